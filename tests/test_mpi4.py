"""MPI-4 persistent collectives, partitioned communication and neighbourhood collectives are
recorded: exact counts, partitioned messages matched, each start of a persistent collective
numbered on its communicator like a collective.

tests/programs/mpi4.c on 3 ranks, plainly and under the shim (the program's output must not
change).  The counts below follow the program's numbered steps.
"""

import numpy as np
import pytest

import count_calls
import mpi_env
from mpigraph.trace import functions as F
from mpigraph.trace import logs
from mpigraph.trace import record as R

NPROCS = 3
ITERATIONS, PARTITIONS = 4, 4        # as in mpi4.c


def expected_counts(nranks):
    per_rank = {
        # 1: persistent allreduce
        "MPI_Allreduce_init": 1, "MPI_Start": ITERATIONS, "MPI_Wait": ITERATIONS + 1, "MPI_Request_free": 1 + 2,
        # 2: neighbourhood collectives on a ring (+ the Wait counted above)
        "MPI_Cart_create": 1, "MPI_Neighbor_alltoall": 1, "MPI_Ineighbor_allgather": 1, "MPI_Comm_free": 1,
        # 3: partitioned
        "MPI_Psend_init": 1, "MPI_Precv_init": 1, "MPI_Startall": ITERATIONS, "MPI_Pready": ITERATIONS * PARTITIONS,
        "MPI_Waitall": ITERATIONS,
    }
    return {name: n * nranks for name, n in per_rank.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    exe = builder.build("mpi4.c", mpi.mpicc)
    plain = mpi_env.mpirun(mpi, NPROCS, [exe])
    assert plain.returncode == 0, plain.stderr
    out = tmp_path_factory.mktemp("mpi4") / "run"
    shimmed = mpi_env.mpirun(mpi, NPROCS, [exe], out=out,
                             rank_env=count_calls.preload(count_calls.build(builder, mpi)))
    assert shimmed.returncode == 0, shimmed.stderr
    return plain, shimmed, out


def test_output_is_unchanged(runs):
    plain, shimmed, _ = runs
    lines = lambda text: sorted(line for line in text.splitlines() if line.startswith("mpi4:"))  # noqa: E731
    assert lines(shimmed.stdout) == lines(plain.stdout) and len(lines(plain.stdout)) == NPROCS


def test_counts_are_exact(runs):
    _, shimmed, out = runs
    counts = mpi_env.read_functions_csv(out / "functions.csv")
    for name, n in expected_counts(NPROCS).items():
        assert counts.get(name) == n, (name, counts.get(name), n)
    # The independent counter preloaded before the shim saw the same calls.
    independent = count_calls.totals(shimmed.stderr)
    assert set(independent) == set(expected_counts(NPROCS)), independent
    assert all(counts.get(name) == n for name, n in independent.items()), (independent, counts)


def test_partitioned_messages_are_matched(runs):
    _, _, out = runs
    assert "Unmatched operations: none" in (out / "summary.txt").read_text()
    with open(out / "unmatched.csv") as f:
        assert len(f.read().splitlines()) == 1       # the header only


def test_each_start_of_a_persistent_collective_is_numbered_alike_on_every_rank(runs):
    _, _, out = runs
    start = F.BY_NAME["MPI_Start"].id
    numbers = []
    for log in logs.open_run(str(out)).logs.values():
        r = np.asarray(log.records)
        parts = r[(r["func"] == start) & ((r["flags"] & R.PART) != 0)]
        assert ((parts["flags"] & R.COLLECTIVE) != 0).all() and len(parts) == ITERATIONS
        numbers.append(parts["seq"].tolist())
    assert all(n == numbers[0] for n in numbers)
    assert np.all(np.diff(numbers[0]) == 1) and numbers[0][0] >= 2    # after the init's own number
