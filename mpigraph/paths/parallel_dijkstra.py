"""Distributed Dijkstra by parts: csgraph's Dijkstra on each analysis rank's part, boundary offers between.

This is what ``parallel-dijkstra`` runs.  Seed 004 (4.3) defines parallel
Dijkstra as parallel delta-stepping with delta = 1 ns: one collective round
per distinct distance, millions of rounds on a long run's distinct slacks
(that formulation is still available as ``parallel-delta-stepping`` with
delta = 1).  Here instead:

- each analysis rank owns its vertices and their incoming edges (``Graph``);
  an edge whose source it also owns is local, the others cross to another rank;
- the sinks (the sink; with splits, the hubs too) are at distance 0 from the
  start;
- each round sends, for each crossing edge u -> v whose v got a smaller
  distance (first: the sinks), the offer dist[v] + w to u's owner (one
  Alltoallv); each rank then runs Dijkstra (scipy.sparse.csgraph, backwards)
  on its local edges, its one-way vertices bypassed (``dijkstra.Bypass``),
  from its vertices with better offers (and in the first
  round its sinks), each starting at its offer (a virtual source with an
  edge of that weight to each), and keeps the smaller distances;
- it ends when no offer improves anything on any rank (one allreduce).

Each round's local distances are exact given the offers so far, so at the
end dist is the least slack to the sink (to the piece's hub with splits):
the number of searches is the most rank-crossings on a shortest path (not
counting edges into sinks), plus one.  With splits on (the default) a path crosses ranks only inside its
piece, so few rounds; with splits off, hubs (owned round robin) are crossed
once per piece, and every round searches everything upstream again: correct
but slow on long runs.  next[] comes from the final distances
(``labels.next_from_dist``), as for every algorithm.
"""

import numpy as np

from mpi4py import MPI

from mpigraph.graph import INF
from mpigraph import owner_exchange as exchange
from mpigraph.paths.dijkstra import Bypass, Reversed, with_remote_edges
from mpigraph.paths.labels import from_dist, local_sinks


def solve(comm, g, split, heartbeat=None):
    """Labels of g's local vertices (collective over comm: the analysis ranks holding g);
    `heartbeat` (``paths.heartbeat``) hears each round."""
    dist, rounds = _distances(comm, g, split, heartbeat)   # the searches' arrays are gone before next[]'s pass
    return from_dist(comm, g, dist, split, rounds)


def _distances(comm, g, split, heartbeat=None):
    """(dist of g's local vertices, rounds): the searches and offers described above."""
    n = len(g.time)
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.indptr))
    relaxed = g.src < g.n_rank_vertices if split else np.ones(len(g.src), bool)
    local = relaxed & g.owns(g.src)
    cross = np.flatnonzero(relaxed & ~local)
    cross_dst, cross_src, cross_w = dst[cross], g.src[cross], g.weight[cross]
    cross_owner = g.owner_of(cross_src)
    del dst, relaxed

    sinks = local_sinks(g, split)
    bypass, part = _local_part(comm, g, local, sinks, with_remote_edges(comm, g, cross_src, cross_owner))
    del local, cross
    # The sinks' distances (0) are known before any search: their crossing edges make offers
    # at once, and the first search starts from the sinks and those offers together.
    dist = np.full(n, INF, np.int64)
    dist[sinks] = 0
    changed = dist < INF
    sources, offsets = sinks, np.zeros(len(sinks), np.int64)
    rounds = 0
    while True:
        send = changed[cross_dst]
        target, offer = exchange.send_rows(comm, cross_owner[send],
                                           [cross_src[send], dist[cross_dst[send]] + cross_w[send]])
        best = np.full(n, INF, np.int64)
        np.minimum.at(best, g.local_index(target), offer)
        target = np.flatnonzero(best < dist)
        sources, offsets = np.concatenate((sources, target)), np.concatenate((offsets, best[target]))
        if not comm.allreduce(len(sources), op=MPI.SUM):
            break
        found = bypass.expand(part.search(bypass.index_of(sources), offsets)) if len(sources) else dist
        changed = found < dist
        if rounds == 0:
            changed[sinks] = False      # their offers went out before the search
        dist = np.minimum(dist, found)
        sources, offsets = sources[:0], offsets[:0]
        rounds += 1
        if heartbeat is not None:
            heartbeat.tick(rounds, "rounds", "%d vertices improved on analysis rank 0" % int(changed.sum()))
    return dist, rounds


def _local_part(comm, g, local, sinks, keep):
    """(Bypass, Reversed): what each round searches, this rank's local edges with its one-way
    vertices bypassed (``dijkstra.Bypass``, exact; `keep`: those with edges to other ranks'
    vertices), and how to read its distances back."""
    indptr = np.concatenate(([0], np.cumsum(local)))[g.indptr]
    src = g.local_index(g.src[local])
    bypass = Bypass(len(g.time), indptr, src, g.weight[local], sinks, keep)
    return bypass, Reversed(len(bypass.vertices), bypass.indptr, bypass.src, bypass.weight)
