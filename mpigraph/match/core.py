"""Matching: the calls of every rank linked into one run (docs/design.md, "Matching").

This module is the interface the later stages (metrics, the critical path)
build on.  After ``analysis`` has run the clock and match stages, every
analysis rank holds, for each trace rank r it owns (``Ownership.ranks_of``):

``RankCalls`` (``matched.calls[r]``)
    rank            the trace rank r
    func[k]         uint16 function id of call k (mpigraph.trace.functions)
    start_ns[k]     int64 ns from the run's start (the end of the earliest
    end_ns[k]       MPI_Init of all ranks; MPI_Init starts a little before 0),
                    on rank 0's clock, after the receive-before-send repair
                    (causality.py)
    k = 0..n_calls-1 indexes the *call records* of r's log (records without the
                    PART flag) in log order: k = trace.call_index position among
                    them; ``record_call[i]`` is the call of record i.

``Dependencies`` (``matched.dependencies``): the dependency edges of the
activity graph whose destination rank this analysis rank owns (incoming edges,
stored with their vertex owner), as equal-length numpy columns:
    src_rank    int32  trace rank of the vertex that released the call
    src_call    int64  its call index on src_rank
    src_vertex  int8   VERTEX_START (0) = S(src_call), VERTEX_END (1) = E(src_call)
                       (all kinds below use VERTEX_START)
    dst_rank    int32  trace rank of the released call
    dst_call    int64  call index on dst_rank; the destination vertex is always
                       E(dst_call), the end of the call that was released
    kind        int8   one of KIND_NAMES:
      0 message_late_sender    send start -> end of the call in which the
                               receive completed (Recv, Sendrecv, or the
                               Wait/Test of an Irecv / persistent receive),
                               and -> end of the probe that found the message
                               (or of the call of its polling run that the
                               send released; match.probes)
      1 message_late_receiver  receive post start -> end of the call in which
                               the send completed; only where that call ended
                               after the receive was posted (rendezvous, Ssend):
                               eager sends that returned earlier get no edge
      2 collective_n_to_n      last arriver's start -> each other member's end
                               (N-to-N collectives and communicator creation)
      3 collective_one_to_n    root's start -> each other member's end
      4 collective_n_to_one    last arriver's start -> the root's end
      5 scan                   last arriver among lower ranks of the
                               communicator -> member's end (Scan, Exscan)
      6 collective_neighbor    the latest of a neighbourhood collective's
                               in-neighbours (match.neighbors) -> member's end
      7 rma_late_post          the latest MPI_Win_post of an access epoch's
                               targets -> end of the origin's first call of the
                               epoch (Win_start, a Put, ..., Win_complete) that
                               ended after it (match.rma)
      8 rma_early_wait         the latest MPI_Win_complete of an exposure
                               epoch's origins -> end of the target's MPI_Win_wait
    A nonblocking collective's member (MPI_Iallreduce, ...) arrives at the start
    of its call and is released at the end of the Wait/Test call that completed
    its request: kinds 2-5 go from the releasing member's (nonblocking) call's
    start to that completing call's end, and the last arriver of a nonblocking
    N-to-N instance has no edge to itself (it is no global synchronisation point).
    Only the latest releasing member has an edge: the others' would have more
    slack, so the path never takes them (and a Scan's would be quadratic).
    src_start   int64  the source call's start (repaired), where the match stage
                       knows it (None: the path stage asks the source's owner)
Every edge u -> E(c) satisfies t(u) <= t(E(c)) after the repair, so slacks
max(0, t(S(c)) - t(u)) are >= 0 and the graph is acyclic in time.

Compute edges E(r,k) -> S(r,k+1) and call edges S(r,k) -> E(r,k) are implicit
in RankCalls.

How the matching works (vectorised, no per-record Python loop):
- requests: per rank, the k-th post of a request id (Isend/Irecv call record,
  or a Start part of a persistent request) pairs with the k-th completion part
  (in a Wait/Test call) of that id;
- messages: a send's key is (comm, src, dst, tag, n) with n its position among
  the sends of (comm, dst, tag) in posting order; a receive's key uses its real
  source and tag (from the completion's status for wildcards) and its position
  in posting order: MPI's non-overtaking rule.  Sends travel to the owner of
  their destination rank (shuffle.exchange, columnar), keys are sorted and
  paired there;
- collectives: each analysis rank reduces its members of an instance to one
  partial row, the partials travel to an owner chosen by a hash of (comm, seq)
  and are combined there; the instance's answer travels back to the analysis
  ranks that sent a partial (collectives.match_collectives).
Operations left without a partner are counted and listed (``Unmatched``).
"""

import dataclasses
import functools

import numpy as np

from mpigraph.util import arrays
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.trace.batches import RecordBatch
from mpigraph.comm import shuffle
from mpigraph.match import kernel

# ---- the interface's names ---------------------------------------------------------

VERTEX_START, VERTEX_END = 0, 1

MESSAGE_LATE_SENDER = 0
MESSAGE_LATE_RECEIVER = 1
COLLECTIVE_N_TO_N = 2
COLLECTIVE_ONE_TO_N = 3
COLLECTIVE_N_TO_ONE = 4
SCAN = 5
COLLECTIVE_NEIGHBOR = 6
RMA_LATE_POST = 7
RMA_EARLY_WAIT = 8
KIND_NAMES = ("message_late_sender", "message_late_receiver", "collective_n_to_n", "collective_one_to_n",
              "collective_n_to_one", "scan", "collective_neighbor", "rma_late_post", "rma_early_wait")


@dataclasses.dataclass
class RankCalls:
    """One trace rank's calls in log order: function ids and corrected start/end times (int64 ns).

    The match, the metrics and the graph all read this one type.  Made from a log
    (``rank_calls``), it also knows the rank and the log's records, which the tables read; made
    from times alone (tests, synthetic runs), every record is a call."""

    func: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    rank: int = -1
    record_call: np.ndarray = None  # the call of each record (None: every record is a call)
    records: np.ndarray = None     # the log's records (memmap), for the fields the tables need
    log: object = None             # the trace.RankLog, whose contiguous func and flags are kept

    def __post_init__(self):
        if not len(self.start_ns) == len(self.end_ns) == len(self.func):
            raise ValueError("RankCalls columns differ in length")

    def field(self, name):
        """A contiguous copy of the records' "func" or "flags": the log's, made once (each pass
        over a field of the 64-byte records reads all of them)."""
        if self.log is not None:
            return self.log.column(name)
        return np.ascontiguousarray(self.records[name])

    @property
    def n_calls(self):
        return len(self.func)

    def record_times(self):
        """(start, end) int64 ns of every record: a part record has its call's times.

        Without part records (records are calls) these are read-only views of the calls' times,
        not copies: 16 bytes a record less while the metrics and the path run."""
        if self.record_call is None or len(self.record_call) == self.n_calls:
            return _read_only(self.start_ns), _read_only(self.end_ns)
        return self.start_ns[self.record_call], self.end_ns[self.record_call]


def _read_only(array):
    view = array.view()
    view.flags.writeable = False
    return view


EDGE_DTYPES = {"src_rank": np.int32, "src_call": np.int64, "src_vertex": np.int8, "dst_rank": np.int32,
               "dst_call": np.int64, "kind": np.int8}


@dataclasses.dataclass
class Dependencies:
    """Incoming dependency edges, as numpy columns (see the module doc)."""

    src_rank: np.ndarray
    src_call: np.ndarray
    src_vertex: np.ndarray
    dst_rank: np.ndarray
    dst_call: np.ndarray
    kind: np.ndarray
    src_start: np.ndarray = None     # see the module doc: the path stage asks no owner for these

    def __post_init__(self):
        for name, dtype in EDGE_DTYPES.items():
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))
        if self.src_start is not None:
            self.src_start = np.ascontiguousarray(self.src_start, dtype=np.int64)
        names = list(EDGE_DTYPES) + (["src_start"] if self.src_start is not None else [])
        if len({len(getattr(self, name)) for name in names}) > 1:
            raise ValueError("Dependencies columns differ in length")

    @classmethod
    def empty(cls):
        return cls.picked([])

    @classmethod
    def picked(cls, parts):
        """The edges that each part's mask picks from its columns, in the order of the parts.

        A part is (mask, src_rank, src_call, dst_rank, dst_call, kind[, src_start]); a column
        is an array over the mask's rows or a scalar, and the source is always VERTEX_START;
        src_start is kept where every part has it.  Each column of the result is allocated once
        and filled in place: a bulk-synchronous run has an edge per call, and edge tables made
        per part and then concatenated would write every column twice, in memory new to the
        process."""
        rows = [np.flatnonzero(mask) for mask, *_ in parts]
        bounds = np.cumsum([0] + [len(r) for r in rows])
        with_start = all(len(part) > len(_PICKED_COLUMNS) + 1 for part in parts)
        dtypes = dict(EDGE_DTYPES, **({"src_start": np.int64} if with_start else {}))
        out = {name: np.empty(bounds[-1], dtype) for name, dtype in dtypes.items()}
        out["src_vertex"].fill(VERTEX_START)
        names = _PICKED_COLUMNS + (("src_start",) if with_start else ())
        for (_, *columns), picked, a, b in zip(parts, rows, bounds[:-1], bounds[1:]):
            for name, column in zip(names, columns):
                _take_into(column, picked, out[name][a:b])
        return cls(**out)

    def __len__(self):
        return len(self.kind)


_PICKED_COLUMNS = ("src_rank", "src_call", "dst_rank", "dst_call", "kind")


def _take_into(values, rows, out):
    """out[:] = values[rows] without a temporary where the dtypes agree; a scalar fills out."""
    if np.ndim(values) == 0:
        out.fill(values)
    elif values.dtype == out.dtype:
        np.take(values, rows, out=out, mode="clip")     # rows are in range; "raise" buffers a copy
    else:
        out[:] = values[rows]


# ---- function kinds as small ints, for vectorised lookups -----------------------------

KINDS = (mf.INIT, mf.FINALIZE, mf.SEND, mf.RECV, mf.SENDRECV, mf.ISEND, mf.IRECV, mf.SEND_INIT, mf.RECV_INIT,
         mf.START, mf.REQUEST_FREE, mf.COMPLETION, mf.PROBE, mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN,
         mf.COMM_CREATE, mf.COMM_FREE) + mf.RECORDED_ONLY_KINDS
KIND_CODE = {k: i for i, k in enumerate(KINDS)}


def _kind_table():
    table = np.full(mf.MAX_ID + 1, -1, np.int8)
    for f in mf.FUNCTIONS:
        table[f.id] = KIND_CODE[f.kind]
    return table


FUNC_KIND = _kind_table()                  # function id -> kind code
NONBLOCKING = np.zeros(mf.MAX_ID + 1, bool)
NONBLOCKING[[f.id for f in mf.FUNCTIONS if f.nonblocking]] = True
BARRIER_ID = mf.BY_NAME["MPI_Barrier"].id


def kind_is(func, *kinds):
    """Boolean array: the function of each id in `func` has one of `kinds`."""
    return _wanted_functions(kinds)[np.asarray(func)]


@functools.lru_cache(maxsize=None)
def _wanted_functions(kinds):
    """Per function id: its kind is one of `kinds`.  One lookup by function id instead of two
    (id -> kind -> wanted): kind_is runs over every record of every log several times."""
    wanted = np.zeros(len(KINDS) + 1, bool)          # the extra last slot: unknown ids (kind -1)
    wanted[[KIND_CODE[k] for k in kinds]] = True
    return wanted[FUNC_KIND]


# ---- sorting helpers ------------------------------------------------------------------

def packed_key(columns):
    """One int64 per row that sorts like the rows of `columns` (int arrays, the first most
    significant) and is equal exactly where all of them are; None when that takes more than 63 bits.

    Each column becomes its offset from its minimum, or, when that is too wide, the dense
    rank of its value (communicator ids are huge and few): a sort by one int64 is many
    times faster than np.lexsort over several columns.
    """
    keys = packed_keys([columns])
    return None if keys is None else keys[0]


def packed_keys(tables):
    """packed_key of several tables (lists of the same columns) at once, comparable across them:
    one int64 array per table, or None.

    The offsets are added into the key in place, and a column with one value (a pipeline's
    communicator, peers and tag) is left out: no temporary the size of a column."""
    columns = [[np.asarray(t[i]) for t in tables] for i in range(len(tables[0]))]
    sizes = [len(a) for a in columns[0]] if columns else [0] * len(tables)
    lows, widths, dense = [], [], {}
    for parts in columns:          # a column's array in each table
        present = [a for a in parts if len(a)]
        low = min((int(a.min()) for a in present), default=0)
        high = max((int(a.max()) for a in present), default=0)
        lows.append(low)
        widths.append((high - low).bit_length())       # Python ints: no wrap-around
    for i in np.argsort(widths)[::-1]:                  # narrow the widest columns first
        if sum(widths) <= 63:
            break
        ranks = np.unique(np.concatenate(columns[i]), return_inverse=True)[1].reshape(-1).astype(np.int64)
        dense[i] = np.split(ranks, np.cumsum(sizes)[:-1])
        widths[i] = _bits(ranks)
    if sum(widths) > 63:
        return None
    keys = [np.zeros(n, np.int64) for n in sizes]
    for i, (parts, low, width) in enumerate(zip(columns, lows, widths)):
        if width == 0:
            continue
        for t, key in enumerate(keys):
            key <<= width
            if i in dense:
                key |= dense[i][t]
            else:               # + (column - low), wrapping in int64 to the offset (< 2**63)
                key += parts[t].astype(np.int64, copy=False) if parts[t].dtype == np.uint64 else parts[t]
                key -= low
    return keys


def _bits(offsets):
    """Bits needed for the offsets (64, too many, when a span beyond int64 wrapped around)."""
    if not len(offsets):
        return 0
    return 64 if offsets.min() < 0 else int(offsets.max()).bit_length()


def group_key(columns):
    """One int64 per row that orders and compares like the rows of `columns`: packed_key, or
    the rows' dense ranks when even that takes more than 63 bits."""
    key = packed_key(columns)
    return _dense_key(columns) if key is None else key


def _dense_key(columns):
    """Each row's rank among the distinct rows of `columns` (any widths; a sort of whole rows)."""
    return np.unique(np.stack([np.asarray(c, np.int64) for c in columns], axis=1), axis=0,
                     return_inverse=True)[1].reshape(-1).astype(np.int64)


def sort_rows(columns, unique=False):
    """The order of rows by `columns` (the first most significant), ties in row order: the same
    as np.lexsort(columns[::-1]).  unique: no two rows are equal (a faster, unstable sort)."""
    key = packed_key(columns)
    if key is None:
        return np.lexsort(list(columns)[::-1])
    return np.argsort(key, kind="quicksort" if unique else "stable")


# ordinal_within sorts by `order` first when it comes in runs at least this long on average.
FEW_RUNS = 64


def ordinal_within(keys, order):
    """Each row's position within its group of equal `keys` (a list of arrays), counted in `order`
    (distinct within a group)."""
    if len(order) == 0:
        return np.zeros(0, np.int64)
    return ordinal_in_groups(group_key(keys), order)


def ordinal_in_groups(group, order, n_groups=None):
    """ordinal_within of the groups of equal values of `group` (an int array); `n_groups`: the
    values are codes 0..n_groups-1 already (none is numbered again)."""
    n = len(order)
    if n == 0:
        return np.zeros(0, np.int64)
    few_runs = np.count_nonzero(order[1:] < order[:-1]) * FEW_RUNS < n
    if few_runs or kernel.available():
        if n_groups is None:
            codes, group = arrays.unique_codes(group)
            n_groups = len(codes)
        # In C: a count per group, row by row (match.kernel), where numpy sorts.
        counted = kernel.ordinals(group, n_groups, order)
        if counted is not None:
            return counted
    if few_runs:
        # `order` in a few increasing runs (posts in log order, rank after rank): stable sorts,
        # each close to one pass, instead of one sort of both together.  Groups numbered 0..g-1
        # with g <= 65536 sort as 16-bit ints: numpy's stable sort of those is a radix sort, one
        # pass (a pipeline's streams: tens of thousands among millions).
        if n_groups <= 1 << 16:
            group = group.astype(np.uint16)
        idx = np.argsort(group, kind="stable")
        sorted_group = group[idx]
        # Each group's rows in `order` already (a group is one rank's, and a rank's blocking or
        # nonblocking operations alone are in log order): the sort by group is the whole sort.
        # Else sort by `order` first, and then by group (the groups sorted alike).
        if not _increasing_within(order[idx], sorted_group):
            idx = np.argsort(order, kind="stable")
            idx = idx[np.argsort(group[idx], kind="stable")]
    else:
        idx = sort_rows([group, order], unique=True)
        sorted_group = group[idx]
    new_group = np.r_[True, sorted_group[1:] != sorted_group[:-1]]
    first = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    out = np.empty(n, np.int64)
    out[idx] = np.arange(n) - first
    return out


def _increasing_within(values, group):
    """`values` increase within each run of equal `group` (rows sorted by group)."""
    return not ((values[1:] <= values[:-1]) & (group[1:] == group[:-1])).any()


def pair_by_key(keys_a, keys_b):
    """Rows of table a and b with equal keys (unique on each side): (index in a, index in b),
    in key order.

    One group key for both (comparable across the sides), each side sorted on its own (stable:
    keys in log order, as a channel's message ordinals are, sort in one pass) and a looked up
    in b: each side's sort finds its rows nearly in order, where one sort of both sides
    together interleaves them and loses that."""
    na, nb = len(keys_a[0]), len(keys_b[0])
    if na == 0 or nb == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = packed_keys([keys_a, keys_b])
    if keys is None:            # too wide to pack even as dense ranks: rank the rows themselves
        key = _dense_key([np.concatenate([np.asarray(a), np.asarray(b)]) for a, b in zip(keys_a, keys_b)])
        keys = key[:na], key[na:]
    (order_a, sorted_a), (order_b, sorted_b) = (_sorted(key) for key in keys)
    if na == nb and np.array_equal(sorted_a, sorted_b) and (sorted_a[1:] > sorted_a[:-1]).all():
        return order_a, order_b             # every row has its partner (most runs)
    at = np.searchsorted(sorted_b, sorted_a)
    hit = at < nb
    hit[hit] = sorted_b[at[hit]] == sorted_a[hit]
    return order_a[hit], order_b[at[hit]]


def pair_by_ordinal(stream_a, ordinal_a, stream_b, ordinal_b, n_streams):
    """pair_by_key([stream_a, ordinal_a], [stream_b, ordinal_b]) where the streams are codes
    0..n_streams-1 and each stream's rows of a have the ordinals 0..count-1 once each (a channel's
    sends, numbered in posting order); rows of b with ordinal -1 pair with none.  By counting,
    without a sort: a's rows are laid out stream after stream, each at its ordinal, and b's rows
    look up their slot there (in C, ``kernel.pair_by_slot``, else numpy's passes).  Other
    ordinals of a take pair_by_key."""
    na = len(ordinal_a)
    if na == 0 or len(ordinal_b) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    found = kernel.pair_by_slot(stream_a, ordinal_a, stream_b, ordinal_b, n_streams)
    if found is not None:
        return found
    count = np.bincount(stream_a, minlength=n_streams)
    first = np.cumsum(count)
    first -= count                                   # each stream's first slot
    a_count = count[stream_a]
    if not ((ordinal_a >= 0) & (ordinal_a < a_count)).all():
        return pair_by_key([stream_a, ordinal_a], [stream_b, ordinal_b])
    slot = first[stream_a]
    slot += ordinal_a
    a_of_slot = np.full(na, -1, np.int64)
    a_of_slot[slot] = np.arange(na)
    if (a_of_slot < 0).any():       # an ordinal twice in a stream
        return pair_by_key([stream_a, ordinal_a], [stream_b, ordinal_b])
    rows_b = np.flatnonzero((ordinal_b >= 0) & (ordinal_b < count[stream_b]))
    slot = first[stream_b[rows_b]]
    slot += ordinal_b[rows_b]
    b_of_slot = np.full(na, -1, np.int64)
    b_of_slot[slot] = rows_b
    slots = np.flatnonzero(b_of_slot >= 0)
    if len(slots) < len(rows_b):    # a key twice on b's side
        return pair_by_key([stream_a, ordinal_a], [stream_b, ordinal_b])
    return a_of_slot[slots], b_of_slot[slots]


def _sorted(key):
    """(the stable order of key, key in that order): without a sort or a copy of key when it is
    sorted already (a channel's messages in posting order)."""
    if (key[1:] >= key[:-1]).all():
        return np.arange(len(key)), key
    order = np.argsort(key, kind="stable")
    return order, key[order]


def pair_occurrences(a, b):
    """The k-th row of `a` with the k-th row of `b` that has the same value, for every value and
    k, rows counted in their order: (index in a, index in b), by value and k.

    The same pairs as pair_by_key([a, ordinal of a], [b, ordinal of b]) without computing the
    ordinals or sorting the two tables together: each side is sorted once (stable) and a row
    of `a` finds its partner by its value's first position in sorted `b` plus its own k."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ia, ib = np.argsort(a, kind="stable"), np.argsort(b, kind="stable")
    sa, sb = a[ia], b[ib]
    if len(sa) == len(sb) and np.array_equal(sa, sb):     # every row has its partner (most runs' requests)
        return ia, ib
    k = np.arange(len(sa)) - np.searchsorted(sa, sa, "left")
    j = np.searchsorted(sb, sa, "left") + k
    paired = j < np.searchsorted(sb, sa, "right")
    return ia[paired], ib[j[paired]]


# ---- routing rows to their owners --------------------------------------------------------

def route(comm, columns, dest, codec=None):
    """Send each row of `columns` to analysis rank dest[i]; returns the rows this rank received,
    by source rank, each source's rows in their order there.

    The answer may share arrays with `columns` (on one analysis rank it is `columns`).  The
    rows that stay (most of them, when ranks mostly talk to ranks of the same analysis rank)
    are copied once, straight into the answer: not sorted by destination, encoded or
    concatenated."""
    size, me = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return {name: np.asarray(c) for name, c in columns.items()}
    columns = {name: np.asarray(c) for name, c in columns.items()}
    dest = np.asarray(dest)
    mine = dest == me
    n_mine = int(np.count_nonzero(mine))
    if n_mine:
        away = np.flatnonzero(~mine)
        batches = shuffle.split_by_dest({name: c[away] for name, c in columns.items()}, dest[away], size)
    else:           # every row goes: no copy of them (a pipeline's sends all go to the next rank)
        batches = shuffle.split_by_dest(columns, dest, size)
    received, _ = shuffle.exchange(comm, batches, codec)
    shuffle.check_schema(list(received.values()), columns)
    if not n_mine and len(received) == 1:       # one source's rows as they were decoded
        return next(iter(received.values()))
    total = n_mine + sum(shuffle.batch_rows(b) for b in received.values())
    out = {name: np.empty(total, c.dtype) for name, c in columns.items()}
    at = 0
    for source in range(size):
        if source == me:
            for name, c in columns.items():
                np.compress(mine, c, out=out[name][at:at + n_mine])
            at += n_mine
        elif source in received:
            rows = shuffle.batch_rows(received[source])
            for name in columns:
                out[name][at:at + rows] = received[source][name]
            at += rows
    return out


# ---- all owned calls in one numbering ----------------------------------------------------------

class CallIndex:
    """The owned ranks' calls numbered 0..n-1 in one sequence (by rank, then call), so
    per-call work on all owned ranks is one numpy operation, not one per rank."""

    def __init__(self, calls_by_rank):
        self.ranks = np.array(sorted(calls_by_rank), np.int64)
        counts = [calls_by_rank[int(r)].n_calls for r in self.ranks]
        self.offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
        self._first_call = self._first_call_table()

    def _first_call_table(self):
        """offsets[searchsorted(ranks, r)] for every r from the first owned rank to the last, or None
        when that span is much wider than the owned ranks.  An analysis rank owns a contiguous
        block of trace ranks: a lookup in this small table is several times faster than a
        binary search per row (of millions)."""
        span = int(self.ranks[-1] - self.ranks[0]) + 1 if len(self.ranks) else 0
        if not 0 < span <= 4 * len(self.ranks) + 1024:
            return None
        return self.offsets[np.searchsorted(self.ranks, np.arange(self.ranks[0], self.ranks[-1] + 1))]

    def __len__(self):
        return int(self.offsets[-1])

    @property
    def first_call_table(self):
        """The first call of each rank from the first owned rank to the last, by rank less the
        first (None where the span is far wider than the owned ranks): the lookup ``of`` makes."""
        return self._first_call

    def of(self, rank, call):
        """Position of call `call` of owned rank `rank` (arrays) in the numbering."""
        rank = np.asarray(rank)
        if self._first_call is not None and rank.size and self.ranks[0] <= rank.min() and rank.max() <= self.ranks[-1]:
            at = self._first_call[rank - self.ranks[0]]
            at += call                  # in place: one array less per million rows
            return at
        return self.offsets[np.searchsorted(self.ranks, rank)] + call

    def column(self, calls_by_rank, name):
        """A RankCalls attribute (start_ns, end_ns, func) of all owned calls, in the numbering."""
        parts = [getattr(calls_by_rank[int(r)], name) for r in self.ranks]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


# ---- the owned ranks' records a batch at a time --------------------------------------------------

class CallBatch(RecordBatch):
    """The records of consecutive owned ranks' RankCalls (made from logs) end to end
    (trace.batches.RecordBatch), with their calls numbered: the match's per-record work (its
    operations, members, probes) is a few numpy calls per batch, not per rank, and the traffic
    tables read their collectives from it.

    calls          the RankCalls, in rank order
    record_call    each record's call on its own rank (RankCalls.record_call; made on first use)
    first_call     int64, len(ranks) + 1: rank i's calls are first_call[i]:first_call[i + 1]
                   (batch_call numbering)
    """

    def __init__(self, calls):
        """From the RankCalls (made from logs) of consecutive ranks, in rank order."""
        super().__init__([c.records for c in calls], [c.field("func") for c in calls],
                         [c.field("flags") for c in calls], [c.rank for c in calls])
        self.calls = calls
        self.first_call = np.concatenate([[0], np.cumsum([c.n_calls for c in calls], dtype=np.int64)]).astype(np.int64)

    @functools.cached_property
    def record_call(self):
        """Each record's call on its own rank, rank after rank: a lone rank's own array."""
        if self.one_rank:
            return _record_call(self.calls[0])
        return np.concatenate([_record_call(c) for c in self.calls])

    def call_of(self, rows):
        """The call of each of `rows` on its own rank (record_call[rows]; `rows` themselves where
        the batch is one rank whose records are all calls: no lookup of millions)."""
        if self.one_rank and len(self.record_call) == int(self.first_call[-1]):
            return rows
        return self.record_call[rows]

    def field_at(self, name, rows):
        """records[name][rows] (`rows` an index array or a slice): gathered from the logs where
        the rows ascend and the batch's copy of every record is not made, else read from that
        copy (a lone rank's: its log's own).  A bulk-synchronous run's members read three fields
        of almost every record and nothing else does: no copy of its 64-byte records."""
        if isinstance(rows, slice) and not self.one_rank:
            rows = np.arange(rows.start, rows.stop, dtype=np.int64)
        if self.one_rank or "records" in self.__dict__ or (rows[1:] < rows[:-1]).any():
            return self.records[name][rows]
        return self.field(name, rows)

    def batch_call(self, position, call):
        """The call `call` of the rank at `position` numbered as the batch's calls end to end."""
        return call if self.one_rank else self.first_call[position] + call

    def times(self, name):
        """The calls' start_ns or end_ns, rank after rank (batch_call numbering): the calls' own
        array for one rank."""
        if self.one_rank:
            return getattr(self.calls[0], name)
        return np.concatenate([getattr(c, name) for c in self.calls])


def _record_call(rank_calls):
    if rank_calls.record_call is None:     # made from times alone: every record is a call
        return np.arange(rank_calls.n_calls, dtype=np.int64)
    return rank_calls.record_call


def joint_keys(tables):
    """One int64 key per row of each table (lists of the same int columns), equal where the rows
    are and ordered like them, comparable across the tables: packed_keys, or the rows' dense
    ranks where even those take more than 63 bits."""
    keys = packed_keys(tables)
    if keys is None:
        key = _dense_key([np.concatenate([np.asarray(t[i]) for t in tables]) for i in range(len(tables[0]))])
        keys = np.split(key, np.cumsum([len(t[0]) for t in tables])[:-1])
    return keys


# ---- calls with corrected times ------------------------------------------------------------

def rank_calls(log, start_ns, end_ns):
    """RankCalls of one log from per-record corrected times (int64 ns)."""
    return rank_calls_of([log], np.array([0, log.n_records]), log.column("func"), log.column("flags"),
                         np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64))[log.rank]


def rank_calls_of(logs, first_record, func, flags, start_ns, end_ns):
    """{rank: RankCalls} of consecutive logs from their records' func, flags and corrected times
    (int64 ns) end to end (log i's are rows first_record[i]:first_record[i + 1]).  Each rank's
    columns are views of the calls' columns of all the logs: one pass over the rows, not one per
    log; the times are taken as they are when every record is a call."""
    is_call = (flags & record.PART) == 0
    out = {}
    if is_call.all():         # no part records (a bulk-synchronous run): record k is call k
        func = func.copy() if len(logs) == 1 else func
        for log, a, b in zip(logs, first_record[:-1].tolist(), first_record[1:].tolist()):
            out[log.rank] = RankCalls(func[a:b], start_ns[a:b], end_ns[a:b], log.rank,
                                      np.arange(b - a, dtype=np.int64), log.records, log)
        return out
    calls = np.flatnonzero(is_call)
    first_call = np.searchsorted(calls, first_record)
    record_call = np.cumsum(is_call, dtype=np.int64)      # the last call record at or before each record
    record_call -= 1
    record_call -= np.repeat(first_call[:-1], np.diff(first_record))       # counted on each log from 0
    np.maximum(record_call, 0, out=record_call)
    func, start_ns, end_ns = func[calls], start_ns[calls], end_ns[calls]
    for log, a, b, ca, cb in zip(logs, first_record[:-1].tolist(), first_record[1:].tolist(), first_call[:-1].tolist(),
                                 first_call[1:].tolist()):
        out[log.rank] = RankCalls(func[ca:cb], start_ns[ca:cb], end_ns[ca:cb], log.rank, record_call[a:b],
                                  log.records, log)
    return out
