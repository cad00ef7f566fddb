"""The critical path of the activity graph: algorithm choice, gathering, and the path table.

``critical_path(comm, inp, algorithm, splits, threshold_s)`` builds the graph
(``mpigraph.graph``) on the analysis ranks of comm, runs the chosen search
and returns ``critical_path.segments`` on analysis rank 0 (None elsewhere):

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
and gather only the path to rank 0.
"""

import numpy as np

from mpigraph import graph as graph_module
from mpigraph.paths import delta_stepping, dijkstra, parallel_dijkstra, walk
from mpigraph.paths.heartbeat import Heartbeat

GRAPH_ALGORITHMS = ("dijkstra", "delta-stepping", "parallel-dijkstra", "parallel-delta-stepping")


def critical_path(comm, inp, algorithm="dijkstra", splits=True, threshold_s=0.0, delta=None, stats=None,
                  say=None):
    """The path table on analysis rank 0, None on the others.  Collective over comm.

    `delta` (ns) overrides the automatic bucket width of the delta-stepping
    algorithms; `stats`, a dict, receives vertices, edges, hubs, delta, rounds and
    slack (on rank 0: the path's slack, what the search minimised); `say(text)`, on
    rank 0, hears how a long round-based search is going (``paths.heartbeat``).
    """
    heartbeat = Heartbeat(algorithm, say if comm.Get_rank() == 0 else None)
    if algorithm not in GRAPH_ALGORITHMS:
        raise ValueError("%r is not a graph algorithm (%s)" % (algorithm, ", ".join(GRAPH_ALGORITHMS)))
    g = graph_module.build(comm, inp, int(round(threshold_s * 1e9)))
    n_edges = comm.allreduce(g.n_edges)
    if not algorithm.startswith("parallel-") and not _whole_graph_fits(comm, algorithm, g.n_vertices, n_edges):
        return None       # analysis rank 0 raised GraphTooBig; the others leave without a path
    sizes = dict(vertices=g.n_vertices, edges=n_edges, hubs=g.n_hubs)
    if algorithm.startswith("parallel-"):
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
    if stats is not None:
        stats.update(sizes, delta=width, rounds=comm.bcast(whole[3].rounds if whole else None, root=0))
    if whole is None:
        return None
    g_meta, time, func, labels = whole
    dist, nxt, next_weight = labels.dist, labels.next, labels.next_weight
    if len(labels.hub_dist):      # hubs carry their distances to the sink, not to their piece's end
        hubs = np.arange(g_meta.n_rank_vertices, g_meta.n_vertices)
        nxt, next_weight = nxt.copy(), next_weight.copy()
        nxt[hubs], next_weight[hubs] = labels.hub_next, 0
    start, slack = walk.start_vertex(g_meta, dist, labels.hub_dist)
    if stats is not None:
        stats["slack"] = slack
    return walk.segments(g_meta, time, func, walk.chase(start, g_meta.sink, nxt), next_weight)


class GraphTooBig(Exception):
    """A sequential algorithm would gather more graph on analysis rank 0 than its node has memory."""


# Analysis rank 0's memory per vertex and per edge of a gathered graph and its search (measured:
# +3.2 GB for 2.0e7 vertices and 3.0e7 edges with dijkstra, 1024 x 10,000 calls on 2 ranks).
GATHERED_BYTES_PER_VERTEX, GATHERED_BYTES_PER_EDGE = 60, 70


def _whole_graph_fits(comm, algorithm, n_vertices, n_edges):
    """Whether the whole graph fits on analysis rank 0 (always, when it is already there).

    Collective.  Gathering more than the node has free would end in the kernel killing the
    analysis (in the job: at MPI_Finalize); instead rank 0 raises GraphTooBig, naming the
    parallel algorithms, and the others return False.
    """
    if comm.Get_size() == 1:
        return True
    need = n_vertices * GATHERED_BYTES_PER_VERTEX + n_edges * GATHERED_BYTES_PER_EDGE
    available = _available_bytes() if comm.Get_rank() == 0 else None
    fits = comm.bcast(available is None or need <= available, root=0)
    if not fits and comm.Get_rank() == 0:
        raise GraphTooBig(
            "%s gathers the whole graph (%d vertices, %d edges: about %.1f GB) on analysis rank 0, whose "
            "node has %.1f GB available; the parallel algorithms keep it distributed and find the same "
            "path: MPIGRAPH_ALGORITHM=parallel-dijkstra, or mpigraph analyze --algorithm parallel-dijkstra "
            "(the raw logs are intact)" % (algorithm, n_vertices, n_edges, need / 1e9, available / 1e9))
    return fits


def _available_bytes():
    """MemAvailable of this node (Linux), None where unknown; MPIGRAPH_TEST_AVAILABLE_BYTES
    overrides it, for the tests."""
    import os

    if os.environ.get("MPIGRAPH_TEST_AVAILABLE_BYTES"):
        return int(os.environ["MPIGRAPH_TEST_AVAILABLE_BYTES"])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def gather_graph(comm, g):
    """The whole graph as one Graph on analysis rank 0 (None elsewhere).

    Rank vertices are numbered analysis rank by analysis rank, so each rank's
    rows of the whole CSR (times, functions, in-degrees, edges) are one block
    of it: Gatherv puts them straight into place, no encoding, no sort.  Hub h
    is owned by rank h % n_analysis and comes after the rank vertices: the
    hubs' rows arrive grouped by rank and are moved to hub order by their
    lengths (``_hub_order``).

    With several analysis ranks g is used up: each of its per-vertex and per-edge arrays is
    dropped (set to None) once it is gathered, so rank 0 never holds its part twice.
    """
    if comm.Get_size() == 1:
        return g
    n_rows, n_hubs = g.hi - g.lo, g.n_hubs     # this rank's rank vertices
    row_edges = int(g.indptr[n_rows])
    degree, g.indptr = np.diff(g.indptr), None
    time, g.time = _gatherv(comm, g.time[:n_rows], extra=n_hubs), None      # the hubs' rows go last
    func, g.func = _gatherv(comm, g.func[:n_rows], extra=n_hubs), None
    rank_degree = _gatherv(comm, degree[:n_rows])
    hub_degree = _gatherv(comm, degree[n_rows:])
    del degree
    n_hub_edges = comm.allreduce(len(g.src) - row_edges)
    src = _gatherv(comm, g.src[:row_edges], extra=n_hub_edges)
    hub_src, g.src = _gatherv(comm, g.src[row_edges:]), None
    weight = _gatherv(comm, g.weight[:row_edges], extra=n_hub_edges)
    hub_weight, g.weight = _gatherv(comm, g.weight[row_edges:]), None
    if comm.Get_rank() != 0:
        return None
    order = _hub_order(n_hubs, comm.Get_size())
    n_rank_rows = len(rank_degree)
    indptr = np.zeros(n_rank_rows + n_hubs + 1, np.int64)
    np.cumsum(rank_degree, out=indptr[1:n_rank_rows + 1])
    del rank_degree
    np.cumsum(hub_degree[order], out=indptr[n_rank_rows + 1:])
    indptr[n_rank_rows + 1:] += indptr[n_rank_rows]
    hub_edges = _rows_in_order(hub_degree, order)
    src[len(src) - n_hub_edges:], weight[len(src) - n_hub_edges:] = hub_src[hub_edges], hub_weight[hub_edges]
    time[len(time) - n_hubs:], func[len(func) - n_hubs:] = g.hub_time, -1
    bounds = np.array([0, g.n_rank_vertices], np.int64)
    return graph_module.Graph(1, 0, g.base, bounds, g.hub_calls, g.hub_time, time, func, indptr,
                              src, weight, g.sink, g.sources, g.t0)


def _gatherv(comm, local, extra=0):
    """Every rank's `local` (one dtype) concatenated in rank order on rank 0, followed by
    `extra` unset places (room for what comes later), None elsewhere.  Collective."""
    local = np.ascontiguousarray(local)
    counts = comm.gather(len(local), root=0)
    if comm.Get_rank() != 0:
        comm.Gatherv(local, None, root=0)
        return None
    out = np.empty(sum(counts) + extra, local.dtype)
    comm.Gatherv(local, [out[:sum(counts)], counts], root=0)
    return out


def _hub_order(n_hubs, n_analysis):
    """The hubs as gathered (rank 0's h = 0, n, 2n, ..., then rank 1's, ...): order[h] = hub h's place."""
    gathered = np.concatenate([np.arange(a, n_hubs, n_analysis, dtype=np.int64) for a in range(n_analysis)])
    order = np.empty(n_hubs, np.int64)
    order[gathered] = np.arange(n_hubs, dtype=np.int64)
    return order


def _rows_in_order(gathered_degree, order):
    """Positions in the gathered hub edges of hub 0's edges, then hub 1's, ...

    The gathered edges are stored row after row, the rows in gathered order;
    order[h] is hub h's row among them.
    """
    gathered_start = (np.cumsum(gathered_degree) - gathered_degree)[order]
    degree = gathered_degree[order]
    return np.repeat(gathered_start - (np.cumsum(degree) - degree), degree) + np.arange(degree.sum(), dtype=np.int64)
