"""Sequential Dijkstra with a binary heap: the reference every other algorithm must match.

Runs on a whole graph (one analysis rank holds it all: ``gather_graph``),
backwards from the sink over incoming edges, with the shared tie-break of
``mpigraph.paths.labels``.  One Python step per edge: the slow, obviously
right baseline.
"""

import heapq

import numpy as np

from mpigraph.graph import INF
from mpigraph.paths.labels import NO_NEXT, Labels, combine_hubs


def solve(g, split):
    """Labels of every vertex of the whole graph g (g.n_analysis == 1)."""
    if g.n_analysis != 1:
        raise ValueError("sequential Dijkstra needs the whole graph on one rank")
    n_rank_vertices = g.n_rank_vertices
    indptr, src, weight = g.indptr.tolist(), g.src.tolist(), g.weight.tolist()
    n = len(g.time)
    dist, nxt, nxt_w = [INF] * n, [NO_NEXT] * n, [0] * n
    sinks = [g.sink] + (list(range(n_rank_vertices, n)) if split else [])
    for s in sinks:
        dist[s] = 0
    heap = [(0, s) for s in sinks]
    heapq.heapify(heap)
    offers = ([], [], [])
    settled = 0
    while heap:
        d, v = heapq.heappop(heap)
        if d > dist[v]:
            continue          # a stale entry: v was reached more cheaply since
        settled += 1
        for e in range(indptr[v], indptr[v + 1]):
            u, w = src[e], weight[e]
            if split and u >= n_rank_vertices:
                offers[0].append(u - n_rank_vertices), offers[1].append(d + w), offers[2].append(v)
                continue
            candidate = d + w
            if candidate < dist[u]:
                dist[u], nxt[u], nxt_w[u] = candidate, v, w
                heapq.heappush(heap, (candidate, u))
            elif candidate == dist[u] and v < nxt[u]:
                nxt[u], nxt_w[u] = v, w
    hub_dist = hub_next = np.zeros(0, np.int64)
    if split:
        hub_dist, hub_next = combine_hubs(g.n_hubs, *(np.array(c, np.int64) for c in offers))
    return Labels(np.array(dist, np.int64), np.array(nxt, np.int64), np.array(nxt_w, np.int64),
                  hub_dist, hub_next, settled)
