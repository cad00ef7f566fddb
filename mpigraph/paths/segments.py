"""The critical path as a table of segments: the one result every path algorithm returns.

Every algorithm (the graph ones, dijkstra and delta-stepping, sequential or
distributed, and the topological sort) returns its path as `segments(...)`:
numpy columns in path order, from the start of the run to its end (kind and
function as object arrays of str, or as ``names.Labels``: a pipelined
program's path has a segment per call).  This
module turns them into critical_path.csv / .parquet, the time each rank and
each MPI function spends on the path, and the path in words for summary.txt.

critical_path.csv, critical_path.parquet: one row per path segment, in order
    order        int   position on the path, from 0
    rank         int   the rank whose time this segment is
    kind         str   compute (the program's own work between two MPI calls),
                       mpi (time inside an MPI call), or message (a dependency
                       between ranks: from an event on `peer` to the end of the
                       call on `rank` it released)
    function     str   the MPI function (of the call, or of the call released by
                       the message); empty for compute
    peer         int   the other rank of a message segment, -1 otherwise
    start_s/_ns  time  from the run's start
    end_s/_ns    time
    duration_s/_ns time end - start
"""

import dataclasses
from collections import namedtuple

import numpy as np

from mpigraph.schema import SEGMENT_COLUMNS  # noqa: F401  (re-exported)

from mpigraph.util.names import Labels, rows_of

# What a path stage returns: this analysis rank's part of the segments table (rows of the path
# with their global `order`: where the path was found whole, all of them on analysis rank 0 and
# none elsewhere; None everywhere when there is no path), the path in words for summary.txt and
# its Totals (both on analysis rank 0).
PathResult = namedtuple("PathResult", "table lines totals", defaults=(None,))

KINDS = ("compute", "mpi", "message")
KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}     # a kind's code in names.Labels


CSV_NAME = "critical_path.csv"
PARQUET_NAME = "critical_path.parquet"


def segments(rank, kind, function, start, end, peer=None, follows=None, order=None):
    """A path table from per-segment arrays in path order (times in ns from the run's start);
    kind and function are str columns: object arrays or ``names.Labels``.

    `follows` (bool, one per row but the first): whether the row follows the one before it on
    the path; rows that do not are not merged (``merge_runs``): an analysis rank's part of a
    path found where it lies has gaps, other ranks' rows.  `order` (each row's position on the
    whole path): the rows are taken as they are, merged by the caller."""
    rank = np.asarray(rank, dtype=np.int64)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    kind, function = _str_column(kind), _str_column(function)
    peer = np.full(len(rank), -1, np.int64) if peer is None else np.asarray(peer, dtype=np.int64)
    if not (len(rank) == len(kind) == len(function) == len(start) == len(end) == len(peer)):
        raise ValueError("path columns differ in length")
    # A Labels column's names are checked, not its rows: a path can have millions of rows, and
    # the path's makers name the kinds only.
    unknown = set((kind.names if isinstance(kind, Labels) else kind).tolist()) - set(KINDS)
    if unknown:
        raise ValueError("unknown segment kinds: %s" % sorted(unknown))
    if (end < start).any():
        raise ValueError("a path segment ends before it starts (segment %d)" % np.flatnonzero(end < start)[0])
    if order is None:
        rank, kind, function, peer, start, end = merge_runs(rank, kind, function, peer, start, end, follows)
    # The call sites are the report's (callsites.path.with_sites): the analysis ranks holding the
    # calls name them after the path is found.
    n = len(rank)
    order = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, np.int64)
    return {"order": order, "rank": rank, "kind": kind, "function": function,
            "peer": peer, "start": start, "end": end, "duration": end - start,
            "callsite": np.zeros(n, np.int64), "callsite_name": Labels(np.zeros(n, np.int64), np.array([""], object))}


def merge_runs(rank, kind, function, peer, start, end, follows=None):
    """The path's columns with each run of consecutive segments of one rank, kind, function and
    peer that touch (one ends where the next starts) made one segment, and an empty compute
    segment between two segments that would merge dropped first.

    A polling loop (MPI_Iprobe or MPI_Test until something arrives) put a segment per call, and
    an empty compute segment between two, on the path: 10 M segments for 5e6 calls per rank.
    Durations per rank, kind and function are unchanged: a merged segment spans exactly its parts.
    Rows that do not follow each other on the path (`follows`, see ``segments``) are not merged.
    """
    first, last = merged_rows(rank, kind, function, peer, start, end, follows)
    if first is None:
        return rank, kind, function, peer, start, end
    return (rank[first], rows_of(kind, first), rows_of(function, first), peer[first], start[first], end[last])


def merged_rows(rank, kind, function, peer, start, end, follows=None):
    """(first, last): the rows each merged segment of ``merge_runs`` starts and ends at; (None,
    None) when no row merges."""
    n = len(rank)
    if n < 3:
        return None, None
    k, f = _codes(kind), _codes(function)
    if follows is not None:
        # Rows merge only within a stretch that follows on: the same count of breaks before them.
        stretch = np.concatenate(([0], np.cumsum(~np.asarray(follows, bool))))
        key_same_rank = lambda a, b: (rank[a] == rank[b]) & (stretch[a] == stretch[b])  # noqa: E731
    else:
        key_same_rank = lambda a, b: rank[a] == rank[b]  # noqa: E731
    # a, b: slices where they can be (views: a path of millions of rows is not gathered again).
    key_same = lambda a, b: key_same_rank(a, b) & (k[a] == k[b]) & (f[a] == f[b]) & (peer[a] == peer[b])  # noqa: E731
    before, middle, after = slice(0, n - 2), slice(1, n - 1), slice(2, n)
    empty_compute = (k[middle] == _code_of(kind, "compute")) & (start[middle] == end[middle])
    keep = np.ones(n, bool)
    keep[1:n - 1][empty_compute & key_same(before, after) & (end[before] == start[after])] = False
    rows = np.flatnonzero(keep)
    later, earlier = (slice(1, n), slice(0, n - 1)) if len(rows) == n else (rows[1:], rows[:-1])
    joins = key_same(later, earlier) & (start[later] == end[earlier])
    if len(rows) == n and not joins.any():
        return None, None
    return rows[np.r_[True, ~joins]], rows[np.r_[~joins, True]]


def _codes(column):
    """Integer codes equal where the column's values are equal."""
    if isinstance(column, Labels):
        return np.asarray(column.codes)
    return np.unique(np.asarray(column, object).astype(str), return_inverse=True)[1]


def _code_of(column, name):
    """The code `_codes` gives `name` in `column` (-1 when no row has it)."""
    if isinstance(column, Labels):
        hits = np.flatnonzero(column.names == name)
        return hits[0] if len(hits) else -1
    values = np.unique(np.asarray(column, object).astype(str))
    hits = np.flatnonzero(values == name)
    return hits[0] if len(hits) else -1


def _str_column(values):
    return values if isinstance(values, Labels) else np.asarray(values, dtype=object)


def empty():
    """A path table of no rows: an analysis rank's part where the path has none of its rows."""
    none = np.zeros(0, np.int64)
    return segments(none, Labels(np.zeros(0, np.int8), np.array(KINDS, object)), Labels(none, np.array([""], object)),
                    none, none)


@dataclasses.dataclass
class Totals:
    """What the report says of a whole path: its segments, its length and the time of each rank,
    kind and function on it.  Sums: the analysis ranks add up their parts' (``reduce_totals``),
    so no rank holds the whole path for them."""

    segments: int
    duration: int
    per_rank: np.ndarray        # ns of each trace rank
    per_kind: dict              # {kind: ns}, every kind
    per_function: dict          # {function: [rows, ns]}; "" for compute (and unknown functions)

    def __add__(self, other):
        n = max(len(self.per_rank), len(other.per_rank))
        per_rank = np.zeros(n, np.int64)
        per_rank[:len(self.per_rank)] += self.per_rank
        per_rank[:len(other.per_rank)] += other.per_rank
        per_function = {name: list(value) for name, value in self.per_function.items()}
        for name, (rows, ns) in other.per_function.items():
            mine = per_function.setdefault(name, [0, 0])
            mine[0] += rows
            mine[1] += ns
        return Totals(self.segments + other.segments, self.duration + other.duration, per_rank,
                      {k: self.per_kind[k] + other.per_kind[k] for k in KINDS}, per_function)

    def time_per_function(self):
        """{MPI function: ns on the path}, as ``time_per_function`` of the whole table."""
        return {name: ns for name, (rows, ns) in self.per_function.items() if rows and name != ""}


def totals(path, n_ranks):
    """The Totals of a path table (or of an analysis rank's part of one)."""
    duration = np.asarray(path["duration"], np.int64)
    function = path["function"]
    if isinstance(function, Labels):
        # Every name in the names' order, rows or not: the parts' sums then add up in the order one
        # whole table's would have (summary.txt's ties between functions fall the same way).
        rows = np.bincount(function.codes, minlength=len(function.names))
        ns = np.bincount(function.codes, weights=duration, minlength=len(function.names))
        per_function = {}
        for name, r, t in zip(np.asarray(function.names).tolist(), rows.tolist(), ns.tolist()):
            mine = per_function.setdefault(name, [0, 0])
            mine[0] += int(r)
            mine[1] += int(t)
    else:
        per_function = {name: [1, ns] for name, ns in _sums_by_name(function, duration).items()}
    return Totals(len(duration), int(duration.sum()), time_per_rank(path, n_ranks), time_per_kind(path), per_function)


def reduce_totals(comm, part, n_ranks):
    """The whole path's Totals on analysis rank 0 (None elsewhere) from every rank's part.  Collective."""
    mine = totals(part, n_ranks)
    if comm.Get_size() == 1:
        return mine
    parts = comm.gather(mine, root=0)
    if comm.Get_rank() != 0:
        return None
    whole = parts[0]
    for other in parts[1:]:
        whole = whole + other
    return whole


def whole(comm, part):
    """On analysis rank 0 the whole path table from every rank's part (None: no rows there), its
    rows in order; None elsewhere.  Collective.  For checks and benchmarks that compare whole
    paths: the analysis keeps the parts where they are."""
    parts = comm.gather(part, root=0) if comm.Get_size() > 1 else [part]
    if comm.Get_rank() != 0:
        return None
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    joined = {c.name: np.concatenate([np.asarray(p[c.name], object if c.kind == "str" else np.int64) for p in parts])
              for c in SEGMENT_COLUMNS}
    order = np.argsort(joined["order"], kind="stable")
    return {name: column[order] for name, column in joined.items()}


def time_per_rank(path, n_ranks):
    """ns each rank spends on the path (int64 array of n_ranks)."""
    return np.bincount(path["rank"], weights=path["duration"], minlength=n_ranks).astype(np.int64)


def time_per_function(path):
    """{MPI function: ns on the path} for the mpi and message segments."""
    per_function = _sums_by_name(path["function"], path["duration"])
    per_function.pop("", None)          # compute segments (and calls of no known function)
    return per_function


def time_per_kind(path):
    """{kind: ns on the path} for compute, mpi and message."""
    per_kind = _sums_by_name(path["kind"], path["duration"])
    return {k: per_kind.get(k, 0) for k in KINDS}


def _sums_by_name(names, values):
    """{name: sum of its rows' values} of a column of a few distinct names (hashed by pyarrow:
    a path can have a segment per MPI call, and a sort of millions of strings takes seconds);
    a ``names.Labels`` column adds up by its codes."""
    if isinstance(names, Labels):
        # Every path maker gives Labels: pyarrow.compute (a fifth of a second of imports, on
        # analysis rank 0 only) is loaded only for str columns.
        return names.sums(values)
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(pa.array(np.asarray(names, object), pa.string()))
    sums = np.bincount(encoded.indices.to_numpy(zero_copy_only=False), weights=values,
                       minlength=len(encoded.dictionary)).astype(np.int64)
    return dict(zip(encoded.dictionary.to_pylist(), sums.tolist()))


def summary_lines(path, n_ranks, top=5):
    """The path in words for summary.txt, from its Totals (or from a whole path table)."""
    whole = path if isinstance(path, Totals) else totals(path, n_ranks)
    total = whole.duration
    if total == 0:
        return ["Critical path: empty (no MPI calls between MPI_Init and MPI_Finalize)"]
    kinds = whole.per_kind
    share = lambda ns: "%.1f%%" % (100.0 * ns / total)  # noqa: E731
    lines = ["Critical path: %.6f s in %d segments; compute %s, inside MPI calls %s, waiting for messages %s"
             % (total / 1e9, whole.segments, share(kinds["compute"]), share(kinds["mpi"]),
                share(kinds["message"]))]
    per_rank = whole.per_rank
    ranks = np.argsort(-per_rank, kind="stable")[:top]
    lines.append("  ranks on the path, most time first: " + ", ".join(
        "rank %d %s" % (r, share(per_rank[r])) for r in ranks if per_rank[r] > 0))
    functions = sorted(whole.time_per_function().items(), key=lambda kv: -kv[1])[:top]
    if functions:
        lines.append("  MPI functions on the path: " + ", ".join("%s %s" % (f, share(ns)) for f, ns in functions))
    return lines
