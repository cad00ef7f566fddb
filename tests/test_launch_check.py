"""A mismatched MPI: mpigraph analyze as a world of 1 rank while the launcher's environment says the
job has several gives the error naming both MPIs and the fix, and writes nothing (issue 28)."""

import os

import pytest

import mpi_env
from mpigraph.testing import synth
from mpigraph.comm import launch


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    synth.write_noisy(run, ranks=4, calls=50)
    return run


@pytest.mark.parametrize("variables, named", [
    ({"PMI_SIZE": "4", "PMI_RANK": "2"}, "PMI_SIZE=4"),
    ({"OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_SIZE=3"),
    ({"MPI_LOCALNRANKS": "2"}, "MPI_LOCALNRANKS=2"),
    # PMIX_* alone cannot be tried here: the mpich wheel's MPI_Init aborts on it ("launcher not
    # compatible with PMI1 client") before any Python runs; launch_ranks reads it (below).
])
def test_mismatched_launch_is_an_error_before_any_work(run_dir, tmp_path, variables, named):
    out = tmp_path / "report"
    result = mpi_env.mpigraph(["analyze", run_dir, "--out", out], env_extra=variables)
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("mpigraph: error: this process is a world of 1 rank")
    assert named in message
    assert "MPICH" in message                    # the analysis's MPI (the mpich wheel's), by name
    assert "MPI4PY_LIBMPI" in message and "mpiexec" in message      # the fix
    assert not out.exists()                      # nothing written
    assert sorted(os.listdir(run_dir)) == ["raw"]


def test_a_matching_single_rank_launch_analyses(run_dir, tmp_path):
    out = tmp_path / "report"
    result = mpi_env.mpigraph(["analyze", run_dir, "--out", out, "--quiet"],
                              env_extra={"PMI_SIZE": "1", "PMI_RANK": "0"})
    assert result.returncode == 0, result.stderr
    assert (out / "summary.txt").exists()


def test_launcher_ranks_reads_size_and_rank_variables():
    assert launch.launcher_ranks({}) is None
    assert launch.launcher_ranks({"PMI_SIZE": "1", "PMI_RANK": "0"}) is None
    assert launch.launcher_ranks({"PMI_SIZE": "x"}) is None
    assert launch.launcher_ranks({"OMPI_COMM_WORLD_SIZE": "8"})[:2] == ("OMPI_COMM_WORLD_SIZE", 8)
    assert launch.launcher_ranks({"PMIX_RANK": "3"})[:2] == ("PMIX_RANK", 3)
