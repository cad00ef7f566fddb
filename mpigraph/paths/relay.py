"""The joined search as a relay: the joined graph cut into slabs of time, one per analysis rank,
swept latest first, each slab's distances handed on to the earlier ones.

parallel-dijkstra's rounds leave a pipelined program's path to one search of the parts joined by
their crossing edges (``parallel_dijkstra._JoinedSearch``): the path crosses between analysis
ranks at nearly every message, and a search that stays on the parts needs a round per crossing.
That search is one sweep in topological order, which does not split into concurrent pieces: a
vertex's distance waits for the distances of everything after it.  What does split is the data.
The graph's edges go forward in time, and a cut at one instant crosses few of them (each trace
rank's chain once, and the messages in flight), so:

- every searched vertex goes, with its incoming edges, to the analysis rank of its slab of time
  (``slabs``: K - 1 instants that leave about as many vertices in each slab);
- the rank of the latest slab sweeps it from the sinks it holds; its edges from vertices of
  earlier slabs become offers to those slabs' ranks; each rank sweeps its slab once every later
  slab has handed it its offers, and the others wait without spinning;
- the distances go back to the ranks whose vertices they are.

The sweeps follow each other, so the search takes about as long as one sweep of the whole joined
graph, as it would on one rank, but no rank holds more than its slab and the rows move once
between equal shares: no gather of the whole joined graph to analysis rank 0 and no scatter back.
An edge into a source (a sink or a hub: distance 0 before any sweep) is an offer known at once.
Any other edge whose source lies in a later slab than its end (times out of order) stops the
relay before anything moves; the caller then joins the parts on one rank.
"""

import numpy as np

from mpigraph.comm import owner_exchange as exchange
from mpigraph.comm.parallel import barrier_idly
from mpigraph.paths.dijkstra import Reversed
from mpigraph.paths.model import INF, index_dtype
from mpigraph.util import arrays

# Times all analysis ranks send together to find the slabs' bounds (each at least 64: every
# rank receives them all), evenly spaced in each rank's sorted times, taken from a sorted
# subsample of at most SUBSAMPLE of them (no sort of every vertex's time).
SAMPLES = 1 << 16
SUBSAMPLE = 1 << 16


def slabs(comm, times):
    """The slab (0 .. K-1, int32) of each of this rank's vertex `times`: the K - 1 bounds leave
    about as many of all ranks' vertices in each slab, and equal times in one.  Collective."""
    size = comm.Get_size()
    if size == 1:
        return np.zeros(len(times), np.int32)
    times = np.asarray(times, np.int64)
    bounds = slab_bounds(comm.allgather(time_sample(times, max(64, SAMPLES // size))), size)
    return np.searchsorted(bounds, times, "right").astype(np.int32)


def time_sample(times, n_samples):
    """(n_samples times evenly spaced in sorted `times`, how many times they stand for): what
    each rank contributes to the slabs' bounds."""
    ordered = np.sort(times[::max(1, len(times) // SUBSAMPLE)])
    if not len(ordered):
        return ordered, 0
    return ordered[((np.arange(n_samples) + 0.5) * len(ordered) / n_samples).astype(np.int64)], len(times)


def slab_bounds(samples, n_slabs):
    """The n_slabs - 1 times that cut every rank's times (``time_sample`` of each) into slabs of
    about equal counts: slab k holds the times from bound k - 1 (included) to bound k (not)."""
    sample = np.concatenate([times for times, _ in samples])
    if not len(sample):
        return np.zeros(n_slabs - 1, np.int64)
    # Each sampled time stands for its rank's times around it: n / (its rank's samples) of them.
    weight = np.concatenate([np.full(len(times), n / len(times)) for times, n in samples if len(times)])
    order = np.argsort(sample, kind="stable")
    sample = sample[order]
    reached = np.cumsum(weight[order])
    # The time at each k / n_slabs of the weight stays with the slab below, all its copies (a
    # tie is never cut): each bound is the next sampled time after it, or just after it.
    at = np.minimum(np.searchsorted(reached, reached[-1] * np.arange(1, n_slabs) / n_slabs), len(sample) - 1)
    after = np.searchsorted(sample, sample[at], "right")
    just_after = np.minimum(sample[at], np.iinfo(np.int64).max - 1) + 1
    return np.where(after < len(sample), sample[np.minimum(after, len(sample) - 1)], just_after)


class Places:
    """Where each of this rank's searched vertices goes: its slab (``slabs``) and its position
    among that slab's vertices.  A slab receives its vertices grouped by the rank that sends
    them, in rank order, each rank's in its own order (``owner_exchange.send_rows``), so every
    rank knows its vertices' positions there from how many each rank sends to each slab: edges
    and offers name their ends by position, and no slab looks ids up.  Collective."""

    def __init__(self, comm, slab):
        size, me = comm.Get_size(), comm.Get_rank()
        self.slab = slab
        self.order, counts = arrays.grouped(slab, size)      # this rank's vertices slab by slab
        self.counts = np.array(comm.allgather(counts), np.int64).reshape(size, size)    # [rank, slab]
        before = self.counts[:me].sum(axis=0)       # each slab's vertices from the lower ranks
        # The k-th of this rank's vertices of slab s (in order) is at before[s] + k there.
        ordered = np.arange(len(slab), dtype=np.int64) + np.repeat(before - (np.cumsum(counts) - counts), counts)
        if self.order is None:
            self.position = ordered
        else:
            self.position = np.empty(len(slab), np.int64)
            self.position[self.order] = ordered


def distances(comm, places, degree, src, weight, src_slab, sources, say=None):
    """Collective: int64 distances (INF: unreached) of this rank's searched vertices from the
    relay of the module doc; None, before anything moves, where an edge comes from a later slab
    than its end's (but into a source).

    `places` (``Places``) are the vertices' slabs and positions there; `degree`, `src`, `weight`
    and `src_slab` are their CSR rows of incoming edges, in vertex order (src: the source's
    position in its slab, src_slab, in the same dtype on every rank); `sources` are the vertices
    here (0-based) at distance 0.  `say` hears, once the relay is sure to run, how many slabs it
    sweeps."""
    me, size = comm.Get_rank(), comm.Get_size()
    slab = places.slab
    n_here = len(slab)
    is_source = np.zeros(n_here, bool)
    is_source[sources] = True
    dst = np.repeat(np.arange(n_here, dtype=np.int64), degree)
    into_source = is_source[dst]      # offers known at once: distance 0 plus the edge's weight
    if comm.allreduce(int(np.count_nonzero((src_slab > slab[dst]) & ~into_source))):
        return None
    if say is not None:
        say(size)
    weight = weight.astype(np.int64, copy=False)
    early = exchange.send_rows(comm, src_slab[into_source], [src[into_source].astype(np.int64), weight[into_source]])
    kept = np.flatnonzero(~into_source)
    kept_dst = dst[kept]
    del dst, into_source
    part = _Slab.of(comm, places, is_source, np.bincount(kept_dst, minlength=n_here), slab[kept_dst], kept,
                    [src, weight, src_slab])
    del kept_dst, kept
    part.offer(*early)
    for turn in range(size - 1, -1, -1):
        dest, offers = part.sweep() if turn == me else _NO_OFFERS
        barrier_idly(comm)     # the other ranks wait for this turn's sweep without spinning
        part.offer(*exchange.send_rows(comm, dest, offers))
    return _home(comm, places, part.dist)


# What a rank that does not sweep this turn sends: no rows, in the offers' dtypes (int64 positions).
_NO_OFFERS = (np.zeros(0, np.int32), [np.zeros(0, np.int64), np.zeros(0, np.int64)])


class _Slab:
    """One analysis rank's slab of the joined graph: the CSR of the edges between its vertices
    (numbered by their positions, ``Places``), the edges into them from earlier slabs, and the
    offers received."""

    @classmethod
    def of(cls, comm, places, is_source, degree, edge_slab, edges, columns):
        """Collective: every rank's vertices (whether each `is_source`, its `degree`) and the
        edges of rows `edges` of `columns` (src, weight, src_slab; the slab of each one's end,
        `edge_slab`; in their ends' order) sent to the ranks of their slabs; this rank's slab."""
        me, size = comm.Get_rank(), comm.Get_size()
        vertex_source, vertex_degree = exchange.send_grouped(
            comm, places.order, places.counts[me], [is_source.view(np.int8), degree.astype(np.int32)])
        # A vertex's edges arrive in its order and after those of its rank's earlier vertices
        # (send_rows keeps each source's order and puts the sources in rank order, for the
        # vertices and the edges alike): its slab finds each edge's row from the degrees.
        # The edges are picked and grouped by one gather of each column.
        order, counts = arrays.grouped(edge_slab, size)
        src, weight, src_slab = columns
        slab_type = np.int16 if size <= 1 << 15 else np.int32
        edge_src, edge_weight, edge_src_slab = exchange.send_grouped(
            comm, edges if order is None else edges[order], counts, [src, weight, src_slab.astype(slab_type)])
        return cls(me, vertex_source.view(bool), vertex_degree, edge_src, edge_weight, edge_src_slab)

    def __init__(self, me, source, degree, edge_src, edge_weight, edge_src_slab):
        self.sources = np.flatnonzero(source)
        n = len(source)
        row = np.repeat(np.arange(n, dtype=np.int64), degree)
        local = edge_src_slab == me
        indptr = arrays.row_pointers(row[local], n, index_dtype(int(np.count_nonzero(local))))
        self.search = Reversed(n, indptr, edge_src[local].astype(index_dtype(n)), edge_weight[local])
        away = ~local
        self.away_row, self.away_src, self.away_weight = row[away], edge_src[away], edge_weight[away]
        self.away_slab = edge_src_slab[away]
        self.offered_at, self.offered = [], []
        self.dist = None

    def offer(self, vertices, values):
        """Offers received: values (int64) to vertices (positions in this slab)."""
        if len(vertices):
            self.offered_at.append(vertices)
            self.offered.append(values)

    def sweep(self):
        """This slab's distances, from its sources and the offers of the later slabs; returns
        (slab of each offer, [vertex, offer]) for the earlier slabs' vertices."""
        sources = np.concatenate([self.sources] + self.offered_at)
        offsets = np.concatenate([np.zeros(len(self.sources), np.int64)] + self.offered)
        self.dist = self.search.search(sources, offsets)
        self.offered_at, self.offered = [], []
        reached = self.dist[self.away_row] < INF
        return self.away_slab[reached], [self.away_src[reached].astype(np.int64),
                                         self.dist[self.away_row[reached]] + self.away_weight[reached]]


def _home(comm, places, dist):
    """The slab's distances sent back to the ranks whose vertices they are: this rank's, in its
    order.  The slab holds them grouped by rank, in rank order: each rank's block goes back whole,
    and arrives slab by slab, as they were sent."""
    me = comm.Get_rank()
    back, = exchange.send_grouped(comm, None, places.counts[:, me], [dist])
    if places.order is None:
        return back
    out = np.empty(len(back), np.int64)
    out[places.order] = back
    return out
