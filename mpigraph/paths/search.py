"""The graph searches: the critical path of the activity graph by one of the graph algorithms.

``critical_path(comm, inp, algorithm, splits, threshold_s)`` builds the graph
(``mpigraph.paths.graph``) on the analysis ranks of comm, runs the chosen search
and returns ``critical_path.segments``: on analysis rank 0 (None elsewhere) for the
searches of the whole graph, a part on every rank for the distributed ones:

    dijkstra                  the graph gathered to rank 0, scipy.sparse.csgraph's Dijkstra there
    delta-stepping            the graph gathered to rank 0, vectorised delta-stepping there
    parallel-dijkstra         distributed Dijkstra by parts: csgraph's Dijkstra on each analysis
                              rank's part, improved boundary offers exchanged until none improves
                              (``paths.parallel_dijkstra``; seed 004's delta-stepping with delta = 1
                              ns is parallel-delta-stepping with delta=1)
    parallel-delta-stepping   distributed delta-stepping with delta = auto_delta

With splits on, each piece between global synchronisation points is searched
from its own end at the same time, in the same loop; off, one search from the
sink.  All of them give the same path (``mpigraph.paths.labels``): the
searches compute distances, and next[] follows from them by one shared pass.
The distributed ones walk the path where the labels are (``walk.distributed``)
and return each rank's part of it.
"""

from mpigraph.paths import algorithms
from mpigraph.paths import graph as graph_module
from mpigraph.comm.parallel import barrier_idly
from mpigraph.paths import delta_stepping, dijkstra, parallel_dijkstra, walk
from mpigraph.paths.gather import gather_graph, whole_graph_fits
from mpigraph.paths.heartbeat import Heartbeat


def critical_path(comm, inp, algorithm="dijkstra", splits=True, threshold_s=0.0, delta=None, stats=None,
                  say=None):
    """The path table on analysis rank 0 (None on the others), or with a distributed algorithm
    each rank's part of it (``walk.distributed``).  Collective over comm.

    `delta` (ns) overrides the automatic bucket width of the delta-stepping
    algorithms; `stats`, a dict, receives vertices, edges, hubs, delta, rounds and
    slack (on rank 0: the path's slack, what the search minimised); `say(text)`, on
    rank 0, hears how a long round-based search is going (``paths.heartbeat``).
    """
    heartbeat = Heartbeat(algorithm, say if comm.Get_rank() == 0 else None)
    if algorithms.get(algorithm).method != "graph":
        raise ValueError("%r is not a graph algorithm (%s)" % (algorithm, ", ".join(algorithms.GRAPH_ALGORITHMS)))
    distributed = algorithms.get(algorithm).distributed
    g = graph_module.build(comm, inp, int(round(threshold_s * 1e9)),
                           keep_remote_hub_edges=splits and distributed)
    n_edges = comm.allreduce(g.n_edges)
    if not distributed and not whole_graph_fits(comm, algorithm, g.n_vertices, n_edges):
        return None       # analysis rank 0 raised GraphTooBig; the others leave without a path
    sizes = dict(vertices=g.n_vertices, edges=n_edges, hubs=g.n_hubs)
    if distributed:
        if algorithm == "parallel-dijkstra":
            width, labels = None, parallel_dijkstra.solve(comm, g, splits, heartbeat)
        else:
            width = delta or delta_stepping.auto_delta(comm, g)
            labels = delta_stepping.solve(comm, g, width, splits, heartbeat)
        table, slack = walk.distributed(comm, g, labels)
        if stats is not None:
            stats.update(sizes, delta=width, rounds=labels.rounds, slack=slack)
        return table
    whole = gather_graph(comm, g)
    del g             # on rank 0 its part is in `whole` now: not held twice through the search
    width = None
    if whole is not None:
        from mpi4py import MPI

        if algorithm == "dijkstra":
            labels = dijkstra.solve(whole, splits)
        else:
            width = delta or delta_stepping.auto_delta(MPI.COMM_SELF, whole)
            labels = delta_stepping.solve(MPI.COMM_SELF, whole, width, splits, heartbeat)
        whole = (whole, whole.time, whole.func, labels)
    barrier_idly(comm)     # the other ranks wait for rank 0's search
    if stats is not None:
        stats.update(sizes, delta=width, rounds=comm.bcast(whole[3].rounds if whole else None, root=0))
    if whole is None:
        return None
    g_meta, time, func, labels = whole
    dist, nxt = labels.dist, labels.next
    if len(labels.hub_dist):      # hubs carry their distances to the sink, not to their piece's end
        # In place: the labels are this function's own, and a copy of the whole graph's next[]
        # would be one more pass over every vertex.
        nxt[g_meta.n_rank_vertices:g_meta.n_vertices] = labels.hub_next
    start, slack = walk.start_vertex(g_meta, dist, labels.hub_dist)
    if stats is not None:
        stats["slack"] = slack
    path = walk.chase(start, g_meta.sink, nxt)
    return walk.segments(g_meta, time, func, path, walk.path_weights(g_meta, dist, nxt, path))
