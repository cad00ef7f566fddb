"""Write the small 3-rank run of docs/concepts.md, as the shim would have logged it, and analyse it.

    python scripts/concepts_example.py OUT      # OUT/raw/rank-*.log, then the report in OUT

Every time is a whole or tenth of a millisecond, on clocks that agree (MPIGRAPH_CLOCK=none), so
each number of the report can be checked by hand against the timeline in docs/concepts.md.
tests/test_docs.py checks the numbers the document quotes.
"""

import os
import sys

import numpy as np

from mpigraph.trace import functions as mpi_functions
from mpigraph.trace import record

MS = 1_000_000          # ns per ms
FID = {f.name: f.id for f in mpi_functions.FUNCTIONS}

# (function, start ms, end ms, fields) per rank, in log order.
CALLS = {
    0: [("MPI_Init", -1, 0, {}),
        ("MPI_Send", 4, 4.1, dict(flags=record.SEND, peer=1, tag=1, bytes=8)),            # late sender
        ("MPI_Allreduce", 5, 8.2, dict(bytes=8, seq=1)),                                  # rank 2 is last
        ("MPI_Bcast", 10, 10.1, dict(bytes=8, seq=2, root=0)),                            # the root is late
        ("MPI_Reduce", 11, 13.1, dict(bytes=8, seq=3, root=0)),                           # the root is early
        ("MPI_Barrier", 14, 15.1, dict(seq=4)),
        ("MPI_Finalize", 20, 20.5, {})],
    1: [("MPI_Init", -1, 0, {}),
        ("MPI_Recv", 1, 4.3, dict(flags=record.RECV, peer=0, tag=1, bytes=8)),
        ("MPI_Allreduce", 5, 8.3, dict(bytes=8, seq=1)),
        ("MPI_Bcast", 9, 10.1, dict(bytes=8, seq=2, root=0)),
        ("MPI_Reduce", 12, 12.1, dict(bytes=8, seq=3, root=0)),
        ("MPI_Barrier", 14.5, 15.1, dict(seq=4)),
        ("MPI_Recv", 18, 18.3, dict(flags=record.RECV, peer=2, tag=2, bytes=1 << 20)),   # late receiver
        ("MPI_Finalize", 20, 20.5, {})],
    2: [("MPI_Init", -1, 0, {}),
        ("MPI_Allreduce", 8, 8.25, dict(bytes=8, seq=1)),
        ("MPI_Bcast", 9, 10.1, dict(bytes=8, seq=2, root=0)),
        ("MPI_Reduce", 13, 13.1, dict(bytes=8, seq=3, root=0)),
        ("MPI_Barrier", 15, 15.1, dict(seq=4)),
        ("MPI_Send", 16, 18.2, dict(flags=record.SEND, peer=1, tag=2, bytes=1 << 20)),
        ("MPI_Finalize", 20, 20.5, {})],
}


def write_logs(run_dir):
    """run_dir/raw/rank-<r>.log for the three ranks; returns run_dir."""
    raw = os.path.join(run_dir, "raw")
    os.makedirs(raw, exist_ok=True)
    for rank, calls in CALLS.items():
        rows = np.zeros(len(calls), record.RECORD_DTYPE)
        rows["peer"], rows["tag"], rows["root"] = record.PEER_NONE, record.TAG_NONE, record.ROOT_NONE
        for i, (name, start, end, fields) in enumerate(calls):
            rows[i]["func"] = FID[name]
            rows[i]["t_start"], rows[i]["t_end"] = round(start * MS), round(end * MS)
            for field, value in fields.items():
                rows[i][field] = value
        header = record.empty_header(rank, len(CALLS))
        header["job_id"], header["hostname"] = b"concepts", b"node0"
        header["clock_source"] = record.CLOCK_MONOTONIC
        header["n_functions"] = len(mpi_functions.FUNCTIONS)
        header["flags"] = record.HEADER_FINALIZED
        record.write_log(os.path.join(raw, "rank-%d.log" % rank), header, rows)
    return run_dir


def analyse(run_dir, quiet=True):
    """The report of the run in run_dir (one analysis rank, clocks trusted); the summary's text."""
    from mpi4py import MPI

    from mpigraph import analysis, config

    cfg = config.Config(clock="none", quiet=quiet)
    return analysis.analyze(run_dir, MPI.COMM_WORLD, cfg)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    analyse(write_logs(sys.argv[1]), quiet=False)
