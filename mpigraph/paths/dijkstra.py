"""Sequential Dijkstra: scipy.sparse.csgraph.dijkstra on the whole graph (gathered to one rank).

Runs backwards from the sink: the graph's CSR of incoming edges (row = an
edge's destination, column = its source) is, read as a sparse matrix, the
reversed graph, and csgraph's Dijkstra (C, Fibonacci heap) walks it from the
sink.  Explicit zero entries of a sparse input are edges for csgraph, and
parallel edges are kept (tests/test_paths.py checks both).  Slacks are
integer ns; the distances are exact in float64 below 2**53 ns (104 days).

With splits, every hub is the sink of its piece: one multi-source search
(``indices`` = the sink and the hubs, ``min_only``) with the edges out of
hubs left out of the matrix; those edges become the hubs' offers
(``labels.hub_offers``, ``labels.combine_hubs``).  next[] comes from the
final distances (``labels.next_from_dist``): the shared
tie-break.
"""

import numpy as np

from mpi4py import MPI

from mpigraph.util import arrays
from mpigraph.comm import owner_exchange as exchange
from mpigraph.paths import dag
from mpigraph.paths.model import INF, as_index, index_dtype, slack_dtype
from mpigraph.paths.labels import from_dist, local_sinks

EXACT_NS = 2 ** 53     # float64 holds every integer below this


def solve(g, split):
    """Labels of every vertex of the whole graph g (g.n_analysis == 1)."""
    if g.n_analysis != 1:
        raise ValueError("sequential Dijkstra needs the whole graph on one rank")
    n = len(g.time)
    # With splits the hubs are sinks too; the edges out of hubs, which the search leaves out,
    # are edges out of sinks: Bypass drops those anyway.
    dist = distances(n, g.indptr, g.src, g.weight, local_sinks(g, split))
    return from_dist(MPI.COMM_SELF, g, dist, split, int((dist < INF).sum()))


def distances(n, indptr, src, weight, sources):
    """int64 least slack from each of n vertices to the nearest of `sources` (INF: none).

    The graph is the CSR of incoming edges (indptr, src local indices, weight).  One sweep in
    topological order (``paths.dag``) where it can run; else Dijkstra on the graph with its
    one-way vertices bypassed (``Bypass``), which gives every distance exactly: bypassing costs
    more than the sweep saves.  The sources (the sink, the hubs) reach most of the graph: the
    sweep takes it whole (``dag.search``).
    """
    _check_exact(weight, "a slack")      # every search keeps to float64's exact integers
    sources = np.asarray(sources, np.int64)
    dist = dag.search(n, indptr, src, weight, sources, np.zeros(len(sources), np.int64), INF, whole=True)
    if dist is not None:
        _check_exact(dist, "a distance", dist < INF)
        return dist
    bypass = Bypass(n, indptr, src, weight, sources)
    search = Reversed(len(bypass.vertices), bypass.indptr, bypass.src, bypass.weight)
    return bypass.expand(search.search(bypass.sources))


class Bypass:
    """The graph without its one-way vertices, and how to give them their distances back.

    A vertex u with a single outgoing edge u -> w (and not a source) has
    dist[u] = weight(u -> w) + dist[w], whatever the search does.  So the search
    can skip it: an edge x -> u becomes x -> w with both weights added, along
    whole runs of such vertices (pointer jumping: `target` is the first vertex
    of the run's end that is not one-way, `slack` the weights up to it), and
    dist[u] = slack[u] + dist[target[u]] afterwards.  Every rank vertex of a
    bulk-synchronous run is one-way with splits (a compute edge to the next
    call, a call to its hub): the search is left with the hubs and the sink.

    The search's graph (indptr, src, weight, sources) has only the other
    vertices, numbered 0, 1, ... in the order of their ids (`vertices`): the
    search's arrays are the size of what is left, not of the whole graph.
    Edges out of the sources are left out too: a source is at distance 0,
    which no edge (slack >= 0) improves.  Vertex ids are int32 where they fit.

    `keep` are vertices the search must keep although they may look one-way
    here, with their edges: on an analysis rank's part of a distributed graph,
    the vertices with edges out to other ranks' vertices, which this rank
    does not see (``parallel_dijkstra``).
    """

    def __init__(self, n, indptr, src, weight, sources, keep=None):
        _check_exact(weight, "a slack")
        index = index_dtype(n)
        # Out-degrees by add.at in int32: np.bincount would first copy src (30 M ids on analysis
        # rank 0 at 1.024e7 records) to int64 and count in int64.
        degree = np.zeros(n, np.int32)
        np.add.at(degree, src, np.int32(1))
        one_way = degree == 1
        one_way[sources] = False
        if keep is not None:
            one_way[keep] = False
        self.vertices = _ids(~one_way, index)
        searched = ~one_way                    # vertices whose outgoing edges the search keeps
        searched[sources] = False
        n_kept = int(degree[searched].sum())   # the search's edges
        del degree
        target, self.slack, kept = self._runs(one_way, self.vertices, searched, indptr, src, weight, index, n_kept)
        dst, src, weight = kept
        del one_way, searched, kept
        position = _positions(self.vertices, n, index)
        src, weight = position[src], weight.astype(np.int64) + self.slack[dst]
        self.slack = _narrowed(self.slack)
        dst = position[target[dst]]
        self.target, self.sources = _renumbered(target, position), position[sources]
        del target, position
        order = np.argsort(dst, kind="stable")
        self.indptr = arrays.row_pointers(dst, len(self.vertices), index_dtype(len(dst)))
        self.src, self.weight = src[order], weight[order]

    @staticmethod
    def _runs(one_way, others, searched, indptr, src, weight, index, n_kept):
        """(target, slack) per vertex: itself and 0 unless one-way (see the class); and the
        (dst, src, weight) of the n_kept edges out of `searched` vertices, the search's.

        The slacks are held in the edges' dtype, uint32 where the graph's slacks fit it (four
        bytes a vertex, not eight, of memory new to the process, and no narrowing copy after),
        else int64.  Should a run's sum not fit uint32, the slacks widen to int64 there, once,
        and the work goes on: nothing is summed twice.  No bound known beforehand would do:
        the weights out of one-way vertices add up to far more than any one run (seconds over
        a whole run, microseconds a run), and a bound by their total would give up the four
        bytes on every large run.
        """
        found = dag.bypass_runs(one_way, searched, indptr, src, weight, n_kept, index)
        if found is not None:       # in C: one pass over the edges and two over each run
            return found
        n = len(one_way)
        slack_type = np.uint32 if weight.dtype == np.uint32 else np.int64
        target, slack = np.empty(n, index), np.empty(n, slack_type)
        kept = [np.empty(n_kept, index), np.empty(n_kept, src.dtype), np.empty(n_kept, weight.dtype)]
        at = 0
        # Each edge writes its dst and weight at its source: a one-way vertex gets its single
        # edge's, and the others are then set back to themselves and 0.  A chunk of rows at a
        # time, with their edges' dst: not a dst for every edge of the graph at once; the kept
        # edges go straight into their columns (a pipelined run keeps an edge per call: the
        # chunks' pieces concatenated would be as much again in memory new to the process).
        for e0, e1, dst in _row_chunks(indptr, index):
            s, w = as_index(src[e0:e1]), weight[e0:e1]
            target[s], slack[s] = dst, w
            out_of_searched = searched[s]
            k = int(np.count_nonzero(out_of_searched))
            for column, values in zip(kept, (dst, s, w)):
                column[at:at + k] = values[out_of_searched]
            at += k
        target[others], slack[others] = others, 0
        slack = _skip_straight_runs(one_way, target, slack)
        slack = _jump(one_way, target, slack)
        return target, slack, kept

    def index_of(self, vertices):
        """Each vertex's index in the search's graph (the vertices must be searched ones)."""
        # In the vertices' own dtype: a search of int32 vertices for int64 ids would copy them all.
        return np.searchsorted(self.vertices, np.asarray(vertices).astype(self.vertices.dtype, copy=False))

    def positions(self):
        """index_of as an array over every vertex id (only read at searched ones): a gather for
        each of millions of lookups, not a binary search (log2 of the vertices in steps each)."""
        return _positions(self.vertices, len(self.target), self.target.dtype)

    def expand(self, dist):
        """The distances of every vertex from the search's (of self.vertices).

        Every vertex's target is itself, with slack 0, unless it is one-way: one pass over all,
        a chunk at a time (``_expanded``).
        """
        end = np.empty(len(self.target), np.int64)
        for a, b in _chunks(len(end)):
            end[a:b] = self._expanded(dist, a, b)
        return end

    def lower(self, dist, found):
        """Lower `dist` (of every vertex) in place to the distances that the search's `found`
        give (``expand``); returns where it improved, as a mask.  A chunk at a time: no
        vertex-sized array of the expanded distances beside dist, new memory in every round."""
        improved = np.empty(len(dist), bool)
        for a, b in _chunks(len(dist)):
            end = self._expanded(found, a, b)
            np.less(end, dist[a:b], out=improved[a:b])
            np.minimum(dist[a:b], end, out=dist[a:b])
        return improved

    def _expanded(self, dist, a, b):
        """The distances of vertices a:b from the search's `dist`: a target's, plus the slack to it."""
        end = dist[as_index(self.target[a:b])]
        unreached = end >= INF
        end += self.slack[a:b]
        end[unreached] = INF
        _check_exact(end, "a distance", where=~unreached)
        return end


def _holding(slack, sums):
    """`slack`, or an int64 copy of it where the int64 `sums` about to be stored in it do not
    fit its dtype (a Bypass's uint32 slacks; the copy's values are the same)."""
    if slack.dtype != np.int64 and len(sums) and sums.max() > np.iinfo(slack.dtype).max:
        return slack.astype(np.int64)
    return slack


def _narrowed(slack):
    """The slacks held through the search in graph.slack_dtype: uint32 where they all fit (a
    vertex-sized array held through the search: half the bytes); their readers add
    them to int64 distances.  Summed as uint32 they are already (``Bypass._runs``); this
    narrows the int64 sums of edges whose slacks did not all fit uint32."""
    return slack.astype(slack_dtype(int(slack.min(initial=0)), int(slack.max(initial=0))), copy=False)


def _renumbered(target, position):
    """target with each id replaced by its position, in place, a chunk at a time: no second
    vertex-sized array of memory new to the process, which costs more to write than the
    renumbering itself."""
    for a, b in _chunks(len(target)):
        target[a:b] = position[as_index(target[a:b])]
    return target


def _positions(vertices, n, dtype):
    """Each of n vertex ids' index among the sorted `vertices` (unset elsewhere)."""
    position = np.empty(n, dtype)
    position[vertices] = np.arange(len(vertices), dtype=dtype)
    return position


# Straight runs are skipped before the pointer jumping when one is at least this long (the
# jumping takes log2 of the longest run's length in passes; with short runs only, as in a
# bulk-synchronous run, the skip costs more passes over all vertices than it saves).
LONG_RUN = 64


def _skip_straight_runs(one_way, target, slack):
    """Point each one-way vertex of a straight run at the run's end at once, the slacks summed;
    returns the slacks (``_holding``: int64 where a sum did not fit their dtype).

    A straight run is v, v + 1, ..., e - 1, one-way vertices each of whose target is the id
    after it (S -> E -> S of the next call, along a rank); e is the first vertex after it that
    is not.  The pointer jumping after this has the runs' ends left to jump, not every vertex
    of them: with a rank whose calls are all one-way (a pipelined program's receiver, 16
    million vertices) that is 2 passes, not 25.  The sums are differences of one cumulative
    sum (int64 wraps, the differences stay exact).
    """
    n = len(target)
    if not n:
        return slack
    straight = _straight(one_way, target)
    if not _has_long_run(straight):         # short runs only: a few passes of the jumping do them
        return slack
    return _point_at_run_ends(straight, target, slack)


def _point_at_run_ends(straight, target, slack):
    """target and slack of every straight vertex: its run's end and the run's slacks from it;
    returns the slacks (``_holding``: int64 where a sum did not fit their dtype).

    A chunk at a time from the last, each chunk carrying in the first vertex after it that
    is not straight and the straight slacks up to it: the temporaries are a chunk's (whole-array
    passes would write several vertex-sized arrays of memory new to the process).  Within
    a chunk, the sums are differences of suffix sums (int64 wraps, the differences stay exact).
    """
    n = len(target)
    carry_end, carry_sum = n, np.int64(0)  # the last vertex is never straight: n is never a target
    for a in range(((n - 1) // SCAN_CHUNK) * SCAN_CHUNK, -1, -SCAN_CHUNK):
        b = min(a + SCAN_CHUNK, n)
        is_straight = straight[a:b]
        run = np.flatnonzero(is_straight)
        if not len(run):
            carry_end, carry_sum = a, 0
            continue
        ids = np.arange(a, b, dtype=target.dtype)
        # Each vertex's first not straight vertex at or after it (carry_end past the chunk).
        end = np.minimum.accumulate(np.where(is_straight, carry_end, ids)[::-1])[::-1]
        # after[i]: the straight slacks from local vertex i on, the carried ones included;
        # after[-1] = 0 stands for carry_end.
        after = np.zeros(b - a + 2, np.int64)
        np.cumsum(np.where(is_straight, slack[a:b], 0)[::-1], dtype=np.int64, out=after[-3::-1])
        after[:-1] += carry_sum
        local_end = np.where(end < b, end - a, b - a + 1)
        sums = after[run] - after[local_end[run]]
        slack = _holding(slack, sums)
        slack[a + run] = sums
        target[a + run] = end[run]
        first = np.flatnonzero(~is_straight)[:1]          # as arrays: int64 sums wrap silently
        if len(first):
            carry_end, carry_sum = a + int(first[0]), (after[:1] - after[first])[0]
        else:
            carry_sum = after[0]
    return slack


# Vertices per chunk of the straight-run checks: their temporaries stay small and in cache
# (memory new to a process costs the kernel a fault and a zeroed page on first write).
SCAN_CHUNK = 1 << 16


def _straight(one_way, target):
    """Where a vertex is one-way and its target is the id after it (a chunk at a time)."""
    straight = np.empty(len(target), bool)
    for a, b in _chunks(len(target)):
        np.equal(target[a:b], np.arange(a + 1, b + 1, dtype=target.dtype), out=straight[a:b])
    straight &= one_way
    return straight


def _chunks(n):
    """(a, b) bounds of the SCAN_CHUNK-sized chunks of n vertices."""
    return ((a, min(a + SCAN_CHUNK, n)) for a in range(0, n, SCAN_CHUNK))


def _row_chunks(indptr, dtype):
    """(first edge, end edge, each edge's row as dtype) of the rows of a CSR, about SCAN_CHUNK
    edges at a time."""
    bounds = arrays.chunk_bounds(indptr, SCAN_CHUNK).tolist()
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield int(indptr[a]), int(indptr[b]), np.repeat(np.arange(a, b, dtype=dtype), np.diff(indptr[a:b + 1]))


def _jump(one_way, target, slack):
    """Pointer jumping: each one-way vertex's target becomes the first vertex of its run that is
    not one-way, its slack the weights up to it; returns the slacks (int64 where a sum did not
    fit their dtype: they widen once, and the pass goes on).

    Each pass doubles the hops made (log2 of the longest run's length in passes), over the
    vertices still pointing at a one-way vertex, a chunk at a time: their ids (in target's
    dtype) and the gathers' temporaries stay small.  A chunk may read targets that an earlier
    chunk of the same pass already moved on: slack and target move on together, so that only
    jumps further.  Whole-array passes would write their temporaries over every vertex in
    memory new to the process, which costs more than the jumping itself.
    """
    jumping = _ids(one_way & one_way[target], target.dtype)
    for _ in range(len(target).bit_length() + 1):
        if not len(jumping):
            return slack
        still = []
        for a in range(0, len(jumping), SCAN_CHUNK):
            ids = jumping[a:a + SCAN_CHUNK]
            v = as_index(ids)
            t = as_index(target[v])
            a, b = slack[v], slack[t]
            sums = a + b
            if sums.dtype.kind == "u" and (sums < a).any():      # an unsigned sum wrapped
                slack, sums = slack.astype(np.int64), a.astype(np.int64) + b
            slack[v] = sums
            t = as_index(target[t])
            target[v] = t
            still.append(ids[one_way[t]])
        jumping = np.concatenate(still)
    if len(jumping):
        raise ValueError("the graph has a cycle of one-way vertices")
    return slack


def _ids(mask, dtype):
    """np.flatnonzero(mask) as `dtype`, a chunk at a time (no int64 array of them all)."""
    return np.concatenate([np.flatnonzero(mask[a:a + SCAN_CHUNK]).astype(dtype) + a
                           for a in range(0, len(mask), SCAN_CHUNK)] + [np.zeros(0, dtype)])


def _has_long_run(straight):
    """Whether LONG_RUN or more straight vertices come in a row (a chunk at a time)."""
    before = 0            # straight vertices in a row at the end of the chunks so far
    for a in range(0, len(straight), SCAN_CHUNK):
        chunk = straight[a:a + SCAN_CHUNK]
        breaks = np.flatnonzero(~chunk)
        if not len(breaks):
            before += len(chunk)
        elif (before + breaks[0] >= LONG_RUN or (len(breaks) > 1 and np.diff(breaks).max() > LONG_RUN)):
            return True
        else:
            before = len(chunk) - 1 - int(breaks[-1])
        if before >= LONG_RUN:
            return True
    return False


def with_remote_edges(comm, g, src, owner):
    """Local indices of this rank's vertices with an edge stored on another analysis rank.

    Collective.  `src` are the sources of this rank's edges that another rank owns,
    `owner` their owners: each rank tells the owners (once).  Such a vertex is not
    one-way, whatever its edges stored here: a distributed Bypass keeps it.
    """
    (remote,) = exchange.send_rows(comm, owner, [src])
    has_remote = np.zeros(len(g.time), bool)      # a mask, not a sort of millions of repeats
    has_remote[g.local_index(remote)] = True
    return np.flatnonzero(has_remote)


def add_hub_edges(indptr, src, weight, hub_edges):
    """(src, weight) of a part's CSR with Graph.remote_hub_edges added as the edges into its last
    vertex, which stands for the other ranks' hubs (a sink) and whose row is last and empty;
    indptr is changed in place."""
    to_hub, slack = hub_edges
    indptr[-1] += len(to_hub)
    return (np.concatenate((src, to_hub.astype(src.dtype, copy=False))),
            np.concatenate((weight, slack.astype(weight.dtype, copy=False))))


def _check_exact(ns, what, where=True):
    """The searches keep slacks and distances below 2**53 ns, where float64 holds them exactly."""
    largest = ns.max(initial=0, where=where)
    if largest >= EXACT_NS:
        raise ValueError("%s of %d ns does not fit a float64 exactly" % (what, largest))


class Reversed:
    """A CSR of incoming edges read as the reversed graph, searched from the sink: in one sweep
    in topological order (``paths.dag``, C) where that can run, else by csgraph's Dijkstra."""

    def __init__(self, n, indptr, src, weight):
        _check_exact(weight, "a slack")
        self.n = n
        self.index_type = np.int32 if len(src) < 2 ** 31 - 1 and n < 2 ** 31 - 1 else np.int64
        self.indptr = indptr.astype(self.index_type, copy=False)
        self.indices = src.astype(self.index_type, copy=False)     # Bypass's are int32 already
        # uint32 slacks as they are (the search reads them so): no int64 copy of a part's edges.
        self.weight = weight if weight.dtype == np.uint32 else weight.astype(np.int64, copy=False)
        self.spreads = np.diff(self.indptr) > 0        # vertices with edges to follow (a byte each)

    def search(self, sources, offsets=None, whole=False):
        """int64 distances to the nearest source, each source starting at its offset (default 0);
        `whole`: the sources reach most of the graph, which is swept whole (``dag.search``).

        With offsets, a virtual vertex n has an edge of that weight to each
        source, and the search starts there.  A source with no edges of its own
        to follow only gets its offset: it is left out of the search (in a
        distributed search, most sources are such vertices).
        """
        sources = np.asarray(sources, np.int64)
        offsets = np.zeros(len(sources), np.int64) if offsets is None else np.asarray(offsets, np.int64)
        spreads = self.spreads[sources]
        # Where all or none spread, no copies of the sources and offsets (millions of them in a
        # round of a distributed search, where the bypassed part often has no edges left).
        if spreads.all():
            return self._search(sources, offsets, whole)
        if spreads.any():
            dist = self._search(sources[spreads], offsets[spreads], whole)
            sources, offsets = sources[~spreads], offsets[~spreads]
        else:
            dist = self._search(sources[:0], offsets[:0])
        np.minimum.at(dist, sources, offsets)
        return dist

    def _search(self, sources, offsets, whole=False):
        n = self.n
        if not len(sources):      # nothing to search: scipy is not even imported (its import is slow)
            return np.full(n, INF, np.int64)
        dist = dag.search(n, self.indptr, self.indices, self.weight, sources, offsets, INF, whole)
        if dist is not None:
            _check_exact(dist, "a distance", dist < INF)
            return dist
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import dijkstra

        indptr, indices, data, size = self.indptr, self.indices, self.weight.astype(np.float64), n
        if offsets.any():
            size = n + 1
            indices = np.concatenate((indices, sources.astype(self.index_type)))
            data = np.concatenate((data, offsets.astype(np.float64)))
            indptr = np.concatenate((indptr, np.array([len(indices)], self.index_type)))
            sources = np.array([n], np.int64)
        matrix = csr_matrix((data, indices, indptr), shape=(size, size))
        found = dijkstra(matrix, directed=True, indices=sources, min_only=True)[:n]
        reached = np.isfinite(found)
        if reached.any() and found[reached].max() >= EXACT_NS:
            raise ValueError("a distance beyond 2**53 ns: not exact in float64")
        dist = np.full(n, INF, np.int64)
        dist[reached] = found[reached].astype(np.int64)
        return dist
