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

Each analysis rank holds the member calls of its own trace ranks only
(SyncPoints.calls); the pieces of other ranks' vertices are asked of their
owners (``pieces``).

Each point becomes a hub vertex (``mpigraph.paths.graph``) whether splits are on or
off, so the graph, and the path, are the same either way.
"""

import dataclasses

import numpy as np

from mpi4py import MPI

from mpigraph.util import arrays
from mpigraph.comm import owner_exchange as exchange
from mpigraph.comm.parallel import Ownership
from mpigraph.paths import model as graph_module


@dataclasses.dataclass
class SyncPoints:
    keys: np.ndarray      # the N-to-N source vertex (last arriver's start) of each point
    # (points, owned trace ranks): each member's call on the trace ranks this analysis rank
    # owns, first, first + 1, ..., as call_dtype(base).  Only those: a column per trace rank on
    # every analysis rank would be a cell per collective call of the whole run on every rank.
    calls: np.ndarray
    time: np.ndarray      # last arrival
    first: int = 0        # the trace rank of calls' column 0


def none(n_owned, first=0):
    return SyncPoints(np.zeros(0, np.int64), np.zeros((0, n_owned), np.int32), np.zeros(0, np.int64), first)


def call_dtype(base):
    """The dtype of the member-call table: int32 where every rank's call index fits.  The table
    is a point per global collective by each owned trace rank (a call per record of a
    bulk-synchronous run: half the bytes of int64)."""
    return graph_module.index_dtype(int(np.diff(base).max(initial=0)) // 2)


def find_sync_points(comm, n_trace_ranks, base, lo, time, deps):
    """The global synchronisation points, in order (keys and times the same on every analysis
    rank; each holds its own trace ranks' member calls)."""
    mine = Ownership(n_trace_ranks, comm.Get_size()).ranks_of(comm.Get_rank())
    keys = _candidate_keys(comm, deps)
    if not len(keys):
        return none(len(mine), mine.start)
    calls, t_last, whole = _instances(comm, mine, base, lo, time, deps, keys)
    keys, calls, t_last = keys[whole], calls[whole], t_last[whole]
    keys, calls, t_last = _in_rank_order(comm, keys, calls, t_last)
    points = SyncPoints(keys, calls, t_last, mine.start)
    uncrossed = ~_crossed(comm, n_trace_ranks, base, deps, points)
    return SyncPoints(keys[uncrossed], calls[uncrossed], t_last[uncrossed], mine.start)


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


def _instances(comm, mine, base, lo, time, deps, keys):
    """(member call per owned trace rank `mine`, last arrival, instance is whole) of each
    candidate key.  Each analysis rank fills its own trace ranks' columns (the N-to-N edges into
    them are its own) and reduces only a value per instance over the ranks: the table itself
    is never summed over ranks."""
    n = len(keys)
    first_end = np.full(n, graph_module.INF, np.int64)
    t_last = np.full(n, -graph_module.INF, np.int64)
    calls = np.full((n, len(mine)), -1, call_dtype(base))
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
            calls[np.repeat(index[a:b], lengths[a:b])[member],
                  deps.dst_rank[e][member] - mine.start] = deps.dst_call[e][member]
        np.minimum.at(first_end, index[found], run_end[found])
        np.maximum.at(t_last, index[found], run_last[found])

    src_rank = np.searchsorted(base, keys, "right") - 1
    own_call = (keys - base[src_rank]) // 2
    # Every owned trace rank a member (each has a call), the last arriver's own call among them
    # where this rank owns it; reduced over the analysis ranks, every trace rank (dst ranks are
    # owned by one analysis rank each).
    ok = (calls >= 0).all(axis=1)
    at = np.flatnonzero((src_rank >= mine.start) & (src_rank < mine.stop))
    ok[at] &= calls[at, src_rank[at] - mine.start] == own_call[at]
    ok = ok.astype(np.uint8)
    for array, op in ((first_end, MPI.MIN), (t_last, MPI.MAX), (ok, MPI.MIN)):
        comm.Allreduce(MPI.IN_PLACE, array, op=op)
    return calls, t_last, (first_end >= t_last) & ok.astype(bool)


def _in_rank_order(comm, keys, calls, t_last):
    """Sorted by trace rank 0's call; points out of order on some rank dropped, one at a time
    (dropping one can put the next in order).  Collective: each analysis rank checks its own
    trace ranks' columns; analysis rank 0 owns trace rank 0."""
    order = np.argsort(calls[:, 0], kind="stable") if comm.Get_rank() == 0 else None
    order = comm.bcast(order, root=0)
    keys, calls, t_last = keys[order], calls[order], t_last[order]
    while len(keys) > 1:
        bad = np.concatenate(([False], (calls[1:] <= calls[:-1]).any(axis=1))).astype(np.uint8)
        comm.Allreduce(MPI.IN_PLACE, bad, op=MPI.MAX)
        if not bad.any():
            break
        drop = np.flatnonzero(bad)[0]
        keep = np.arange(len(keys)) != drop
        keys, calls, t_last = keys[keep], calls[keep], t_last[keep]
    return keys, calls, t_last


def piece_of(base, calls, vertices, first=0):
    """Piece of each rank vertex: how many points it comes after (S of a member: before; E: after).
    calls: the member-call table's columns of trace ranks first, first + 1, ..., which own
    every vertex asked about.  Many vertices: looked up in a count per call of those ranks
    (``_piece_by_lookup``), or where those calls are many more, one binary search among the
    member calls for all."""
    n_points, n_ranks = calls.shape
    if len(vertices) > n_ranks and _covered_calls(base, n_ranks, first) <= LOOKUP_CALLS_PER_VERTEX * len(vertices):
        return _piece_by_lookup(base, calls, vertices, first)
    rank = np.searchsorted(base, vertices, "right") - 1
    position = vertices - base[rank]                       # 2 * call + side
    rank -= first                                          # the rank's column
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


# piece_of looks vertices up in a table of the calls of the table's ranks (``_piece_by_lookup``)
# where those calls are at most this many per vertex asked: the table costs a pass over the
# calls, a binary search among every member call about log2(points x ranks) reads per vertex,
# most of them missing the caches (a halo exchange's message ends: 3 times slower).
LOOKUP_CALLS_PER_VERTEX = 4


def _covered_calls(base, n_ranks, first):
    """The calls of trace ranks first .. first + n_ranks - 1 (the member-call table's)."""
    return (int(base[first + n_ranks]) - int(base[first])) // 2


def _piece_by_lookup(base, calls, vertices, first):
    """piece_of by a gather: each call of the table's ranks gets the count of its rank's member
    calls before it (every rank is a member of every point: rank k's count starts at k times the
    points), and a vertex's piece is its call's count, plus one for E of a member."""
    n_points, n_ranks = calls.shape
    lo = int(base[first])
    starts = (base[first:first + n_ranks + 1] - lo) // 2           # each rank's first call, local
    member = np.zeros(int(starts[-1]), np.int8)
    member[(calls + starts[:-1]).ravel()] = 1
    before = np.cumsum(member, dtype=graph_module.index_dtype(len(member)))
    before -= member
    for k in range(1, n_ranks):      # per rank, a slice: the counts of the ranks before it
        before[starts[k]:starts[k + 1]] -= k * n_points
    local = vertices - lo
    call = local >> 1
    return np.add(before[call], member[call] & (local & 1), dtype=np.int64)


# The most member calls (points x trace ranks) whose table every analysis rank gets whole, to
# find any vertex's piece itself: a run with few synchronisation points (a pipelined program's
# few collectives) then asks nothing of the other ranks about millions of message ends.
GATHER_POINT_CALLS = 1 << 20


def pieces(comm, n_trace_ranks, base, points, vertices):
    """piece_of any rank vertices: this rank's trace ranks' in its own columns (points.calls),
    the others' looked up on their ranks, each distinct vertex once, or in every rank's columns
    gathered when they are few.  Collective."""
    vertices = np.asarray(vertices, np.int64)
    if comm.Get_size() == 1:
        return piece_of(base, points.calls, vertices, points.first)
    # The same on every rank (the points are): gathered or asked, every rank takes part.
    whole = (np.concatenate(comm.allgather(points.calls), axis=1)     # columns in trace rank order
             if len(points.keys) * n_trace_ranks <= GATHER_POINT_CALLS else None)
    ownership = Ownership(n_trace_ranks, comm.Get_size())
    mine = ownership.ranks_of(comm.Get_rank())
    # This rank's trace ranks' vertices are the ids base[first] .. base[stop] - 1: two
    # comparisons, and only the other vertices are looked up elsewhere.  Those here are looked
    # up among this rank's calls only, not every trace rank's (``_piece_by_lookup`` counts
    # along all the calls of the ranks it covers).
    here = (vertices >= base[mine.start]) & (vertices < base[mine.stop])
    if here.all():
        result = piece_of(base, points.calls, vertices, points.first)
    else:
        result = np.empty(len(vertices), np.int64)
        result[here] = piece_of(base, points.calls, vertices[here], points.first)
    away = np.flatnonzero(~here)
    del here
    if whole is not None:
        result[away] = piece_of(base, whole, vertices[away])
        return result
    asked, _, inverse = arrays.unique_inverse(vertices[away])
    owner = ownership.owner_of(np.searchsorted(base, asked, "right") - 1)

    def answer(query):
        return [piece_of(base, points.calls, query[0], points.first)]

    (found,) = exchange.ask_owners(comm, owner, [asked], answer)
    result[away] = found[inverse]
    return result


def edges_of(deps, keys):
    """Mask of the N-to-N dependency edges of the points `keys`: those out of a key.  Only the
    N-to-N edges are looked up (a halo exchange's message edges come between them, and would
    cut their runs of one source into runs of one edge: ``arrays.isin_few``)."""
    mask = deps.kind == graph_module.N_TO_N
    edges = arrays.block_or_positions(mask)
    mask[edges] = arrays.isin_few(deps.src[edges], keys)
    return mask


def _crossed(comm, n_trace_ranks, base, deps, points):
    """Points crossed by a dependency edge other than their own N-to-N edges."""
    n = len(points.keys)
    if not n:                        # the same on every rank: no rank asks another
        return np.zeros(0, bool)
    own = edges_of(deps, points.keys)
    a, b = np.split(pieces(comm, n_trace_ranks, base, points, np.concatenate((deps.src[~own], deps.dst[~own]))), 2)
    first, last = np.minimum(a, b), np.maximum(a, b)
    count = np.zeros(n + 1, np.int64)
    np.add.at(count, first, 1)
    np.add.at(count, last, -1)
    comm.Allreduce(MPI.IN_PLACE, count, op=MPI.SUM)
    return np.cumsum(count)[:n] > 0
