"""Global synchronisation points: where the activity graph splits into independent pieces.

Seed 004 (4.4): a collective over all ranks is a global synchronisation point
unless a nonblocking operation is still outstanding across it or its
execution time is negative.  We test what those rules stand for, on the
graph itself:

- an N-to-N instance (its dependency edges share one source, the last
  arriver's start) whose members are all trace ranks, the last arriver's own
  call among them;
- non-negative execution: every member ends after the last arrival;
- the members' calls come in the same order on every rank as the other
  points' (MPI_COMM_WORLD collectives always do);
- no other dependency edge crosses it (an outstanding Isend/Irecv completed
  on the far side is such an edge), so every path crosses at the hub.

Each point becomes a hub vertex (``mpigraph.paths.graph``) whether splits are on or
off, so the graph, and the path, are the same either way.
"""

import dataclasses

import numpy as np

from mpi4py import MPI

from mpigraph.util import arrays
from mpigraph.paths import model as graph_module


@dataclasses.dataclass
class SyncPoints:
    keys: np.ndarray      # the N-to-N source vertex (last arriver's start) of each point
    calls: np.ndarray     # (points, trace ranks): each member's call, as call_dtype(base)
    time: np.ndarray      # last arrival


def none(n_trace_ranks):
    return SyncPoints(np.zeros(0, np.int64), np.zeros((0, n_trace_ranks), np.int32), np.zeros(0, np.int64))


def call_dtype(base):
    """The dtype of the member-call table: int32 where every rank's call index fits.  The table
    is a point per global collective by every trace rank, on every analysis rank (a call per
    record of a bulk-synchronous run: half the bytes of int64 on every analysis rank)."""
    return graph_module.index_dtype(int(np.diff(base).max(initial=0)) // 2)


def find_sync_points(comm, n_trace_ranks, base, lo, time, deps):
    """The global synchronisation points, in order (the same on every analysis rank)."""
    keys = _candidate_keys(comm, deps)
    if not len(keys):
        return none(n_trace_ranks)
    calls, t_last, whole = _instances(comm, n_trace_ranks, base, lo, time, deps, keys)
    keys, calls, t_last = keys[whole], calls[whole], t_last[whole]
    keys, calls, t_last = _in_rank_order(keys, calls, t_last)
    uncrossed = ~_crossed(comm, base, deps, keys, calls)
    return SyncPoints(keys[uncrossed], calls[uncrossed], t_last[uncrossed])


def _candidate_keys(comm, deps):
    """The N-to-N instances trace rank 0 is a member of (a global collective has a member
    there; ``_instances`` drops any other as not whole): the sources of their edges into
    trace rank 0, which analysis rank 0 owns.  Only those edges are sorted, not the N-to-N
    edges of every owned rank (a bulk-synchronous run has one per call)."""
    if comm.Get_rank() != 0:
        return comm.bcast(None, root=0)
    into_rank_0 = (deps.kind == graph_module.N_TO_N) & (deps.dst_rank == 0)
    return comm.bcast(arrays.unique(deps.src[into_rank_0]), root=0)


# Edges per chunk of _instances' pass over the N-to-N edges.
CHUNK_EDGES = 1 << 20


def _instances(comm, n_trace_ranks, base, lo, time, deps, keys):
    """(member call per rank, last arrival, instance is whole) of each candidate key."""
    n = len(keys)
    first_end = np.full(n, graph_module.INF, np.int64)
    t_last = np.full(n, -graph_module.INF, np.int64)
    calls = np.full((n, n_trace_ranks), -1, call_dtype(base))
    edge = arrays.block_or_positions(deps.kind == graph_module.N_TO_N)     # every edge of a bulk-synchronous
    if arrays.count(edge):                                                  # run: one block, views of it
        # An instance's edges come in runs of one source, its members' edges in a row (runs of
        # as many edges as the instance has members): looked up and reduced a run at a time, not
        # an edge at a time.
        src = deps.src[edge]
        head, lengths = arrays.runs(src)
        index = np.searchsorted(keys, src[head])
        found = index < n
        found[found] = keys[index[found]] == src[head[found]]
        run_end, run_last = np.empty(len(head), np.int64), np.empty(len(head), np.int64)
        # A chunk of runs at a time: the edges' temporaries are small and reused from chunk to
        # chunk, not memory new to the process the size of every edge (dear to write).
        ends = np.append(head, len(src))
        bounds = arrays.chunk_bounds(ends, CHUNK_EDGES)
        for a, b in zip(bounds[:-1], bounds[1:]):
            e, at = arrays.part_of(edge, ends[a], ends[b]), head[a:b] - ends[a]
            run_end[a:b] = np.minimum.reduceat(time[deps.dst[e] - lo], at)
            run_last[a:b] = np.maximum.reduceat(deps.t_src[e], at)
            member = np.repeat(found[a:b], lengths[a:b])          # the edges of a candidate
            calls[np.repeat(index[a:b], lengths[a:b])[member], deps.dst_rank[e][member]] = deps.dst_call[e][member]
        np.minimum.at(first_end, index[found], run_end[found])
        np.maximum.at(t_last, index[found], run_last[found])
    for array, op in ((first_end, MPI.MIN), (t_last, MPI.MAX), (calls, MPI.MAX)):
        comm.Allreduce(MPI.IN_PLACE, array, op=op)

    src_rank = np.searchsorted(base, keys, "right") - 1
    own_call = (keys - base[src_rank]) // 2
    # Every trace rank a member: each has a call (dst ranks are owned by one analysis rank each).
    whole = ((first_end >= t_last) & (calls >= 0).all(axis=1)
             & (calls[np.arange(n), src_rank] == own_call))
    return calls, t_last, whole


def _in_rank_order(keys, calls, t_last):
    """Sorted by trace rank 0's call; points out of order on some rank dropped."""
    order = np.argsort(calls[:, 0], kind="stable")
    keys, calls, t_last = keys[order], calls[order], t_last[order]
    while len(keys) > 1:
        bad = np.concatenate(([False], (calls[1:] <= calls[:-1]).any(axis=1)))
        if not bad.any():
            break
        drop = np.flatnonzero(bad)[0]
        keep = np.arange(len(keys)) != drop
        keys, calls, t_last = keys[keep], calls[keep], t_last[keep]
    return keys, calls, t_last


def piece_of(base, calls, vertices):
    """Piece of each rank vertex: how many points it comes after (S of a member: before; E: after)."""
    n_points, n_ranks = calls.shape
    rank = np.searchsorted(base, vertices, "right") - 1
    position = vertices - base[rank]                       # 2 * call + side
    if len(vertices) <= n_ranks:     # a few vertices (the path's start, the ranks' starts): their ranks only,
        # each a search of its rank's column (2c + 1 <= p where c <= (p - 1) // 2), with no table of
        # every rank's points (as many as the run's calls, for the few vertices asked about)
        return arrays.column_counts(calls, rank, (position - 1) // 2)
    stride = int(base[-1]) + 2
    # Rank r's point positions 2c+1, shifted into a block of their own: one searchsorted for all.
    # Built in place, rank-major: one (ranks, points) array, no transposed temporaries.
    bounds = np.empty((n_ranks, n_points), np.int64)
    np.multiply(calls.T, 2, out=bounds)
    bounds += 1 + stride * np.arange(n_ranks, dtype=np.int64)[:, None]
    return np.searchsorted(bounds.ravel(), position + stride * rank, "right") - n_points * rank


def _crossed(comm, base, deps, keys, calls):
    """Points crossed by a dependency edge other than their own N-to-N edges."""
    n = len(keys)
    if not n:
        return np.zeros(0, bool)
    own = (deps.kind == graph_module.N_TO_N) & arrays.isin_few(deps.src, keys)
    a, b = np.split(piece_of(base, calls, np.concatenate((deps.src[~own], deps.dst[~own]))), 2)   # one table
    first, last = np.minimum(a, b), np.maximum(a, b)
    count = np.zeros(n + 1, np.int64)
    np.add.at(count, first, 1)
    np.add.at(count, last, -1)
    comm.Allreduce(MPI.IN_PLACE, count, op=MPI.SUM)
    return np.cumsum(count)[:n] > 0
