"""Write the small 3-rank runs of docs/concepts.md, as the shim would have logged them, and analyse them.

    python scripts/concepts_example.py OUT [EXAMPLE]     # OUT/raw/rank-*.log, then the report in OUT

EXAMPLE is `main` (the default: the document's example run), `nonblocking` (an MPI_Iallreduce
completed by MPI_Wait) or `scan` (an MPI_Scan), the runs of EXAMPLES.

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


# Nonblocking collective: every rank posts an MPI_Iallreduce (request 1) and completes it in an
# MPI_Wait (whose part record names the request); rank 2 posts last, at 6.
NONBLOCKING_CALLS = {
    0: [("MPI_Init", -1, 0, {}),
        ("MPI_Iallreduce", 1, 1.1, dict(bytes=8, seq=1, request=1)),                     # then 1.9 ms of compute
        ("MPI_Wait", 3, 6.2, dict(parts=[dict(request=1)])),
        ("MPI_Finalize", 8, 8.5, {})],
    1: [("MPI_Init", -1, 0, {}),
        ("MPI_Iallreduce", 2, 2.1, dict(bytes=8, seq=1, request=1)),
        ("MPI_Wait", 2.5, 6.3, dict(parts=[dict(request=1)])),
        ("MPI_Finalize", 8, 8.5, {})],
    2: [("MPI_Init", -1, 0, {}),
        ("MPI_Iallreduce", 6, 6.1, dict(bytes=8, seq=1, request=1)),                     # the last to arrive
        ("MPI_Wait", 6.1, 6.2, dict(parts=[dict(request=1)])),
        ("MPI_Finalize", 8, 8.5, {})],
}

# Scan: rank 1 arrives last, rank 2 first; rank i waits only for the ranks below it.
SCAN_CALLS = {
    0: [("MPI_Init", -1, 0, {}),
        ("MPI_Scan", 2, 2.1, dict(bytes=8, seq=1)),
        ("MPI_Finalize", 8, 8.5, {})],
    1: [("MPI_Init", -1, 0, {}),
        ("MPI_Scan", 4, 4.2, dict(bytes=8, seq=1)),                                      # the last to arrive
        ("MPI_Finalize", 8, 8.5, {})],
    2: [("MPI_Init", -1, 0, {}),
        ("MPI_Scan", 1, 4.3, dict(bytes=8, seq=1)),                                      # waits for rank 1
        ("MPI_Finalize", 8, 8.5, {})],
}

EXAMPLES = {"main": CALLS, "nonblocking": NONBLOCKING_CALLS, "scan": SCAN_CALLS}


def _records(calls):
    """The log records of one rank's calls: a call record each, then its part records (fields
    `parts`: one dict of fields each; a part shares its call's function and times)."""
    flat = []
    for name, start, end, fields in calls:
        fields = dict(fields)
        parts = fields.pop("parts", [])
        flat.append((name, start, end, fields))
        flat += [(name, start, end, dict(part, flags=record.PART | part.get("flags", 0))) for part in parts]
    rows = np.zeros(len(flat), record.RECORD_DTYPE)
    rows["peer"], rows["tag"], rows["root"] = record.PEER_NONE, record.TAG_NONE, record.ROOT_NONE
    for i, (name, start, end, fields) in enumerate(flat):
        rows[i]["func"] = FID[name]
        rows[i]["t_start"], rows[i]["t_end"] = round(start * MS), round(end * MS)
        for field, value in fields.items():
            rows[i][field] = value
    return rows


def write_logs(run_dir, example="main"):
    """run_dir/raw/rank-<r>.log for the three ranks of EXAMPLES[example]; returns run_dir."""
    raw = os.path.join(run_dir, "raw")
    os.makedirs(raw, exist_ok=True)
    runs = EXAMPLES[example]
    for rank, calls in runs.items():
        rows = _records(calls)
        header = record.empty_header(rank, len(runs))
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
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in EXAMPLES):
        sys.exit(__doc__)
    analyse(write_logs(*sys.argv[1:]), quiet=False)
