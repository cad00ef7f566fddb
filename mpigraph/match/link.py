"""The clock and match stages of the pipeline: aligned call times, matched operations, edges.

``aligned_calls`` turns the owned logs into match.RankCalls on rank 0's clock;
``link`` matches messages, requests and collectives, repairs receive-before-
send violations (clock/repair.py), computes every call's waits (waits.py) and
the dependency edges (match.py's interface), and returns a ``Linked``.
"""

import dataclasses

import numpy as np

from mpigraph.clock import repair as causality
from mpigraph.clock import models as clock
from mpigraph.match import collectives
from mpigraph.match import neighbors
from mpigraph.match import p2p
from mpigraph.match import probes
from mpigraph.match import rma
from mpigraph.match.core import (COLLECTIVE_N_TO_N, MESSAGE_LATE_RECEIVER, MESSAGE_LATE_SENDER, NONBLOCKING,
                                 CallBatch, Dependencies, rank_calls_of)
from mpigraph.metrics.waits import waits_and_member_totals
from mpigraph.traffic import stage as traffic_stage
from mpigraph.trace.batches import RecordBatch, of_ranks, owned_batches
from mpigraph.util import arrays


@dataclasses.dataclass
class ClockInfo:
    """The alignment applied (same on every analysis rank); arrays over all trace ranks."""

    method: str
    samples: np.ndarray          # clock.SAMPLES_DTYPE rows, all ranks
    lines: object                # clock.Lines of `method`
    origin_ns: int               # rank 0's clock at the run's start (subtracted from every time)


@dataclasses.dataclass
class Linked:
    """This analysis rank's share of the linked run (see match.py for calls and dependencies)."""

    calls: dict                  # owned trace rank -> match.RankCalls
    dependencies: Dependencies   # edges into the owned ranks (None when not asked for)
    waits: dict                  # owned trace rank -> per-call columns (waits.call_waits)
    instances: dict              # collective instances grouped on this analysis rank
    unmatched: dict              # operations without partner found on this analysis rank
    orphans: dict                # owned trace rank -> completion records with no post (ranks with any)
    incomplete_requests: dict    # owned trace rank -> ops whose request never completed (ranks with any)
    repair: causality.Repair
    clock: ClockInfo
    # owned trace rank -> its calls' end times for the path stage, where a polling run of
    # probes is one wait (match.probes); ranks without one are not in it
    path_ends: dict = dataclasses.field(default_factory=dict)
    # The end of every owned receive completion a matched message released (the late-sender
    # edges' destinations, repaired times): toposort's bulk-synchronous check reads them.
    receive_ends: np.ndarray = None
    # the matched messages' (sender, receiver) sums and the operations' sizes (traffic.stage.from_match)
    traffic: dict = None


# ---- clock ---------------------------------------------------------------------------------

def aligned_calls(comm, logs, method):
    """({rank: RankCalls} with times on rank 0's clock from the run's start, ClockInfo).

    Times are from the end of the earliest MPI_Init, like ranks.csv and the critical path:
    an MPI_Init record starts a little before 0.  One collective, before the work per record:
    every rank's clock samples and the local end of its first record, from which every analysis
    rank finds the lines and the run's start alike.  The work per record is done a batch of
    consecutive ranks at a time (trace.batches), each rank's calls views of its batch's."""
    ranks = sorted(logs)
    gathered = comm.allgather((clock.samples_of(logs), _first_ends([logs[r] for r in ranks])))
    samples = np.sort(np.concatenate([s for s, _ in gathered]), order="rank")   # one small row per trace rank
    lines = clock.lines_for(method, samples)
    # The run's start, the origin of every time in every report file: the end of the earliest
    # MPI_Init (the first record of a log), when the program first runs under MPI.
    firsts = [(rank, end) for _, (rank, end) in gathered if len(rank)]
    if firsts:
        rank, end = map(np.concatenate, zip(*firsts))
        origin = int(lines.rows_to_global(rank, 1, end).min())
    else:
        origin = 0
    calls = {}
    sizes = [logs[r].n_records for r in ranks]
    for first, stop in owned_batches(sizes):
        part = [logs[r] for r in ranks[first:stop]]
        calls.update(_batch_calls(part, RecordBatch.of_logs(part), lines, origin))
    return {rank: calls[rank] for rank in logs}, ClockInfo(method, samples, lines, origin)


def _first_ends(logs):
    """(ranks, their first record's end: int64 ns on their own clocks) of the logs with records."""
    logs = [log for log in logs if log.n_records]
    ticks = np.array([log.records["t_end"][0] for log in logs], np.int64)
    return np.array([log.rank for log in logs], np.int64), clock.RowConversions(logs, 1).to_ns(ticks)


def _batch_calls(logs, batch, lines, origin):
    """{rank: RankCalls} of consecutive logs (`batch`: their RecordBatch) from one pass over their
    records end to end (core.rank_calls' rows)."""
    lengths = np.diff(batch.first_record)
    conversions = clock.RowConversions(logs, lengths)
    times = []
    for field in ("t_start", "t_end"):
        ns = lines.rows_to_global(batch.ranks, lengths, conversions.to_ns(batch.field(field)))
        if batch.one_rank and np.may_share_memory(ns, logs[0].records):     # the log's own field: not written
            ns = np.subtract(ns, origin, dtype=np.int64)
        else:       # an array of this batch's own: in place, no second array of the rows
            ns -= origin
        times.append(ns)
    return rank_calls_of(logs, batch.first_record, batch.func, batch.flags, *times)


# ---- match ------------------------------------------------------------------------------------

@dataclasses.dataclass
class Owned:
    """What the match reads of the owned ranks' records (no times but the members' first ones):
    made in one pass over them, a core.CallBatch at a time (trace.batches)."""

    ops: dict                    # the operation table (p2p.OP_DTYPES), in rank order
    orphans: dict                # owned trace rank -> completion records with no post (ranks with any)
    member_parts: list           # collectives.members of each batch (LocalGroups.of_parts empties it)
    probes: dict                 # the probe calls (probes.PROBE_DTYPES), in rank order
    neighbours: tuple            # the in-neighbours (rank, comm, peer; neighbors.in_neighbours)

    @classmethod
    def of(cls, calls, world_size):
        ops, orphans, member_parts, probe_rows, neighbours = [], {}, [], [], []
        for batch in of_ranks(calls, CallBatch):
            batch_ops, batch_orphans = p2p.operations(batch)
            ops.append(batch_ops)
            orphans.update(batch_orphans)
            member_parts.append(collectives.members(batch, world_size))
            probe_rows.append(probes.probe_rows(batch))
            neighbours.append(neighbors.in_neighbours(batch))
        return cls(_concat(ops, p2p.OP_DTYPES), orphans, member_parts, _concat(probe_rows, probes.PROBE_DTYPES),
                   tuple(np.concatenate([t[i] for t in neighbours]) if neighbours else np.zeros(0, np.int64)
                         for i in range(3)))


def _concat(tables, dtypes):
    return {name: np.concatenate([t[name] for t in tables]) if tables else np.zeros(0, dtype)
            for name, dtype in dtypes.items()}


def _repair_loop(comm, ownership, calls, owned, codec):
    """Match, repair violations, repeat until none is left; returns the last match and the Repair.
    `owned`: the Owned tables of `calls` (its member parts are let go of once grouped).

    What is matched with what uses no times: messages are paired and members found and
    grouped by instance once; a round only takes the new times and combines the instances'
    partials again."""
    repair = causality.Repair()
    ops = owned.ops
    pairs = p2p.MessagePairs(comm, ownership, ops, codec)
    groups = collectives.LocalGroups.of_parts(owned.member_parts)
    releases = _Releases(comm, calls, owned.neighbours)
    while True:
        messages = pairs.messages(comm, calls, codec)
        groups = groups.retimed(calls) if repair.rounds else groups
        instances, members = collectives.match_collectives(comm, groups, codec)
        members = releases.applied(comm, calls, groups, members, codec)
        rank, _, _ = causality.violations(messages, members)
        n = comm.allreduce(len(rank))
        if repair.rounds == 0:
            repair.found = n
        if n == 0 or repair.rounds == causality.MAX_ROUNDS:
            repair.remaining = n
            return messages, pairs, instances, members, repair, groups, releases
        # Whole chains at once (clock/repair.py); a longest chain has at most one hop per call.
        passes = comm.allreduce(sum(c.n_calls for c in calls.values())) + 1
        causality.repair_chains(comm, calls, causality.edges(messages, members), repair, passes)
        repair.rounds += 1


class _Releases:
    """The releases collectives.py cannot combine from per-instance partials: neighbourhood
    collectives (by in-neighbour, match.neighbors) and post/start/complete/wait epochs
    (match.rma, rows appended after the collective members).  What is matched with what is
    found once; each repair round only re-reads the times."""

    def __init__(self, comm, calls, neighbours):
        self.epochs = rma.Epochs(calls)
        self.any_epochs = comm.allreduce(len(self.epochs)) > 0
        self.neighbours = neighbours      # the owned ranks' in-neighbours (neighbors.in_neighbours)
        self.wants, self.any_neighbours = None, False

    def applied(self, comm, calls, groups, members, codec=None):
        if self.wants is None:
            self.wants = neighbors.Wants.of(self.neighbours, members, _OfInstance(groups, "comm"),
                                            _OfInstance(groups, "seq"))
            self.any_neighbours = comm.allreduce(len(self.wants.rows)) > 0
        if self.any_neighbours:
            members = self.wants.released(comm, members, codec)
        if self.any_epochs:
            extra = rma.member_rows(comm, self.epochs, calls, members, codec)
            members = {name: np.concatenate([members[name], extra[name]]) for name in members}
        return members


class _OfInstance:
    """An instance column of the members of collectives.LocalGroups `groups` (of each member,
    its instance's), looked up only for the rows asked (neighbourhood members: none in most runs)."""

    def __init__(self, groups, name):
        self.column, self.group = groups.instance[name], groups.group

    def __getitem__(self, rows):
        return self.column[self.group[rows]]


# Per function id: a blocking N-to-N collective (one lookup per member, not two and a test).
_BLOCKING_N_TO_N = (collectives.PATTERN_OF_FUNC == COLLECTIVE_N_TO_N) & ~NONBLOCKING[:len(collectives.PATTERN_OF_FUNC)]


def dependency_edges(to_me, from_me, members, probe_edges=None):
    """The incoming edges of the owned ranks (match.py's Dependencies), with their sources' starts;
    `probe_edges`: (send rank, send call, probe rank, probe call, send start) late-sender edges
    into probes (match.probes)."""
    done = to_me["r_done_call"] >= 0
    # Only a send call that ended after the receive was posted may have waited for it.
    waited = (from_me["s_done_call"] >= 0) & (from_me["r_post_start"] <= from_me["s_done_end"])
    # Into the call that completed each member: the call itself, or the Wait/Test of a
    # nonblocking collective's request (none when it never completed).
    completed = members["done_call"] >= 0
    released = completed & (members["release_rank"] >= 0)
    pattern = collectives.pattern_of(members["func"])
    assert ((pattern >= COLLECTIVE_N_TO_N) | ~released).all()
    # The last arriver of a blocking N-to-N instance releases itself too: with that edge the path
    # stage sees every member of the instance, which a global synchronisation point needs.  A
    # nonblocking one is no such point (its members' calls are not where they wait).
    last = _BLOCKING_N_TO_N[members["func"]]
    last &= completed
    last &= ~released
    # Each source's start goes with its edge (the match has it): the path stage need not ask
    # the source's owner for it (a pipeline's messages all come from another analysis rank).
    s_rank, s_call, p_rank, p_call, s_start = probe_edges if probe_edges else (None,) * 5
    return Dependencies.picked([
        (done, to_me["s_rank"], to_me["s_post_call"], to_me["r_rank"], to_me["r_done_call"], MESSAGE_LATE_SENDER,
         to_me["s_post_start"]),
        (waited, from_me["r_rank"], from_me["r_post_call"], from_me["s_rank"], from_me["s_done_call"],
         MESSAGE_LATE_RECEIVER, from_me["r_post_start"]),
        (released, members["release_rank"], members["release_call"], members["rank"], members["done_call"], pattern,
         members["release_start"]),
        (last, members["rank"], members["call"], members["rank"], members["call"], COLLECTIVE_N_TO_N,
         members["start"]),
    ] + ([(np.ones(len(s_rank), bool), s_rank, s_call, p_rank, p_call, MESSAGE_LATE_SENDER, s_start)]
         if probe_edges else []))


def link(comm, ownership, calls, world_size, clock_info, codec=None, with_edges=True):
    """Stage match (see the module doc); collective over comm.  Without `with_edges` the
    dependency edges (only the graph's critical path reads them) are not made."""
    owned = Owned.of(calls, world_size)
    ops, orphans = owned.ops, owned.orphans
    messages, pairs, instances, members, repair, groups, releases = _repair_loop(comm, ownership, calls, owned, codec)
    from_me = p2p.to_senders(comm, ownership, messages, calls, codec)
    probe_waits, probe_edges, path_ends = _probe_links(calls, owned.probes, ops, pairs, messages)
    # Win_test loops are polling too (match.rma): their calls' path ends join the probes'
    for rank, ends in rma.polling_ends(calls, releases.epochs).items():
        path_ends[rank] = np.maximum(path_ends[rank], ends) if rank in path_ends else ends
    waits, (member_wait, member_time) = waits_and_member_totals(calls, messages, from_me, members, probe_waits)
    n = len(groups.group)       # the instances' own members: match.rma's epoch rows come after them
    instances = collectives.instance_waits(comm, groups, member_wait[:n], member_time[:n], instances, codec)
    dependencies = dependency_edges(messages, from_me, members, probe_edges) if with_edges else None
    receive_ends = messages["r_done_end"][messages["r_done_call"] >= 0].astype(np.int64)
    return Linked(calls, dependencies, waits, instances, pairs.unmatched, orphans, _incomplete(ops), repair,
                  clock_info, path_ends, receive_ends, traffic_stage.from_match(ops, messages, by_site=True))


def _probe_links(calls, found, ops, pairs, messages):
    """(waits, edges, path_ends) of the owned ranks' probes `found` (match.probes): each found
    probe's message is the one the receive after it got, whose receiver this analysis rank owns too."""
    if not found["found"].any():        # most programs: no per-call work at all
        return None, None, {}
    receive = probes.receive_of_probe(found, ops)
    message = np.where(receive >= 0, probes.message_of_op(len(ops["side"]), pairs)[np.maximum(receive, 0)], -1)
    return probes.probe_links(calls, found, message, messages)


def _incomplete(ops):
    """{owned rank: its operations that never completed}, the ranks that have any (ops are in
    owned-rank order)."""
    never = np.flatnonzero(ops["done_call"] < 0)
    if not len(never):          # most runs: no column is filtered
        return {}
    never = {name: col[never] for name, col in ops.items()}
    starts, lengths = arrays.runs(never["rank"])
    return {int(never["rank"][a]): {name: col[a:a + n] for name, col in never.items()}
            for a, n in zip(starts.tolist(), lengths.tolist())}
