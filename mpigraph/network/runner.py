"""netprobe under mpiexec: one rank per node, the plan's rounds of concurrent ping-pongs.

    rank 0 maps ranks to terminals (by MPI_Get_processor_name; --emulate: rank i is terminal
    i), plans, and broadcasts the schedule: the plan's rounds, then rounds of held-out pairs
    (not in the plan: measured to check the predictions, never used in the solve)
    every round: the pair (a, b) of each ping-pong: a sends 8 B, b answers; `warmup` untimed
    round trips, then timed ones, the minimum kept (interference only adds time); a barrier
    between rounds, so the rounds' ping-pongs do not overlap; the whole schedule runs
    `passes` times, repeats/passes timed round trips each time
    --emulate: b busy-spins for the emulated route's round-trip latency before it answers, so
    on one host the RTT is (emulated latency + the shared-memory round trip) and the
    solution must recover the emulated links; the shared-memory time is the same for every
    pair and goes into the terminal links (every round trip crosses exactly two of them,
    twice each); on a host with fewer cores than ranks the pairs of a round take turns
    --emulate: b's reply carries how late b answered (the time past the spin's intended end,
    when the scheduler had b off its core), and a subtracts it: a spin of milliseconds with
    another runnable process on its core is preempted at a tick and resumed a tick or more
    later, in most round trips on a loaded host and at times in all of a pair's, a delay of
    the emulation (a wire is never descheduled) that the minimum then cannot remove
"""

import os
from dataclasses import dataclass

import numpy as np

from mpigraph.network import NetworkError
from mpigraph.network.outputs import PairTable
from mpigraph.network.plan import all_pairs, conflict_graph, make_plan, path_matrix, welsh_powell, with_endpoints
from mpigraph.network.solve import aggregated_links, solve
from mpigraph.network.topology import Topology

# An emulated link's latency: far above a shared-memory round trip (a few us) and above the
# delays the minimum of repeats cannot remove on a host shared with other jobs (a waiting
# rank woken late, seen up to 0.5 ms on 2 cores with 10 other runnable processes).
EMULATED_LOW, EMULATED_HIGH = 0.5e-3, 1.5e-3
# A responder's lateness counted as such in the summary: far above the spin loop's own
# granularity (one MPI_Wtime call, well under a microsecond), below a scheduler tick (1-10 ms).
LATE = 100e-6
MESSAGE = 8                                  # bytes per ping-pong (seed 001 measures latency only):
                                             # one float64, the responder's lateness on the way back


@dataclass
class Schedule:
    rounds: list                  # per round: (k, 2) int array of (initiator, responder) ranks
    pair_ids: list                # per round: the pair index (into all_pairs(ranks)) of each row
    spin: np.ndarray              # per pair index: the responder's busy-spin (0 unless emulating)


def map_ranks(names: list, topology: Topology, emulate: bool) -> np.ndarray:
    """The terminal of each rank: its processor name, or rank i -> terminal i with --emulate."""
    if emulate:
        if len(names) > topology.n:
            raise NetworkError("%d ranks but the topology has %d terminals: run at most that many ranks"
                               % (len(names), topology.n))
        return np.arange(len(names))
    index = {t: i for i, t in enumerate(topology.terminals)}
    unknown = sorted(set(n for n in names if n not in index))
    if unknown or len(set(names)) != len(names):
        raise NetworkError(
            "the ranks' processor names (%s) are not distinct terminals of the topology: start one rank "
            "per node (mpiexec -ppn 1) and name the terminals by host name, or use --emulate on one host"
            % ", ".join(sorted(set(names))[:4]))
    return np.array([index[n] for n in names])


def build_schedule(topology: Topology, terminals: np.ndarray, plan, emulate: bool, validate: int, rng,
                   one_at_a_time: bool = False):
    """The plan's rounds and the held-out pairs' rounds (coloured the same way), and the spins;
    with one_at_a_time every round is split into rounds of one ping-pong."""
    x, y = all_pairs(len(terminals))
    S = path_matrix(topology, terminals[x], terminals[y])
    spare = np.setdiff1d(np.arange(len(x)), plan.measured)
    held = rng.choice(spare, size=min(validate, len(spare)), replace=False) if len(spare) else spare
    rounds, pair_ids = _rounds(plan.measured, plan.rounds, x, y)
    if len(held):
        more, more_ids = _rounds(held, welsh_powell(conflict_graph(with_endpoints(S[held], x[held], y[held], len(terminals)))), x, y)
        rounds, pair_ids = rounds + more, pair_ids + more_ids
    if one_at_a_time:
        pair_ids = [ids[i:i + 1] for ids in pair_ids for i in range(len(ids))]
        rounds = [pairs[i:i + 1] for pairs in rounds for i in range(len(pairs))]
    truth = rng.uniform(EMULATED_LOW, EMULATED_HIGH, size=topology.m) if emulate else np.zeros(topology.m)
    return Schedule(rounds, pair_ids, S @ truth), S, held, truth


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _rounds(pairs, colours, x, y):
    rounds, ids = [], []
    for c in range(int(colours.max()) + 1 if len(colours) else 0):
        chosen = pairs[colours == c]
        rounds.append(np.stack([x[chosen], y[chosen]], axis=1))
        ids.append(chosen)
    return rounds, ids


def ping_pongs(comm, schedule: Schedule, warmup: int, repeats: int, passes: int) -> dict:
    """Run every round `passes` times, repeats/passes timed round trips a time; returns
    {pair index: (min RTT, its error, round trips answered late, round trips)} of the pairs
    this rank initiated (late: the responder's lateness above LATE, already taken out).

    Passes spread a pair's round trips over the run: a burst of load from other processes
    that lasts the length of one pair's measurement cannot spoil all of that pair's samples.
    The error of the minimum is the larger of the gap between the two smallest samples and
    the gap between the two smallest of the passes' own minima: when the load on the host
    changes during the run, the minimum each pass finds changes with it (one bad pass,
    though, does not count).
    """
    from mpi4py import MPI

    me = comm.Get_rank()
    times, lates = {}, {}
    buf = np.zeros(MESSAGE // 8)
    per_pass = max(1, -(-repeats // passes))
    for _ in range(passes):
        for pairs, ids in zip(schedule.rounds, schedule.pair_ids):
            mine = np.nonzero((pairs == me).any(axis=1))[0]
            if len(mine):
                a, b = pairs[mine[0]]
                pair = int(ids[mine[0]])
                if a == me:
                    rtt, late = _initiate(comm, MPI, int(b), buf, warmup, per_pass)
                    times.setdefault(pair, []).append(rtt)
                    lates.setdefault(pair, []).append(late)
                else:
                    _respond(comm, MPI, int(a), buf, warmup + per_pass, float(schedule.spin[pair]))
            comm.Barrier()
    out = {}
    for pair, chunks in times.items():
        ordered = np.sort(np.concatenate(chunks))
        gap = ordered[1] - ordered[0] if len(ordered) > 1 else 0.0
        lows = np.sort([c.min() for c in chunks])
        late = np.concatenate(lates[pair])
        out[pair] = (ordered[0], max(gap, lows[1] - lows[0] if len(lows) > 1 else 0.0),
                     int((late > LATE).sum()), len(late))
    return out


def _initiate(comm, MPI, peer, buf, warmup, repeats):
    """The timed round trips' RTT_i = (reply received - request sent) - late_i, and late_i: the
    responder's lateness its reply carries (0 unless emulating)."""
    times, late = np.empty(repeats), np.empty(repeats)
    for i in range(warmup + repeats):
        start = MPI.Wtime()
        comm.Send(buf, dest=peer, tag=7)
        comm.Recv(buf, source=peer, tag=7)
        if i >= warmup:
            late[i - warmup] = buf[0]
            times[i - warmup] = MPI.Wtime() - start - buf[0]
    return times, late


def _respond(comm, MPI, peer, buf, count, spin) -> None:
    """Answer `count` requests, each after busy-spinning `spin` seconds; the reply carries how
    long after the spin's intended end it is sent (0 without a spin)."""
    for _ in range(count):
        comm.Recv(buf, source=peer, tag=7)
        late = 0.0
        if spin > 0:
            until = MPI.Wtime() + spin
            _spin(MPI, until)
            # Measured here, just before the reply: a preemption anywhere between taking the
            # request and replying is the emulation's, and is taken out.  (A late wake-up to
            # take the request is not: a real responder has that too.)
            late = MPI.Wtime() - until
        buf[0] = late
        comm.Send(buf, dest=peer, tag=7)


def _spin(MPI, until: float) -> None:
    """Busy until MPI.Wtime() reaches `until` (busy, not sleep: a sleep's wake-up is too coarse)."""
    while MPI.Wtime() < until:
        pass


def run(topology: Topology, orders: int, oversample: float, seed: int, emulate: bool, warmup: int,
        repeats: int, validate: int, passes: int = 3):
    """The whole MPI run.  On rank 0 returns (plan, PairTable, aggregates, Solution, notes); None
    elsewhere.  A user error raises NetworkError on rank 0 only (one message, not one per
    rank); the other ranks return False."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        raise NetworkError("netprobe --topology needs 2 or more ranks, one per node: mpiexec -n N mpigraph netprobe ...")
    names = comm.allgather(MPI.Get_processor_name())
    schedule = None
    if comm.Get_rank() == 0:
        try:
            rng = np.random.default_rng(seed)
            terminals = map_ranks(names, topology, emulate)
            plan = make_plan(topology, terminals, orders=orders, oversample=oversample, seed=seed)
            # On one host with fewer cores than ranks, concurrent ping-pongs (their responders
            # busy-spinning) would take turns on the cores and measure the scheduler: there,
            # emulated rounds run one ping-pong at a time.  A real network's rounds stay parallel.
            serial = emulate and cores() < comm.Get_size()
            schedule, S, held, truth = build_schedule(topology, terminals, plan, emulate, validate, rng, serial)
        except NetworkError as error:
            schedule = error
    # Only the schedule travels: the pairs x links matrix stays on rank 0, which solves.
    schedule = comm.bcast(schedule, root=0)
    if isinstance(schedule, NetworkError):
        if comm.Get_rank() == 0:
            raise schedule
        return False
    results = ping_pongs(comm, schedule, warmup, repeats, passes)
    gathered = comm.gather(results, root=0)
    if comm.Get_rank() != 0:
        return None
    merged = {k: v for part in gathered for k, v in part.items()}
    keys = np.array(sorted(merged))
    values = np.array([merged[k] for k in keys])
    rtt = np.full(S.shape[0], np.nan)
    gap = np.full(S.shape[0], np.nan)
    rtt[keys], gap[keys] = values[:, 0], values[:, 1]
    solution = solve(S[plan.measured], rtt[plan.measured], gap[plan.measured])
    predicted, se = solution.predict(S)
    x, y = all_pairs(len(terminals))
    status = np.full(len(x), "no", dtype=object)
    status[plan.measured] = "plan"
    status[held] = "held_out"
    table = PairTable([topology.terminals[t] for t in terminals], x, y, status, rtt, predicted, se, S @ truth if emulate else None)
    notes = ["the rounds ran one ping-pong at a time: %d cores for %d ranks" % (cores(), comm.Get_size())] \
        if serial else []
    late, trips = int(values[:, 2].sum()), int(values[:, 3].sum())
    if emulate:
        notes.append("responders descheduled past their spin's end (late by > %g us) in %d of %d round trips: "
                     "taken out of the RTTs" % (LATE * 1e6, late, trips))
    return plan, table, aggregated_links(S[plan.measured], solution), solution, notes
