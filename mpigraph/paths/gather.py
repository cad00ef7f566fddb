"""Gathering onto analysis rank 0: the whole graph (for the sequential searches), or any
per-rank array (and scattering one back), and whether what is gathered fits rank 0's node.

Rank vertices are numbered analysis rank by analysis rank, so each rank's rows of
the whole CSR are one block of it: ``gatherv`` (MPI Gatherv, no encoding, no
sort) puts them straight into place.
"""

import numpy as np

from mpigraph.paths import graph as graph_module
from mpigraph.comm import meter
from mpigraph.comm.node_memory import NotEnoughMemory, available_bytes


class GraphTooBig(NotEnoughMemory):
    """A sequential algorithm would gather more graph on analysis rank 0 than its node has memory."""


# Analysis rank 0's memory per vertex and per edge of a gathered graph and its search: the
# growth of its peak on a large run, rounded up, so that GraphTooBig is raised only where the
# search could not fit (docs/benchmarks.md, Memory).
GATHERED_BYTES_PER_VERTEX, GATHERED_BYTES_PER_EDGE = 60, 70


def whole_graph_fits(comm, algorithm, n_vertices, n_edges):
    """Whether the whole graph fits on analysis rank 0 (always, when it is already there).

    Collective.  Gathering more than the node has free would end in the kernel killing the
    analysis (in the job: at MPI_Finalize); instead rank 0 raises GraphTooBig, naming the
    parallel algorithms, and the others return False.
    """
    if comm.Get_size() == 1:
        return True
    need = gathered_bytes(n_vertices, n_edges)
    fits, available = fits_on_root(comm, need)
    if not fits and comm.Get_rank() == 0:
        raise GraphTooBig(
            "%s gathers the whole graph (%d vertices, %d edges: about %.1f GB) on analysis rank 0, whose "
            "node has %.1f GB available; the parallel algorithms keep it distributed and find the same "
            "path: MPIGRAPH_ALGORITHM=parallel-dijkstra, or mpigraph analyze --algorithm parallel-dijkstra "
            "(the raw logs are intact)" % (algorithm, n_vertices, n_edges, need / 1e9, available / 1e9))
    return fits


def gathered_bytes(n_vertices, n_edges):
    """About what a graph of that size and its search take on the rank it is gathered to."""
    return n_vertices * GATHERED_BYTES_PER_VERTEX + n_edges * GATHERED_BYTES_PER_EDGE


def graph_fits_on_root(comm, n_vertices, n_edges):
    """Collective: whether a graph of that size and its search fit analysis rank 0's node."""
    return fits_on_root(comm, gathered_bytes(n_vertices, n_edges))[0]


def fits_on_root(comm, need):
    """(whether `need` bytes fit analysis rank 0's node, its available bytes) on every rank.

    Collective.  Where the available memory is unknown, anything fits."""
    available = available_bytes() if comm.Get_rank() == 0 else None
    return comm.bcast((available is None or need <= available, available), root=0)


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
    time, g.time = gatherv(comm, g.time[:n_rows], extra=n_hubs), None      # the hubs' rows go last
    func, g.func = gatherv(comm, g.func[:n_rows], extra=n_hubs), None
    rank_degree = gatherv(comm, degree[:n_rows])
    hub_degree = gatherv(comm, degree[n_rows:])
    del degree
    n_hub_edges = comm.allreduce(len(g.src) - row_edges)
    src = gatherv(comm, g.src[:row_edges], extra=n_hub_edges)
    hub_src, g.src = gatherv(comm, g.src[row_edges:]), None
    weight = gatherv(comm, g.weight[:row_edges], extra=n_hub_edges)
    hub_weight, g.weight = gatherv(comm, g.weight[row_edges:]), None
    if comm.Get_rank() != 0:
        return None
    order = _hub_order(n_hubs, comm.Get_size())
    n_rank_rows = len(rank_degree)
    indptr = np.zeros(n_rank_rows + n_hubs + 1, graph_module.index_dtype(len(src)))
    np.cumsum(rank_degree, out=indptr[1:n_rank_rows + 1])
    del rank_degree
    np.cumsum(hub_degree[order], out=indptr[n_rank_rows + 1:])
    indptr[n_rank_rows + 1:] += indptr[n_rank_rows]
    hub_edges = _rows_in_order(hub_degree, order)
    src[len(src) - n_hub_edges:], weight[len(src) - n_hub_edges:] = hub_src[hub_edges], hub_weight[hub_edges]
    time[len(time) - n_hubs:], func[len(func) - n_hubs:] = g.hub_time, -1
    bounds = np.array([0, g.n_rank_vertices], np.int64)
    return graph_module.Graph(1, 0, g.base, bounds, g.source_piece, g.hub_time, time, func, indptr,
                              src, weight, g.sink, g.sources, g.t0)


def gatherv(comm, local, extra=0):
    """Every rank's `local` (one dtype) concatenated in rank order on rank 0, followed by
    `extra` unset places (room for what comes later), None elsewhere.  Collective."""
    local = np.ascontiguousarray(local)
    counts = comm.gather(len(local), root=0)
    if comm.Get_rank() != 0:
        comm.Gatherv(local, None, root=0)
        meter.count(sent=local.nbytes)
        return None
    out = np.empty(sum(counts) + extra, local.dtype)
    comm.Gatherv(local, [out[:sum(counts)], counts], root=0)
    meter.count(received=(sum(counts) - len(local)) * local.itemsize)
    return out


def scatterv(comm, whole, n_here):
    """The inverse of gatherv: rank r's `n_here` items of rank 0's `whole` (int64, the ranks'
    blocks in rank order; None on the other ranks).  Collective."""
    here = np.empty(n_here, np.int64)
    counts = comm.gather(n_here, root=0)
    comm.Scatterv([whole, counts] if comm.Get_rank() == 0 else None, here, root=0)
    if comm.Get_rank() == 0:
        meter.count(sent=(sum(counts) - n_here) * here.itemsize)
    else:
        meter.count(received=here.nbytes)
    return here


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
