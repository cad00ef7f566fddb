"""Delta-stepping (Meyer and Sanders), vectorised per bucket, sequential or distributed.

Buckets of width delta hold the vertices by tentative distance.  Each phase
takes the current bucket's changed vertices, relaxes their light incoming
edges (weight < delta) all at once with numpy, sends each offer to the owner
of the edge's source vertex (one Alltoallv per phase) and repeats until the
bucket stays empty on every rank; then the heavy edges of the bucket's
vertices are relaxed once.  delta = 1 is Dijkstra (a bucket is one distance),
delta >= the largest distance is Bellman-Ford.  With one analysis rank it is
the sequential algorithm; the search direction is backwards from the sink.
"""

import heapq

import numpy as np

from mpi4py import MPI

from mpigraph.graph import INF
from mpigraph import owner_exchange as exchange
from mpigraph.paths.labels import Labels, best_offers, combine_hubs, empty_labels


def auto_delta(comm, g):
    """The mean positive edge weight over all ranks (at least 1 ns).

    Meyer and Sanders take delta ~ (max weight) / (degree); slacks are mostly
    0 with a long tail, where the max is an outlier, so the mean of the
    non-zero slacks keeps both the number of buckets and the re-relaxations
    within a bucket moderate.
    """
    positive = g.weight[g.weight > 0]
    total = comm.allreduce(float(positive.sum()))
    count = comm.allreduce(len(positive))
    return max(1, int(round(total / count))) if count else 1


class _Buckets:
    """Changed ("dirty") local vertices by bucket: bucket -> index arrays, with a heap of buckets."""

    def __init__(self, n, delta):
        self.lists, self.heap, self.delta = {}, [], delta
        self.dirty = np.zeros(n, bool)

    def add(self, index, dist):
        if not len(index):
            return
        self.dirty[index] = True
        bucket = dist // self.delta
        order = np.argsort(bucket, kind="stable")
        bucket, index = bucket[order], index[order]
        cuts = np.flatnonzero(np.diff(bucket)) + 1
        for b, part in zip(bucket[np.concatenate(([0], cuts))].tolist(), np.split(index, cuts)):
            if b not in self.lists:
                self.lists[b] = []
                heapq.heappush(self.heap, b)
            self.lists[b].append(part)

    def _valid(self, b, dist):
        """Dirty vertices still in bucket b (a vertex may have moved down, or been taken)."""
        index = np.unique(np.concatenate(self.lists[b]))
        return index[self.dirty[index] & (dist[index] // self.delta == b)]

    def smallest(self, dist):
        """The smallest non-empty bucket, or INF."""
        while self.heap:
            b = self.heap[0]
            if b in self.lists:
                valid = self._valid(b, dist)
                if len(valid):
                    self.lists[b] = [valid]
                    return b
                del self.lists[b]
            heapq.heappop(self.heap)
        return INF

    def take(self, b, dist):
        """The dirty vertices of bucket b, no longer dirty."""
        if b not in self.lists:
            return np.zeros(0, np.int64)
        valid = self._valid(b, dist)
        del self.lists[b]
        self.dirty[valid] = False
        return valid


class _Search:
    def __init__(self, comm, g, delta, split):
        self.comm, self.g, self.delta, self.split = comm, g, delta, split
        self.gid = g.global_ids()
        self.dist, self.next, self.next_weight = empty_labels(len(g.time))
        self.buckets = _Buckets(len(g.time), delta)
        self.offers = []      # splits: (hub, dist, key) offered to hubs

    def start(self):
        sinks = [self.g.sink] + (list(range(self.g.n_rank_vertices, self.g.n_vertices)) if self.split else [])
        sinks = np.array(sinks, np.int64)
        mine = self.g.local_index(sinks[self.g.owner_of(sinks) == self.g.me])
        self.dist[mine] = 0
        self.buckets.add(mine, self.dist[mine])

    def relax(self, frontier, light):
        """Offer dist[v] + w to the source u of each light (or heavy) incoming edge of the frontier."""
        g = self.g
        starts, counts = g.indptr[frontier], g.indptr[frontier + 1] - g.indptr[frontier]
        edge = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        target = np.repeat(frontier, counts)
        weight = g.weight[edge]
        keep = weight < self.delta if light else weight >= self.delta
        edge, target, weight = edge[keep], target[keep], weight[keep]
        source, dist, key = g.src[edge], self.dist[target] + weight, self.gid[target]
        if self.split:
            to_hub = source >= g.n_rank_vertices
            self.offers.append((source[to_hub] - g.n_rank_vertices, dist[to_hub], key[to_hub]))
            source, dist, key, weight = source[~to_hub], dist[~to_hub], key[~to_hub], weight[~to_hub]
        source, dist, key, weight = exchange.send_rows(self.comm, g.owner_of(source), [source, dist, key, weight])
        self.apply(g.local_index(source), dist, key, weight)

    def apply(self, target, dist, key, weight):
        target, dist, key, weight = best_offers(target, dist, key, weight)
        current = self.dist[target]
        better = (dist < current) | ((dist == current) & (key < self.next[target]))
        improved = dist < current
        self.dist[target[better]] = dist[better]
        self.next[target[better]] = key[better]
        self.next_weight[target[better]] = weight[better]
        self.buckets.add(target[improved], dist[improved])

    def run(self):
        self.start()
        rounds = 0
        while True:
            b = self.comm.allreduce(self.buckets.smallest(self.dist), op=MPI.MIN)
            if b >= INF:
                break
            settled = []
            while True:
                frontier = self.buckets.take(b, self.dist)
                settled.append(frontier)
                self.relax(frontier, light=True)
                rounds += 1
                if not self.comm.allreduce(self.buckets.smallest(self.dist) == b, op=MPI.LOR):
                    break
            self.relax(np.unique(np.concatenate(settled)), light=False)
        return self.labels(rounds)

    def labels(self, rounds):
        hub_dist = hub_next = np.zeros(0, np.int64)
        if self.split:
            hub, dist, key = (np.concatenate([o[i] for o in self.offers] + [np.zeros(0, np.int64)])
                              for i in range(3))
            everyone = self.comm.allgather((hub, dist, key))
            hub_dist, hub_next = combine_hubs(self.g.n_hubs, *(np.concatenate(c) for c in zip(*everyone)))
        return Labels(self.dist, self.next, self.next_weight, hub_dist, hub_next, rounds)


def solve(comm, g, delta, split):
    """Labels of g's local vertices (collective over comm: the analysis ranks holding g)."""
    if delta < 1:
        raise ValueError("delta must be >= 1 ns, got %r" % delta)
    return _Search(comm, g, int(delta), split).run()
