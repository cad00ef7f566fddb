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

import bisect

import numpy as np

from mpigraph import critical_path
from mpigraph import mpi_functions as mf
from mpigraph.graph import INF, START, END
from mpigraph.paths.labels import NO_NEXT
from mpigraph.splits import piece_of


def start_vertex(g, dist, hub_dist, source_dist=None):
    """(The path's first vertex, its distance to the sink): the least, lowest id among equals.

    `source_dist` (dist of each of g.sources) replaces dist, which is then not used.
    """
    dist_to_sink = dist[g.sources] if source_dist is None else source_dist
    if len(hub_dist):            # splits: sources' distances end at their piece's hub
        piece = piece_of(g.base, g.hub_calls, g.sources)
        ends_at_hub = piece < g.n_hubs
        dist_to_sink = np.where(ends_at_hub, dist_to_sink + hub_dist[np.minimum(piece, g.n_hubs - 1)],
                                dist_to_sink)
    total = np.minimum(dist_to_sink, INF)
    best = np.lexsort((g.sources, total))[0]
    if total[best] >= INF:
        raise ValueError("no rank's start reaches the end of the run: the graph is disconnected")
    return int(g.sources[best]), int(total[best])


def chase(start, sink, nxt):
    """The vertices from start to sink along nxt (one numpy lookup per path vertex)."""
    path, v = [start], start
    while v != sink:
        v = int(nxt[v])
        if v == NO_NEXT or len(path) > len(nxt):
            raise ValueError("the path from vertex %d does not reach the sink %d" % (start, sink))
        path.append(v)
    return np.array(path, np.int64)


def segments(g, time, func, path, next_weight):
    """critical_path.segments of a vertex path (time, func, next_weight indexed by global id)."""
    return path_segments(g, path, time[path], func[path], next_weight[path])


def path_segments(g, path, time, func, weight):
    """critical_path.segments of a vertex path, with time, func and next_weight of each path vertex."""
    is_hub = path >= g.n_rank_vertices
    # u -> H -> v becomes u -> v with the slack of both edges (H -> v has slack 0).
    own, weight = weight, weight.copy()
    weight[:-1][is_hub[1:]] += own[1:][is_hub[1:]]
    path, weight, time, func = path[~is_hub], weight[~is_hub], time[~is_hub], func[~is_hub]
    u, v, w = path[:-1], path[1:], weight[:-1]
    u_rank, u_call, u_side = g.decode(u)
    v_rank, v_call, v_side = g.decode(v)
    end = time[1:]
    start = np.minimum(time[:-1] + w, end)
    compute = (u_rank == v_rank) & (u_side == END) & (v_side == START) & (v_call == u_call + 1)
    message = u_rank != v_rank
    kind = np.where(compute, "compute", np.where(message, "message", "mpi")).astype(object)
    names = mf.names_array()
    func_v = func[1:]
    known = (func_v >= 0) & (func_v < len(names))
    function = np.where(compute | ~known, "", names[np.where(known, func_v, 0)]).astype(object)
    peer = np.where(message, u_rank, -1)
    if time[0] > g.t0:       # the start rank was still in MPI_Init after the run's start
        first_rank = g.decode(path[:1])[0]
        first_name = names[func[0]] if 0 <= func[0] < len(names) else ""
        v_rank, kind, function = (np.r_[first_rank, v_rank], np.r_[np.array(["mpi"], object), kind],
                                  np.r_[np.array([first_name], object), function])
        start, end, peer = np.r_[g.t0, start], np.r_[time[0], end], np.r_[-1, peer]
    return critical_path.segments(v_rank, kind, function, start - g.t0, end - g.t0, peer)


def distributed(comm, g, labels):
    """(critical_path.segments on rank 0, None elsewhere; the path's slack) from distributed labels.

    Collective over comm.  Nothing per vertex is gathered: the owner of the
    current vertex follows next[] through its own vertices, then passes the
    first vertex it does not own to everyone (one bcast per change of owner);
    the pieces of the path (a few int64 per path vertex) go to rank 0.
    """
    from mpi4py import MPI

    hub_dist, hub_next = labels.hub_dist, labels.hub_next
    n_rank_vertices = g.n_rank_vertices
    source_dist = np.full(len(g.sources), INF, np.int64)
    mine = g.owner_of(g.sources) == g.me
    source_dist[mine] = labels.dist[g.local_index(g.sources[mine])]
    comm.Allreduce(MPI.IN_PLACE, source_dist, op=MPI.MIN)
    start, slack = start_vertex(g, None, hub_dist, source_dist)
    nxt, next_weight, limit = labels.next, labels.next_weight, g.n_vertices
    lo, hi, me, n_analysis, bounds = g.lo, g.hi, g.me, g.n_analysis, g.bounds.tolist()

    def owner(v):         # Graph.owner_of and local_index for one vertex, in plain Python
        return (v - n_rank_vertices) % n_analysis if v >= n_rank_vertices else bisect.bisect_right(bounds, v) - 1

    def local(v):
        return v - lo if v < n_rank_vertices else (hi - lo) + (v - n_rank_vertices) // n_analysis

    pieces, v, hops, length, done = [], start, 0, 0, False
    while not done:
        holder = owner(v)
        state = None
        if holder == me:
            vertices, weights = [v], []
            while v != g.sink and len(vertices) + length <= limit:
                if len(hub_dist) and v >= n_rank_vertices:
                    v, w = int(hub_next[v - n_rank_vertices]), 0
                else:
                    i = local(v)
                    v, w = int(nxt[i]), int(next_weight[i])
                weights.append(w)
                if v == NO_NEXT or owner(v) != me:
                    break
                vertices.append(v)
            done = vertices[-1] == g.sink
            weights = np.array(weights[:len(vertices)] + [0] * (len(vertices) - len(weights)), np.int64)
            vertices = np.array(vertices, np.int64)
            index = g.local_index(vertices)
            pieces.append((hops, vertices, g.time[index], g.func[index], weights))
            state = (v, length + len(vertices), done)
        v, length, done = comm.bcast(state, root=holder)
        hops += 1
        if not done and (v == NO_NEXT or length > limit):
            raise ValueError("the path from vertex %d does not reach the sink %d" % (start, g.sink))
    pieces = comm.gather(pieces, root=0)
    if comm.Get_rank() != 0:
        return None, slack
    pieces = sorted((p for part in pieces for p in part), key=lambda p: p[0])
    path, time, func, weight = (np.concatenate([p[i] for p in pieces]) for i in range(1, 5))
    return path_segments(g, path, time, func, weight), slack
