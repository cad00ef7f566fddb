"""MPI-IO and one-sided communication are recorded: exact counts, MPI time, fences as collectives.

tests/programs/io_rma.c on 4 ranks, plainly and under the shim: a shared
file written with MPI_File_write_at_all and MPI_File_write_all, then
ITERATIONS epochs of MPI_Put between MPI_Win_fence calls, the last rank
computing before each closing fence.  The counts below follow the program
step by step; the program's own output must not change under the shim.
"""

import csv
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

import count_calls
import mpi_env

NPROCS = 4
ITERATIONS = 5        # as in io_rma.c
BLOCK_BYTES = 1024 * 4


def expected_counts(nranks):
    """Calls of the whole run, from io_rma.c: step 1 (the file), step 2 (the window)."""
    per_rank = {"MPI_File_open": 1, "MPI_File_write_at_all": 1, "MPI_File_set_view": 1, "MPI_File_write_all": 1,
                "MPI_File_close": 1,
                "MPI_Win_create": 1, "MPI_Win_fence": 1 + ITERATIONS, "MPI_Put": ITERATIONS, "MPI_Win_free": 1}
    return {name: n * nranks for name, n in per_rank.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    exe = builder.build("io_rma.c", mpi.mpicc)
    base = tmp_path_factory.mktemp("io_rma")
    plain = mpi_env.mpirun(mpi, NPROCS, [exe, str(base / "plain.dat")])
    assert plain.returncode == 0, plain.stderr
    out = base / "run"
    counter = count_calls.build(builder, mpi)
    shimmed = mpi_env.mpirun(mpi, NPROCS, [exe, str(base / "shimmed.dat")], out=out,
                             rank_env=count_calls.preload(counter))
    assert shimmed.returncode == 0, shimmed.stderr
    return plain, shimmed, out, base


def program_lines(text):
    return sorted(line for line in text.splitlines() if line.startswith("io_rma:"))


def test_program_output_and_file_are_unchanged(runs):
    plain, shimmed, _, base = runs
    mine = lambda lines: [re.sub(r" spin \S+", "", line) for line in lines]   # noqa: E731  (timing)
    assert mine(program_lines(shimmed.stdout)) == mine(program_lines(plain.stdout))
    assert (base / "plain.dat").read_bytes() == (base / "shimmed.dat").read_bytes()


def test_counts_are_exact(runs):
    _, shimmed, out, _ = runs
    counts = mpi_env.read_functions_csv(out / "functions.csv")
    for name, n in expected_counts(NPROCS).items():
        assert counts.get(name) == n, (name, counts.get(name), n)
    # The independent counter preloaded before the shim saw the same calls.
    independent = count_calls.totals(shimmed.stderr)
    assert set(independent) == set(expected_counts(NPROCS)), independent
    assert all(counts.get(name) == n for name, n in independent.items()), (independent, counts)


def test_collective_file_writes_count_their_bytes(runs):
    _, _, out, _ = runs
    with open(out / "functions.csv", newline="") as f:
        rows = {row["function"]: row for row in csv.DictReader(f)}
    for name in ("MPI_File_write_all", "MPI_File_write_at_all"):
        assert int(rows[name]["bytes_collective"]) == NPROCS * BLOCK_BYTES


def test_fences_and_file_operations_are_collective_instances(runs):
    _, _, out, _ = runs
    c = pq.read_table(out / "collectives.parquet").to_pydict()
    functions = np.array(c["function"], object)
    fences = functions == "MPI_Win_fence"
    assert fences.sum() == 1 + ITERATIONS
    assert all(np.array(c["members"])[fences] == NPROCS)
    # The last rank computes before each closing fence: it arrives last at those ITERATIONS fences.
    closing = np.argsort(np.array(c["seq"])[fences])[1:]
    assert (np.array(c["last_rank"])[fences][closing] == NPROCS - 1).all()
    for name in ("MPI_File_open", "MPI_File_write_all", "MPI_File_write_at_all", "MPI_File_close",
                 "MPI_Win_create", "MPI_Win_free"):
        assert (functions == name).sum() == 1 and np.array(c["members"])[functions == name][0] == NPROCS


def test_fence_time_is_mpi_time_spent_waiting_for_the_computing_rank(runs):
    _, shimmed, out, _ = runs
    pattern = r"io_rma: rank (\d+) sum \S+ spin (\S+)"
    spin = {int(m.group(1)): float(m.group(2)) for m in re.finditer(pattern, shimmed.stdout)}
    late = spin[NPROCS - 1]
    assert late > 0
    r = pq.read_table(out / "ranks.parquet").to_pydict()
    for rank in range(NPROCS - 1):
        # The others wait in the closing fences while the last rank spins: that is MPI time (the
        # fence's wait), not their compute.  Half of it is a bound any load leaves (they arrive
        # at the fence long before the spin ends).
        assert r["mpi_time_ns"][rank] >= r["wait_nxn_ns"][rank] >= 0.5 * late * 1e9, (rank, late)
        assert r["compute_ns"][rank] < r["wait_nxn_ns"][rank]
    assert r["compute_ns"][NPROCS - 1] >= 0.5 * late * 1e9


def test_fortran_2008_fences_and_window_free_are_recorded(tmp_path):
    """rma_f08.f90 (use mpi_f08): MPICH's f08 MPI_Win_fence and MPI_Win_free call PMPI directly;
    the shim's bindings (csrc/fortran.c) record them.  Counts only: what the program prints
    is compared plain against shimmed."""
    mpi = mpi_env.debian_mpich()
    if mpi is None or mpi.mpif90 is None:
        pytest.skip("Debian's MPICH with gfortran is not installed (apt-get install mpich libmpich-dev gfortran)")
    exe = mpi_env.Builder(str(tmp_path)).build("rma_f08.f90", mpi.mpif90)
    plain = mpi_env.mpirun(mpi, 2, [exe])
    assert plain.returncode == 0, plain.stderr
    out = tmp_path / "run"
    shimmed = mpi_env.mpirun(mpi, 2, [exe], out=out)
    assert shimmed.returncode == 0, shimmed.stderr
    lines = lambda text: sorted(line for line in text.splitlines() if line.startswith("rma_f08:"))  # noqa: E731
    assert lines(shimmed.stdout) == lines(plain.stdout)
    counts = mpi_env.read_functions_csv(out / "functions.csv")
    iterations = 5      # as in rma_f08.f90
    assert counts["MPI_Win_create"] == 2 and counts["MPI_Win_free"] == 2
    assert counts["MPI_Win_fence"] == 2 * (1 + iterations) and counts["MPI_Put"] == 2 * iterations
