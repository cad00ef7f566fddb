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

from mpigraph import critical_path
from mpigraph import mpi_functions as mf
from mpigraph.graph import INF, START, END
from mpigraph.paths.labels import NO_NEXT
from mpigraph.splits import piece_of


def start_vertex(g, dist, hub_dist):
    """(The path's first vertex, its distance to the sink): the least, lowest id among equals."""
    dist_to_sink = dist[g.sources]
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
    """The vertices from start to sink along nxt (a list, for a Python walk)."""
    nxt = nxt.tolist()
    path, v = [start], start
    while v != sink:
        v = nxt[v]
        if v == NO_NEXT or len(path) > len(nxt):
            raise ValueError("the path from vertex %d does not reach the sink %d" % (start, sink))
        path.append(v)
    return np.array(path, np.int64)


def segments(g, time, func, path, next_weight):
    """critical_path.segments of a vertex path (time, func, next_weight indexed by global id)."""
    is_hub = path >= g.n_rank_vertices
    # u -> H -> v becomes u -> v with the slack of both edges (H -> v has slack 0).
    weight = next_weight[path]
    weight[:-1][is_hub[1:]] += next_weight[path[1:][is_hub[1:]]]
    path, weight = path[~is_hub], weight[~is_hub]
    u, v, w = path[:-1], path[1:], weight[:-1]
    u_rank, u_call, u_side = g.decode(u)
    v_rank, v_call, v_side = g.decode(v)
    end = time[v]
    start = np.minimum(time[u] + w, end)
    compute = (u_rank == v_rank) & (u_side == END) & (v_side == START) & (v_call == u_call + 1)
    message = u_rank != v_rank
    kind = np.where(compute, "compute", np.where(message, "message", "mpi")).astype(object)
    names = mf.names_array()
    known = (func[v] >= 0) & (func[v] < len(names))
    function = np.where(compute | ~known, "", names[np.where(known, func[v], 0)]).astype(object)
    peer = np.where(message, u_rank, -1)
    first = path[0]
    if time[first] > g.t0:       # the start rank was still in MPI_Init after the run's start
        first_rank = g.decode(path[:1])[0]
        first_name = names[func[first]] if 0 <= func[first] < len(names) else ""
        v_rank, kind, function = (np.r_[first_rank, v_rank], np.r_[np.array(["mpi"], object), kind],
                                  np.r_[np.array([first_name], object), function])
        start, end, peer = np.r_[g.t0, start], np.r_[time[first], end], np.r_[-1, peer]
    return critical_path.segments(v_rank, kind, function, start - g.t0, end - g.t0, peer)
