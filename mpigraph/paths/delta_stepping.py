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

Bookkeeping (``_Queue``): (bucket, vertex) entries, a sorted part read from
its head and a small unsorted part for new entries, merged by one sort when
it grows; stale entries (a vertex that moved down a bucket, or was taken)
are dropped when met.  The search
computes distances only; next[] comes from them (``labels.next_from_dist``).

A chain inside one bucket (a pipelined program: a message per row, each on the
path) takes a light phase per vertex: millions.  When the phases have run about
as long as one Dijkstra search of the whole graph would take, that search
(``parallel_dijkstra.joined_distances``: the parts joined, relayed over slabs of
time, or on analysis rank 0 where their times are out of order; only when they
fit there) finds the rest at once (``_Joining``).
"""

import dataclasses
import time

import numpy as np

from mpi4py import MPI

from mpigraph.paths.graph import INF
from mpigraph.util import arrays
from mpigraph.comm import owner_exchange as exchange
from mpigraph.paths import gather
from mpigraph.paths.dijkstra import Bypass, add_hub_edges, with_remote_edges
from mpigraph.paths.labels import from_dist, local_sinks
from mpigraph.paths.parallel_dijkstra import joined_distances, seconds_before_joining


def auto_delta(comm, g):
    """The mean positive edge weight over all ranks (at least 1 ns).

    Meyer and Sanders take delta ~ (max weight) / (degree); slacks are mostly
    0 with a long tail, where the max is an outlier, so the mean of the
    non-zero slacks keeps both the number of buckets and the re-relaxations
    within a bucket moderate.
    """
    weights = [g.weight]
    if g.remote_hub_edges is not None:     # edges into other ranks' hubs: kept only here
        weights.append(np.asarray(g.remote_hub_edges[1]))
    positive = [w[w > 0] for w in weights]
    # Python ints: the sum is exact, the same however the edges are spread over the ranks.
    total = comm.allreduce(sum(int(p.sum()) for p in positive))
    count = comm.allreduce(sum(len(p) for p in positive))
    return max(1, int(round(total / count))) if count else 1


class _Queue:
    """Changed ("dirty") local vertices by bucket, as (bucket, vertex) entries.

    An entry is current while its vertex is dirty and still in that bucket
    (distance // delta); stale ones are dropped when met.  ``later`` is
    sorted by bucket and read from ``pos`` on; new entries go to ``fresh``
    (unsorted) and are merged into ``later`` by one sort when ``fresh``
    outgrows it, so a phase costs about its own entries, not all pending ones.
    """

    def __init__(self, dist, delta):
        self.dist, self.delta = dist, delta
        self.dirty = np.zeros(len(dist), bool)
        self.stamp = np.zeros(len(dist), np.int32)     # scratch for distinct(): positions in its index
        empty = np.zeros(0, np.int64)
        self.later_b, self.later_v, self.pos = empty, empty, 0
        self.fresh_b, self.fresh_v = empty, empty

    def add(self, vertices):
        """Vertices whose distance dropped (each once)."""
        self.dirty[vertices] = True
        self.fresh_b = np.concatenate((self.fresh_b, self.dist[vertices] // self.delta))
        self.fresh_v = np.concatenate((self.fresh_v, vertices))
        if len(self.fresh_v) > 4096 + 2 * (len(self.later_v) - self.pos):
            b = np.concatenate((self.later_b[self.pos:], self.fresh_b))
            v = np.concatenate((self.later_v[self.pos:], self.fresh_v))
            current = self._current(b, v)
            b, v = b[current], v[current]
            order = np.argsort(b, kind="stable")
            self.later_b, self.later_v, self.pos = b[order], v[order], 0
            self.fresh_b, self.fresh_v = self.fresh_b[:0], self.fresh_v[:0]

    def _current(self, b, v):
        return self.dirty[v] & (self.dist[v] // self.delta == b)

    def smallest(self):
        """The smallest bucket with a current entry (INF: none)."""
        current = self._current(self.fresh_b, self.fresh_v)
        self.fresh_b, self.fresh_v = self.fresh_b[current], self.fresh_v[current]
        best = int(self.fresh_b.min()) if len(self.fresh_b) else INF
        window = 64
        while self.pos < len(self.later_v):      # skip stale entries at the head of later
            end = min(self.pos + window, len(self.later_v))
            current = self._current(self.later_b[self.pos:end], self.later_v[self.pos:end])
            if current.any():
                self.pos += int(np.argmax(current))
                return min(best, int(self.later_b[self.pos]))
            self.pos, window = end, 2 * window
        return best

    def take(self, b):
        """The dirty vertices of bucket b (each once), no longer dirty."""
        end = self.pos + int(np.searchsorted(self.later_b[self.pos:], b, "right"))
        in_b = self.fresh_b == b
        b_ = np.concatenate((self.later_b[self.pos:end], self.fresh_b[in_b]))
        v = np.concatenate((self.later_v[self.pos:end], self.fresh_v[in_b]))
        self.pos = end
        self.fresh_b, self.fresh_v = self.fresh_b[~in_b], self.fresh_v[~in_b]
        v = self.distinct(v[self._current(b_, v)])
        self.dirty[v] = False
        return v

    def distinct(self, index):
        """index without repeats (in no particular order), without sorting."""
        if len(index) > np.iinfo(self.stamp.dtype).max:      # positions past the stamps' dtype
            return np.unique(index)
        position = np.arange(len(index), dtype=self.stamp.dtype)
        self.stamp[index] = position        # the last write of each repeated index wins ...
        return index[self.stamp[index] == position]     # ... and only that one is kept


@dataclasses.dataclass
class _Searched:
    """The graph the search runs on: the vertices ``Bypass`` keeps, numbered 0, 1, ... (its
    ``vertices``), their incoming edges, and where offers to the edges' sources go.

    No edge leaves a hub with splits: those are offers (``labels.hub_offers``), and Bypass
    leaves out the edges out of sinks.
    """

    n: int                    # vertices searched here (with the extra ones of ``_bypassed``)
    indptr: np.ndarray        # CSR of incoming edges, rows in search numbering
    src: np.ndarray           # each edge's source: its search index, or its global id when distributed
    weight: np.ndarray
    sinks: np.ndarray         # search indices of the sinks this rank owns
    owner_of: object = None   # distributed: global ids -> their analysis ranks
    index_of: object = None   # distributed: global ids of vertices owned here -> their search indices


class _Search:
    """The search on one analysis rank: distances, and the queue of changed vertices."""

    def __init__(self, comm, graph, delta, heartbeat=None, give_up_after_s=float("inf")):
        self.comm, self.graph, self.delta, self.heartbeat = comm, graph, delta, heartbeat
        self.give_up_after_s = give_up_after_s      # seconds of phases after which distances() gives up
        self.dist = np.full(graph.n, INF, np.int64)
        self.queue = _Queue(self.dist, delta)
        self.distributed = comm.Get_size() > 1

    def start(self):
        self.dist[self.graph.sinks] = 0
        self.queue.add(self.graph.sinks)

    def relax(self, frontier, light):
        """Offer dist[v] + w to the source u of each light (or heavy) incoming edge of the frontier."""
        g = self.graph
        starts, counts = g.indptr[frontier], g.indptr[frontier + 1] - g.indptr[frontier]
        edge = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        weight = g.weight[edge]
        keep = weight < self.delta if light else weight >= self.delta
        edge, weight = edge[keep], weight[keep]
        source, dist = g.src[edge], np.repeat(self.dist[frontier], counts)[keep] + weight
        if self.distributed:     # offers to vertices owned elsewhere go to their owners
            source, dist = exchange.keep_or_send(self.comm, g.owner_of(source), [source, dist])
            source = g.index_of(source)
        self.apply(source, dist)

    def apply(self, target, dist):
        before = self.dist[target]
        np.minimum.at(self.dist, target, dist)
        improved = target[self.dist[target] < before]
        if len(improved):
            self.queue.add(self.queue.distinct(improved))

    def next_bucket(self, started):
        """(the smallest bucket with a changed vertex on any rank, whether a rank has run out of
        time): one allreduce."""
        mine = np.array([self.queue.smallest(), time.perf_counter() - started <= self.give_up_after_s], np.int64)
        if self.distributed:
            self.comm.Allreduce(MPI.IN_PLACE, mine, op=MPI.MIN)
        return int(mine[0]), not mine[1]

    def distances(self):
        """(dist, rounds): the final distances of the local vertices and the light phases run;
        dist is None when the phases ran out of time first (on every rank at the same phase)."""
        self.start()
        started = time.perf_counter()
        rounds = 0
        b, late = self.next_bucket(started)
        while b < INF:
            settled = []
            while True:     # light phases: until bucket b stays empty on every rank
                if late:
                    return None, rounds
                frontier = self.queue.take(b)
                settled.append(frontier)
                self.relax(frontier, light=True)
                rounds += 1
                if self.heartbeat is not None:
                    self.heartbeat.tick(rounds, "light phases", "at %.6f s of slack from the end" % (b * self.delta / 1e9))
                following, late = self.next_bucket(started)
                if following != b:
                    break
            self.relax(self.queue.distinct(np.concatenate(settled)), light=False)
            b, late = self.next_bucket(started)
        return self.dist, rounds


def solve(comm, g, delta, split, heartbeat=None):
    """Labels of g's local vertices (collective over comm: the analysis ranks holding g).

    The search runs on g with its one-way vertices bypassed (``_bypassed``,
    exact), as dijkstra's does.
    """
    if delta < 1:
        raise ValueError("delta must be >= 1 ns, got %r" % delta)
    searched, expand, n_searched = _bypassed(comm, g, local_sinks(g, split), split)
    joining = _Joining(comm, n_searched, len(searched.src))
    dist, rounds = _Search(comm, searched, int(delta), heartbeat, joining.after_s).distances()
    if dist is None:
        del searched, expand  # the search starts afresh: its state is not held through the join
        if heartbeat is not None:
            heartbeat.say_now(joining.describe(heartbeat.algorithm, rounds))
        dist, rounds = joined_distances(comm, g, split), rounds + 1
    else:
        dist = expand(dist)
        del searched, expand  # the searched graph is not held through next[]'s pass
    return from_dist(comm, g, dist, split, rounds)




class _Joining:
    """When the light phases give way to one search of the parts joined
    (``parallel_dijkstra.joined_distances``): exact, like the phases, and it starts afresh.

    A chain of vertices inside one bucket (a pipelined program: a message per row, each on
    the path) takes a light phase per vertex: millions, each dearer as offers pile up in the
    later buckets.  The phases go on until they have taken about as long as the joined search
    would (the rule of renting skis until their rent would have bought them: at worst about
    twice the better of the two), never when the joined graph would not fit analysis rank 0's
    node.  A bulk-synchronous run needs a few phases per bucket and does not get there.
    """

    def __init__(self, comm, n_vertices, n_edges):
        # The searched graph's size over all ranks: the joined graph is no larger (it has no
        # vertices for other ranks' sources, and no edges out of hubs).
        self.n_vertices, self.n_edges = comm.allreduce(n_vertices), comm.allreduce(n_edges)
        self.n_analysis = comm.Get_size()
        fits = self.n_analysis == 1 or gather.graph_fits_on_root(comm, self.n_vertices, self.n_edges)
        self.after_s = seconds_before_joining(self.n_vertices + self.n_edges) if fits else float("inf")

    def describe(self, algorithm, phases):
        where = "of the parts joined" if self.n_analysis > 1 else "of the whole graph"
        return ("path: %s, the rest after %d light phases (a chain inside a bucket) in one search %s: "
                "%d vertices, %d edges" % (algorithm, phases, where, self.n_vertices, self.n_edges))


def _bypassed(comm, g, sinks, split):
    """(the ``_Searched`` graph: g with its one-way vertices bypassed, how to give every vertex
    of g its distance from the searched ones', how many of them are g's).

    ``dijkstra.Bypass`` on this rank's edges (``_bypassed_part`` on a part of a distributed
    graph).  The search's arrays are the size of what Bypass keeps, not of g: on a
    bulk-synchronous run with splits, about half of a part's vertices with several analysis
    ranks, and only the synchronisation points with one.
    """
    if g.n_analysis > 1:
        return _bypassed_part(comm, g, sinks, split)
    bypass = Bypass(len(g.time), g.indptr, g.src, g.weight, sinks)   # local ids are global ids
    searched = _Searched(len(bypass.vertices), bypass.indptr, bypass.src, bypass.weight, bypass.sources)
    return searched, bypass.expand, len(bypass.vertices)


def _bypassed_part(comm, g, sinks, split):
    """``_bypassed`` on this analysis rank's part of a distributed graph.

    An edge whose source another rank owns has that source as an extra vertex
    here (ids n, n+1, ...: kept, no edges of its own), and a vertex with an
    edge stored on another rank is kept (``with_remote_edges``).  Offers to a
    source go to its owner by global id, and are looked up there in
    ``Bypass.positions``.
    """
    n = len(g.time)
    src, remote, keep = _part_sources(comm, g, split)
    n_extra = len(remote) + int(split)
    hub_sinks = [n + len(remote)] if split else []
    indptr = np.concatenate((g.indptr, np.full(n_extra, g.indptr[-1])))
    weight = g.weight
    if split and g.remote_hub_edges is not None:
        src, weight = add_hub_edges(indptr, src, weight, g.remote_hub_edges)   # the hubs' vertex is last
    kept = np.concatenate((keep, np.arange(n, n + n_extra, dtype=np.int64)))
    bypass = Bypass(n + n_extra, indptr, src, weight, np.concatenate((sinks, hub_sinks)).astype(np.int64), kept)
    del src, indptr, weight
    # The searched edges' sources as global ids (none is the hubs' vertex: a source of Bypass).
    src = bypass.vertices[bypass.src].astype(np.int64)
    local = src < n
    src[local] = g.global_id(src[local])
    src[~local] = remote[src[~local] - n]
    position = bypass.positions()
    # The search starts from the sinks and, with splits, the other ranks' hubs' vertex (at 0, as
    # every hub: its edges in are those of Graph.remote_hub_edges, its edges out were left out).
    starts = np.concatenate((sinks, hub_sinks)).astype(np.int64)
    searched = _Searched(len(bypass.vertices), bypass.indptr, src, bypass.weight, position[starts],
                         g.owner_of, lambda ids: position[g.local_index(ids)])
    return searched, (lambda dist: bypass.expand(dist)[:n]), len(bypass.vertices) - n_extra


def _part_sources(comm, g, split):
    """(each edge's source as a local id or an extra one, the global ids of the extra ones n,
    n+1, ... in order, the local vertices with an edge stored on another rank).  Collective.

    With splits another rank's hubs are sinks too, and the search relaxes no edge out of a
    hub (those are offers: ``labels.hub_offers``).  Their edges here all start at one more
    extra vertex, n + len(remote), which the Bypass takes as a source and so leaves out of the
    search with its edges, as it does the local sinks': no hub is looked up, told to its
    owner, or searched.  So do the edges into this rank's hubs from other ranks' members
    when the graph keeps Graph.remote_hub_edges: their owners have them, as edges into that
    vertex there.
    """
    n = len(g.time)
    here = g.owns(g.src)
    cross = np.flatnonzero(~here)
    cross_src = g.src[cross]
    # Edges whose source becomes the other ranks' hubs' vertex (edges the Bypass leaves out).
    if split:
        to_hubs_vertex = cross_src >= g.n_rank_vertices
        if g.remote_hub_edges is not None:    # into hubs, from members elsewhere: there too
            to_hubs_vertex |= cross >= g.first_hub_edge
    else:
        to_hubs_vertex = np.zeros(len(cross), bool)
    cross_src = cross_src[~to_hubs_vertex]
    keep = with_remote_edges(comm, g, cross_src, g.owner_of(cross_src))
    remote, _, extra = arrays.unique_inverse(cross_src)
    del cross_src
    src = np.empty(len(g.src), g.src.dtype)        # local ids and the extra ones after them fit the ids' dtype
    src[here] = g.local_index(g.src[here])
    src[cross[~to_hubs_vertex]] = n + extra
    src[cross[to_hubs_vertex]] = n + len(remote)
    return src, remote, keep
