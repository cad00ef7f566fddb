"""What every search leaves on its vertices, and the deterministic tie-break they share.

The search runs backwards from the sink over incoming edges: dist[v] is the
least slack from v to the sink and next[v] the vertex after v on that path.  The
slack of the edge v -> next[v] is dist[v] - dist[next[v]] (the edge is tight), so it
is not kept per vertex: the walk takes it from the path's distances
(``walk.path_weights``, ``walk.distributed``).

Ties: next[v] is the smallest vertex id among the successors w with
dist[v] == weight(v -> w) + dist[w].  Every algorithm relaxes each edge with
the final distance of its target at least once, and a relaxation with a
non-final distance is strictly worse, so keeping the lexicographic minimum of
(distance, target id) gives the same next[] whatever the order of the
relaxations: the same path from every algorithm.

Since next[] depends only on the final distances, ``next_from_dist`` computes
it in one pass over the edges (in C, ``dag.next_from_dist``; numpy's chunks without the
kernel) once a search has its distances: next[u] = the smallest v among the edges u -> v with
dist[v] < INF and dist[u] == weight + dist[v].  Every search uses it, so
every algorithm's next[] is the same by construction; a search need only get
the distances right.

With splits, each hub starts a search of its own (the sink of its piece,
distance 0) and the edges out of hubs are not relaxed but set aside
(``hub_offers``); ``combine_hubs`` then adds up the pieces from the last one.
"""

import dataclasses

import numpy as np

from mpigraph.util import arrays
from mpigraph.comm import owner_exchange as exchange
from mpigraph.paths import dag
from mpigraph.paths.model import INF, as_index

NO_NEXT = np.iinfo(np.int64).max


@dataclasses.dataclass
class VertexLabels:
    """What a search leaves on each local vertex: its distance to the sink (its piece's end) and
    the next vertex on its least-slack path there."""

    dist: np.ndarray          # per local vertex (relative to its piece's end with splits)
    next: np.ndarray          # global id, NO_NEXT when none
    hub_dist: np.ndarray      # splits: each hub's distance to the sink; else empty
    hub_next: np.ndarray
    rounds: int = 0           # bucket phases (delta-stepping) or vertices settled (Dijkstra)


def local_sinks(g, split):
    """Local indices of the sinks g's rank owns, sorted: the run's sink and, with splits, the
    hubs (each the end of its piece).  Every search starts from them at distance 0."""
    sinks = np.array([g.sink] + (list(range(g.n_rank_vertices, g.n_vertices)) if split else []), np.int64)
    return arrays.unique(g.local_index(sinks[g.owner_of(sinks) == g.me]))


def empty_labels(n):
    return np.full(n, INF, np.int64), np.full(n, NO_NEXT, np.int64), np.zeros(n, np.int64)


# Edges per chunk of the next_from_dist pass: bounds its temporary arrays (~ 10 int64 per edge).
# Small enough that they stay in the CPU's caches and are reused from chunk to chunk: larger
# chunks were slower and raised the path stage's peak memory.
CHUNK_EDGES = 1 << 16

# Chunks whose edges out of other ranks' vertices go to those ranks in one exchange: a
# collective every so many chunks, not every chunk (a large run has hundreds of chunks, and
# each collective is a wait for the slowest rank).
CHUNKS_PER_EXCHANGE = 16


def next_from_dist(comm, g, dist, split):
    """(next, hub offers) of g's local vertices from their final distances (the tie-break above).

    Collective over comm (the analysis ranks holding g).  Each edge u -> v is
    looked at where it is stored, with v's owner; u's owner decides whether
    it is tight (the edges out of other ranks' vertices go there: after the C pass
    (``_next_in_c``) in one exchange, in numpy's chunks every CHUNKS_PER_EXCHANGE chunks).  With `split`, edges out of hubs are not relaxed and give no
    next: each H -> v into a reached vertex offers dist[v] + w to H, with key v
    (global id), picked up in the same pass (``hub_offers`` takes them); else
    the offers are empty.  An offer worse than one made to its hub in an earlier
    chunk is dropped at once: the offers kept are the few that may be their hub's
    best, not one per hub edge (a bulk-synchronous run has a hub edge per call).
    """
    done = _next_in_c(comm, g, dist, split)
    if done is not None:
        return done
    n = len(dist)
    nxt = _Next(dist)
    remote_hubs = split and g.n_analysis > 1 and g.remote_hub_ids is not None
    offers = []
    hub_best = np.full(g.n_hubs if split else 0, INF, np.int64)   # each hub's best offer so far
    indptr = g.indptr
    # Vertex chunks of about CHUNK_EDGES edges; the same number of chunks on every rank.
    cuts = arrays.chunk_bounds(indptr, CHUNK_EDGES)
    n_chunks = comm.allreduce(len(cuts) - 1, op=_max()) if g.n_analysis > 1 else len(cuts) - 1
    away = []               # edges out of other ranks' vertices, not yet sent
    for c in range(n_chunks):
        a, b = (int(cuts[c]), int(cuts[c + 1])) if c + 1 < len(cuts) else (n, n)
        e0, e1 = int(indptr[a]), int(indptr[b])
        degree = np.diff(indptr[a:b + 1])
        chunk = np.arange(a, b, dtype=np.int64)
        dst = np.repeat(chunk if g.n_analysis == 1 else g.global_id(chunk), degree)   # global ids
        d = np.repeat(dist[a:b], degree)
        src, weight = g.src[e0:e1], g.weight[e0:e1]
        offer = d + weight            # no overflow: INF leaves room for a slack
        keep = d < INF
        if split:
            from_rank = src < g.n_rank_vertices
            out_of_hub = np.flatnonzero(keep & ~from_rank)
            hub, hub_offer = as_index(src[out_of_hub]) - g.n_rank_vertices, offer[out_of_hub]
            np.minimum.at(hub_best, hub, hub_offer)
            best_so_far = np.flatnonzero(hub_offer == hub_best[hub])
            offers.append((hub[best_so_far], hub_offer[best_so_far], dst[out_of_hub[best_so_far]]))
            keep &= from_rank
        if g.n_analysis == 1:         # every source is here: only the tight edges are taken out
            src = as_index(src)
            keep &= dist[src] == offer
            nxt.take(src[keep], dst[keep])
            continue
        # Edges whose source another rank owns are decided there; the edges into hubs from other
        # ranks' members are decided there without being sent (``_remote_hub_edges``).
        here = g.owns(src)
        if remote_hubs:
            keep[max(g.first_hub_edge, e0) - e0:] &= here[max(g.first_hub_edge, e0) - e0:]
        edge = np.flatnonzero(keep & ~here)
        away.append((src[edge], offer[edge], dst[edge]))
        edge = np.flatnonzero(keep & here)
        nxt.offer(g.local_index(src[edge]), offer[edge], dst[edge])
        if (c + 1) % CHUNKS_PER_EXCHANGE == 0 or c + 1 == n_chunks:
            src, offer, key = (np.concatenate(column) for column in zip(*away))
            away = []
            src, offer, key = exchange.send_rows(comm, g.owner_of(src), [src, offer, key])
            nxt.offer(g.local_index(src), offer, key)
    if remote_hubs:
        nxt.offer(*_remote_hub_edges(g))
    offers = [np.concatenate(c) for c in zip(*offers)] if offers else [np.zeros(0, np.int64)] * 3
    return nxt.next, offers


def _next_in_c(comm, g, dist, split):
    """next_from_dist in one C pass over the CSR (``dag.next_from_dist``), the edges out of other
    ranks' vertices then sent to their owners in one exchange: (next, offers), the offers each
    hub's best only (what ``hub_offers`` keeps of them).  None where the kernel cannot run on
    every analysis rank (the numpy pass's exchanges are not this one's)."""
    if g.n_analysis > 1 and not comm.allreduce(dag.available(), op=_land()):
        return None
    remote_hubs = split and g.n_analysis > 1 and g.remote_hub_ids is not None
    # With remote hub edges, the hubs' rows' edges from other ranks' members are decided there.
    owner = (g.lo, g.hi, g.me, g.n_analysis, g.hi - g.lo if remote_hubs else None)
    found = dag.next_from_dist(g.indptr, g.src, g.weight, dist, INF, g.n_rank_vertices, g.n_hubs, split, NO_NEXT,
                               owner)
    if found is None:
        return None
    nxt, hub_best, hub_key, away = found
    if g.n_analysis > 1:
        tight = _Next(dist, nxt)
        src, offer, key = exchange.send_rows(comm, g.owner_of(away[0]), away)
        tight.offer(g.local_index(src), offer, key)
        if remote_hubs:
            tight.offer(*_remote_hub_edges(g))
    hub = np.flatnonzero(hub_best < INF)
    return nxt, [hub, hub_best[hub], hub_key[hub]]


def _remote_hub_edges(g):
    """(local S, offer, key) of this rank's edges S(member) -> H into hubs another rank owns
    (Graph.remote_hub_edges), as next_from_dist offers them.  With splits a hub is the sink of its
    piece, dist[H] = 0: the offer is the slack, known here.  The hub's owner holds these edges
    too, and sending them back here to be decided cost an exchange of (K-1)/K of a
    bulk-synchronous run's calls: it leaves them out."""
    s_local, slack = g.remote_hub_edges
    return np.asarray(s_local, np.int64), np.asarray(slack, np.int64), g.n_rank_vertices + g.remote_hub_ids


class _Next:
    """next[] as next_from_dist's edges come in: each vertex's least key (the edge's target, a
    global id) among its tight edges."""

    def __init__(self, dist, nxt=None):
        self.dist = dist
        self.next = np.full(len(dist), NO_NEXT, np.int64) if nxt is None else nxt

    def offer(self, vertex, offer, key):
        """Edges out of local vertices, each with dist[its target] + its slack: the tight ones taken."""
        vertex = as_index(vertex)
        tight = self.dist[vertex] == offer
        self.take(vertex[tight], key[tight])

    def take(self, vertex, key):
        """Tight edges out of local vertices."""
        np.minimum.at(self.next, vertex, key)


def from_dist(comm, g, dist, split, rounds):
    """Labels of g's local vertices from their final distances, as every search ends: next[]
    by ``next_from_dist`` and, with splits, each hub's distance to the sink and next vertex."""
    nxt, offers = next_from_dist(comm, g, dist, split)
    hub_dist = hub_next = np.zeros(0, np.int64)
    if split:
        hub_dist, hub_next = combine_hubs(g.n_hubs, *hub_offers(comm, g, offers))
    return VertexLabels(dist, nxt, hub_dist, hub_next, rounds)


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _land():
    from mpi4py import MPI

    return MPI.LAND


def hub_offers(comm, g, offers):
    """(hub, dist, key): the best offer to each hub over all ranks, from next_from_dist's offers.

    Each rank keeps its best offer per hub (least dist, then least key), and
    the ranks combine theirs (two allreduces of one value per hub).
    """
    hub, offer, key = offers
    best, nxt = _best_per_hub(g.n_hubs, hub, offer, key)
    if g.n_analysis > 1:
        from mpi4py import MPI

        everyone = best.copy()
        comm.Allreduce(MPI.IN_PLACE, everyone, op=MPI.MIN)
        nxt = np.where(best == everyone, nxt, NO_NEXT)
        comm.Allreduce(MPI.IN_PLACE, nxt, op=MPI.MIN)
        best = everyone
    has = best < INF
    return np.flatnonzero(has), best[has], nxt[has]


def _best_per_hub(n_hubs, hub, dist, key):
    """The least dist offered to each hub, and the least key among the offers of that dist."""
    best = np.full(n_hubs, INF, np.int64)
    nxt = np.full(n_hubs, NO_NEXT, np.int64)
    np.minimum.at(best, hub, dist)
    tie = dist == best[hub]
    np.minimum.at(nxt, hub[tie], key[tie])
    return best, nxt


def combine_hubs(n_hubs, hub, dist, key):
    """Each hub's distance to the sink and next vertex, from the offers made to it.

    Hub k's piece ends at hub k+1 (the last at the sink), so its distance is
    the best offer plus hub k+1's distance: a sum over the later hubs.
    """
    best, nxt = _best_per_hub(n_hubs, hub, np.minimum(dist, INF), key)
    unreachable = np.logical_or.accumulate((best >= INF)[::-1])[::-1]
    total = np.cumsum(np.where(best >= INF, 0, best)[::-1])[::-1]
    return np.where(unreachable, INF, total), nxt
