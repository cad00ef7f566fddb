"""The memory of the analysis ranks' nodes: what a node has available, the least the analysis
needs of it, and the error when a node has less.

The analysis allocates numpy arrays for every record it owns.  Past what the node has, the
kernel kills a rank: in the job, at MPI_Finalize, one of the program's own ranks.  A clear
error before the analysis allocates, with the logs intact, is better.  The need is a floor,
not an estimate: below the least memory per record any analysis rank took, above what it held
once its logs were open, on bulk-synchronous, halo and pipelined runs with every algorithm
(docs/benchmarks.md, Memory).  A floor, because a check that refused a run that would have fit
costs the user more than a rank killed late: so it refuses only an analysis that cannot fit.
"""

import os

BYTES_PER_RECORD_AT_LEAST = 160


class NotEnoughMemory(Exception):
    """The analysis needs more memory than a node of its analysis ranks has available."""


def available_bytes():
    """MemAvailable of this node (Linux), None where unknown; MPIGRAPH_TEST_AVAILABLE_BYTES
    overrides it, for the tests."""
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


def require_room(comm, n_records_here, run_dir):
    """Raise NotEnoughMemory on the first analysis rank of every node whose analysis ranks,
    at BYTES_PER_RECORD_AT_LEAST for each record they own, need more than it has available.

    Collective over comm (the analysis ranks); run it through ``parallel.collectively`` so the
    other ranks stop too.  The ranks of one node share its memory: their needs add up.
    """
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        records, n_ranks, first = node.allreduce(n_records_here), node.Get_size(), node.Get_rank() == 0
    finally:
        node.Free()
    if not first:
        return
    need, available = records * BYTES_PER_RECORD_AT_LEAST, available_bytes()
    if available is not None and need > available:
        raise NotEnoughMemory(
            "%s: analysing the %s records that node %s's %d analysis rank%s own needs at least %.2f GB "
            "(%d bytes a record), and the node has %.2f GB available; the logs are intact: analyse them "
            "on analysis ranks spread over more nodes (mpiexec -n N, over several nodes, mpigraph analyze %s)"
            % (run_dir, format(records, ","), MPI.Get_processor_name(), n_ranks, "" if n_ranks == 1 else "s",
               need / 1e9, BYTES_PER_RECORD_AT_LEAST, available / 1e9, run_dir))
