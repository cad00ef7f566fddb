"""Synthetic traces for tests and benchmarks: a bulk-synchronous program, simulated.

Each iteration every rank computes (one random rank is slow), sends to its
right neighbour and receives from its left (blocking, eager: a late sender
makes the receive wait), and every `sync_every` iterations all ranks meet
in an MPI_Allreduce.  The run starts with MPI_Init and ends with a barrier
and MPI_Finalize.  Times are exact (every wait explained by a dependency),
unless `jitter_ns` adds noise.  The result is a graph.PathInput per analysis
rank, the dependencies as the match stage would give them.
"""

from collections import namedtuple

import numpy as np

from mpigraph.paths import graph
from mpigraph.trace import functions as mf
from mpigraph.comm.parallel import Ownership

FID = {f.name: f.id for f in mf.FUNCTIONS}
Simulated = namedtuple("Simulated", "start end func deps slow")   # (ranks, calls) arrays; slow rank per iteration
LATENCY = 1_000       # ns from a send's start to the receive's end, at the earliest
CALL = 200            # ns a call takes when it does not wait


class _Recorder:
    """Calls per rank as growing lists of arrays (one entry per simulated step)."""

    def __init__(self, n_ranks):
        self.n = n_ranks
        self.start, self.end, self.func = [], [], []
        self.deps = []          # (src_rank, src_call, src_vertex, dst_rank, dst_call, kind) arrays
        self.count = 0          # calls so far on every rank (all ranks make the same number)

    def call(self, name, start, end):
        self.start.append(np.asarray(start, np.int64))
        self.end.append(np.asarray(end, np.int64))
        self.func.append(np.full(self.n, FID[name], np.int64))
        self.count += 1
        return self.count - 1

    def dep(self, src_rank, src_call, dst_rank, dst_call, kind):
        n = len(dst_rank)
        self.deps.append([np.broadcast_to(np.asarray(v, np.int64), n) for v in
                          (src_rank, src_call, np.zeros(n), dst_rank, dst_call, np.full(n, kind))])


def _collective(rec, name, t):
    """All ranks enter at t; all leave CALL after the last arrival."""
    last = int(np.lexsort((np.arange(rec.n), -t))[0])
    end = np.full(rec.n, t[last] + CALL)
    call = rec.call(name, t, end)
    rec.dep(last, call, np.arange(rec.n), call, graph.N_TO_N)
    return end


def simulate(n_ranks, iterations, sync_every=1, seed=0, jitter_ns=0, work_ns=100_000):
    """A Simulated run: start, end, func as (ranks, calls) arrays, the Dependencies of all
    ranks, and the slow rank of each iteration."""
    rng = np.random.default_rng(seed)
    rec = _Recorder(n_ranks)
    ranks = np.arange(n_ranks)
    t = rng.integers(0, 1000, n_ranks)
    rec.call("MPI_Init", t, t + 5 * CALL)
    t = t + 5 * CALL
    slow = rng.integers(0, n_ranks, iterations)
    for i in range(iterations):
        work = rng.integers(work_ns // 2, work_ns, n_ranks)
        work[slow[i]] += work_ns          # the slow rank of this iteration
        t = t + work
        if n_ranks > 1:
            send = rec.call("MPI_Send", t, t + CALL)
            t = t + 2 * CALL
            left = (ranks - 1) % n_ranks
            arrival = np.asarray(rec.start[send])[left] + LATENCY
            recv_end = np.maximum(t + CALL, arrival)
            recv = rec.call("MPI_Recv", t, recv_end)
            rec.dep(left, send, ranks, recv, graph.LATE_SENDER)
            t = recv_end
        if (i + 1) % sync_every == 0:
            t = _collective(rec, "MPI_Allreduce", t + CALL)
    t = _collective(rec, "MPI_Barrier", t + CALL)
    t = t + CALL
    rec.call("MPI_Finalize", t, t + CALL)
    start, end, func = (np.stack(c, axis=1) for c in (rec.start, rec.end, rec.func))
    if jitter_ns:
        start, end = _jittered(rng, start, end, jitter_ns)
    deps = graph.Dependencies(*(np.concatenate(c) for c in zip(*rec.deps))) if rec.deps \
        else graph.Dependencies.empty()
    return Simulated(start, end, func, deps, slow)


def _jittered(rng, start, end, jitter_ns):
    """Noisy clocks: every time moved by up to jitter_ns, then kept in order on each rank."""
    times = np.empty((start.shape[0], 2 * start.shape[1]), np.int64)
    times[:, 0::2], times[:, 1::2] = start, end
    times = np.sort(times + rng.integers(-jitter_ns, jitter_ns + 1, times.shape), axis=1)
    return times[:, 0::2], times[:, 1::2]


def path_input(simulated, n_analysis=1, me=0):
    """The PathInput analysis rank `me` of `n_analysis` would hold."""
    start, end, func, deps = simulated[:4]
    n_ranks = start.shape[0]
    mine = Ownership(n_ranks, n_analysis).ranks_of(me)
    calls = {r: graph.RankCalls(func[r], start[r], end[r]) for r in mine}
    owned = (deps.dst_rank >= mine.start) & (deps.dst_rank < mine.stop)
    return graph.PathInput(n_ranks, calls, graph.Dependencies(
        deps.src_rank[owned], deps.src_call[owned], deps.src_vertex[owned], deps.dst_rank[owned],
        deps.dst_call[owned], deps.kind[owned]))
