"""In the job a small run is analysed by fewer ranks than the program has (issue 28): the shim
gives the analysis ceil(records / 1e6) ranks, the first ones of MPI_COMM_WORLD, and the others
leave MPI_Finalize at once.  The report is the one an offline analysis on one rank writes."""

import filecmp
import os
import sys

import pyarrow.dataset as ds

import mpi_env

EMPTY = os.path.join(mpi_env.REPO, "benchmarks", "init_finalize.c")


def test_an_empty_program_is_analysed_by_one_rank(wheel, builder, tmp_path):
    exe = builder.build(EMPTY, wheel.mpicc)
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 4, [exe], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    # 4 ranks x (MPI_Init, MPI_Finalize) = 8 records: one analysis rank, one part per dataset.
    for name in ("calls.parquet", "waitstates.parquet", "critical_path.parquet"):
        assert os.listdir(run / name) == ["part-0000.parquet"], name
    offline = tmp_path / "offline"
    done = mpi_env.mpigraph(["analyze", run, "--out", offline, "--quiet"])
    assert done.returncode == 0, done.stderr
    for name in ("calls.parquet", "critical_path.parquet", "ranks.parquet"):
        assert ds.dataset(run / name).to_table().equals(ds.dataset(offline / name).to_table()), name
    assert filecmp.cmp(run / "functions.csv", offline / "functions.csv", shallow=False)


def test_a_python_program_is_analysed_by_one_rank(wheel, tmp_path):
    program = os.path.join(mpi_env.PROGRAMS, "calls_py.py")
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 3, [sys.executable, program], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists()
    assert os.listdir(run / "calls.parquet") == ["part-0000.parquet"]
    assert "ranks          3 (all finalized)" in (run / "summary.txt").read_text()
