"""Probes: which message each MPI_Probe / Iprobe / Mprobe / Improbe waited for, and who sent it.

A probe that found a message (a blocking Probe or Mprobe, an Iprobe or Improbe
with flag 1: the shim marks it ``record.MATCHED`` and writes the status's
source, tag and size) names the message only by (communicator, source, tag).
MPI's non-overtaking rule makes that enough: the probe sees the first message
of the stream (comm, source -> this rank, tag) that no receive posted before
it has taken, which is the message the next receive of that stream posted
after the probe gets.  For Mprobe and Improbe that is the Mrecv / Imrecv of
the returned handle in every program that receives a probed message before
posting another receive of the same stream (mpi4py's lowercase recv: Mprobe
then Mrecv at once); the shim does not record which handle a receive used.
So each found probe is matched to that receive, and through the receive's
message (p2p.MessagePairs) to the send.  A probed message that is never
received has no send here: its probe gets no wait and no edge.

Polling.  The Iprobe / Improbe calls that found nothing, right before the
found probe on the same rank with no other MPI call between them (compute
between them is allowed: the loop's own work), were waiting for something
that this message ended: they are the *polling run* of the found probe.

What the match stage makes of it (``probe_links``):
- waits: every call of the run and the found probe waited for the message
  from its start until the send started (late sender), at most its duration:
  max(0, min(send start - call start, call duration));
- the path (``path_ends``): a polling run is one wait, so for the path stage
  each probe of the run that found nothing ends where the next call of the run
  starts (the loop's instructions between two Iprobes are polling, not work).
  Without it a send that started between two Iprobes would release the next
  one after the gap, and the path, finding the polling rank's chain of calls
  and gaps without slack, would stay in the loop instead of going to the
  sender.  The calls' own times (calls.parquet, the waits) are left as recorded;
- edges: one late-sender edge S(send) -> E(c), c the first call of the run
  (the found probe included) that ended, for the path, at or after the send
  started: the call the message released.  A blocking Probe waits alone: c is
  the probe.  An edge whose send started after the found probe ended (clocks
  that disagree) is left out: every edge u -> E(c) must have t(u) <= t(E(c)).
"""

import numpy as np

from mpigraph.match.core import CallIndex, group_key, kind_is
from mpigraph.match.p2p import RECV_SIDE
from mpigraph.trace import functions as mf
from mpigraph.trace import record

# Blocking probes always found a message (logs written before the MATCHED flag existed).
_BLOCKING = np.zeros(mf.MAX_ID + 1, bool)
_BLOCKING[[mf.BY_NAME["MPI_Probe"].id, mf.BY_NAME["MPI_Mprobe"].id]] = True

PROBE_DTYPES = {"rank": np.int32, "call": np.int64, "record": np.int64, "comm": np.int64, "peer": np.int32,
                "tag": np.int32, "found": bool}


def probe_rows(batch):
    """The probe calls of a CallBatch, rank after rank (PROBE_DTYPES): found = the probe found a
    message, whose source and tag are then `peer` and `tag` (world rank, >= 0)."""
    rows = np.flatnonzero(kind_is(batch.func, mf.PROBE) & ((batch.flags & record.PART) == 0))
    flags, func = batch.flags[rows], batch.func[rows]
    peer, tag = batch.field_at("peer", rows), batch.field_at("tag", rows)
    ok = (flags & record.ERROR) == 0
    found = ok & (((flags & record.MATCHED) != 0) | _BLOCKING[func]) & (peer >= 0) & (tag >= 0)
    out = {"rank": batch.rank_of(rows), "call": batch.record_call[rows], "record": batch.local_record(rows),
           "comm": batch.field_at("comm", rows), "peer": peer, "tag": tag, "found": found}
    return {name: np.asarray(out[name]).astype(dtype, copy=False) for name, dtype in PROBE_DTYPES.items()}


def receive_of_probe(probes, ops):
    """For each found probe, the row of `ops` (the owned ranks' operation table) of the receive
    that gets the probed message: the first receive of its stream (rank, comm, source, tag)
    posted after the probe; -1 where none is (or the probe found nothing).

    One sort of the receives and the probes together by (stream, record in the log): a probe's
    receive is the next receive in that order within its stream."""
    found = np.flatnonzero(probes["found"])
    recv = np.flatnonzero(ops["side"] == RECV_SIDE)
    answer = np.full(len(probes["rank"]), -1, np.int64)
    if not len(found) or not len(recv):
        return answer
    stream = group_key([np.concatenate([ops[name][recv], probes[name][found]]).astype(np.int64)
                        for name in ("rank", "comm", "peer", "tag")])
    at = np.concatenate([ops["post_record"][recv], probes["record"][found]])
    is_recv = np.r_[np.ones(len(recv), bool), np.zeros(len(found), bool)]
    order = np.lexsort((at, stream))
    n = len(order)
    # The next receive at or after each sorted position (n: none), by a minimum from the back.
    position = np.where(is_recv[order], np.arange(n), n)
    next_recv = np.minimum.accumulate(position[::-1])[::-1]
    probe_at = np.flatnonzero(~is_recv[order])
    j = next_recv[probe_at]
    ok = j < n
    ok[ok] = stream[order[j[ok]]] == stream[order[probe_at[ok]]]
    rows = np.full(len(probe_at), -1, np.int64)
    rows[ok] = recv[order[j[ok]]]
    answer[found[order[probe_at] - len(recv)]] = rows
    return answer


def message_of_op(n_ops, pairs):
    """Per row of the ops table, its matched message's row in MessagePairs.messages (-1: none)."""
    out = np.full(n_ops, -1, np.int64)
    out[pairs.recv_rows[pairs.i_r]] = np.arange(len(pairs.i_r))
    return out


def probe_links(calls_by_rank, probes, probe_message, messages):
    """(waits, edges, path_ends) of the found probes and their polling runs (see the module doc).

    `probe_message`: per probe row, its message's row in `messages` (-1 none); `messages`: the
    matched messages on the receivers' owner (with the repaired times).
    waits: (rank, call, ns) late-sender time of each call of each run; edges: (s_rank,
    s_post_call, rank, call, s_post_start) of each late-sender edge into a probe run; path_ends: {owned rank:
    its calls' end times for the path stage}, only for ranks with a polling run."""
    has = probe_message >= 0
    rank, call = probes["rank"][has].astype(np.int64), probes["call"][has]
    msg = probe_message[has]
    send_rank, send_call = messages["s_rank"][msg], messages["s_post_call"][msg]
    send_start = messages["s_post_start"][msg]
    index = CallIndex(calls_by_rank)
    start = index.column(calls_by_rank, "start_ns")
    end = index.column(calls_by_rank, "end_ns")
    found_at = index.of(rank, call)
    first = _run_starts(index, probes)[found_at]
    # Every call of every run, by run: positions first..found_at (a few calls a run).
    length = found_at - first + 1
    member = np.repeat(first - np.cumsum(np.r_[0, length[:-1]]), length) + np.arange(length.sum())
    run = np.repeat(np.arange(len(found_at)), length)
    wait = np.clip(send_start[run] - start[member], 0, np.maximum(end[member] - start[member], 0))
    # For the path a polling run is one wait: each probe that found nothing lasts until the
    # next call of its run starts (the loop's own instructions between them are polling too).
    polling = member < found_at[run]
    path_end = end[member]
    path_end[polling] = start[member[polling] + 1]
    # The call the message released: the first of its run that ended (for the path) at or
    # after the send started.
    n = len(index)
    released = np.full(len(found_at), n, np.int64)
    ended = path_end >= send_start[run]
    np.minimum.at(released, run[ended], member[ended])
    keep = released < n
    owner = np.repeat(index.ranks, np.diff(index.offsets))        # the trace rank of each position
    waits = (owner[member], member - index.offsets[np.searchsorted(index.ranks, owner[member])], wait)
    edges = (send_rank[keep], send_call[keep], rank[keep], call[keep] - (found_at[keep] - released[keep]),
             send_start[keep])
    return waits, edges, _path_ends(index, calls_by_rank, member[polling], path_end[polling])


def _path_ends(index, calls_by_rank, positions, ends):
    """{owned rank: a copy of its calls' end times with `ends` at `positions`} for the ranks
    that have any of `positions` (CallIndex numbering)."""
    out = {}
    at = np.searchsorted(index.offsets, positions, side="right") - 1
    for i in np.unique(at):
        rank = int(index.ranks[i])
        mine = at == i
        column = calls_by_rank[rank].end_ns.copy()
        column[positions[mine] - index.offsets[i]] = ends[mine]
        out[rank] = column
    return out


def _run_starts(index, probes):
    """Per owned call (CallIndex numbering), the first call of the unbroken sequence of
    not-found probes that ends right before it (the call itself where none does)."""
    n = len(index)
    idle = np.zeros(n, bool)           # a probe that found nothing
    lost = ~probes["found"]
    idle[index.of(probes["rank"][lost].astype(np.int64), probes["call"][lost])] = True
    # A run never crosses from one rank to the next: a rank's first call starts a new one.
    boundary = np.zeros(n, bool)
    boundary[index.offsets[:-1][np.diff(index.offsets) > 0]] = True
    # start of a run at position p: the last position q <= p with idle[q - 1] false (or a boundary).
    breaks = ~np.r_[False, idle[:-1]] | boundary
    return np.maximum.accumulate(np.where(breaks, np.arange(n), 0))
