"""mpigraph profiles its own analysis: `mpigraph analyze` run under the shim records the
analysis's MPI calls and reports them (issue 28); a Python program whose MPI was finalised past
the shim keeps its raw logs with a clear line instead of an analysis aborted in MPI."""

import os
import sys

import pytest

import mpi_env
from mpigraph.testing import synth

# The analysis's stages (mpigraph.analysis.analyze): trace, clock, match, metrics, path, report;
# each runs through parallel.collectively, which ends in an Ibarrier and an allgather.
STAGES = 6


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    synth.write_noisy(run, ranks=4, calls=200)
    return run


def test_analyze_under_the_shim_reports_its_own_calls(run_dir, wheel, tmp_path):
    own, report = tmp_path / "own", tmp_path / "report"
    result = mpi_env.mpirun(wheel, 2, [sys.executable, "-m", "mpigraph", "analyze", run_dir, "--out", report,
                                       "--quiet"], out=own)
    assert result.returncode == 0, result.stderr
    assert "after finalizing" not in result.stderr
    assert (report / "summary.txt").exists()             # the run it was asked to analyse
    calls = mpi_env.read_functions_csv(own / "functions.csv")     # and the analysis's own run
    assert calls["MPI_Init_thread"] == 2 and calls["MPI_Finalize"] == 2
    assert calls["MPI_Ibarrier"] >= 2 * STAGES and calls["MPI_Allgather"] >= 2 * STAGES
    summary = (own / "summary.txt").read_text()
    assert "ranks          2 (all finalized)" in summary


def test_finalized_past_the_shim_keeps_the_logs(wheel, tmp_path):
    out = tmp_path / "run"
    program = os.path.join(mpi_env.PROGRAMS, "finalize_past_shim.py")
    result = mpi_env.mpirun(wheel, 2, [sys.executable, program], out=out)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("MPI was finalised before mpigraph closed the log") == 2
    assert "after finalizing" not in result.stderr
    assert sorted(os.listdir(out / "raw")) == ["rank-0.log", "rank-1.log"]
    assert not (out / "summary.txt").exists()
