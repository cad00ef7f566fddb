"""The activity graph of a run (docs/design.md, "The graph"), as columns.

Input (``PathInput``): for each trace rank an analysis rank owns, the corrected
times and function ids of its calls (call records in log order), and the
dependency edges whose destination rank it owns, as produced by the match
stage (``Dependencies``).

Vertices: call k of trace rank r gives S(r,k) = base[r] + 2k and
E(r,k) = base[r] + 2k + 1, so each trace rank's vertices, and each analysis
rank's, are one contiguous range of ids.  A global synchronisation point
(``mpigraph.paths.splits``) adds a hub vertex n_rank_vertices + h.

Edges (u -> v, weight = slack >= 0: how long before it was needed u happened):
    compute     E(r,k) -> S(r,k+1)    0
    call        S(r,k) -> E(r,k)      the call's wait: how long it waited for
                                      the latest dependency into E(r,k), within
                                      [0, its duration]
    dependency  u -> E(c)             max(0, t(S(c)) - t(u))
    hub         S(r,c_r) -> H         t(H) - t(S(r,c_r)), t(H) = the last arrival
                H -> E(r,c_r)         0
At a hub, the hub replaces the members' call edges and the collective's
N-to-N dependency edges, so every path crosses the hub and the graph splits
there exactly (the hub path S -> H -> E of a member has the call edge's slack).

A path's time is t(end) - t(start) - (its slack), so the critical path is the
path of least slack from a rank's start (end of MPI_Init; a rank that starts
after the earliest one was inside MPI_Init until then, which is on the path,
not slack) to the sink, the start of the last MPI_Finalize.  Each analysis rank keeps its vertices and their incoming
edges as CSR arrays (``Graph``): what the backward search needs.
"""

import dataclasses

import numpy as np

from mpigraph.metrics import profile as metrics
from mpigraph.paths import dag, splits, threshold
from mpigraph.match.core import Dependencies, RankCalls, group_key  # noqa: F401  (Dependencies, RankCalls: the input)
from mpigraph.comm.parallel import Ownership
from mpigraph.util import arrays
from mpigraph.comm import owner_exchange as exchange
from mpigraph.paths.model import (  # noqa: F401  (re-exported: the graph's vocabulary)
    LATE_SENDER, LATE_RECEIVER, N_TO_N, ONE_TO_N, N_TO_ONE, SCAN, KIND_NAMES,
    START, END, INF, FUNC_DTYPE, as_index, index_dtype, slack_dtype)


def _int64(values):
    return np.ascontiguousarray(values, dtype=np.int64)


@dataclasses.dataclass
class PathInput:
    """What the path stage needs on one analysis rank."""

    n_trace_ranks: int
    calls: dict                  # owned trace rank -> match.core.RankCalls
    deps: Dependencies           # the edges whose dst_rank this analysis rank owns

    def hand_over(self) -> tuple:
        """(calls, deps) for ``build`` to read; this input keeps them (it can be built again)."""
        return self.calls, self.deps


class HandedOverInput(PathInput):
    """A PathInput whose calls and edges go to the first ``build`` that reads them: the
    analysis's own (``paths.stage.graph_input``), which nothing reads again."""

    def hand_over(self) -> tuple:
        # The input lets go of its columns as it hands them over, so that the build's later
        # steps and the search, which never read them again, do not hold them (and the
        # callers' frames, which hold this input until the search returns, keep nothing).
        calls, deps = self.calls, self.deps
        self.calls = self.deps = None
        return calls, deps


@dataclasses.dataclass
class Graph:
    """One analysis rank's part of the graph: its vertices and their incoming edges.

    Local vertex i is rank vertex lo + i for i < hi - lo, then the hubs this
    rank owns (hub h is owned by analysis rank h % n_analysis).
    """

    n_analysis: int
    me: int
    base: np.ndarray             # first vertex id of each trace rank, and the total
    bounds: np.ndarray           # first rank-vertex id of each analysis rank, and the total
    source_piece: np.ndarray     # the piece of each of `sources`: how many hubs come before it
    hub_time: np.ndarray
    time: np.ndarray             # per local vertex
    func: np.ndarray             # per local vertex (-1 for hubs), FUNC_DTYPE
    indptr: np.ndarray           # incoming edges of local vertex i: indptr[i]:indptr[i+1] (index_dtype)
    src: np.ndarray              # global id of each edge's source (index_dtype)
    weight: np.ndarray           # slack of each edge (slack_dtype)
    sink: int
    sources: np.ndarray          # a start vertex per trace rank with calls
    t0: int                      # the earliest start: the path's time origin
    # The edges S(member) -> H into the hubs that other analysis ranks own, from this rank's
    # member calls: (local index of S, slack), kept only here (not in the hub owner's rows)
    # when build was asked to.  With splits a hub is a sink, so S's distance through such an
    # edge is its slack, known here: the distributed searches need not send it from the hub's
    # owner, nor keep S out of the bypass for it (``parallel_dijkstra``, ``delta_stepping``).
    # None: not kept (they are in the hub owner's rows, crossing edges like any other).
    remote_hub_edges: tuple = None
    # The hub of each of remote_hub_edges (its index among the hubs), kept with them: the pass
    # that picks next[] decides those edges here too (``labels.next_from_dist``).
    remote_hub_ids: np.ndarray = None

    @property
    def lo(self):
        return int(self.bounds[self.me])

    @property
    def hi(self):
        return int(self.bounds[self.me + 1])

    @property
    def n_rank_vertices(self):
        return int(self.base[-1])

    @property
    def n_hubs(self):
        return len(self.hub_time)

    @property
    def n_vertices(self):
        return self.n_rank_vertices + self.n_hubs

    @property
    def n_edges(self):
        """This rank's edges: its CSR's and the edges into other ranks' hubs kept only here
        (remote_hub_edges), so that the sum over ranks is the graph's for every K."""
        return len(self.src) + (len(self.remote_hub_edges[0]) if self.remote_hub_edges is not None else 0)

    @property
    def first_hub_edge(self):
        """The position of the first edge into a hub: the hubs' rows come after the rank vertices'."""
        return int(self.indptr[self.hi - self.lo])

    # The four maps below take the rank vertices' way for every id, then redo only the hubs
    # (ids from n_rank_vertices on): the few of millions of edges' ends, so no division or
    # np.where over all of them (passes over every edge are what the path stage is made of).

    def _hubs_among(self, vertices):
        """Positions of the hub ids among `vertices`, and their hub numbers."""
        at = np.flatnonzero(vertices >= self.n_rank_vertices)
        return at, vertices[at] - self.n_rank_vertices

    def owner_of(self, vertices):
        """Analysis rank owning each global vertex id (hub h: rank h % n_analysis)."""
        vertices = _int64(vertices)
        owner = np.searchsorted(self.bounds, vertices, "right") - 1
        at, hub = self._hubs_among(vertices)
        owner[at] = hub % self.n_analysis
        return owner

    def owns(self, vertices):
        """Whether this analysis rank owns each global vertex id (owner_of(v) == me, without
        owner_of's search: one pass over millions of edges' sources, in their own dtype)."""
        vertices = np.asarray(vertices)
        if self.n_analysis == 1:
            return np.ones(len(vertices), bool)
        owned = (vertices >= self.lo) & (vertices < self.hi)      # False for hubs: hi <= n_rank_vertices
        at, hub = self._hubs_among(vertices)
        owned[at] = hub % self.n_analysis == self.me
        return owned

    def local_index(self, vertices):
        """Local index of owned global vertex ids, int32 where the ids are (the graph's own
        are, where they fit: index_dtype), else int64."""
        vertices = np.asarray(vertices)
        if vertices.dtype != np.int32:
            vertices = _int64(vertices)
        local = vertices - self.lo
        at, hub = self._hubs_among(vertices)
        local[at] = (self.hi - self.lo) + hub // self.n_analysis
        return local

    def global_id(self, local):
        """Global id of local vertex indices (the inverse of local_index): computed for the
        vertices asked about, not looked up in a table of every local vertex."""
        local = _int64(local)
        n_rows = self.hi - self.lo
        ids = local + self.lo
        at = np.flatnonzero(local >= n_rows)
        ids[at] = self.n_rank_vertices + self.me + self.n_analysis * (local[at] - n_rows)
        return ids

    def decode(self, vertices):
        """(trace rank, call, START/END) of rank vertex ids."""
        vertices = _int64(vertices)
        rank = np.searchsorted(self.base, vertices, "right") - 1
        offset = vertices - self.base[rank]
        return rank, offset // 2, offset % 2


# ---- building -------------------------------------------------------------------

def build(comm, inp, threshold_ns=0, keep_remote_hub_edges=False):
    """This analysis rank's Graph, with its remote_hub_edges if asked (what the distributed
    searches with splits use).  Collective over comm (the analysis ranks)."""
    n_analysis, me = comm.Get_size(), comm.Get_rank()
    ownership = Ownership(inp.n_trace_ranks, n_analysis)
    mine = list(ownership.ranks_of(me))
    calls, deps_in = inp.hand_over()
    blocks = {r: _merged(calls.get(r), threshold_ns) for r in mine}
    del calls
    base = _bases(comm, inp.n_trace_ranks, blocks)
    bounds = base[[ownership.first_of(a) for a in range(n_analysis + 1)]]
    lo = int(bounds[me])
    time = _interleave([blocks[r][0] for r in mine], [blocks[r][1] for r in mine])
    func = np.repeat(np.concatenate([blocks[r][2] for r in mine] + [np.zeros(0, np.int64)]).astype(FUNC_DTYPE), 2)

    deps = _dependency_edges(comm, ownership, deps_in, blocks, base, lo, time, merged=threshold_ns > 0)
    del deps_in
    hubs = splits.find_sync_points(comm, inp.n_trace_ranks, base, lo, time, deps)
    deps = _not_replaced_by_hubs(deps, hubs)
    ids = index_dtype(int(base[-1]) + len(hubs.time))        # every vertex id, local ones too
    edges = _local_edges(mine, base, lo, time, deps, hubs, ids)
    hub_edges, remote_hub_edges = _hub_edges(comm, mine, base, lo, time, hubs, len(time), ids,
                                             keep_remote_hub_edges)
    edges += hub_edges
    del deps          # not held through _csr, the build's peak
    sink, sources, t0 = _ends(comm, mine, blocks, base, time, lo)
    # The member-call table (points x owned trace ranks: as large as this rank's calls in a
    # bulk-synchronous run) is let go of here: what the path needs of it is the sources' pieces.
    source_piece, hub_time = splits.pieces(comm, inp.n_trace_ranks, base, hubs, sources), hubs.time
    del hubs
    n_local = len(time) + len(range(me, len(hub_time), n_analysis))
    indptr, src, weight = _csr(n_local, edges, ids, _slack_dtype(comm, edges))
    del edges
    remote_hub_ids = None
    if remote_hub_edges is not None:
        s_local, slack, remote_hub_ids = remote_hub_edges
        remote_hub_edges = (s_local, slack.astype(weight.dtype))
    return Graph(n_analysis, me, base, bounds, source_piece, hub_time,
                 np.concatenate((time, hub_time[me::n_analysis])),
                 np.concatenate((func, np.full(n_local - len(time), -1, FUNC_DTYPE))),
                 indptr, src, weight, sink, sources, t0, remote_hub_edges, remote_hub_ids)


def _slack_dtype(comm, groups):
    """Collective: slack_dtype of the slacks of every rank's edge groups (one dtype on all
    ranks: a gathered graph's parts are put together as they come)."""
    from mpi4py import MPI

    bounds = np.array([0, 0], np.int64)         # -(least slack), greatest slack
    for _, _, weight in groups:
        if len(weight):
            bounds = np.maximum(bounds, [-weight.min(), weight.max()])
    comm.Allreduce(MPI.IN_PLACE, bounds, op=MPI.MAX)
    return slack_dtype(-int(bounds[0]), int(bounds[1]))


def _csr(n, groups, src_dtype=np.int64, weight_dtype=np.int64):
    """(indptr, src, weight) of edges given as groups of (local dst, src, weight) columns, src
    as src_dtype, weight as weight_dtype, indptr as index_dtype of the edges' count.

    The same as a stable sort of the concatenated groups by dst, without
    sorting: each group is placed one sorted run of it at a time, in order
    (``_sorted_runs``), a run whose dst strictly increase (compute, call,
    hub-out edges) one edge per row, a run whose dst only do not decrease
    (hub-in edges, one run per sending rank) by the rows' lengths.  A run is placed a chunk
    of CSR_CHUNK edges at a time, its positions as intp (``as_index``): the temporaries stay
    in the caches, and no index is converted inside numpy again.  The weights start at zero,
    and the zero weights of ``_zeros`` (compute and hub-out edges) are not written.

    `groups` is emptied: a run's edges are let go of once placed, so the output's pages are
    written as the input's are freed, not on top of all of them (``_csr`` is the build's peak,
    and every page by which a peak grows is memory new to the process, dear to write).

    Where the path kernel runs, a counting sort in C places them instead (``dag.csr``: the same
    CSR, a group at a time, with no runs and no sort of a group out of order).
    """
    placed = dag.csr(n, groups, index_dtype, src_dtype, weight_dtype, _is_zeros)
    if placed is not None:
        return placed
    runs = []
    while groups:
        runs += _sorted_runs(*groups.pop(0))
    indptr = np.zeros(n + 1, index_dtype(sum(len(run.dst) for run in runs)))
    counts = indptr[1:]               # each row's count, summed in place into indptr's rows
    one = counts.dtype.type(1)        # add.at's fast loop wants the array's own dtype
    for run in runs:
        if run.within is None:
            np.add.at(counts, run.rows, one)
        else:
            counts[run.rows] += run.lengths
    np.cumsum(counts, out=counts)
    fill = indptr[:-1].copy()         # the next free place in each row
    src = np.empty(int(indptr[-1]), src_dtype)
    weight = np.zeros(int(indptr[-1]), weight_dtype)
    while runs:
        run = runs.pop(0)
        zero = _is_zeros(run.weight)
        for a in range(0, len(run.dst), CSR_CHUNK):
            b = a + CSR_CHUNK
            dst = as_index(run.dst[a:b])
            place = as_index(fill[dst])
            if run.within is None:    # one edge per row: its next free place is the one after
                fill[dst] = place + 1
            else:                     # the rows' places move on once the whole run is placed
                place += run.within[a:b]
            src[place] = run.src[a:b]
            if not zero:
                weight[place] = run.weight[a:b]
        if run.within is not None:
            fill[run.rows] += run.lengths
        del run
    return indptr, src, weight


# Edges per chunk of _csr's placement.
CSR_CHUNK = 1 << 16


# A group of more sorted runs than this (dependency edges, in match order) is sorted instead.
MAX_RUNS = 64


@dataclasses.dataclass
class _Run:
    """Edges whose dst do not decrease: their rows, each row's length, each edge's place in its row."""

    dst: np.ndarray
    src: np.ndarray
    weight: np.ndarray
    rows: np.ndarray
    lengths: object                   # 1 when dst strictly increase, else an array per row
    within: object                    # None when dst strictly increase


def _sorted_runs(dst, src, weight):
    """A group of edges as _Runs whose concatenation is the group stably sorted by dst."""
    cuts = np.flatnonzero(dst[1:] < dst[:-1]) + 1
    if len(cuts) >= MAX_RUNS:
        order = np.argsort(dst, kind="stable")
        dst, src, weight = dst[order], src[order], weight[order]
        cuts = cuts[:0]
    bounds = [0] + cuts.tolist() + [len(dst)]
    return [_run(dst[a:b], src[a:b], weight[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _run(dst, src, weight):
    if len(dst) < 2 or bool((dst[1:] > dst[:-1]).all()):
        return _Run(dst, src, weight, dst, 1, None)
    row_start, lengths = arrays.runs(dst)
    within = np.arange(len(dst), dtype=np.int64) - np.repeat(row_start, lengths)
    return _Run(dst, src, weight, dst[row_start], lengths, within)


def _merged(calls, threshold_ns):
    """(start, end, func, block_of) of one rank's calls after the threshold."""
    if calls is None:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    return threshold.merge_calls(calls.start_ns, calls.end_ns, calls.func, threshold_ns)


def _bases(comm, n_trace_ranks, blocks):
    from mpi4py import MPI

    counts = np.zeros(n_trace_ranks, np.int64)
    for r, block in blocks.items():
        counts[r] = len(block[0])
    comm.Allreduce(MPI.IN_PLACE, counts, op=MPI.SUM)
    return np.concatenate(([0], 2 * np.cumsum(counts))).astype(np.int64)


def _interleave(starts, ends):
    starts = np.concatenate(starts + [np.zeros(0, np.int64)])
    ends = np.concatenate(ends + [np.zeros(0, np.int64)])
    time = np.empty(2 * len(starts), np.int64)
    time[0::2], time[1::2] = starts, ends
    return time


def _block_index(blocks, ranks, calls, what):
    """Block (merged call) index of (rank, call) pairs of owned ranks; ValueError when out of range."""
    ranks, calls = np.asarray(ranks), _int64(calls)
    owned = sorted(blocks)
    block_of = [blocks[r][3] for r in owned]
    count = np.zeros(int(max(owned[-1] + 1, ranks.max(initial=-1) + 1)) if owned else
                     int(ranks.max(initial=-1) + 1), np.int64)
    first = np.zeros(len(count), np.int64)
    if owned:
        count[owned] = [len(b) for b in block_of]
        first[owned] = np.concatenate(([0], np.cumsum(count[owned])[:-1]))
    # One pass of each check over millions of edges (ranks past the owned ones have count 0).
    bad = ranks < 0 if len(ranks) and ranks.min() < 0 else (calls < 0) | (calls >= count[ranks])
    if bad.any():
        r, c = int(ranks[bad][0]), int(calls[bad][0])
        raise ValueError("%s: trace rank %d has %d calls, no call %d"
                         % (what, r, count[r] if 0 <= r < len(count) else 0, c))
    if all(len(b) == 0 or b[-1] == len(b) - 1 for b in block_of):
        return calls      # no calls merged (no threshold): each call is its own block
    flat = np.concatenate(block_of + [np.zeros(0, np.int64)])
    return flat[first[ranks] + calls]


@dataclasses.dataclass
class DependencyEdges:
    """Dependencies in vertex ids (merged calls), with their source times."""

    src: np.ndarray
    dst: np.ndarray              # always an E vertex
    t_src: np.ndarray
    kind: np.ndarray
    dst_rank: np.ndarray
    dst_call: np.ndarray


def _dependency_edges(comm, ownership, deps, blocks, base, lo, time, merged=False):
    """Map dependencies to vertex ids; fetch each source's time from its owner, unless the match
    stage gave it (``Dependencies.src_start``) and no calls merge: then the id is the source
    call's own vertex (base[rank] + 2 call), its time that start, and nothing travels (a
    pipeline's messages all come from another analysis rank)."""
    dst_call = _block_index(blocks, deps.dst_rank, deps.dst_call, "dependency destination")
    dst = 2 * dst_call
    dst += base[deps.dst_rank]
    dst += END
    if ((deps.src_vertex != START) & (deps.src_vertex != END)).any():
        raise ValueError("dependency src_vertex must be 0 (start) or 1 (end)")
    mine = ownership.ranks_of(comm.Get_rank())
    away = (deps.src_rank < mine.start) | (deps.src_rank >= mine.stop)
    told = None
    if deps.src_start is not None and not merged:
        # Every source start the match gave, this rank's own too: a lookup of its vertex's
        # time here would find that same start, after finding the distinct sources first.
        told = deps.src_vertex == START
        away &= ~told
    if told is None or not told.any():
        src, t_src = _asked_sources(comm, ownership, deps, None, away, blocks, base, lo, time)
    else:
        src, t_src = np.empty(len(dst), np.int64), np.empty(len(dst), np.int64)
        asked = np.flatnonzero(~told)
        src[asked], t_src[asked] = _asked_sources(comm, ownership, deps, asked, away[asked], blocks, base, lo, time)
        told = np.flatnonzero(told)
        src[told] = base[deps.src_rank[told]] + 2 * deps.src_call[told] + START
        t_src[told] = deps.src_start[told]
    keep = src != dst     # a call merged with its own releaser: no edge
    if keep.all():        # always without a threshold: no copy of every column
        return DependencyEdges(src, dst, t_src, deps.kind, deps.dst_rank, dst_call)
    return DependencyEdges(src[keep], dst[keep], t_src[keep], deps.kind[keep], deps.dst_rank[keep],
                           dst_call[keep])


def _asked_sources(comm, ownership, deps, rows, away, blocks, base, lo, time):
    """(vertex id, time) of the sources of deps' edges `rows` (None: all), from their owners
    (the owned ones here).  Collective.  `away`: of those rows, which another rank owns."""

    def answer(query):
        rank, call, side = query
        vertex = base[rank] + 2 * _block_index(blocks, rank, call, "dependency source") + side
        return [vertex, time[vertex - lo]]

    columns = [deps.src_rank, deps.src_call, deps.src_vertex]
    if rows is not None:
        columns = [c[rows] for c in columns]
    # Ask once per distinct source event that another rank answers: the members of a
    # collective share theirs.  This rank's own are looked up here, however often they repeat.
    heads, inverse = _distinct_rows(columns, away)
    src_rank, src_call, src_vertex = (c[heads] for c in columns)
    src, t_src = exchange.ask_owners(comm, ownership.owner_of(src_rank), [src_rank, src_call, src_vertex], answer)
    return src[inverse], t_src[inverse]


def _distinct_rows(columns, away):
    """(a row of each distinct row of the int64 columns, each row's index among those), where
    rows not `away` (a mask) may repeat among those.

    Repeats next to each other (a collective's members in a row) cost one comparison; of the
    rest, only the rows `away` (answered by another rank: each distinct one travels once) are
    sorted, as one int64 key per row (``match.core.group_key``).
    """
    n = len(columns[0])
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    change = np.zeros(n, bool)
    change[0] = True
    for c in columns:
        change[1:] |= c[1:] != c[:-1]
    first = np.flatnonzero(change)
    run = np.cumsum(change) - 1
    del change
    sorted_heads = np.flatnonzero(away[first])
    if not len(sorted_heads):
        return first, run
    _, pick, inverse = arrays.unique_inverse(group_key([c[first[sorted_heads]] for c in columns]))
    kept = ~away[first]                          # the heads that stand for their rows
    kept[sorted_heads[pick]] = True
    head_id = np.cumsum(kept) - 1
    head_id[sorted_heads] = head_id[sorted_heads[pick]][inverse.reshape(-1)]
    return first[kept], head_id[run]


def _not_replaced_by_hubs(deps, hubs):
    """deps without the N-to-N edges of the hubs' collectives, which the hubs replace.

    They end in the members' calls, whose call edges the hubs replace too: the calls' waits
    that they give are not read.  A bulk-synchronous run has one per member call, the graph
    none of them."""
    keep = ~splits.edges_of(deps, hubs.keys)
    if keep.all():
        return deps
    return DependencyEdges(*(getattr(deps, f.name)[keep] for f in dataclasses.fields(DependencyEdges)))


def _local_edges(mine, base, lo, time, deps, hubs, ids):
    """(local dst, global src, weight) arrays of the compute, call and dependency edges (deps:
    the hubs' own N-to-N edges left out); the compute and call edges' ids as `ids`, the vertex
    ids' dtype, and their zero weights a broadcast scalar: not 8 bytes an edge each."""
    n = len(time)
    starts = np.arange(0, n, 2, dtype=ids)                 # local index of every S
    rank_ends = np.zeros(n // 2, bool)                     # the last call of each rank
    for r in mine:
        first, last = (base[r] - lo) // 2, (base[r + 1] - lo) // 2
        if last > first:
            rank_ends[last - 1] = True
    is_member = _members(base, lo, hubs.calls, mine, n // 2)        # hubs.calls: the owned ranks' columns

    t_start_dst = time[deps.dst - 1 - lo]
    slack = np.maximum(0, t_start_dst - deps.t_src)
    wait = np.zeros(n // 2, np.int64)
    np.maximum.at(wait, (deps.dst - lo) // 2, deps.t_src - t_start_dst)
    wait = np.clip(wait, 0, time[1::2] - time[0::2])

    compute = ~rank_ends
    call = ~is_member
    s_compute, s_call = starts[compute], starts[call]
    return [
        (s_compute + 2, s_compute + ids(1 + lo), _zeros(len(s_compute))),
        (s_call + 1, s_call + ids(lo), wait[call]),
        (deps.dst - lo, deps.src, slack),
    ]


# Points per block of _members' pass over the member-call table.
MEMBER_ROWS = 64


def _members(base, lo, owned, mine, n_calls):
    """Mask of this rank's n_calls local calls that are members of a point (owned: the member-call
    table of the owned trace ranks `mine`).  The table is read a block of rows at a time, each
    row's owned ranks side by side: not a strided column per rank (a strided read touches a
    cache line per element), and the temporaries are a block's."""
    is_member = np.zeros(n_calls, bool)
    first = ((base[mine] - lo) // 2).astype(index_dtype(n_calls))   # each owned rank's first call
    for a in range(0, len(owned), MEMBER_ROWS):
        is_member[owned[a:a + MEMBER_ROWS] + first] = True
    return is_member


def _hub_edges(comm, mine, base, lo, time, hubs, n_rank_local, ids, keep_remote):
    """(edge groups: H -> E(member), kept here, and S(member) -> H, sent to the hub's owner;
    with `keep_remote`, Graph.remote_hub_edges and remote_hub_ids: the latter's (local S, slack,
    hub) where another rank owns the hub, kept here instead of sent, else None).  Vertex ids
    as `ids`, their dtype."""
    n_hubs = len(hubs.time)
    no_hub_edges = (np.zeros(0, ids), np.zeros(0, np.int64), np.zeros(0, np.int64)) if keep_remote else None
    if not n_hubs:            # the same on every rank (find_sync_points): no allreduce to learn it
        return [], no_hub_edges
    mine = np.asarray(mine, np.int64)
    # S of each owned rank's member call, (hubs, owned ranks): whole arrays, no loop over ranks,
    # made in place (a bulk-synchronous run has a member per call).
    s_member = hubs.calls.astype(ids)        # the owned trace ranks' columns
    s_member *= ids(2)
    s_member += base[mine].astype(ids)
    hub_ids = np.arange(n_hubs, dtype=ids)
    # H -> E(member), rank by rank: the E ids only increase, one sorted run for _csr.
    e_member = s_member.T.flatten()
    e_member += ids(1 - lo)
    outs = (e_member, np.tile(hub_ids + ids(base[-1]), len(mine)), _zeros(s_member.size))
    # S(member) -> H hub-major, each hub's members in trace rank order: every sender's rows arrive
    # sorted by hub, and _csr places them without sorting (in the same order as a stable sort would).
    s_member -= ids(lo)                           # local S, (hubs, owned ranks)
    weight = time[s_member]                       # t(S(member)); the edge's: t(H) - t(S), at least 0
    np.subtract(hubs.time[:, None], weight, out=weight)
    np.maximum(weight, 0, out=weight)
    n_analysis, me = comm.Get_size(), comm.Get_rank()
    if not keep_remote:
        s_member += ids(lo)
        hub = np.repeat(hub_ids, len(mine))
        hub, s_member, weight = exchange.send_rows(comm, hub % ids(n_analysis), [hub, s_member.ravel(), weight.ravel()])
        return [outs, (ids(n_rank_local) + hub // ids(n_analysis), s_member, weight)], None
    # The distributed searches with splits read an edge into another rank's hub only here, as
    # Graph.remote_hub_edges (the hub is a sink: the edge's slack is S's distance), and next[]
    # decides it here too: the hub's owner would never read a copy, so none is sent (the exchange
    # carried (K-1)/K of a bulk-synchronous run's calls).  The joined searches of dijkstra and
    # delta-stepping, and the searches without splits, keep_remote False, read the hubs' rows
    # whole on their owners.  Hub h is analysis rank h % K's: this rank's hubs are every K-th row
    # of the (hubs, owned ranks) arrays (with one analysis rank, all of them: no copy).
    remote = np.arange(n_hubs) % n_analysis != me
    remote_hub_edges = (s_member[remote].ravel(), weight[remote].ravel(),
                        np.repeat(np.flatnonzero(remote), len(mine)))
    s_member, weight = s_member[me::n_analysis], weight[me::n_analysis]
    local_hub = np.repeat(np.arange(n_rank_local, n_rank_local + len(s_member), dtype=ids), len(mine))
    s_member += ids(lo)
    return [outs, (local_hub, s_member.ravel(), weight.ravel())], remote_hub_edges


def _zeros(n):
    """n zero weights as one broadcast int64: _csr reads them (``_is_zeros``), nothing writes them."""
    return np.broadcast_to(np.zeros(1, np.int64), (n,))


def _is_zeros(weight):
    """Whether a group's weights are ``_zeros``': one value broadcast (stride 0), and that 0."""
    return weight.strides == (0,) and not weight[:1].any()


def _ends(comm, mine, blocks, base, time, lo):
    """(sink, start vertex per rank, earliest start time: the path's time origin)."""
    rows = []
    for r in mine:
        func = blocks[r][2]
        if not len(func):
            continue
        inits = np.flatnonzero(metrics.IS_INIT[func])
        finals = np.flatnonzero(metrics.IS_FINALIZE[func])
        source = base[r] + (2 * inits[0] + END if len(inits) else START)
        sink = base[r] + (2 * finals[-1] + START if len(finals) else 2 * (len(func) - 1) + END)
        rows.append((r, int(source), int(time[source - lo]), int(sink), int(time[sink - lo])))
    rows = sorted(row for part in comm.allgather(rows) for row in part)
    if not rows:
        raise ValueError("no MPI calls in the run: no critical path")
    ranks, sources, t_sources, sinks, t_sinks = (np.array(c, np.int64) for c in zip(*rows))
    last = np.lexsort((ranks, -t_sinks))[0]    # the latest sink; the lowest rank among equals
    t0 = int(t_sources.min())
    return int(sinks[last]), sources, t0
