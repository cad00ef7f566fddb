"""Report tables of the linked run: calls, collectives, wait states, unmatched operations, clock.

Each analysis rank builds its rows as numpy columns (function ids, not names), consecutive
owned trace ranks a batch at a time; ``gather`` brings them to analysis rank 0 with shuffle.gather (columnar,
compressed), where ``finish`` adds the names the files show.
"""

import collections

import numpy as np

from mpigraph.schema import CALL_COLUMNS, COLLECTIVE_COLUMNS, UNMATCHED_COLUMNS, WAITSTATE_COLUMNS  # noqa: F401

from mpigraph.util import arrays
from mpigraph.trace import functions as mf
from mpigraph.match import p2p
from mpigraph.trace import record
from mpigraph.trace.batches import owned_batches
from mpigraph.comm import owner_exchange as exchange, parallel, shuffle
from mpigraph.metrics import call_kernel, waits
from mpigraph.util.names import Labels


UNMATCHED_WHAT = ("send", "receive", "completion", "request", "collective")
UNMATCHED_REASON = ("no matching receive", "no matching send", "completes no known request",
                    "never completed (no Wait/Test completed it)", "not all members of the communicator took part")


# ---- per analysis rank ---------------------------------------------------------------------

def call_rows(linked, ranks=None, piece=slice(None)):
    """CALL_COLUMNS rows of the owned `ranks` (default: all; function and wait_state as ids), the
    ranks' calls one after another, each column made once for all of them (a few numpy calls
    per column, not per rank and column).  `piece`: a slice of consecutive calls of each rank
    (a rank's calls in pieces)."""
    ranks = sorted(linked.calls) if ranks is None else list(ranks)
    calls = [linked.calls[rank] for rank in ranks]
    which = [range(c.n_calls)[piece] for c in calls]
    first = np.array([w.start for w in which], np.int64)
    count = np.array([len(w) for w in which], np.int64)
    # Plain views: a memmap's field goes through its slow __getitem__.
    if piece == slice(None):        # whole ranks: their records' fields end to end, less the part records
        records, calls_among = [np.asarray(c.records) for c in calls], _batch_call_records(calls)
    else:                           # a piece of a big rank: only its records are read
        records, calls_among = [np.asarray(c.records)[_call_records(c, piece)] for c in calls], slice(None)

    out = {"rank": np.repeat(np.asarray(ranks, np.int64), count), "call": arrays.ranges(first, first + count - 1)}
    out.update(_record_fields(records, calls_among))
    out["function"] = _joined([c.func[piece] for c in calls], np.int64)
    out["start"] = _joined([c.start_ns[piece] for c in calls], np.int64)
    out["end"] = _joined([c.end_ns[piece] for c in calls], np.int64)
    w = linked.waits.of_ranks(ranks)
    # The pieces' rows among the ranks' waits (all of them when the piece is every call).
    at = np.concatenate(([0], np.cumsum([c.n_calls for c in calls])))[:-1].astype(np.int64) + first
    if piece == slice(None):
        rows = slice(None)
    elif len(ranks) == 1:         # a piece of one rank: a slice of its waits, read without a copy
        rows = slice(int(at[0]), int(at[0] + count[0]))
    else:
        rows = arrays.ranges(at, at + count - 1)
    for name in ("wait_before", "wait_after", "execution", "wait_state", "wait_state_time", "other_state_time"):
        out[name] = w[name][rows]       # whole ranks: views (the report only reads a chunk's columns)
    return {c.name: np.asarray(out[c.name], bool if c.kind == "bool" else np.int64)
            for c in CALL_COLUMNS if c.name != "on_path"}


def _record_fields(records, among):
    """The columns read from the records (call_kernel.FIELDS) of the calls `among` (a slice(None)
    or ascending indices) the arrays `records` end to end: each record read once by the kernel,
    else a field at a time."""
    fields = call_kernel.call_fields(records, None if isinstance(among, slice) else among)
    if fields is not None:
        return fields

    def field(name, dtype=np.int64):
        return _joined([r[name] for r in records], dtype)[among]

    out = {name: field(name) for name in ("peer", "tag", "comm", "bytes", "root")}
    out["callsite"] = field("site")      # the shim's id: the report numbers the run's
    flags, seq = field("flags", None), field("seq")
    out["device_buffer"] = (flags & record.DEVICE) != 0
    # A merged run of polls keeps its count in seq (trace/record.py): no collective number.
    repeated = (flags & record.REPEAT) != 0
    out["calls"] = np.where(repeated, seq, 1)
    out["seq"] = np.where(repeated, 0, seq)
    return out


def _joined(parts, dtype=None):
    """The arrays end to end, as `dtype` (None: theirs), in one new array."""
    return np.concatenate(parts, dtype=dtype) if parts else np.zeros(0, dtype or np.int64)


def _call_records(calls, piece):
    """The records of a rank's calls `piece` (a slice of its calls): the records without PART.

    Where every record is a call, the piece itself: no pass over the flags of every record for
    each piece of a rank (a rank of millions of calls comes in many pieces)."""
    if len(calls.record_call) == calls.n_calls:
        return piece
    return np.flatnonzero((calls.field("flags") & record.PART) == 0)[piece]


def _batch_call_records(calls):
    """The records of the ranks' calls (`calls`: RankCalls), their records end to end: those
    without PART (a slice of all where every record is a call)."""
    if all(len(c.record_call) == c.n_calls for c in calls):
        return slice(None)
    return np.flatnonzero((_joined([c.field("flags") for c in calls]) & record.PART) == 0)


def collective_rows(linked):
    inst = linked.instances
    return {name: np.asarray(inst[name], np.int64) for name in
            ("comm", "seq", "func", "members", "comm_size", "max_start", "min_end", "wait_total", "time_total",
             "seed_wait_total", "last_rank", "root")}


def waitstate_rows(linked):
    """(rank, function id, kind) sums of the owned ranks, rows by rank, function and kind.  A
    point-to-point call whose wait is charged to both kinds (metrics.message_kinds) counts under
    each, with its part."""
    owned = sorted(linked.calls)
    return _concat([_waitstate_sums(linked, owned[first:stop])
                    for first, stop in owned_batches([linked.calls[rank].n_calls for rank in owned])],
                   WAITSTATE_COLUMNS)


def _waitstate_sums(linked, ranks):
    """``waitstate_rows`` of a batch of consecutive owned ranks."""
    n_states = len(waits.WAIT_STATES)
    calls = [linked.calls[rank] for rank in ranks]
    func = _joined([c.func for c in calls])
    bounds = np.concatenate(([0], np.cumsum([c.n_calls for c in calls]))).astype(np.int64)
    kind, time = waits.charged_states(linked.waits.of_ranks(ranks))
    n = len(func)
    # The charges: each call's own (its wait state), then the other kind's of a few calls; the
    # calls of each in order, so their ranks are counted, not searched.
    charged = [np.flatnonzero(kind[:n] >= 0), np.flatnonzero(kind[n:] >= 0)]
    call = np.concatenate(charged)
    owner = np.concatenate([np.repeat(np.arange(len(calls)), np.diff(np.searchsorted(c, bounds))) for c in charged])
    charged[1] += n
    charged = np.concatenate(charged)
    # A key per (rank, function, kind): ranks x function ids x kinds, or where many small ranks
    # make that span wide, ranks x the function-kinds charged (a few dozen, numbered first).
    func_kinds = func[call].astype(np.int64) * n_states + kind[charged]
    width = _FUNC_KINDS
    if len(calls) * width >= max(4 * len(func_kinds), 1 << 16):
        named, func_kinds = arrays.unique_codes(func_kinds)
        width = max(len(named), 1)
    keys, count, sums = arrays.keyed_sums(owner * width + func_kinds, time[charged])
    func_kinds = keys % width if width == _FUNC_KINDS else named[keys % width]
    return {"rank": np.asarray(ranks, np.int64)[keys // width], "function": func_kinds // n_states,
            "kind": func_kinds % n_states, "calls": count, "time": sums}


_FUNC_KINDS = (mf.MAX_ID + 1) * len(waits.WAIT_STATES)      # function id x wait-state kind


def unmatched_rows(linked):
    """UNMATCHED_COLUMNS rows found on this analysis rank (what and reason as codes)."""
    parts = []
    u = linked.unmatched
    is_send = u["side"] == p2p.SEND_SIDE
    func = u["func"]
    parts.append({"rank": u["rank"], "what": np.where(is_send, 0, 1), "reason": np.where(is_send, 0, 1),
                  "function": func, "call": u["post_call"], "comm": u["comm"], "peer": u["peer"], "tag": u["tag"],
                  "bytes": u["bytes"]})
    # Only the ranks with any: a loop over every owned rank's empty arrays costs more than its rows.
    for rank, orphans in [(rank, orphans) for rank, orphans in linked.orphans.items() if len(orphans)]:
        records, calls = linked.calls[rank].records, linked.calls[rank]
        n = len(orphans)
        parts.append({"rank": np.full(n, rank), "what": np.full(n, 2), "reason": np.full(n, 2),
                      "function": records["func"][orphans], "call": calls.record_call[orphans],
                      "comm": records["comm"][orphans], "peer": records["peer"][orphans],
                      "tag": records["tag"][orphans], "bytes": records["bytes"][orphans]})
    for ops in [ops for ops in linked.incomplete_requests.values() if len(ops["rank"])]:
        n = len(ops["rank"])
        parts.append({"rank": ops["rank"], "what": np.full(n, 3), "reason": np.full(n, 3),
                      "function": ops["func"], "call": ops["post_call"],
                      "comm": ops["comm"], "peer": ops["peer"], "tag": ops["tag"], "bytes": ops["bytes"]})
    inst = linked.instances
    broken = np.flatnonzero((inst["comm_size"] >= 0) & (inst["members"] != inst["comm_size"]))
    n = len(broken)
    parts.append({"rank": np.full(n, -1), "what": np.full(n, 4), "reason": np.full(n, 4),
                  "function": inst["func"][broken], "call": np.full(n, -1), "comm": inst["comm"][broken],
                  "peer": np.full(n, -1), "tag": inst["seq"][broken], "bytes": np.zeros(n)})
    return _concat(parts, UNMATCHED_COLUMNS)


def _concat(parts, columns):
    return {c.name: np.concatenate([np.asarray(p[c.name], np.int64) for p in parts]) if parts
            else np.zeros(0, np.int64) for c in columns}


# ---- on analysis rank 0 ----------------------------------------------------------------------

# Rows of the calls table made and written at a time (a Parquet row group each).  Each chunk's
# 17 columns are memory new to the process the first time and reused by the next chunks: with
# chunks of 1 << 20 rows, K analysis ranks owning one chunk each paid K times what one rank paid
# for all of them (at 4e6 records, K = 4: 2.8 s of CPU summed over the ranks against 1.8 s on
# one rank); with 1 << 18, 1.7 s against 1.6 s.
CHUNK_ROWS = 1 << 18


def gather(comm, linked, codec=None, waitstates=None):
    """{table name: columns} of the whole run's small tables on analysis rank 0 (None elsewhere).

    The calls table (a row per call) is not gathered: the report streams each analysis rank's
    rows to rank 0 a chunk at a time, each chunk made when its turn comes (``call_chunks``).
    `waitstates`: this rank's ``waitstate_rows`` when the caller holds them (the report writes
    them as this rank's part of waitstates.parquet: made once, not twice)."""
    local = {"collectives": collective_rows(linked),
             "waitstates": waitstate_rows(linked) if waitstates is None else waitstates,
             "unmatched": unmatched_rows(linked)}
    gathered = {name: shuffle.gather(comm, columns, 0, codec)[0] for name, columns in local.items()}
    return finish(gathered) if comm.Get_rank() == 0 else None


def call_chunks(linked, queries=None, chunk_rows=None):
    """This analysis rank's rows of the calls table (``call_rows``, on_path set from the path's
    ``path_queries``; None: all false) in (rank, call) order, in chunks of at most chunk_rows
    rows, each made only when it is asked for: whole trace ranks together, and a rank with more
    calls than that in pieces of its own.

    The owned ranks are a contiguous block, so the analysis ranks' chunks in rank order are
    the whole table in order.  Made from `linked`, which the analysis holds anyway, the table
    is never held whole, so its 17 columns per call do not add to the path stage's peak.  A
    rank in pieces (a rank of millions of calls: as one chunk it would be held whole, and as
    much again decoded on analysis rank 0) has its on_path found over all its calls at once
    (``rank_on_path``): a path segment may fall between two pieces.
    """
    chunk_rows = chunk_rows or CHUNK_ROWS
    group, rows = [], 0
    for rank in sorted(linked.calls):
        n = linked.calls[rank].n_calls
        if rows and rows + n > chunk_rows:
            yield _marked(call_rows(linked, group), queries)
            group, rows = [], 0
        if n > chunk_rows:
            yield from _rank_in_pieces(linked, rank, queries, chunk_rows)
            continue
        group.append(rank)
        rows += n
    if rows:
        yield _marked(call_rows(linked, group), queries)


def _rank_in_pieces(linked, rank, queries, chunk_rows):
    calls = linked.calls[rank]
    on_path = rank_on_path(queries, rank, calls.start_ns, calls.end_ns)
    for a in range(0, calls.n_calls, chunk_rows):
        rows = call_rows(linked, [rank], slice(a, a + chunk_rows))
        rows["on_path"] = on_path[a:a + chunk_rows]
        yield rows


def _marked(rows, queries):
    if queries is None:
        return _unmarked(rows)
    mark_on_path([rows], queries)      # sets on_path of every row
    return rows


def _unmarked(rows):
    rows["on_path"] = np.zeros(len(rows["rank"]), bool)
    return rows


def call_block(rows):
    """Rows of the calls table as the report writes them: function and wait_state as Labels."""
    block = dict(rows)
    block["function"] = Labels(rows["function"], mf.names_array())
    block["wait_state"] = Labels(rows["wait_state"] + 1, _WAIT_STATE_NAMES)
    return block


_WAIT_STATE_NAMES = np.array([""] + list(waits.WAIT_STATES), dtype=object)


def _share(part, whole):
    """part / whole as float, NaN where whole <= 0."""
    whole = np.asarray(whole, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole > 0, np.asarray(part, np.float64) / np.where(whole > 0, whole, 1), np.nan)


def finish(tables):
    """Names for ids, derived columns, sorted rows: the small tables as the report writes them."""
    names = mf.names_array()
    inst = dict(tables["collectives"])
    inst["function"] = names[inst.pop("func")]
    inst["complete"] = inst["members"] == inst["comm_size"]
    # By the collective's pattern (schema.COLLECTIVE_COLUMNS): each member's wait is within its
    # call, so execution >= 0 and the imbalance is a share from 0 to 1.
    inst["execution"] = inst["time_total"] - inst["wait_total"]
    inst["imbalance"] = _share(inst["wait_total"], inst["time_total"])
    # The seed's instance formulas, kept as documented extra columns.
    inst["seed_execution"] = inst["min_end"] - inst["max_start"]
    inst["seed_imbalance"] = _share(inst["seed_wait_total"], inst["members"] * inst["seed_execution"])
    order = np.lexsort((inst["seq"], inst["comm"]))
    inst = {name: col[order] for name, col in inst.items()}

    ws = named_waitstates(tables["waitstates"])

    un = dict(tables["unmatched"])
    un["function"] = names[un["function"]]
    un["reason"] = np.array(UNMATCHED_REASON, dtype=object)[un["reason"]]
    un["what"] = np.array(UNMATCHED_WHAT, dtype=object)[un["what"]]
    return {"collectives": inst, "waitstates": ws, "unmatched": un}


def named_waitstates(rows):
    """``waitstate_rows`` with the function and kind names the files show."""
    ws = dict(rows)
    ws["function"] = mf.names_array()[ws["function"]]
    ws["kind"] = np.array(waits.WAIT_STATES, dtype=object)[ws["kind"]]
    return ws


def path_queries(path):
    """What ``mark_on_path`` looks up, from a critical_path table (None: no path): a list of
    (rank, lo, hi, how), int64 columns sorted by rank, one per kind of lookup.

    Numbers only, made once: they go to every analysis rank, and each of its chunks of calls
    takes its ranks' rows by a binary search (a path can have a segment per call).
    """
    if path is None or not len(path["rank"]):
        return None
    kind, rank, peer = path["kind"], path["rank"], path["peer"]
    start, end = path["start"], path["end"]
    mpi, message = kind == "mpi", kind == "message"
    queries = []
    for (q_rank, lo, hi), how in zip(((rank[mpi], start[mpi], end[mpi]),
                                      (rank[message], end[message], end[message]),
                                      (peer[message], start[message], start[message])), QUERY_KINDS):
        order = np.argsort(q_rank, kind="stable")
        queries.append((q_rank[order], lo[order], hi[order], how))
    return queries


QUERY_KINDS = ("overlap", "ends in", "starts in")     # path_queries' lookups, in their order


def owned_path_queries(comm, path, n_trace_ranks):
    """``path_queries`` of the trace ranks this analysis rank owns (parallel.Ownership): every
    rank makes them from its part of the path (`path`; None on every rank without a path) and
    sends each owner its rows, sorted by rank where they arrive; None everywhere without a path.
    Collective.

    Not a broadcast: a pipelined program's path has a segment per call, and every rank would
    receive the queries of every trace rank to use its own.  Most of a part's rows are of the
    rank's own trace ranks: they stay."""
    queries = path_queries(path)
    if comm.size == 1 or path is None:
        return queries
    owner = parallel.Ownership(n_trace_ranks, comm.size)
    none = np.zeros(0, np.int64)
    owned = []
    for i, how in enumerate(QUERY_KINDS):
        q_rank, lo, hi = queries[i][:3] if queries is not None else (none, none, none)
        known = (q_rank >= 0) & (q_rank < n_trace_ranks)    # a message of an unknown peer marks nothing
        # A trace rank travels in four bytes, and a point query (lo == hi) sends its time once.
        columns = [np.asarray(q_rank)[known].astype(np.int32), np.asarray(lo, np.int64)[known]]
        if how == "overlap":
            columns.append(np.asarray(hi, np.int64)[known])
        received = exchange.send_rows(comm, owner.owner_of(columns[0]), columns)
        by_rank = np.argsort(received[0], kind="stable")
        owned.append((received[0][by_rank], received[1][by_rank], received[-1][by_rank], how))
    return owned


def mark_on_path(blocks, queries):
    """Set on_path in the calls table's row blocks (``finish``) from a path's ``path_queries``.

    A call is on the path when the path spends time in it or passes through it:
    an ``mpi`` segment of its rank overlaps it; a ``message`` segment ends in it (the
    call the message released, on the segment's rank: the call holding the
    segment's end, the one ending there on a tie) or starts in it (the event on
    the peer that sent or arrived last: the call holding the segment's start, the
    one starting there on a tie).  Compute segments lie between calls.
    """
    if queries is None:
        return
    for block in blocks:
        block_rank = np.asarray(block["rank"])
        # A block's rows are its ranks' calls rank after rank: each rank's rows are one run, found
        # by comparing neighbours (no sort of the block's million ranks).
        firsts = arrays.runs(block_rank)[0] if len(block_rank) else np.zeros(0, np.int64)
        block["on_path"] = calls_on_path(queries, block_rank[firsts], firsts, np.asarray(block["start"]),
                                         np.asarray(block["end"]))


def rank_on_path(queries, rank, starts, ends):
    """on_path of every call of one trace rank (``mark_on_path``), given its calls' starts and
    ends in call order; all false without queries."""
    return calls_on_path(queries, np.array([rank], np.int64), np.zeros(1, np.int64), starts, ends)


def calls_on_path(queries, ranks, firsts, starts, ends):
    """on_path (``mark_on_path``) of calls that are several ranks' calls one rank after another:
    `ranks` (distinct) from rows `firsts` on, each rank's in call order; all false without queries.

    With the kernel (metrics.call_kernel.PathMarks) each query is searched for in its rank's
    calls, from the row the query before found.  With numpy every rank's calls are searched at
    once: a call's key is its time within a band of keys of its own rank (rank after rank), so
    the ranks' calls in order are one sorted array of keys and a query, its time in its rank's
    band, is one binary search in it.  A rank whose calls are not in order (threads overlapped
    them) has each query checked against every call.
    """
    n = len(starts)
    marked = np.zeros(n + 1, np.int64)    # +1 at a range's first row, -1 after its last
    if not n or not queries:
        return np.zeros(n, bool)
    firsts = np.asarray(firsts, np.int64)
    stops = np.append(firsts[1:], n)
    by_rank = np.argsort(ranks, kind="stable")
    asked = [(how,) + _queries_of(q_rank, lo, hi, np.asarray(ranks)[by_rank], by_rank)
             for q_rank, lo, hi, how in queries]
    kernel = call_kernel.PathMarks.open(starts, ends, firsts, stops)
    if kernel is not None:
        for how, q_run, lo, hi in asked:
            kernel.mark(marked, QUERY_KINDS.index(how), q_run, lo, hi)
        _mark_unordered(marked, kernel.unordered, asked, starts, ends, firsts, stops)
        return kernel.rows(marked)
    # A rank's calls follow each other (starts and ends both in order) unless threads overlapped them.
    disorder = np.flatnonzero((starts[1:] < starts[:-1]) | (ends[1:] < ends[:-1]))
    unordered = np.zeros(len(firsts), bool)
    run = np.searchsorted(firsts, disorder, "right") - 1
    unordered[run[run == np.searchsorted(firsts, disorder + 1, "right") - 1]] = True
    bands = _Bands(starts, ends)
    for g0, g1 in bands.groups(len(firsts)):
        group = None
        for how, q_run, lo, hi in asked:
            mine = np.flatnonzero(~unordered[q_run] & (q_run >= g0) & (q_run < g1))
            if len(mine):
                group = group or bands.group(starts, ends, firsts[g0:g1], stops[g0:g1])
                _mark_ordered(marked, group, q_run[mine] - g0, lo[mine], hi[mine], firsts[q_run[mine]],
                              stops[q_run[mine]], how)
    _mark_unordered(marked, unordered, asked, starts, ends, firsts, stops)
    return np.cumsum(marked[:-1]) > 0


def _mark_unordered(marked, unordered, asked, starts, ends, firsts, stops):
    """Add the calls that the `asked` queries of the `unordered` runs hold to `marked`."""
    for how, q_run, lo, hi in asked:
        for k in np.unique(q_run[unordered[q_run]]).tolist():
            mine = q_run == k
            a, b = firsts[k], stops[k]
            _mark_rows_unordered(marked[a:b + 1], starts[a:b], ends[a:b], lo[mine], hi[mine], how)


def _queries_of(q_rank, lo, hi, sorted_ranks, by_rank):
    """(the run of each query of a rank among `sorted_ranks`, its lo, its hi): the queries of
    the other ranks left out (q_rank sorted, as path_queries makes them)."""
    a, b = np.searchsorted(q_rank, [sorted_ranks[0], sorted_ranks[-1] + 1])
    q_rank, lo, hi = q_rank[a:b], lo[a:b], hi[a:b]
    at = np.searchsorted(sorted_ranks, q_rank)
    mine = sorted_ranks[np.minimum(at, len(sorted_ranks) - 1)] == q_rank
    return by_rank[at[mine]], lo[mine], hi[mine]


class _Bands:
    """Keys of times in bands of their rank (``calls_on_path``): run k of a group of runs from
    g0 on has the keys (k - g0) * width + t - low, `low` one below every call's time and `high`
    one above; a query's time outside them is clipped to them, past every call of its rank on
    that side.  A group holds as many runs as keep its keys in int64 (all of them but where
    the calls' times span more than 2^62 ns over the number of runs)."""

    def __init__(self, starts, ends):
        self.low = min(int(starts.min()), int(ends.min())) - 1
        self.high = max(int(starts.max()), int(ends.max())) + 1
        self.width = self.high - self.low + 1
        self.per_group = max(1, (1 << 62) // self.width)

    def groups(self, n_runs):
        """[(g0, g1)] bounds of the groups of runs."""
        return [(g0, min(g0 + self.per_group, n_runs)) for g0 in range(0, n_runs, self.per_group)]

    def group(self, starts, ends, firsts, stops):
        """The keys of the calls of a group of runs (rows firsts[i]:stops[i], one after another)."""
        rows = slice(firsts[0], stops[-1])
        band = np.repeat(np.arange(len(firsts), dtype=np.int64) * self.width, stops - firsts)
        start_keys, end_keys = starts[rows] - self.low, ends[rows] - self.low
        start_keys += band
        end_keys += band
        return _Group(start_keys, end_keys, rows.start, starts, ends, self)

    def query_keys(self, times, run_in_group):
        """Keys of query times, each in the band of its run (numbered in its group)."""
        return run_in_group * self.width + (np.clip(times, self.low, self.high) - self.low)


# A group of runs' calls (``_Bands.group``): start and end keys, its first row in the block, and
# the block's starts and ends.
_Group = collections.namedtuple("_Group", "start_keys end_keys offset starts ends bands")


def _mark_ordered(marked, group, run, lo, hi, first_row, stop_row, how):
    """Add the calls [first, last) that each query holds to `marked` (a block's rows), the queries'
    ranks' calls in order: a binary search of the group's keys per query (`run`: the query's run
    in the group, whose rows are first_row:stop_row)."""
    lo_keys = group.bands.query_keys(lo, run)
    if how == "overlap":        # start < hi and end > lo; a zero-length segment: start <= lo <= end
        hi_keys = group.bands.query_keys(hi, run)
        first = np.searchsorted(group.end_keys, lo_keys, "right")
        last = np.searchsorted(group.start_keys, hi_keys, "left")
        point = np.flatnonzero(lo == hi)
        first[point] = np.searchsorted(group.end_keys, lo_keys[point], "left")
        last[point] = np.searchsorted(group.start_keys, hi_keys[point], "right")
        first += group.offset
        last += group.offset
    elif how == "ends in":      # the first call ending at or after the time, if it started by then
        first = np.searchsorted(group.end_keys, lo_keys, "left") + group.offset
        holds = first < stop_row
        holds[holds] = group.starts[first[holds]] <= lo[holds]
        first, last = first[holds], first[holds] + 1
    else:                       # "starts in": the last call starting at or before the time, if it ends after
        first = np.searchsorted(group.start_keys, lo_keys, "right") - 1 + group.offset
        holds = first >= first_row
        holds[holds] = group.ends[first[holds]] >= lo[holds]
        first, last = first[holds], first[holds] + 1
    keep = first < last
    # Counted, not added one at a time (np.add.at): a pipelined program's path marks every call.
    marked += np.bincount(first[keep], minlength=len(marked))
    marked -= np.bincount(last[keep], minlength=len(marked))


def _mark_rows_unordered(marked, starts, ends, lo, hi, how):
    """Add the calls [first, last) that each query holds to `marked` (one rank's calls, of several
    threads, which overlap): one query at a time, checked against every call."""
    for a, b in zip(lo.tolist(), hi.tolist()):
        if how == "overlap":
            rows = np.flatnonzero((starts <= a) & (ends >= a) if a == b else (starts < b) & (ends > a))
        else:
            holding = np.flatnonzero((starts <= a) & (ends >= a))
            rows = holding[:1] if how == "ends in" else holding[-1:]
        np.add.at(marked, rows, 1)
        np.add.at(marked, rows + 1, -1)
