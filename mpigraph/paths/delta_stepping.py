"""Delta-stepping (Meyer and Sanders), vectorised per bucket, sequential or distributed.

Buckets of width delta hold the vertices by tentative distance.  Each phase
takes the current bucket's changed vertices, relaxes their light incoming
edges (weight < delta) all at once with numpy, applies the offers to
vertices owned here at once and sends the others to the owners of the
edges' source vertices (one Alltoallv per phase), and repeats until the
bucket stays empty on every rank; then the heavy edges of the bucket's
vertices are relaxed once.  One allreduce per phase gives the smallest
non-empty bucket of all ranks: the same bucket again, or the next one.
delta = 1 is Dijkstra (a bucket is one distance), delta >= the largest
distance is Bellman-Ford.  With one analysis rank it is the sequential
algorithm; the search direction is backwards from the sink.

Bookkeeping: the changed vertices not yet relaxed are one array (each
vertex once, a flag per vertex); a vertex's bucket is read from its
distance when needed, so moving down a bucket costs nothing.  The search
computes distances only; next[] comes from them (``labels.next_from_dist``).
"""

import numpy as np

from mpi4py import MPI

from mpigraph.graph import INF
from mpigraph import owner_exchange as exchange
from mpigraph.paths.labels import Labels, combine_hubs, hub_offers, next_from_dist


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


class _Search:
    """The search on one analysis rank: distances, and the changed vertices not yet relaxed.

    ``pending`` holds the changed ("dirty") local vertices, each once; their
    buckets are their distances // delta, read when needed, so a vertex that
    moves to a lower bucket needs no bookkeeping.
    """

    def __init__(self, comm, g, delta, split):
        self.comm, self.g, self.delta, self.split = comm, g, delta, split
        self.dist = np.full(len(g.time), INF, np.int64)
        self.dirty = np.zeros(len(g.time), bool)
        self.pending = np.zeros(0, np.int64)
        self.stamp = np.zeros(len(g.time), np.int64)     # scratch for _distinct
        self.distributed = comm.Get_size() > 1

    def start(self):
        sinks = [self.g.sink] + (list(range(self.g.n_rank_vertices, self.g.n_vertices)) if self.split else [])
        sinks = np.array(sinks, np.int64)
        mine = self.g.local_index(sinks[self.g.owner_of(sinks) == self.g.me])
        self.dist[mine] = 0
        self.dirty[mine] = True
        self.pending = np.unique(mine)

    def smallest(self):
        """The smallest bucket holding a pending vertex here (INF: none)."""
        return int((self.dist[self.pending] // self.delta).min()) if len(self.pending) else INF

    def take(self, b):
        """The pending vertices of bucket b, no longer pending."""
        in_b = self.dist[self.pending] // self.delta == b
        frontier, self.pending = self.pending[in_b], self.pending[~in_b]
        self.dirty[frontier] = False
        return frontier

    def relax(self, frontier, light):
        """Offer dist[v] + w to the source u of each light (or heavy) incoming edge of the frontier."""
        g = self.g
        starts, counts = g.indptr[frontier], g.indptr[frontier + 1] - g.indptr[frontier]
        edge = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        weight = g.weight[edge]
        keep = weight < self.delta if light else weight >= self.delta
        edge, weight = edge[keep], weight[keep]
        source, dist = g.src[edge], np.repeat(self.dist[frontier], counts)[keep] + weight
        if self.split:    # edges out of hubs are offers to the hubs: labels.hub_offers, at the end
            to_rank = source < g.n_rank_vertices
            source, dist = source[to_rank], dist[to_rank]
        if self.distributed:     # offers to vertices owned elsewhere go to their owners
            owner = g.owner_of(source)
            here = owner == g.me
            away = ~here
            source_in, dist_in = exchange.send_rows(self.comm, owner[away], [source[away], dist[away]])
            source = g.local_index(np.concatenate((source[here], source_in)))
            dist = np.concatenate((dist[here], dist_in))
        self.apply(source, dist)

    def apply(self, target, dist):
        before = self.dist[target]
        np.minimum.at(self.dist, target, dist)
        improved = target[self.dist[target] < before]
        new = improved[~self.dirty[improved]]
        if len(new):
            self.dirty[new] = True
            self.pending = np.concatenate((self.pending, self._distinct(new)))

    def _distinct(self, index):
        """index without repeats (in no particular order), without sorting."""
        position = np.arange(len(index), dtype=np.int64)
        self.stamp[index] = position        # the last write of each repeated index wins ...
        return index[self.stamp[index] == position]     # ... and only that one is kept

    def next_bucket(self):
        return self.comm.allreduce(self.smallest(), op=MPI.MIN) if self.distributed else self.smallest()

    def run(self):
        self.start()
        rounds = 0
        b = self.next_bucket()
        while b < INF:
            settled = []
            while True:     # light phases: until bucket b stays empty on every rank
                frontier = self.take(b)
                settled.append(frontier)
                self.relax(frontier, light=True)
                rounds += 1
                following = self.next_bucket()
                if following != b:
                    break
            self.relax(self._distinct(np.concatenate(settled)), light=False)
            b = self.next_bucket()
        return self.labels(rounds)

    def labels(self, rounds):
        nxt, nxt_w = next_from_dist(self.comm, self.g, self.dist, self.split)
        hub_dist = hub_next = np.zeros(0, np.int64)
        if self.split:
            hub_dist, hub_next = combine_hubs(self.g.n_hubs, *hub_offers(self.comm, self.g, self.dist))
        return Labels(self.dist, nxt, nxt_w, hub_dist, hub_next, rounds)


def solve(comm, g, delta, split):
    """Labels of g's local vertices (collective over comm: the analysis ranks holding g)."""
    if delta < 1:
        raise ValueError("delta must be >= 1 ns, got %r" % delta)
    return _Search(comm, g, int(delta), split).run()
