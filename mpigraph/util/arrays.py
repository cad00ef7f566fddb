"""Array helpers numpy has, done the way that stays fast on millions of distinct values.

numpy 2.3 made ``np.unique(values)`` (no return_index, _inverse or _counts)
hash-based.  On millions of distinct int64 values the hash table misses the
caches at every insert and is far slower than a sort and a comparison, which
stream.  ``unique`` is the sort, whatever numpy's version.  With its inverse,
np.unique sorts too, yet ``unique_inverse``'s one stable argsort takes a third
to a half less time (one sort instead of np.unique's several passes; a stable
sort is fastest on ids that come in sorted runs, as vertex ids do).
"""

import numpy as np


def unique(values):
    """The sorted distinct values of a 1-d array (np.unique without its hash table)."""
    values = np.sort(np.asarray(values).reshape(-1))
    if len(values) < 2:
        return values
    first = np.empty(len(values), bool)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return values[first]


def unique_inverse(values):
    """(sorted distinct values, index of each one's first occurrence, each value's index among
    them): np.unique(values, return_index=True, return_inverse=True), by one stable argsort."""
    values = np.asarray(values).reshape(-1)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.empty(len(values), bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(len(values), np.int64)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], order[first], inverse


def unique_codes(values):
    """(sorted distinct values, each value's index among them): ``unique_inverse`` without the
    first occurrences.  Where the values span few integers (at most 4 per value, or 65,536), a
    table over the span replaces the sort: mark each value present, number the marks by a running
    sum, look each value's number up: four passes that stream, against a sort's many (sums per
    call site and wait state: keys of a few sites, functions and kinds over millions of calls)."""
    values = np.asarray(values).reshape(-1)
    if not len(values):
        return values.copy(), np.zeros(0, np.int64)
    lo, hi = int(values.min()), int(values.max())
    if lo == hi:        # one value (a program's one communicator): wide ids need no sort then
        return values[:1].copy(), np.zeros(len(values), np.int64)
    if hi - lo >= max(4 * len(values), 1 << 16):
        uniq, _, inverse = unique_inverse(values)
        return uniq, inverse
    offset = values - lo
    present = np.zeros(hi - lo + 1, bool)
    present[offset] = True
    number = np.cumsum(present) - 1
    return (np.flatnonzero(present) + lo).astype(values.dtype), number[offset]


def keyed_sums(keys, values):
    """(sorted distinct keys, how many rows have each, the int64 sum of `values` over them),
    exact (np.add.at, not bincount's float weights).  Where the keys span few integers (as in
    ``unique_codes``) they are counted in a table over the span, else sorted."""
    keys = np.asarray(keys).reshape(-1)
    if not len(keys):
        return keys.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo >= max(4 * len(keys), 1 << 16):
        uniq, at = unique_codes(keys)
        count = np.bincount(at, minlength=len(uniq))
        present = slice(None)
    else:
        at = keys - lo
        count = np.bincount(at, minlength=hi - lo + 1)
        present = np.flatnonzero(count)
        uniq = (present + lo).astype(keys.dtype)
    sums = np.zeros(len(count), np.int64)
    np.add.at(sums, at, values)
    return uniq, count[present].astype(np.int64), sums[present]


def grouped(group, n_groups):
    """(a stable order of the rows by `group`, a small int 0..n_groups-1, or None where they are
    in that order already; the rows in each group, int64).

    A few groups take a mask and a flatnonzero each; more take numpy's stable sort of 8- or
    16-bit ints, a radix sort: one pass whatever n_groups, where the masks take n_groups passes
    and a sort of wider ints is a merge sort (``benchmarks/bench_grouping.py``)."""
    group = np.asarray(group)
    if len(group) < 2 or bool((group[1:] >= group[:-1]).all()):
        return None, np.bincount(group.astype(np.intp, copy=False), minlength=n_groups).astype(np.int64)
    if n_groups <= FEW_GROUPS:
        rows = [np.flatnonzero(group == g) for g in range(n_groups)]
        return np.concatenate(rows), np.array([len(r) for r in rows], np.int64)
    narrow = np.uint8 if n_groups <= 1 << 8 else np.uint16 if n_groups <= 1 << 16 else group.dtype
    return (np.argsort(group.astype(narrow, copy=False), kind="stable"),
            np.bincount(group, minlength=n_groups).astype(np.int64))


# Up to this many groups a mask per group costs no more than the radix sort (a million rows in 8
# groups: 9.7 against 11.2 ms on the 2-core VM; in 16: 31.9 against 6.3 ms).
FEW_GROUPS = 8


def runs(values):
    """(start, length) of each run of equal neighbours in a non-empty 1-d array."""
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    return starts, np.diff(np.append(starts, len(values)))


def groups(values):
    """[(value, indices of its entries)] per distinct value of a 1-d array, by one stable argsort:
    a loop over the groups costs the sort, not a pass over the whole array per group."""
    values = np.asarray(values).reshape(-1)
    if not len(values):
        return []
    order = np.argsort(values, kind="stable")
    starts, lengths = runs(values[order])
    return [(values[order[a]], order[a:a + n]) for a, n in zip(starts.tolist(), lengths.tolist())]


def batches(sizes, max_rows):
    """Consecutive runs of `sizes` (a list of row counts) adding up to at most max_rows each, a
    larger one alone: [(first, stop)] index bounds.  Thousands of small trace ranks taken a batch
    at a time cost a stage a few dozen numpy calls per batch, where one rank at a time cost them
    per rank (more than the rows themselves at a few hundred rows a rank)."""
    bounds, first, rows = [], 0, 0
    for i, n in enumerate(sizes):
        if i > first and rows + n > max_rows:
            bounds.append((first, i))
            first, rows = i, 0
        rows += n
    if first < len(sizes):
        bounds.append((first, len(sizes)))
    return bounds


def end_to_end(parts, dtype):
    """The 1-d arrays `parts` end to end: one array itself (no copy), none an empty one of `dtype`."""
    if len(parts) == 1:
        return np.asarray(parts[0])
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def stacked(columns, dtype=None):
    """(the 1-d arrays of `columns` end to end, the position in `columns` of each row's array, the
    first row of each array): one array of a batch's columns, and whose each row is."""
    lengths = np.array([len(c) for c in columns], np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    whole = np.concatenate(columns) if columns else np.zeros(0, dtype or np.int64)
    if dtype is not None:
        whole = whole.astype(dtype, copy=False)
    return whole, np.repeat(np.arange(len(columns), dtype=np.int64), lengths), starts


def run_sums(values, bounds):
    """Sums of values[bounds[i]:bounds[i + 1]] for each i, int64 (exact; 0 for an empty run): a
    batch's per-rank sums of a column whose rows are its ranks' one after another, one pass."""
    bounds = np.asarray(bounds, np.int64)
    sums = np.zeros(len(bounds) - 1, np.int64)
    has = bounds[1:] > bounds[:-1]
    if has.any():
        sums[has] = np.add.reduceat(values, bounds[:-1][has], dtype=np.int64)
    return sums


def run_cumsums(values, starts, lengths):
    """Running sums of `values` within each run (rows starts[i] .. starts[i] + lengths[i] - 1,
    lengths >= 1), each run's from 0, left to right: each run's own np.cumsum.

    Float sums of a run then do not depend on the runs before it, as the differences of one
    running sum over all rows do (their rounding grows with that sum).  The runs of one length
    are summed together, as the rows of a 2-d array: a few numpy steps per distinct length."""
    values = np.asarray(values)
    starts, lengths = np.asarray(starts, np.int64), np.asarray(lengths, np.int64)
    out = np.empty_like(values)
    order = np.argsort(lengths, kind="stable")
    bounds = np.flatnonzero(np.diff(lengths[order])) + 1
    for runs in np.split(order, bounds) if len(order) else ():
        rows = starts[runs][:, None] + np.arange(int(lengths[runs[0]]))
        out[rows] = np.cumsum(values[rows], axis=1)
    return out


def ranges(first, last):
    """The integers first[i], first[i] + 1, ..., last[i] of each pair, one range after another."""
    first, last = np.asarray(first, np.int64), np.asarray(last, np.int64)
    lengths = last - first + 1
    shift = np.repeat(first - (np.cumsum(lengths) - lengths), lengths)
    return shift + np.arange(int(lengths.sum()), dtype=np.int64)


def chunk_bounds(indptr, edges_per_chunk):
    """Row bounds 0 = b[0] < b[1] < ... = n of a CSR's n rows in chunks of about edges_per_chunk
    edges (a row with more edges than that alone): chunk i is rows b[i]:b[i + 1]."""
    n = len(indptr) - 1
    marks = np.arange(0, int(indptr[-1]) + edges_per_chunk, edges_per_chunk)
    inside = marks <= indptr[-1]        # past the last edge: row n
    cuts = np.full(len(marks), n, np.int64)
    cuts[inside] = sorted_positions(indptr, marks[inside])
    return unique(np.concatenate(([0], cuts, [n])))


def isin_few(values, few):
    """np.isin(values, few) of a 1-d `values` where `few` are few (a value per synchronisation
    point) and `values` many and in runs of equal neighbours (the source vertex of an edge per
    member of an instance): one binary search of the sorted `few` per run of `values`.

    np.isin takes a table of few's range when that range is small against the two sizes, else
    sorts values and few together.  Vertex ids span the whole run, so on one analysis rank it
    takes the table, and on each of K ranks, holding 1/K of the edges, the sort: every rank
    spent about as long as one rank did on all the edges."""
    few = np.sort(np.asarray(few).reshape(-1))
    values = np.asarray(values)
    if not len(few) or not len(values):
        return np.zeros(len(values), bool)
    head, lengths = runs(values)
    at = np.searchsorted(few, values[head])
    np.minimum(at, len(few) - 1, out=at)
    return np.repeat(few[at] == values[head], lengths)


def sorted_positions(sorted_values, queries, side="left"):
    """np.searchsorted with the queries in the sorted array's dtype (they must fit it): with
    int64 queries searchsorted first converts a whole int32 array, such as a graph's indptr
    (a vertex-sized copy in new memory for every search)."""
    return np.searchsorted(sorted_values, np.asarray(queries).astype(sorted_values.dtype, copy=False), side)


def column_counts(table, columns, limits):
    """How many entries of each asked column of a 2-d table are <= its limit, the columns'
    entries increasing down the rows: np.searchsorted(table[:, c], limit, "right") for every
    (c, limit) pair at once.  A binary search run for all pairs together, a gather per halving
    of the rows: no copy of a strided column per pair (a strided copy reads a cache line per
    element)."""
    columns, limits = np.asarray(columns, np.int64), np.asarray(limits)
    n_rows = table.shape[0]
    found = np.zeros(len(columns), np.int64)    # rows known to be <= the limit
    step = 1 << n_rows.bit_length()
    while step:
        probe = found + step
        room = np.flatnonzero(probe <= n_rows)
        below = table[probe[room] - 1, columns[room]] <= limits[room]
        found[room[below]] = probe[room[below]]
        step >>= 1
    return found


def row_pointers(rows, n, dtype):
    """The indptr (as dtype) of a CSR of n rows holding one entry per element of `rows` (row
    numbers in any order).  Counted in place with add.at: np.bincount counts in int64 and
    its cumsum is another array (two int64 arrays of the rows' size, in new memory)."""
    indptr = np.zeros(n + 1, dtype)
    np.add.at(indptr[1:], rows, indptr.dtype.type(1))
    np.cumsum(indptr[1:], out=indptr[1:])
    return indptr


def block_or_positions(mask):
    """The positions where `mask` is True: a slice when they are one block (no array of
    millions of positions, and a column taken with it is a view), else np.flatnonzero's."""
    n = int(np.count_nonzero(mask))
    first = int(np.argmax(mask)) if n else 0
    if not n or mask[first:first + n].all():
        return slice(first, first + n)
    return np.flatnonzero(mask)


def count(positions):
    """How many positions a slice or an index array from block_or_positions holds."""
    return positions.stop - positions.start if isinstance(positions, slice) else len(positions)


def part_of(positions, a, b):
    """Positions a:b of a slice or an index array from block_or_positions (a slice stays one)."""
    if isinstance(positions, slice):
        return slice(positions.start + a, positions.start + b)
    return positions[a:b]
