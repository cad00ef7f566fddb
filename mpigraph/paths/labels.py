"""What every search leaves on its vertices, and the deterministic tie-break they share.

The search runs backwards from the sink over incoming edges: dist[v] is the
least slack from v to the sink, next[v] the vertex after v on that path and
next_weight[v] the slack of the edge v -> next[v].

Ties: next[v] is the smallest vertex id among the successors w with
dist[v] == weight(v -> w) + dist[w].  Every algorithm relaxes each edge with
the final distance of its target at least once, and a relaxation with a
non-final distance is strictly worse, so keeping the lexicographic minimum of
(distance, target id) gives the same next[] whatever the order of the
relaxations: the same path from every algorithm.

With splits, each hub starts a search of its own (the sink of its piece,
distance 0) and the edges out of hubs are not relaxed but set aside
(``hub_offers``); ``combine_hubs`` then adds up the pieces from the last one.
"""

import dataclasses

import numpy as np

from mpigraph.graph import INF

NO_NEXT = np.iinfo(np.int64).max


@dataclasses.dataclass
class Labels:
    dist: np.ndarray          # per local vertex (relative to its piece's end with splits)
    next: np.ndarray          # global id, NO_NEXT when none
    next_weight: np.ndarray
    hub_dist: np.ndarray      # splits: each hub's distance to the sink; else empty
    hub_next: np.ndarray
    rounds: int = 0           # bucket phases (delta-stepping) or vertices settled (Dijkstra)


def empty_labels(n):
    return np.full(n, INF, np.int64), np.full(n, NO_NEXT, np.int64), np.zeros(n, np.int64)


def best_offers(target, dist, key, weight):
    """The lexicographically least (dist, key) offer per target: (target, dist, key, weight) rows."""
    order = np.lexsort((key, dist, target))
    target, dist, key, weight = target[order], dist[order], key[order], weight[order]
    first = np.concatenate(([True], target[1:] != target[:-1])) if len(target) else np.zeros(0, bool)
    return target[first], dist[first], key[first], weight[first]


def combine_hubs(n_hubs, hub, dist, key):
    """Each hub's distance to the sink and next vertex, from the offers made to it.

    Hub k's piece ends at hub k+1 (the last at the sink), so its distance is
    the best offer plus hub k+1's distance: a sum over the later hubs.
    """
    best = np.full(n_hubs, INF, np.int64)
    nxt = np.full(n_hubs, NO_NEXT, np.int64)
    hub, dist, key, _ = best_offers(hub, dist, key, np.zeros(len(hub), np.int64))
    best[hub], nxt[hub] = np.minimum(dist, INF), key
    unreachable = np.logical_or.accumulate((best >= INF)[::-1])[::-1]
    total = np.cumsum(np.where(best >= INF, 0, best)[::-1])[::-1]
    return np.where(unreachable, INF, total), nxt
