"""Calls in flight when a run ended: where each rank hung, deadlock cycles, aborts.

The shim writes a blocking call's start into its thread's slot of the log
header (``record.HEADER_DTYPE["inflight"]``) before the call and clears it
(func 0) when the call returns; MPI_Abort marks the header (``HEADER_ABORTED``,
``abort_code``).  A rank that reached MPI_Finalize has no call in flight; one
that was killed keeps the call it was blocked in.

A deadlock is a cycle of ranks each blocked in a point-to-point call (a
receive, send, probe or wait on requests of one peer) whose peer is the next
rank of the cycle: rank r waits for ``succ[r]``; following ``succ`` from every
rank finds each cycle of that functional graph once.
"""

import numpy as np

from mpigraph.clock import models as clock
from mpigraph.trace import functions as mf
from mpigraph.trace import logs as trace
from mpigraph.trace import record

# Kinds whose in-flight call waits for its peer alone: the edges of the wait-for graph.
_WAITS_FOR_PEER = frozenset({mf.SEND, mf.RECV, mf.SENDRECV, mf.PROBE, mf.COMPLETION, mf.RMA_SYNC})
_PEER_KIND = np.zeros(mf.MAX_ID + 1, bool)
_PEER_KIND[[f.id for f in mf.FUNCTIONS if f.kind in _WAITS_FOR_PEER]] = True
_ABORT_ID = mf.BY_NAME["MPI_Abort"].id


def read(run_dir: str, world_size: int) -> dict:
    """The in-flight table of a run (schema.INFLIGHT_COLUMNS), plus "aborted" {rank: error code}.

    Reads each rank's header and first record (its MPI_Init, the origin of ``since``).
    """
    rows = {name: [] for name in ("rank", "thread", "function", "peer", "tag", "comm", "seq", "requests", "since")}
    aborted = {}
    for rank in range(world_size):
        log = trace.open_log(trace.log_path(run_dir, rank), validate=False)
        header = log.header
        if header["flags"] & record.HEADER_ABORTED:
            aborted[rank] = int(header["abort_code"])
        if log.finalized:
            continue
        slots = header["inflight"]
        busy = np.flatnonzero(slots["func"] != 0)
        if not len(busy):
            continue
        calls = slots[busy]
        origin = clock.to_ns(log, log.records["t_end"][:1])[0] if log.n_records else 0
        rows["rank"].append(np.full(len(busy), rank))
        rows["thread"].append(calls["thread"].astype(np.int64))
        rows["function"].append(mf.names_array()[calls["func"]])
        for name in ("peer", "tag", "comm", "seq"):
            rows[name].append(calls[name].astype(np.int64))
        rows["requests"].append(np.where(_is_wait(calls["func"]), calls["bytes"], 0).astype(np.int64))
        rows["since"].append(clock.to_ns(log, calls["t_start"]) - origin)
    table = {name: np.concatenate(parts) if parts else np.zeros(0, object if name == "function" else np.int64)
             for name, parts in rows.items()}
    table["deadlock"], found = deadlocks(table["rank"], table["peer"], _function_ids(table["function"]), world_size)
    return {"table": table, "aborted": aborted, "deadlocks": found}


def _is_wait(func):
    return np.isin(func, [f.id for f in mf.FUNCTIONS if f.kind == mf.COMPLETION])


def _function_ids(names):
    ids = {f.name: f.id for f in mf.FUNCTIONS}
    return np.array([ids.get(n, 0) for n in names], np.int64)


def deadlocks(rank, peer, func, world_size):
    """(per row: the index of the cycle its rank is in, -1 for none; the cycles, each a list of ranks
    from its lowest, in order of that rank).

    succ[r] is the peer of rank r's first in-flight point-to-point call (-1 when it has none);
    a cycle is a set of ranks with succ[r] in it for each of them.
    """
    succ = np.full(world_size, -1, np.int64)
    edge = _PEER_KIND[func] & (peer >= 0) & (peer < world_size)
    first = np.unique(rank[edge], return_index=True)[1]
    succ[rank[edge][first]] = peer[edge][first]
    cycle_of = np.full(world_size, -1, np.int64)
    found = cycles(succ)
    for cycle_index, members in enumerate(found):
        cycle_of[members] = cycle_index
    return (cycle_of[rank] if len(rank) else np.zeros(0, np.int64)), found


def cycles(succ):
    """The cycles of the functional graph r -> succ[r] (succ -1: no edge), each from its lowest rank.

    Walks from every rank not yet seen (a loop per rank, each rank visited once): a walk that
    meets a rank of its own path has found a cycle, one that meets an earlier walk's rank has not.
    """
    state = np.zeros(len(succ), np.int8)         # 0 unseen, 1 on the current walk, 2 done
    found = []
    for start in range(len(succ)):
        path, r = [], start
        while r >= 0 and state[r] == 0:
            state[r] = 1
            path.append(r)
            r = succ[r]
        if r >= 0 and state[r] == 1:
            members = [int(m) for m in path[path.index(r):]]
            low = members.index(min(members))
            found.append(members[low:] + members[:low])
        state[path] = 2
    return sorted(found)


def _call_text(row, table):
    function, peer, tag = table["function"][row], table["peer"][row], table["tag"][row]
    words = [function]
    if function == "MPI_Abort":
        return "MPI_Abort (error code %d)" % tag
    if peer >= 0:
        words.append("peer %d" % peer)
    elif peer == record.PEER_ANY:
        words.append("any source")
    if tag >= 0:
        words.append("tag %d" % tag)
    if table["seq"][row]:
        words.append("collective #%d" % table["seq"][row])
    if table["requests"][row] > 1:
        words.append("%d requests" % table["requests"][row])
    words.append("comm %d" % table["comm"][row])
    return "%s, since %.6f s" % (", ".join(words), table["since"][row] / 1e9)


def summary_lines(found) -> list:
    """The words of summary.txt: aborts, deadlocks and every in-flight call (empty when none)."""
    table, aborted = found["table"], found["aborted"]
    lines = ["rank %d called MPI_Abort (error code %d)" % (rank, code) for rank, code in sorted(aborted.items())]
    for members in found["deadlocks"]:
        lines.append("deadlock: %s (each rank blocked in a call waiting for the next)"
                     % " -> ".join(str(r) for r in members + members[:1]))
    if len(table["rank"]):
        lines.append("calls in flight when the run ended (in %s):" % CSV_NAME)
        for row in range(len(table["rank"])):
            thread = " thread %d" % table["thread"][row] if table["thread"][row] else ""
            lines.append("  rank %d%s: %s" % (table["rank"][row], thread, _call_text(row, table)))
    return lines


CSV_NAME = "inflight.csv"
