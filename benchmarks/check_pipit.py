"""The OTF2 export read by pipit (hpcgroup/pipit): its communication matrix against ours.

    python benchmarks/check_pipit.py RUN_DIR [RUN_DIR ...]

For each analysed run directory: ``mpigraph export RUN_DIR --otf2 TMP`` (mpigraph.export.otf2_trace),
then pipit's ``Trace.from_otf2(TMP).comm_matrix("count")`` and ``("size")`` against the
point-to-point rows of RUN_DIR/commmatrix (mpigraph.load(RUN_DIR).comm_matrix, kind "p2p").
Prints both matrices and "equal" or "DIFFERS"; exits 1 when any run differs.

pipit is not on PyPI (its "pipit" there is an empty 0.0.1): install it from its repository,
``pip install git+https://github.com/hpcgroup/pipit`` (tested at 05d9563, 2024-10-18).

pipit's comm_matrix takes an MpiSend's receiver as a world rank: it ignores the event's
communicator, so a message on a split communicator lands on the receiver's rank in that
communicator (OTF2 defines the receiver that way; mpigraph's own reader,
mpigraph.export.readback, maps it back through the communicator's group).  Runs whose messages
are all on MPI_COMM_WORLD (the demo, rings, halos) agree exactly.
"""

import os
import sys
import tempfile

import numpy as np


def ours(run_dir: str) -> tuple:
    """(messages, bytes) world x world of the run's point-to-point communication matrix."""
    import mpigraph

    run = mpigraph.load(run_dir)
    p = int(run.ranks["rank"].max()) + 1
    m = run.comm_matrix
    m = m[m["kind"] == "p2p"]
    messages, nbytes = np.zeros((p, p), np.int64), np.zeros((p, p), np.int64)
    np.add.at(messages, (m["src"].to_numpy(), m["dst"].to_numpy()), m["messages"].to_numpy())
    np.add.at(nbytes, (m["src"].to_numpy(), m["dst"].to_numpy()), m["bytes"].to_numpy())
    return messages, nbytes


def pipits(archive_dir: str) -> tuple:
    """(messages, bytes) of pipit's comm_matrix of the archive (its Process column: the location group)."""
    import pipit

    trace = pipit.Trace.from_otf2(archive_dir, num_processes=1)
    return (trace.comm_matrix("count").astype(np.int64), trace.comm_matrix("size").astype(np.int64))


def check(run_dir: str) -> bool:
    from mpigraph.export import otf2_trace

    with tempfile.TemporaryDirectory() as tmp:
        archive = os.path.join(tmp, "otf2")
        otf2_trace.export(run_dir, archive)
        theirs = pipits(archive)
    mine = ours(run_dir)
    same = all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(mine, theirs))
    print("%s: %s" % (run_dir, "equal" if same else "DIFFERS"))
    for label, a, b in zip(("messages", "bytes"), mine, theirs):
        print("  %s, mpigraph (commmatrix p2p):\n%s\n  %s, pipit (Trace.from_otf2().comm_matrix):\n%s"
              % (label, a, label, b))
    return same


def main(argv=None) -> int:
    runs = sys.argv[1:] if argv is None else argv
    if not runs:
        print(__doc__)
        return 2
    return 0 if all([check(r) for r in runs]) else 1


if __name__ == "__main__":
    sys.exit(main())
