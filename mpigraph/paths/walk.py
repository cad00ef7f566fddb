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

import numpy as np

from mpigraph.util import arrays
from mpigraph.comm.parallel import barrier_idly
from mpigraph.paths import dag, gather
from mpigraph.paths import segments as critical_path
from mpigraph.trace import functions as mf
from mpigraph.comm import owner_exchange as exchange
from mpigraph.paths.graph import INF, END
from mpigraph.util.names import Labels, rows_of
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
    """The vertices from start to sink along nxt: one C loop (``dag.walk_runs``, a run from one
    entry through every vertex), else ``follow``'s numpy scan per straight run.  A pipelined
    program's path is most of its calls, in runs of a few vertices between its messages: a
    Python step per run was a second for PRK p2p's 2.4 M segments."""
    found = dag.walk_runs(nxt, 0, len(nxt), sink, NO_NEXT, np.array([start], np.int64))
    if found is not None:
        path = found[2]
    else:
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
    prepended by a copy).  ``_pair_segments`` makes the same rows from a part's vertex pairs
    (the distributed walk); tests/path_mpi_check.py compares the two algorithms' paths row by row.
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
    """(this analysis rank's part of the critical path's segments, the path's slack) from
    distributed labels.  Collective over comm.

    Nothing per vertex is gathered, and the path is not either.  The path is a chain of runs,
    each through one analysis rank's vertices along next[]: from an entry (the path's start, the
    vertex after a hub, or where another rank's run hands over) to its exit (a vertex another
    rank owns, a hub, or the end).  Every rank finds the exit of each of its vertices at once
    (``local_exits``), rank 0 chains the entries by their exits and every rank learns the chain
    (``_entries_on_path``): a fixed number of collectives, where walking run by run took a round
    of them per rank change.  Then each rank walks its runs on the path and makes the segments
    ending at their vertices (``_Runs.part``): a pipelined program's path is most of its calls,
    which one rank gathering, joining and sending back out was the analysis's rank-0 funnel.
    """
    from mpi4py import MPI

    source_dist = np.full(len(g.sources), INF, np.int64)
    mine = g.owner_of(g.sources) == g.me
    source_dist[mine] = labels.dist[g.local_index(g.sources[mine])]
    comm.Allreduce(MPI.IN_PLACE, source_dist, op=MPI.MIN)
    start, slack = start_vertex(g, None, labels.hub_dist, source_dist)
    after_hub = _after_hubs(comm, g, labels)
    chain = _entries_on_path(comm, g, labels.next, start, after_hub)
    runs = _Runs(g, labels)
    runs.walk(chain, np.flatnonzero(g.owns(chain)))
    return runs.part(comm, len(labels.hub_dist) > 0), slack


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
    """The entries of the path's runs, in path order, on every rank.  Collective.

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
    return comm.bcast(path_entries, root=0)


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

    def walk(self, chain, mine):
        """Walk the runs of the path's `chain` of entries (every rank's) at positions `mine` (this
        rank's, in path order)."""
        g = self.g
        self.chain, self.mine = chain, mine
        self.entry = np.asarray(chain[mine], np.int64)
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

    def part(self, comm, split):
        """This rank's part of the path's segments: the segment ending at each vertex of its runs
        (at the path's first vertex, the MPI_Init segment where there is one), merged as one whole
        path's would be (``critical_path.segments``), each with its order on the whole path.
        Collective.

        A segment u -> v takes u's time and the slack of its edge to v, dist[u] - dist[v]
        (``path_weights``; across a hub too, dist[H] = dist[v]; with splits dist[u] where u's run
        ends at a hub, the end of its piece).  At the first vertex of a run u is the last of the
        run before it on the path, which its rank sends."""
        g, n_chain = self.g, len(self.chain)
        index = self.vertices - g.lo
        vertex, time, func, dist = self.vertices, g.time[index], g.func[index], self.dist[index]
        self._check_reaches_sink(comm)
        first = np.cumsum(self.length) - self.length          # each run's first row
        # u's of the path's first vertex (no segment ends there): itself, so every row is defined.
        u, u_time, weight = vertex.copy(), time.copy(), np.zeros(len(vertex), np.int64)
        u[1:], u_time[1:] = vertex[:-1], time[:-1]
        np.subtract(dist[:-1], dist[1:], out=weight[1:])
        handed = self.mine > 0
        prev, prev_time, prev_dist, prev_at_hub = self._runs_before(comm, split)
        at = first[handed]
        u[at], u_time[at] = prev, prev_time
        weight[at] = np.where(prev_at_hub, prev_dist, prev_dist - dist[at])
        starts_path = len(self.mine) and self.mine[0] == 0
        lead = int(bool(starts_path) and time[0] > g.t0)
        columns = _pair_segments(g, u, u_time, weight, vertex, time, func)
        if lead:                # the start rank still in MPI_Init after the run's start: MPI_Init from t0
            columns = _with_lead_row(g, columns, vertex[0], time[0], func[0])
        # The path's first vertex ends no segment (but the MPI_Init one): its row is dropped.
        rows = slice(int(bool(starts_path) and not lead), None)
        run = np.repeat(np.arange(len(self.mine)), self.length)[rows]
        # A row follows the one before it on the path inside a run, and across two runs that
        # follow each other in the chain.
        follows = (run[1:] == run[:-1]) | (self.mine[run[1:]] == self.mine[run[:-1]] + 1)
        columns = [rows_of(c, rows) for c in columns]     # views
        return self._merged(comm, columns, run, follows, n_chain)

    def _check_reaches_sink(self, comm):
        """Raise ValueError on every rank when the path's last run does not end at the sink."""
        from mpi4py import MPI

        g, last = self.g, len(self.chain) - 1
        mine_last = len(self.mine) and self.mine[-1] == last
        bad = bool(mine_last and self.vertices[-1] != g.sink)
        if comm.allreduce(bad, op=MPI.LOR):
            raise ValueError("the path from vertex %d does not reach the sink %d" % (self.chain[0], g.sink))

    def _runs_before(self, comm, split):
        """For each of this rank's runs after the path's first: the last vertex of the run before
        it on the path, that vertex's time and dist, and whether that run ended at a hub with
        splits.  Each rank sends its runs' last vertices to the ranks walking the runs after them."""
        g = self.g
        last = np.cumsum(self.length) - 1
        sent = self.mine < len(self.chain) - 1
        after = self.mine[sent] + 1
        index = self.vertices[last[sent]] - g.lo
        exit_ = self.exit[sent]
        at_hub = (exit_ >= g.n_rank_vertices) & (exit_ != NO_NEXT) & bool(split)
        columns = [after.astype(np.int64), self.vertices[last[sent]].astype(np.int64),
                   g.time[index].astype(np.int64), self.dist[index].astype(np.int64), at_hub.astype(np.int8)]
        key, vertex, time, dist, hub = exchange.send_rows(comm, g.owner_of(self.chain[after]), columns)
        by_key = np.argsort(key, kind="stable")
        wanted = self.mine[self.mine > 0]
        at = by_key[np.searchsorted(key[by_key], wanted)] if len(wanted) else np.zeros(0, np.int64)
        return vertex[at], time[at], dist[at], hub[at].astype(bool)

    def _merged(self, comm, columns, run, follows, n_chain):
        """The part's segments merged (``critical_path.merged_rows``), numbered on the whole path:
        a merged segment counts in the run of its first row, and the runs' counts, summed over
        the ranks in path order, say where each run's segments begin."""
        from mpi4py import MPI

        rank, kind, function, peer, start, end = columns
        first, last = critical_path.merged_rows(rank, kind, function, peer, start, end, follows)
        if first is not None:
            stretch = np.concatenate(([0], np.cumsum(~follows)))
            follows = stretch[first[1:]] == stretch[last[:-1]]
            rank, kind, function, peer, start, end = (rank[first], kind.take(first), function.take(first), peer[first],
                                                      start[first], end[last])
            run = run[first]
        counts = np.bincount(run, minlength=len(self.mine))
        per_run = np.zeros(n_chain, np.int64)
        per_run[self.mine] = counts
        comm.Allreduce(MPI.IN_PLACE, per_run, op=MPI.SUM)
        begins = np.cumsum(per_run) - per_run
        order = begins[self.mine[run]] + np.arange(len(run)) - (np.cumsum(counts) - counts)[run]
        return critical_path.segments(rank, kind, function, start, end, peer, follows=follows, order=order)


def _pair_segments(g, u, u_time, weight, v, v_time, v_func):
    """[rank, kind, function, peer, start, end] of the segments u -> v (each u's time and its
    edge's slack), times from the run's start; kind and function as names.Labels."""
    u_rank = np.searchsorted(g.base, u, "right") - 1
    v_rank = np.searchsorted(g.base, v, "right") - 1
    compute = (u_rank == v_rank) & ((u & 1) == END) & (v == u + 1)
    message = u_rank != v_rank
    start = np.minimum(u_time + weight, v_time) - g.t0
    code = critical_path.KIND_CODE
    kind = np.full(len(v), code["mpi"], np.int8)
    kind[compute] = code["compute"]
    kind[message] = code["message"]
    names = np.append(mf.names_array(), "")        # "": compute, or a function id not known
    function = _function_code(v_func, len(names) - 1)
    function[compute] = len(names) - 1
    peer = np.full(len(v), -1, np.int64)
    peer[message] = u_rank[message]
    return [v_rank, Labels(kind, critical_path.KINDS), Labels(function, names), peer, start, v_time - g.t0]


def _with_lead_row(g, columns, vertex, time, func):
    """`columns` (``_pair_segments``) with their first row made the MPI_Init segment: on the
    path's first vertex's rank, from the run's start to that vertex's time."""
    rank, kind, function, peer, start, end = columns
    rank[0] = np.searchsorted(g.base, vertex, "right") - 1
    kind.codes[0] = critical_path.KIND_CODE["mpi"]
    function.codes[0] = _function_code(np.array([func]), len(function.names) - 1)[0]
    peer[0], start[0], end[0] = -1, 0, time - g.t0
    return columns
