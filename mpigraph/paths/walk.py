"""From the search's labels to the critical path's segments.

The path starts at the rank start (the end of its MPI_Init) with the least
distance to the sink, lowest vertex id among equals, and follows next[] to the
sink.  A rank whose MPI_Init returned after the run's start (the earliest end
of MPI_Init) was inside MPI until then: that time is on the path, as a first
MPI_Init segment, not slack.  Each
edge u -> v of it becomes one segment ending at t(v) and starting at
t(u) + slack(u -> v): the part of the edge that counted (for a call that
waited, the time after the wait; for a message, from when the later of the
sender and the receiver was ready).  A hub is not a segment of its own:
S(r) -> H -> E(x) is rank x's call (x == r) or a message from r to x.
Times are made relative to the earliest start, like ranks.csv.
"""

import dataclasses

import numpy as np

from mpigraph.util import arrays
from mpigraph.comm.parallel import barrier_idly
from mpigraph.paths import dag, gather
from mpigraph.paths import segments as critical_path
from mpigraph.trace import functions as mf
from mpigraph.comm import owner_exchange as exchange
from mpigraph.paths.graph import INF, END
from mpigraph.util.names import Labels
from mpigraph.paths.labels import NO_NEXT


def start_vertex(g, dist, hub_dist, source_dist=None):
    """(The path's first vertex, its distance to the sink): the least, lowest id among equals.

    `source_dist` (dist of each of g.sources) replaces dist, which is then not used.
    """
    dist_to_sink = dist[g.sources] if source_dist is None else source_dist
    if len(hub_dist):            # splits: sources' distances end at their piece's hub
        piece = g.source_piece
        ends_at_hub = piece < g.n_hubs
        dist_to_sink = np.where(ends_at_hub, dist_to_sink + hub_dist[np.minimum(piece, g.n_hubs - 1)],
                                dist_to_sink)
    total = np.minimum(dist_to_sink, INF)
    best = np.lexsort((g.sources, total))[0]
    if total[best] >= INF:
        raise ValueError("no rank's start reaches the end of the run: the graph is disconnected")
    return int(g.sources[best]), int(total[best])


def chase(start, sink, nxt):
    """The vertices from start to sink along nxt (``follow``: a numpy scan per straight run, not
    a lookup per vertex; a pipelined program's path is most of its calls)."""
    firsts, lasts = [], []
    follow(nxt, 0, start, len(nxt), sink, firsts, lasts)
    path = arrays.ranges(firsts, lasts)
    if path[-1] != sink:
        raise ValueError("the path from vertex %d does not reach the sink %d" % (start, sink))
    return path


def follow(nxt, lo, v, stop, sink, firsts, lasts):
    """The vertex next[] leads to after the vertices from v along next[] (next of x: nxt[x - lo])
    while they are in [lo, stop), up to the sink: NO_NEXT after the sink, at a dead end or on a
    cycle.  Those vertices are appended to `firsts` and `lasts` as straight runs
    (``straight_end``, scanned with numpy): first to last, one run after another.  The caller
    makes the vertices of all its walks' runs at once (``arrays.ranges``): a walk of a
    bulk-synchronous run's piece is a vertex or two, and a numpy call per walk would cost more
    than the walk."""
    count = 0
    while True:
        w = straight_end(nxt, lo, v, stop, sink)
        firsts.append(v)
        lasts.append(w)
        count += w - v + 1
        if w == sink:
            return NO_NEXT
        v = int(nxt[w - lo])
        if v == NO_NEXT or not lo <= v < stop:
            return v
        if count > stop - lo:           # a cycle: the caller finds no sink and says so
            return NO_NEXT


# straight_end steps FIRST_SCAN vertices one at a time, then scans blocks of twice that, doubling
# up to LAST_SCAN: a short run costs what a Python step per vertex costs, a run of millions of
# vertices a few dozen scans.
FIRST_SCAN, LAST_SCAN = 8, 1 << 20


def straight_end(nxt, lo, v, stop, sink):
    """The last vertex w of the straight run from v: v, v + 1, ..., w, each vertex's next the id
    after it (next of x is nxt[x - lo]), w < stop, and none after the sink.

    Along a rank's calls next[] goes S -> E -> S of the next call: ids in a row.  The path
    leaves the run at w, to nxt[w - lo].
    """
    if v <= sink < stop:
        stop = sink + 1
    w = v
    for _ in range(FIRST_SCAN):         # a short run (most, off a pipeline): a few scalar steps
        if w + 1 >= stop or nxt[w - lo] != w + 1:
            return w
        w += 1
    block = 2 * FIRST_SCAN
    while w + 1 < stop:
        end = min(w + block, stop - 1)
        broken = np.flatnonzero(nxt[w - lo:end - lo] != np.arange(w + 1, end + 1))
        if len(broken):
            return w + int(broken[0])
        w, block = end, min(2 * block, LAST_SCAN)
    return w


def path_weights(g, dist, nxt, path):
    """The slack of the edge from each vertex of a whole graph's path to its next: dist[u] -
    dist[next[u]], exactly the weight of the tight edge that next_from_dist chose (dist[u] ==
    weight + dist[next[u]]); 0 for the last vertex and for hubs (every edge out of a hub has
    slack 0).  With splits a hub is the end of its piece, at distance 0 in dist.

    So no search keeps a slack per vertex (a vertex-sized array of the whole graph, and a pass
    to fill it, for the few vertices of the path)."""
    weight = np.zeros(len(path), np.int64)
    u = path[:-1]
    weight[:-1] = dist[u] - dist[nxt[u]]
    weight[path >= g.n_rank_vertices] = 0
    return weight


def segments(g, time, func, path, weight):
    """critical_path.segments of a vertex path (time and func indexed by global id, weight: the
    slack of each path vertex's edge to the next, ``path_weights``).

    The hubs leave the path before its vertices' columns are gathered: u -> H -> v is u -> v
    with u -> H's slack, since every edge out of a hub has slack 0 (``graph``).  So the columns
    are not copied again without them: a pipelined program's path holds a vertex per call,
    and a copy of its columns would add to the path stage's peak.
    """
    is_hub = path >= g.n_rank_vertices
    if is_hub.any():
        path, weight = path[~is_hub], weight[~is_hub]
    return path_segments(g, path, time[path], func[path], weight)


def path_segments(g, path, time, func, weight):
    """critical_path.segments of a vertex path without hubs, with time, func and the slack to the
    next of each path vertex (the caller's own arrays: time is made relative to the run's start in place).

    A pipelined program's path has a segment per call: each column is made
    once, in its final place, with the first MPI_Init segment's row where there is one (not
    prepended by a copy).
    """
    # Each vertex decoded once; a segment's ends are consecutive path vertices u and v.  Every
    # trace rank's first vertex id is even (S(r, k) = base[r] + 2k, E = S + 1): the side is the
    # id's last bit.
    rank = np.searchsorted(g.base, path, "right") - 1
    u_rank, v_rank = rank[:-1], rank[1:]
    compute = (u_rank == v_rank) & ((path[:-1] & 1) == END) & (path[1:] == path[:-1] + 1)
    message = u_rank != v_rank
    # The start rank still in MPI_Init after the run's start: a first segment, MPI_Init from t0.
    lead = int(time[0] > g.t0)
    n = len(path) - 1 + lead
    start = np.empty(n, np.int64)
    np.add(time[:-1], weight[:-1], out=start[lead:])
    np.minimum(start[lead:], time[1:], out=start[lead:])
    start[:lead] = g.t0
    # kind and function as codes into their few names: no Python object per segment.
    code = critical_path.KIND_CODE
    kind = np.full(n, code["mpi"], np.int8)
    kind[lead:][compute] = code["compute"]
    kind[lead:][message] = code["message"]
    names = np.append(mf.names_array(), "")        # "": compute, or a function id not known
    function = _function_code(func[1 - lead:], len(names) - 1)
    function[lead:][compute] = len(names) - 1
    peer = np.full(n, -1, np.int64)
    peer[lead:][message] = u_rank[message]
    del compute, message
    # With the lead row, the first segment is on the path's first rank and ends at its first
    # vertex: the rank and end columns are the path's own, from its first vertex.
    start -= g.t0
    end = time[1 - lead:]
    end -= g.t0
    return critical_path.segments(rank[1 - lead:], Labels(kind, critical_path.KINDS), Labels(function, names),
                                  start, end, peer)


def _function_code(func, unknown):
    """func where it is a known function id, else `unknown`."""
    return np.where((func >= 0) & (func < unknown), func, unknown)


def distributed(comm, g, labels):
    """(critical_path.segments on rank 0, None elsewhere; the path's slack) from distributed labels.

    Collective over comm.  Nothing per vertex is gathered.  The path is a chain of runs, each
    through one analysis rank's vertices along next[]: from an entry (the path's start, the
    vertex after a hub, or where another rank's run hands over) to its exit (a vertex another
    rank owns, a hub, or the end).  Every rank finds the exit of each of its vertices at once
    (``local_exits``) and rank 0 chains the entries by their exits (``_entries_on_path``): a
    fixed number of collectives, where walking run by run took a round of them per rank change
    (a pipelined program's path changes rank at nearly every message).  Then each rank walks
    its runs on the path (``_Runs``) and rank 0 joins them.
    """
    from mpi4py import MPI

    source_dist = np.full(len(g.sources), INF, np.int64)
    mine = g.owner_of(g.sources) == g.me
    source_dist[mine] = labels.dist[g.local_index(g.sources[mine])]
    comm.Allreduce(MPI.IN_PLACE, source_dist, op=MPI.MIN)
    start, slack = start_vertex(g, None, labels.hub_dist, source_dist)
    after_hub = _after_hubs(comm, g, labels)
    runs = _Runs(g, labels)
    runs.walk(_entries_on_path(comm, g, labels.next, start, after_hub))
    table = runs.gather(comm)
    if comm.Get_rank() != 0:
        return None, slack
    path, time, func, weight = table.chain(start, g.sink, after_hub, g.n_rank_vertices, len(labels.hub_dist) > 0)
    return path_segments(g, path, time, func, weight), slack


def local_exits(nxt, lo, hi, sink):
    """For each rank vertex lo .. hi - 1 (next of x: nxt[x - lo]), where its run through the
    vertices lo .. hi - 1 along next[] leaves them: ``follow``'s value, for all at once.

    Pointer jumping: each vertex points at its next while that is in the range, and the
    pointers are followed by doubling until they reach the runs' last vertices (a few dozen
    passes for runs of millions of vertices), or one pass in C (``dag.run_exits``) where that
    runs.  A cycle's vertices get NO_NEXT, as in follow."""
    n = hi - lo
    exits = dag.run_exits(nxt, lo, n, sink, NO_NEXT)
    if exits is not None:
        return exits
    step = nxt[:n]
    inside = (step >= lo) & (step < hi)
    if lo <= sink < hi:
        inside[sink - lo] = False          # a run ends at the sink
    last = np.arange(n, dtype=np.int64)
    last[inside] = step[inside] - lo
    for _ in range(n.bit_length() + 1):
        further = last[last]
        if np.array_equal(further, last):
            break
        last = further
    exits = step[last]
    exits[inside[last]] = NO_NEXT          # still inside after every doubling: a cycle
    if lo <= sink < hi:
        exits[last == sink - lo] = NO_NEXT
    return exits


def _entries_on_path(comm, g, nxt, start, after_hub):
    """The entries of the path's runs that this rank owns, in path order.  Collective.

    Each rank sends the rank vertices its runs exit to to their owners (where a run may
    begin), and every rank then sends rank 0 the exit of each of its possible entries: those
    and the path's start and the vertices after the hubs.  Rank 0 follows entry to exit from
    the start, across hubs, and sends each rank its entries back."""
    exits = local_exits(nxt, g.lo, g.hi, g.sink)
    # The runs' exits to other ranks' vertices are where next[] leaves this rank's (NO_NEXT and
    # hubs are above the rank vertices): a few of its vertices, not a unique() of every exit.
    step = nxt[:g.hi - g.lo]
    handed = arrays.unique(step[((step < g.lo) | (step >= g.hi)) & (step < g.n_rank_vertices)])
    (entries,) = exchange.send_rows(comm, g.owner_of(handed), [handed])
    known = np.append(after_hub, start)
    known = known[(known < g.n_rank_vertices)]
    entries = arrays.unique(np.concatenate((entries, known[g.owns(known)])))
    # Each rank's entries are sorted and in its own range of ids: gathered in rank order they
    # are sorted (a pipelined program's are millions: no sort of them on rank 0).
    entry, exit_ = gather.gatherv(comm, entries), gather.gatherv(comm, exits[entries - g.lo])
    path_entries = None
    if comm.Get_rank() == 0:
        path_entries = _chain_entries(entry, exit_, start, after_hub, g.n_rank_vertices)
    barrier_idly(comm)        # the other ranks wait idly for rank 0's chain
    path_entries = comm.bcast(path_entries, root=0)
    return path_entries[g.owns(path_entries)]


def _chain_entries(entry, exit_, start, after_hub, n_rank_vertices):
    """The entries from `start` along their exits (sorted `entry`, `exit_` of each), across
    hubs, up to an exit NO_NEXT or an entry not in the table: a step per run on the path, each
    a search of the sorted entries (most entries are off the path: a pipelined program's
    runs hand over at every message, and the path takes a few of them).  In C where the path
    kernel runs (``dag.chain_entries``): a pipelined program's path has hundreds of thousands of
    runs, seconds of this loop on rank 0 while the other ranks wait."""
    chained = dag.chain_entries(entry, exit_, start, after_hub, n_rank_vertices, NO_NEXT)
    if chained is not None:
        return chained
    path, v = [], start
    for _ in range(len(entry)):
        i = int(np.searchsorted(entry, v))
        if i == len(entry) or entry[i] != v:
            break
        path.append(v)
        v = int(exit_[i])
        if v != NO_NEXT and v >= n_rank_vertices:
            v = int(after_hub[v - n_rank_vertices])
        if v == NO_NEXT:
            break
    return np.array(path, np.int64)


def _after_hubs(comm, g, labels):
    """The vertex after each hub on its path to the sink, on every rank.

    With splits the labels have it (``hub_next``); without, each hub's owner
    has it in next[] and the ranks combine them.
    """
    from mpi4py import MPI

    if len(labels.hub_dist) or not g.n_hubs:
        return np.asarray(labels.hub_next, np.int64)
    hubs = np.arange(g.n_rank_vertices, g.n_vertices, dtype=np.int64)
    after = np.full(g.n_hubs, NO_NEXT, np.int64)
    mine = g.owner_of(hubs) == g.me
    after[mine] = labels.next[g.local_index(hubs[mine])]
    comm.Allreduce(MPI.IN_PLACE, after, op=MPI.MIN)
    return after


class _Runs:
    """The runs one rank walks: from an entry along next[] through the rank's own rank vertices.

    A run holds its vertices, their time, func and dist; its exit is the
    vertex after its last one (a hub, a vertex of another rank, or NO_NEXT
    after the sink or a dead end).  In C where the path kernel runs (``dag.walk_runs``): a
    pipelined program's path is hundreds of thousands of runs of a few vertices, a second or
    more of Python steps on the rank the path stays on longest, while the others wait."""

    def __init__(self, g, labels):
        self.g, self.nxt, self.dist = g, labels.next, labels.dist

    def walk(self, entries):
        """Walk a run from each entry (this rank's vertices)."""
        g = self.g
        self.entry = np.asarray(entries, np.int64)
        walked = dag.walk_runs(self.nxt, g.lo, g.hi - g.lo, g.sink, NO_NEXT, self.entry)
        self.exit, self.length, self.vertices = walked if walked is not None else self._walk_in_python()

    def _walk_in_python(self):
        """(exits, lengths, vertices) by ``follow``: its straight runs made at once."""
        g, exits, firsts, lasts, straight_runs = self.g, [], [], [], []
        for v in self.entry.tolist():
            before = len(firsts)
            exits.append(follow(self.nxt, g.lo, v, g.hi, g.sink, firsts, lasts))
            straight_runs.append(len(firsts) - before)
        firsts, lasts = np.array(firsts, np.int64), np.array(lasts, np.int64)
        # Each run's length: its straight runs' lengths added up (a run has at least one).
        straight = np.array(straight_runs, np.int64)
        lengths = np.add.reduceat(lasts - firsts + 1, np.cumsum(straight) - straight) if len(straight) else straight
        return np.array(exits, np.int64), lengths, arrays.ranges(firsts, lasts)

    def gather(self, comm):
        """Every rank's runs on rank 0 as one _RunTable (None elsewhere)."""
        index = self.vertices - self.g.lo
        mine = [self.entry, self.exit, self.length, self.vertices, self.g.time[index], self.g.func[index],
                self.dist[index]]
        # A Gatherv per column: a pipelined program's path is millions of vertices, which a
        # pickled gather would copy twice more.
        columns = [gather.gatherv(comm, column) for column in mine]
        if comm.Get_rank() != 0:
            return None
        return _RunTable(*columns)


@dataclasses.dataclass
class _RunTable:
    """All ranks' runs, one after another: entry, exit and length per run; per vertex its id,
    time, func and dist."""

    entry: np.ndarray
    exit: np.ndarray
    length: np.ndarray
    vertices: np.ndarray
    time: np.ndarray
    func: np.ndarray
    dist: np.ndarray

    def chain(self, start, sink, after_hub, n_rank_vertices, split):
        """(path, time, func, weight) from start to sink without its hubs: run after run, across
        a hub where one ends at it (u -> H -> v is u -> v: H -> v has slack 0, nothing to add).
        The runs are put in order first, then their rows taken at once (a bulk-synchronous run's
        path is a run or two per piece: thousands of runs of a vertex or two).

        weight, the slack of each vertex's edge to the next (``path_weights``): dist[u] -
        dist[v] of consecutive u and v (across a hub too: dist[H] = dist[v]), but dist[u] where
        u's run ends at a hub with splits (the end of u's piece, at distance 0); 0 at the sink."""
        first = np.concatenate(([0], np.cumsum(self.length)))
        # The runs in path order: their entries chained as the ranks' were (one run an entry).
        by_entry = np.argsort(self.entry, kind="stable")
        entries = self.entry[by_entry]
        chained = _chain_entries(entries, self.exit[by_entry], start, after_hub, n_rank_vertices)
        order = by_entry[np.searchsorted(entries, chained)]
        rows = arrays.ranges(first[order], first[order + 1] - 1)
        if not len(rows) or self.vertices[rows[-1]] != sink:
            raise ValueError("the path from vertex %d does not reach the sink %d" % (start, sink))
        dist = self.dist[rows]
        weight = np.zeros(len(rows), np.int64)
        np.subtract(dist[:-1], dist[1:], out=weight[:-1])
        if split:
            exit_ = self.exit[order]
            last = (np.cumsum(self.length[order]) - 1)[(exit_ >= n_rank_vertices) & (exit_ != NO_NEXT)]
            weight[last] = dist[last]
        return self.vertices[rows], self.time[rows], self.func[rows].astype(np.int64), weight
