"""Run under mpiexec: every graph algorithm, distributed over the job's ranks, against the
serial reference computed on rank 0 alone.  Started by test_paths_mpi.py; exits 1 on a mismatch.

    mpiexec -n 3 python tests/path_mpi_check.py
"""

import os
import sys

from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pathbuild import SETTINGS, random_input, rows, share, solve_all  # noqa: E402

from mpigraph import paths, synthetic  # noqa: E402


def cases():
    """(name, whole-run PathInput, options): the same on every rank."""
    yield "bsp", synthetic.path_input(synthetic.simulate(5, 8, sync_every=2, seed=7)), {}
    yield "bsp-jitter", synthetic.path_input(synthetic.simulate(4, 8, sync_every=3, seed=8, jitter_ns=20_000)), {}
    yield "bsp-threshold", synthetic.path_input(synthetic.simulate(4, 6, sync_every=2, seed=9)), {"threshold_s": 1e-6}
    for seed in range(6):
        yield "random-%d" % seed, random_input(seed, 2 + seed % 3, 6, 25, collectives=seed % 3), {}
    yield "two-ranks-on-many", synthetic.path_input(synthetic.simulate(2, 4, seed=10)), {}


def main():
    comm = MPI.COMM_WORLD
    failures = 0
    for name, inp, options in cases():
        reference = paths.critical_path(MPI.COMM_SELF, inp, "dijkstra", False, **options) if comm.rank == 0 else None
        slacks = {}
        results = solve_all(share(inp, comm.size, comm.rank), comm=comm, slacks=slacks, **options)
        if comm.rank == 0:
            expected = rows(reference)
            bad = [setting for setting in SETTINGS if rows(results[setting]) != expected]
            failures += len(bad)
            print("%-18s %d segments, slack %s: %s" % (name, len(expected), sorted(set(slacks.values())),
                                                       "MISMATCH %s" % bad if bad else "all %d equal" % len(SETTINGS)))
    failures = comm.bcast(failures, root=0)
    if comm.rank == 0:
        print("path_mpi_check on %d ranks: %s" % (comm.size, "FAILED" if failures else "OK"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
