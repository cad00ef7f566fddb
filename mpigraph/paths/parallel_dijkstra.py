"""Distributed Dijkstra by parts: csgraph's Dijkstra on each analysis rank's part, boundary offers between.

This is what ``parallel-dijkstra`` runs.  Seed 004 (4.3) defines parallel
Dijkstra as parallel delta-stepping with delta = 1 ns: one collective round
per distinct distance, millions of rounds on a long run's distinct slacks
(that formulation is still available as ``parallel-delta-stepping`` with
delta = 1).  Here instead:

- each analysis rank owns its vertices and their incoming edges (``Graph``);
  an edge whose source it also owns is local, the others cross to another rank
  (with splits, an edge from a member call into another rank's hub is searched
  where the member is, as an edge into a local sink: ``Graph.remote_hub_edges``);
- the sinks (the sink; with splits, the hubs too) are at distance 0 from the
  start;
- each round sends, for each crossing edge u -> v whose v got a smaller
  distance (first: the sinks), the offer dist[v] + w to u's owner (one
  Alltoallv); each rank then searches its local edges backwards (one sweep in
  topological order in C, ``paths.dag``; csgraph's Dijkstra where that cannot run)
  from its vertices with better offers (and in the first
  round its sinks), each starting at its offer (a virtual source with an
  edge of that weight to each), and keeps the smaller distances;
- it ends when no offer improves anything on any rank (one allreduce).

Each round's local distances are exact given the offers so far, so at the
end dist is the least slack to the sink (to the piece's hub with splits):
the number of searches is the most rank-crossings on a shortest path (not
counting edges into sinks), plus one.  With splits on (the default) a path crosses ranks only inside its
piece, so few rounds; with splits off, hubs (owned round robin) are crossed
once per piece, and a pipelined program's path (a message per row) crosses
thousands of times, each round searching everything upstream again.  So where offers
remain after ``rounds_before_joining`` rounds, after a round that lowered most vertices' distances
again (``RESEARCHED_SHARE``), or once the rounds have taken as long as that search
would (``seconds_before_joining``), the rest is one search of the parts' searched
graphs joined by the crossing edges (``_JoinedSearch``): cut into slabs of time that
the analysis ranks sweep one after another, latest first (``paths.relay``: no rank
holds more than its slab), or, where the graph's times are out of order, on analysis
rank 0 when it fits that node; else the rounds go on.  next[] comes from the final
distances (``labels.next_from_dist``), as for every algorithm.
"""

import time

import numpy as np

from mpi4py import MPI

from mpigraph.util import arrays
from mpigraph.comm import owner_exchange as exchange
from mpigraph.paths.graph import INF
from mpigraph.comm.parallel import barrier_idly
from mpigraph.paths import dag, gather, relay
from mpigraph.paths.dijkstra import Bypass, Reversed, add_hub_edges, distances, with_remote_edges
from mpigraph.paths.labels import from_dist, local_sinks


def solve(comm, g, split, heartbeat=None):
    """Labels of g's local vertices (collective over comm: the analysis ranks holding g);
    `heartbeat` (``paths.heartbeat``) hears each round."""
    dist, rounds = _distances(comm, g, split, heartbeat)   # the searches' arrays are gone before next[]'s pass
    return from_dist(comm, g, dist, split, rounds)


def _distances(comm, g, split, heartbeat=None):
    """(dist of g's local vertices, rounds): the searches and offers described above."""
    if g.n_analysis == 1:
        # No edge crosses to another rank: the first round would be the whole search, on a copy
        # of g's edges without those out of hubs (which Bypass leaves out anyway: hubs are sinks).
        dist = joined_distances(comm, g, split)
        if heartbeat is not None:
            heartbeat.tick(1, "rounds", "one analysis rank: the whole search in that round")
        return dist, 1
    n = len(g.time)
    joined = _JoinedSearch.of(comm, g, split)
    sinks = joined.sinks
    cross_dst, cross_src, cross_w, cross_owner = joined.cross
    part = Reversed(*joined.part)
    # The sinks' distances (0) are known before any search: their crossing edges make offers
    # at once, and the first search starts from the sinks (the other ranks' hubs' vertex too,
    # when the part has one: _local_part) and those offers together.
    dist = np.full(n, INF, np.int64)
    dist[sinks] = 0
    changed = dist < INF
    sources = joined.sources()
    offsets = np.zeros(len(sources), np.int64)
    rounds = 0
    join_at = rounds_before_joining(comm.Get_size())
    # The joined search's size is known once its parts are bypassed, which only a join does:
    # the parts' own size, which is larger, stands for it.
    join_after_s = seconds_before_joining(comm.allreduce(joined.part[0] + len(joined.part[2]) + len(cross_dst)))
    n_all = comm.allreduce(n)
    started, asked, researched = time.perf_counter(), False, False
    while True:
        if researched and not asked:
            # The last round searched most of the graph again (a pipeline): the joined search takes
            # over before another exchange of offers, whose distances it would not read.
            asked = True
            found = joined.distances(heartbeat, rounds)
            if found is not None:
                return found, rounds + 1
        send = changed[cross_dst]
        target, offer = exchange.send_rows(comm, cross_owner[send],
                                           [cross_src[send], dist[cross_dst[send]] + cross_w[send]])
        offered = _take_offers(dist, g.local_index(target), offer)
        target = np.flatnonzero(offered)
        sources, offsets = np.concatenate((sources, target)), np.concatenate((offsets, dist[target]))
        if not comm.allreduce(len(sources), op=MPI.SUM):
            break           # no offer improved any distance: the rounds are done
        # Rounds are still to come.  After join_at rounds, or once the rounds have taken as long
        # as the joined search would (the slowest rank's clock, so that all decide alike), it
        # takes over if it fits: only then, so a search whose rounds are over (a run with a
        # synchronisation point every few calls, whose pieces are done in a round or two) is
        # never done again.  After a round that searched most of the graph again it takes over
        # at once (above).
        if not asked and (rounds == join_at or (rounds and comm.allreduce(
                time.perf_counter() - started, op=MPI.MAX) >= join_after_s)):
            asked = True
            found = joined.distances(heartbeat, rounds)
            if found is not None:
                return found, rounds + 1
        changed = offered
        if len(sources):
            # The first round starts from the sinks, which reach most of the part: it is swept
            # whole; a later round's offers reach a few vertices near the crossings.
            changed |= _lowered(dist, part.search(sources, offsets, whole=rounds == 0))
        if rounds == 0:
            changed[sinks] = False      # their offers went out before the search
        sources, offsets = sources[:0], offsets[:0]
        rounds += 1
        if rounds >= 2:      # the first round lowers every distance it reaches
            researched = comm.allreduce(int(np.count_nonzero(changed))) > RESEARCHED_SHARE * n_all
        if heartbeat is not None and heartbeat.due():
            heartbeat.tick(rounds, "rounds", "%d vertices improved on analysis rank 0" % int(changed.sum()))
    return dist, rounds


def _lowered(dist, found):
    """Lower `dist` in place to a round's search's distances (`found`: of the part's vertices,
    the local ones first); returns where it improved, as a mask."""
    found = found[:len(dist)]
    improved = found < dist
    np.minimum(dist, found, out=dist)
    return improved


def _take_offers(dist, vertex, offer):
    """Lower dist in place to the offers (offer[i] to local vertex[i]); returns where they
    improved it, as a mask.  Those vertices start the round's search at their new distance.
    In place: no vertex-sized array of the best offers beside dist, memory new to the
    process in every round."""
    before = dist[vertex]
    np.minimum.at(dist, vertex, offer)
    offered = np.zeros(len(dist), bool)
    offered[vertex[dist[vertex] < before]] = True
    return offered


def joined_distances(comm, g, split):
    """Collective: dist of g's local vertices from one search of its parts joined
    (``_JoinedSearch``; with one analysis rank, dijkstra's search of g).  The caller has checked
    that they fit analysis rank 0, where they go when the relay cannot run."""
    if g.n_analysis == 1:
        return distances(len(g.time), g.indptr, g.src, g.weight, local_sinks(g, split))
    return _JoinedSearch.of(comm, g, split).distances()


def _split(g, split, cut):
    """((indptr, src, weight): the CSR of the edges out of vertices this rank owns, src as local
    ids; (dst, src, weight): the crossing edges before edge `cut`); with splits the edges out of
    hubs are in neither (edges out of sinks).  In C (``dag.split_part``: two passes over the
    edges), else by numpy's masks."""
    found = dag.split_part(g.indptr, g.src, g.weight, g.lo, g.hi, g.n_rank_vertices, g.n_analysis, g.me,
                           not split, cut)
    if found is not None:
        return found
    relaxed = g.src < g.n_rank_vertices if split else np.ones(len(g.src), bool)
    local = relaxed & g.owns(g.src)
    crossing = relaxed & ~local
    crossing[cut:] = False
    cross = np.flatnonzero(crossing)
    del relaxed, crossing
    # The crossing edges' rows (a few of the edges): found in indptr, not in a dst per edge.
    cross_dst = (arrays.sorted_positions(g.indptr, cross, "right") - 1).astype(g.src.dtype)
    kept = np.zeros(len(local) + 1, g.indptr.dtype)      # local edges before each edge
    np.cumsum(local, out=kept[1:])
    indptr = kept[g.indptr]
    del kept
    return (indptr, g.local_index(g.src[local]), g.weight[local]), (cross_dst, g.src[cross], g.weight[cross])


def _local_part(g, indptr, src, weight, to_hubs):
    """(n, indptr, src, weight): the CSR of what each round searches, this rank's local edges
    (``_split``).  Searched whole: a round's search is one sweep in C of what its sources reach
    (``paths.dag``), and a bulk-synchronous run or a halo exchange with a synchronisation point
    every few calls is done in a round or two; only a join bypasses its one-way vertices
    (``_JoinedSearch.bypass``).

    `to_hubs` (with splits: Graph.remote_hub_edges, or None) become edges into one more vertex,
    n, a sink standing for the other ranks' hubs (all sinks): a member call's S then gets its
    edge's slack, and no offer comes for it from the hub's owner.
    """
    n = len(g.time)
    if to_hubs is None or not len(to_hubs[0]):
        return n, indptr, src, weight
    indptr = np.append(indptr, indptr[-1])         # vertex n's row, last
    src, weight = add_hub_edges(indptr, src, weight, to_hubs)
    return n + 1, indptr, src, weight


# Seconds per vertex and edge of the joined search: its parts made, moved, searched in one
# sweep and its distances sent back.  Measured on a 16-core machine when the joined graph went to
# rank 0 (PRK p2p, 31 M vertices and 63 M edges joined: 3.5 s; the relay's sweeps add up to one
# sweep too), with room for slower ones: it only decides when the rounds (or delta-stepping's
# light phases) have cost about as much as the joined search would.
JOINED_SECONDS_PER_ELEMENT = 0.05e-6


def seconds_before_joining(n_elements):
    """Seconds of rounds (or light phases) after which the rest is one joined search; at least
    a second, so that a small search's course does not hang on a few milliseconds."""
    return max(1.0, n_elements * JOINED_SECONDS_PER_ELEMENT)


# A round after the first that still lowered more than this share of all vertices' distances
# searched most of the graph again: the path crosses between the ranks at nearly every step (a
# pipelined program: PRK p2p's second, third and fourth rounds lowered 97%, 67% and 51%), and
# the rounds would go on for as many crossings, each about a part's search; the joined search
# then takes over at once.  A bulk-synchronous run's second round lowers next to none.
RESEARCHED_SHARE = 0.5


def rounds_before_joining(n_analysis):
    """Rounds of offers after which the rest is one search on analysis rank 0 (``_JoinedSearch``),
    when that fits there.

    A round costs about one part's search, the joined search about all n_analysis parts'
    (and their gather): the rounds go on until they have cost about as much as it would, then
    it takes over (the rule of renting skis until their rent would have bought them), so the
    search costs at worst about twice what the better of the two would have.  A
    bulk-synchronous run with splits is done in 1 round; a pipelined one needs a round per
    crossing of its path between analysis ranks (thousands, each about a part's search, where
    the joined search costs about two parts').  One analysis rank
    has no crossings: its first round is the whole search.
    """
    return max(2, n_analysis)


class _JoinedSearch:
    """The parts' searched graphs (``Bypass``: each rank's vertices that are not one-way) joined
    by the crossing edges and searched at once: cut into slabs of time swept one after another
    by the analysis ranks (``paths.relay``), or, where the graph's times are out of order,
    gathered to analysis rank 0 and searched there.

    A crossing edge u -> v goes from u's searched vertex (u is one on its owner: it has an
    edge to another rank) to the end of v's run of one-way vertices here, with the run's slack
    added.  The search is exact, like the rounds, and starts afresh: each rank gets its
    searched vertices' distances back and expands them to all its vertices (``Bypass.expand``).
    Rank 0 holds only the joined graph, not the whole one (``dijkstra`` gathers that).
    """

    def __init__(self, comm, g, sinks, part, keep, cross):
        self.comm, self.g, self.sinks, self.part, self.keep, self.cross = comm, g, sinks, part, keep, cross
        self._bypass = self.n_vertices = self.n_edges = None

    @classmethod
    def of(cls, comm, g, split):
        """Collective: g's local part bypassed (``_local_part``) and its crossing edges (dst, src,
        weight, src's owner); with splits the edges out of hubs are left out (edges out of sinks)."""
        to_hubs = g.remote_hub_edges if split else None
        # With to_hubs, the edges into hubs from other ranks' members are no crossing edges: there
        # they are local.
        part, (cross_dst, cross_src, cross_weight) = _split(g, split, g.first_hub_edge if to_hubs is not None
                                                            else len(g.src))
        # Local ids in the graph's id dtype and owners in int32: four bytes an edge each, not eight.
        cross = cross_dst, cross_src, cross_weight, g.owner_of(cross_src).astype(np.int32)
        keep = with_remote_edges(comm, g, cross_src, cross[3])
        return cls(comm, g, local_sinks(g, split), _local_part(g, *part, to_hubs), keep, cross)

    def sources(self):
        """The part's vertices at distance 0: the sinks, and the vertex standing for the other
        ranks' hubs where the part has one."""
        return np.append(self.sinks, np.arange(len(self.g.time), self.part[0], dtype=np.int64))

    @property
    def bypass(self):
        """The part without its one-way vertices (``dijkstra.Bypass``, exact; kept: those with
        edges to other ranks' vertices): what the joined search joins.  Made on first use."""
        if self._bypass is None:
            self._bypass = Bypass(*self.part, self.sources(), self.keep)
        return self._bypass

    def _count(self):
        """Collective: the joined graph's vertices and edges over all ranks."""
        if self.n_vertices is None:
            bypass, comm = self.bypass, self.comm
            self.n_vertices = comm.allreduce(len(bypass.vertices))
            self.n_edges = comm.allreduce(len(bypass.src) + len(self.cross[0]))

    def fits(self):
        """Collective: whether the joined graph fits analysis rank 0's node."""
        self._count()
        return gather.graph_fits_on_root(self.comm, self.n_vertices, self.n_edges)

    def describe(self, rounds, how):
        return ("path: parallel-dijkstra, the rest after %d rounds in one sweep of the parts joined (%d vertices "
                "and %d edges), %s" % (rounds, self.n_vertices, self.n_edges, how))

    def distances(self, heartbeat=None, rounds=0):
        """Collective: dist of this rank's vertices, by the relay over slabs of time; where an
        edge goes back in time across slabs, by one search on analysis rank 0 when the joined
        graph fits there (else None).  `heartbeat` hears which, after `rounds` rounds."""
        self._count()
        comm, bypass = self.comm, self.bypass
        n_here = len(bypass.vertices)
        slab = relay.slabs(comm, self._times())
        places = relay.Places(comm, slab)
        degree, src, weight, src_slab = self._rows(places.position, slab)
        say = None if heartbeat is None else (
            lambda n_slabs: heartbeat.say_now(self.describe(rounds, "relayed over %d slabs of time" % n_slabs)))
        dist = relay.distances(comm, places, degree, src, weight, src_slab, bypass.sources, say)
        if dist is None:
            del places, degree, src, weight, src_slab
            if not self.fits():
                return None
            if heartbeat is not None:
                heartbeat.say_now(self.describe(rounds, "on analysis rank 0 (times out of order for a relay)"))
            first = comm.exscan(n_here) or 0            # this rank's first vertex in the joined numbering
            degree, src, weight, _ = self._rows(first + np.arange(n_here, dtype=np.int64), slab)
            del slab
            dist = self._gathered(first, degree, src, weight)
        return bypass.expand(dist)[:len(self.g.time)]

    def _gathered(self, first, degree, src, weight):
        """Collective: dist of this rank's searched vertices from one search of the joined graph
        gathered to analysis rank 0."""
        comm, bypass = self.comm, self.bypass
        # Each rank's rows come sorted and in rank order: rank 0 only adds up the rows' degrees.
        degree, src, weight = gather.gatherv(comm, degree), gather.gatherv(comm, src), gather.gatherv(comm, weight)
        sources = gather.gatherv(comm, first + bypass.sources.astype(np.int64))
        dist = None
        if comm.Get_rank() == 0:
            indptr = np.zeros(self.n_vertices + 1, np.int64)
            np.cumsum(degree, out=indptr[1:])
            del degree
            dist = Reversed(self.n_vertices, indptr, src, weight).search(sources)
            del src, weight
        barrier_idly(comm)     # the other ranks wait for rank 0's search
        return gather.scatterv(comm, dist, len(bypass.vertices))

    def _times(self):
        """Each searched vertex's time (ns), which cuts the relay's slabs; the vertex standing for
        the other ranks' hubs (``_local_part``), a sink, last."""
        vertices, time = self.bypass.vertices, self.g.time
        times = np.full(len(vertices), np.iinfo(np.int64).max, np.int64)
        real = vertices < len(time)
        times[real] = time[vertices[real]]
        return times

    def _rows(self, number, slab):
        """(degree of each searched vertex here, src, weight, src_slab) of this rank's searched
        edges and crossing edges into them, sorted by their vertex: a CSR's rows, src the
        source's `number` (each searched vertex's, on the rank that has it: its id in the joined
        graph, or its position in its slab for the relay; int32 where the joined graph's ids fit,
        as Reversed keeps them), and the slab of each edge's source (`slab`: this rank's vertices')."""
        bypass, g = self.bypass, self.g
        cross_dst, cross_src, cross_w, cross_owner = self.cross

        def numbered(query):
            at = bypass.index_of(g.local_index(query[0]))
            return [number[at], slab[at]]

        remote_src, remote_slab = exchange.ask_owners(self.comm, cross_owner, [cross_src], numbered)
        n_here = len(bypass.vertices)
        crossing_rows = bypass.target[cross_dst].astype(np.int64)
        # The searched edges are in row order already: only the crossing edges are put among them.
        rows = np.concatenate((np.repeat(np.arange(n_here, dtype=np.int64), np.diff(bypass.indptr)), crossing_rows))
        order = np.argsort(rows, kind="stable")
        degree = np.bincount(rows, minlength=n_here)
        del rows
        index = np.int32 if self.n_vertices < 2 ** 31 - 1 else np.int64
        src = np.concatenate((number[bypass.src], remote_src))[order].astype(index)
        weight = np.concatenate((bypass.weight, cross_w.astype(np.int64) + bypass.slack[cross_dst]))[order]
        src_slab = np.concatenate((slab[bypass.src], remote_slab))[order].astype(np.int32)
        return degree, src, weight, src_slab
