"""Report tables of the linked run: calls, collectives, wait states, unmatched operations, clock.

Each analysis rank builds its rows as numpy columns (function ids, not names);
``gather`` brings them to analysis rank 0 with shuffle.gather (columnar,
compressed), where ``finish`` adds the names the files show.
"""

import numpy as np

from mpigraph.schema import CALL_COLUMNS, COLLECTIVE_COLUMNS, UNMATCHED_COLUMNS, WAITSTATE_COLUMNS  # noqa: F401

from mpigraph.util import arrays
from mpigraph.trace import functions as mf
from mpigraph.match import p2p
from mpigraph.trace import record
from mpigraph.comm import owner_exchange as exchange, parallel, shuffle
from mpigraph.metrics import waits
from mpigraph.util.names import Labels


UNMATCHED_WHAT = ("send", "receive", "completion", "request", "collective")
UNMATCHED_REASON = ("no matching receive", "no matching send", "completes no known request",
                    "never completed (no Wait/Test completed it)", "not all members of the communicator took part")


# ---- per analysis rank ---------------------------------------------------------------------

def call_rows(linked, ranks=None, piece=slice(None)):
    """CALL_COLUMNS rows of the owned `ranks` (default: all; function and wait_state as ids),
    int64 columns filled rank by rank: one array per column, no per-rank pieces to concatenate.
    `piece`: a slice of each rank's calls (a rank's calls in pieces)."""
    ranks = sorted(linked.calls) if ranks is None else ranks
    n = sum(len(range(linked.calls[rank].n_calls)[piece]) for rank in ranks)
    out = {c.name: np.empty(n, bool if c.kind == "bool" else np.int64) for c in CALL_COLUMNS if c.name != "on_path"}
    at = 0
    for rank in ranks:
        calls = linked.calls[rank]
        which = range(calls.n_calls)[piece]
        records = np.asarray(calls.records)      # a plain view: a memmap's field goes through its slow __getitem__
        index = _call_records(calls, piece)
        w = linked.waits[rank]
        rows = slice(at, at + len(which))
        at += len(which)
        out["rank"][rows] = rank
        out["call"][rows] = np.arange(which.start, which.stop, which.step)
        for name in ("peer", "tag", "comm", "bytes", "root"):
            out[name][rows] = records[name][index]
        out["callsite"][rows] = records["site"][index]   # the shim's id: the report numbers the run's
        flags, seq = records["flags"][index], records["seq"][index]
        out["device_buffer"][rows] = (flags & record.DEVICE) != 0
        # A merged run of polls keeps its count in seq (trace/record.py): no collective number.
        repeated = (flags & record.REPEAT) != 0
        out["calls"][rows] = np.where(repeated, seq, 1) if repeated.any() else 1
        out["seq"][rows] = np.where(repeated, 0, seq) if repeated.any() else seq
        out["function"][rows] = calls.func[piece]
        out["start"][rows], out["end"][rows] = calls.start_ns[piece], calls.end_ns[piece]
        for name in ("wait_before", "wait_after", "execution", "wait_state", "wait_state_time", "other_state_time"):
            out[name][rows] = w[name][piece]
    return out


def _call_records(calls, piece):
    """The records of a rank's calls `piece` (a slice of its calls): the records without PART.

    Where every record is a call, the piece itself: no pass over the flags of every record for
    each piece of a rank (a rank of millions of calls comes in many pieces)."""
    if len(calls.record_call) == calls.n_calls:
        return piece
    return np.flatnonzero((calls.field("flags") & record.PART) == 0)[piece]


def collective_rows(linked):
    inst = linked.instances
    return {name: np.asarray(inst[name], np.int64) for name in
            ("comm", "seq", "func", "members", "comm_size", "max_start", "min_end", "wait_total", "time_total",
             "seed_wait_total", "last_rank", "root")}


def waitstate_rows(linked):
    """(rank, function id, kind) sums of the owned ranks.  A point-to-point call whose wait is
    charged to both kinds (metrics.message_kinds) counts under each, with its part."""
    n_states = len(waits.WAIT_STATES)
    parts = []
    for rank, calls in linked.calls.items():
        w = linked.waits[rank]
        kind, time = waits.charged_states(w)
        has = kind >= 0
        func = np.tile(calls.func, 2)[has].astype(np.int64)
        key = func * n_states + kind[has]
        # Keys are function id x kind, a few thousand at most: counted in place, not sorted.
        count = np.bincount(key)
        sums = np.zeros(len(count), np.int64)
        np.add.at(sums, key, time[has])         # exact in int64, unlike bincount's float weights
        keys = np.flatnonzero(count)
        parts.append({"rank": np.full(len(keys), rank, np.int64), "function": keys // n_states,
                      "kind": keys % n_states, "calls": count[keys].astype(np.int64), "time": sums[keys]})
    return _concat(parts, WAITSTATE_COLUMNS)


def unmatched_rows(linked):
    """UNMATCHED_COLUMNS rows found on this analysis rank (what and reason as codes)."""
    parts = []
    u = linked.unmatched
    is_send = u["side"] == p2p.SEND_SIDE
    func = u["func"]
    parts.append({"rank": u["rank"], "what": np.where(is_send, 0, 1), "reason": np.where(is_send, 0, 1),
                  "function": func, "call": u["post_call"], "comm": u["comm"], "peer": u["peer"], "tag": u["tag"],
                  "bytes": u["bytes"]})
    for rank, orphans in linked.orphans.items():
        records, calls = linked.calls[rank].records, linked.calls[rank]
        n = len(orphans)
        parts.append({"rank": np.full(n, rank), "what": np.full(n, 2), "reason": np.full(n, 2),
                      "function": records["func"][orphans], "call": calls.record_call[orphans],
                      "comm": records["comm"][orphans], "peer": records["peer"][orphans],
                      "tag": records["tag"][orphans], "bytes": records["bytes"][orphans]})
    for rank, ops in linked.incomplete_requests.items():
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
        on_path = np.zeros(len(block_rank), bool)
        # A block's rows are its ranks' calls rank after rank: each rank's rows are one run, found
        # by comparing neighbours (no sort of the block's million ranks).
        firsts, lengths = arrays.runs(block_rank) if len(block_rank) else ((), ())
        for first, last in zip(np.asarray(firsts).tolist(), np.add(firsts, lengths).tolist()):
            on_path[first:last] = rank_on_path(queries, int(block_rank[first]), block["start"][first:last],
                                               block["end"][first:last])
        block["on_path"] = on_path


def rank_on_path(queries, rank, starts, ends):
    """on_path of every call of one trace rank (``mark_on_path``), given its calls' starts and
    ends in call order; all false without queries."""
    marked = np.zeros(len(starts) + 1, np.int64)    # +1 at a range's first row, -1 after its last
    for q_rank, lo, hi, how in queries or ():
        a, b = np.searchsorted(q_rank, [rank, rank + 1])
        if a < b:
            _mark_rows(marked, starts, ends, lo[a:b], hi[a:b], how)
    return np.cumsum(marked[:-1]) > 0


def _mark_rows(marked, starts, ends, lo, hi, how):
    """Add the calls [first, last) that each query holds to `marked` (one rank's calls).

    A rank's calls follow each other (starts and ends both in order) unless
    threads overlapped them: then each query is checked against every call.
    """
    if (np.diff(starts) < 0).any() or (np.diff(ends) < 0).any():
        _mark_rows_unordered(marked, starts, ends, lo, hi, how)
        return
    if how == "overlap":        # start < hi and end > lo; a zero-length segment: start <= lo <= end
        first, last = np.searchsorted(ends, lo, "right"), np.searchsorted(starts, hi, "left")
        point = np.flatnonzero(lo == hi)
        first[point] = np.searchsorted(ends, lo[point], "left")
        last[point] = np.searchsorted(starts, hi[point], "right")
    elif how == "ends in":      # the first call ending at or after the time, if it started by then
        first = np.searchsorted(ends, lo, "left")
        holds = first < len(starts)
        holds[holds] = starts[first[holds]] <= lo[holds]
        first, last = first[holds], first[holds] + 1
    else:                       # "starts in": the last call starting at or before the time, if it ends after
        first = np.searchsorted(starts, lo, "right") - 1
        holds = first >= 0
        holds[holds] = ends[first[holds]] >= lo[holds]
        first, last = first[holds], first[holds] + 1
    keep = first < last
    # Counted, not added one at a time (np.add.at): a pipelined program's path marks every call.
    marked += np.bincount(first[keep], minlength=len(marked))
    marked -= np.bincount(last[keep], minlength=len(marked))


def _mark_rows_unordered(marked, starts, ends, lo, hi, how):
    """_mark_rows for calls of several threads, which overlap: one query at a time."""
    for a, b in zip(lo.tolist(), hi.tolist()):
        if how == "overlap":
            rows = np.flatnonzero((starts <= a) & (ends >= a) if a == b else (starts < b) & (ends > a))
        else:
            holding = np.flatnonzero((starts <= a) & (ends >= a))
            rows = holding[:1] if how == "ends in" else holding[-1:]
        np.add.at(marked, rows, 1)
        np.add.at(marked, rows + 1, -1)
