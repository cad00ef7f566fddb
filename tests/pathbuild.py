"""Helpers for the critical-path tests: inputs by hand, random inputs, and a reference answer."""

import graphlib

import numpy as np
from mpi4py import MPI

from mpigraph import paths
from mpigraph.paths import graph, segments as critical_path
from mpigraph.trace import functions as mf

FID = {f.name: f.id for f in mf.FUNCTIONS}
SETTINGS = [(algorithm, splits) for algorithm in paths.GRAPH_ALGORITHMS for splits in (True, False)]


def rank_calls(*calls):
    """RankCalls from (name, start, end) triples."""
    names, starts, ends = zip(*calls)
    return graph.RankCalls([FID[n] for n in names], starts, ends)


def deps(*rows):
    """Dependencies from (src_rank, src_call, src_vertex, dst_rank, dst_call, kind) rows."""
    if not rows:
        return graph.Dependencies.empty()
    return graph.Dependencies(*(np.array(c, np.int64) for c in zip(*rows)))


def path_input(calls, dependencies):
    """A PathInput holding every rank (one analysis rank)."""
    return graph.PathInput(len(calls), dict(enumerate(calls)), dependencies)


def solve_all(inp, comm=MPI.COMM_SELF, slacks=None, **options):
    """{(algorithm, splits): path} for every graph algorithm, splits on and off; `slacks`, a
    dict, receives the least slack each one found."""
    results = {}
    for a, s in SETTINGS:
        stats = {}
        # The whole path on rank 0: the distributed searches leave it in parts, a part per rank.
        results[(a, s)] = critical_path.whole(comm, paths.critical_path(comm, inp, a, s, stats=stats, **options))
        if slacks is not None:
            slacks[(a, s)] = stats.get("slack")
    return results


def rows(path):
    """A path as a list of tuples (for equality and readable failures)."""
    return list(zip(*(path[c].tolist() for c in ("rank", "kind", "function", "peer", "start", "end"))))


def least_slack(inp, threshold_s=0.0):
    """The least slack from a rank's start to the sink, by a plain DP in topological order
    over the built graph: the reference for every algorithm.  A rank's start delay is not
    slack: it was inside MPI_Init until then (mpigraph.paths.walk)."""
    g = graph.build(MPI.COMM_SELF, inp, int(round(threshold_s * 1e9)))
    dst = np.repeat(np.arange(g.n_vertices), np.diff(g.indptr))
    successors = {}
    sorter = graphlib.TopologicalSorter()
    for u, v, w in zip(g.src.tolist(), dst.tolist(), g.weight.tolist()):
        successors.setdefault(u, []).append((v, w))
        sorter.add(v, u)
    order = list(sorter.static_order())        # raises CycleError if the graph is not a DAG
    dist = {g.sink: 0}
    for u in reversed(order):
        options = [w + dist[v] for v, w in successors.get(u, []) if v in dist]
        if u != g.sink and options:
            dist[u] = min(options)
    total = [dist[s] for s in g.sources.tolist() if s in dist]
    return min(total), g


def random_input(seed, n_ranks, n_calls, n_deps, collectives=0, step_ns=50):
    """A random run: strictly increasing times per rank, dependencies that go forward in
    time (so the graph is a DAG), and `collectives` all-rank N-to-N instances.  Times advance
    by 0 to 3 steps of `step_ns` (2**31: slacks of several seconds, beyond a uint32)."""
    rng = np.random.default_rng(seed)
    names = ["MPI_Send", "MPI_Recv", "MPI_Wait", "MPI_Bcast"]
    calls, times = [], []
    for r in range(n_ranks):
        t = np.cumsum(rng.integers(0, 4, 2 * n_calls + 4) * step_ns) + rng.integers(0, 3) * step_ns
        t = t + np.arange(len(t))          # strictly increasing
        func = [FID["MPI_Init"]] + [FID[names[i]] for i in rng.integers(0, 4, n_calls)] + [FID["MPI_Finalize"]]
        calls.append(graph.RankCalls(func, t[0::2], t[1::2]))
        times.append(t)
    rows_ = []
    for _ in range(n_deps):
        q, r = rng.integers(0, n_ranks, 2)
        j, k = rng.integers(1, n_calls + 1, 2)
        side = int(rng.integers(0, 2))
        if times[q][2 * j + side] < times[r][2 * k + 1] and (q, j) != (r, k):
            rows_.append((q, j, side, r, k, int(rng.integers(0, 6)) if side == 0 else graph.LATE_SENDER))
    for c in sorted(rng.choice(np.arange(1, n_calls + 1), min(collectives, n_calls), replace=False)):
        starts = np.array([t[2 * c] for t in times])
        last = int(np.argmax(starts))
        if all(t[2 * c + 1] >= starts[last] for t in times):
            rows_ += [(last, c, 0, r, c, graph.N_TO_N) for r in range(n_ranks)]
    # A rank-kind N-to-N edge must come from a real instance: drop random ones of that kind.
    rows_ = [row for row in rows_ if row[5] != graph.N_TO_N or row[1] == row[4]]
    return path_input(calls, deps(*rows_))


def share(inp, n_analysis, me, with_starts=True):
    """The part of a whole-run PathInput that analysis rank `me` of `n_analysis` holds;
    `with_starts`: its edges carry their source calls' starts, as the match stage's do
    (the graph's build then asks no owner for the sources it is told)."""
    from mpigraph.comm.parallel import Ownership

    mine = Ownership(inp.n_trace_ranks, n_analysis).ranks_of(me)
    d = inp.deps
    owned = (d.dst_rank >= mine.start) & (d.dst_rank < mine.stop)
    starts = None
    if with_starts:
        counts = [len(inp.calls[r].start_ns) for r in range(inp.n_trace_ranks)]
        first = np.concatenate(([0], np.cumsum(counts)))
        every = np.concatenate([inp.calls[r].start_ns for r in range(inp.n_trace_ranks)] + [np.zeros(0, np.int64)])
        starts = every[first[d.src_rank[owned]] + d.src_call[owned]]
    return graph.PathInput(inp.n_trace_ranks, {r: inp.calls[r] for r in mine},
                           graph.Dependencies(d.src_rank[owned], d.src_call[owned], d.src_vertex[owned],
                                              d.dst_rank[owned], d.dst_call[owned], d.kind[owned], starts))
