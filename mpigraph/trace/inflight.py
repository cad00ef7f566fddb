"""Calls in flight when a run ended: where each rank hung, deadlock cycles, aborts.

The shim writes a blocking call's start into its thread's slot of the log
header (``record.HEADER_DTYPE["inflight"]``) before the call and clears it
(func 0) when the call returns; MPI_Abort marks the header (``HEADER_ABORTED``,
``abort_code``).  A rank that reached MPI_Finalize has no call in flight; one
that was killed keeps the call it was blocked in.

The wait-for graph has an edge r -> s where rank r's call in flight cannot
return before rank s acts:

- a receive, send, probe, wait on requests of one peer, or passive-target
  lock/flush, whose peer is s;
- an N-to-N collective (barrier, allreduce, communicator or window creation,
  fence, collective file operation, ...) on a communicator s belongs to, s not
  in flight in the same instance (communicator, sequence number); a non-root
  member of a 1-to-N collective -> its root; the root of an N-to-1 collective
  -> the other members not in it.  (Scans and neighbourhood collectives wait
  for only some members: no edges, so no false deadlock.)

A deadlock is a set of ranks each waiting, through such edges, for the
others: a strongly connected component of two or more ranks (or one rank
waiting for itself).  Members of a communicator come from the logs'
communicator-creation parts (``record`` module doc).
"""

import numpy as np

from mpigraph.clock import models as clock
from mpigraph.trace import functions as mf
from mpigraph.trace import logs as trace
from mpigraph.trace import record


def _ids(*kinds):
    table = np.zeros(mf.MAX_ID + 1, bool)
    table[[f.id for f in mf.FUNCTIONS if f.kind in kinds]] = True
    return table


_PEER_KIND = _ids(mf.SEND, mf.RECV, mf.SENDRECV, mf.PROBE, mf.COMPLETION, mf.RMA_SYNC)
_ALL_KIND = _ids(mf.N_TO_N, mf.COMM_CREATE, mf.COMM_FREE)
_ONE_TO_N, _N_TO_ONE = _ids(mf.ONE_TO_N), _ids(mf.N_TO_ONE)
_WAIT_KIND = _ids(mf.COMPLETION)
_CREATE_KIND = _ids(mf.COMM_CREATE)
_COLUMNS = ("rank", "thread", "function", "func", "peer", "tag", "comm", "seq", "root", "requests", "since")


def read(run_dir: str, world_size: int) -> dict:
    """{"table": the in-flight table (schema.INFLIGHT_COLUMNS, plus func and root), "aborted":
    {rank: error code}, "deadlocks": [ranks of each deadlock, in the order of a cycle]}.

    Reads each rank's header, its first record (its MPI_Init: the origin of ``since``) and, when
    some call is in flight on a communicator, its communicator-creation parts.
    """
    rows = {name: [] for name in _COLUMNS}
    aborted, logs = {}, {}
    for rank in range(world_size):
        log = trace.open_log(trace.log_path(run_dir, rank), validate=False)
        logs[rank] = log
        if log.header["flags"] & record.HEADER_ABORTED:
            aborted[rank] = int(log.header["abort_code"])
        if not log.finalized:
            _add_rows(rows, rank, log)
    table = {name: np.concatenate(parts) if parts else np.zeros(0, object if name == "function" else np.int64)
             for name, parts in rows.items()}
    members = _members(logs, set(table["comm"][table["seq"] > 0].tolist()), world_size)
    src, dst = wait_edges(table, members)
    table["deadlock"], found = deadlocks(table["rank"], src, dst, world_size)
    return {"table": table, "aborted": aborted, "deadlocks": found}


def _add_rows(rows, rank, log):
    slots = log.header["inflight"]
    busy = np.flatnonzero(slots["func"] != 0)
    if not len(busy):
        return
    calls = slots[busy]
    origin = clock.to_ns(log, log.records["t_end"][:1])[0] if log.n_records else 0
    rows["rank"].append(np.full(len(busy), rank, np.int64))
    rows["thread"].append(calls["thread"].astype(np.int64))
    rows["function"].append(mf.names_array()[calls["func"]])
    rows["func"].append(calls["func"].astype(np.int64))
    for name in ("peer", "tag", "comm", "seq", "root"):
        rows[name].append(calls[name].astype(np.int64))
    rows["requests"].append(np.where(_WAIT_KIND[calls["func"]], calls["bytes"], 0).astype(np.int64))
    rows["since"].append(clock.to_ns(log, calls["t_start"]) - origin)


def _members(logs, comms, world_size):
    """{comm id: world ranks of its members} for `comms`: MPI_COMM_WORLD, and the others from the
    creation parts in each rank's log (a rank is a member of the communicators it created)."""
    members = {0: np.arange(world_size)} if 0 in comms else {}
    wanted = np.array(sorted(comms - {0}), np.int64)
    if not len(wanted):
        return members
    found = {c: [] for c in wanted.tolist()}
    for rank, log in logs.items():
        r = log.records
        parts = ((log.column("flags") & record.PART) != 0) & _CREATE_KIND[log.column("func")]
        for c in np.intersect1d(r["comm"][parts], wanted).tolist():
            found[c].append(rank)
    members.update((c, np.array(ranks, np.int64)) for c, ranks in found.items())
    return members


def wait_edges(table, members):
    """(src, dst) world ranks of the wait-for graph's edges (module doc), one row at a time for
    the collectives (a row per blocked rank: few)."""
    func, rank, peer = table["func"], table["rank"], table["peer"]
    p2p = _PEER_KIND[func] & (peer >= 0)
    src, dst = [rank[p2p]], [peer[p2p]]
    in_instance = {}
    for i in np.flatnonzero(table["seq"] > 0):
        in_instance.setdefault((table["comm"][i], table["seq"][i]), set()).add(int(rank[i]))
    for i in np.flatnonzero((table["seq"] > 0) & (_ALL_KIND[func] | _ONE_TO_N[func] | _N_TO_ONE[func])):
        comm, seq, root = table["comm"][i], table["seq"][i], table["root"][i]
        if comm not in members:
            continue
        here = in_instance[(comm, seq)]
        others = np.array([m for m in members[comm].tolist() if m not in here], np.int64)
        if _ONE_TO_N[func[i]]:
            others = others[others == root] if root != rank[i] else others[:0]
        elif _N_TO_ONE[func[i]] and root != rank[i]:
            others = others[:0]
        src.append(np.full(len(others), rank[i]))
        dst.append(others)
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)


def deadlocks(rank, src, dst, world_size):
    """(per in-flight row: the index of the deadlock its rank is in, -1 for none; the deadlocks,
    each its ranks in the order of a cycle from its lowest rank, in order of that rank).

    A deadlock is a strongly connected component of the wait-for graph with two or more ranks,
    or one rank waiting for itself.
    """
    # Here, not at the top: only a run that hung pays scipy's import (the report imports this module).
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(src)), (src, dst)), shape=(world_size, world_size)).tocsr()
    _, component = connected_components(graph, directed=True, connection="strong")
    size = np.bincount(component, minlength=world_size)
    self_wait = np.zeros(world_size, bool)
    self_wait[src[src == dst]] = True
    stuck = (size[component] >= 2) | self_wait
    found = []
    for low in np.flatnonzero(stuck).tolist():
        if low == np.flatnonzero(component == component[low])[0]:
            found.append(_cycle(graph, component, low))
    deadlock_of = np.full(world_size, -1, np.int64)
    for index, ranks in enumerate(found):
        deadlock_of[component == component[ranks[0]]] = index
    return (deadlock_of[rank] if len(rank) else np.zeros(0, np.int64)), found


def _cycle(graph, component, low):
    """A cycle through `low` inside its component: from each rank, its lowest successor in the
    component not yet on the walk, until an edge leads back to `low` (a walk per deadlock)."""
    walk, here = [low], low
    while True:
        succ = graph.indices[graph.indptr[here]:graph.indptr[here + 1]]
        succ = np.sort(succ[component[succ] == component[low]])
        if low in succ.tolist() and (len(walk) > 1 or here == low):
            return walk
        fresh = [s for s in succ.tolist() if s not in walk]
        if not fresh:          # only edges back into the walk: the cycle closes at the first such rank
            back = succ[0]
            return walk[walk.index(back):]
        here = fresh[0]
        walk.append(here)


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
