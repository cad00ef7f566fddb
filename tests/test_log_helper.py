"""MPIGRAPH_LOG_HELPER=auto (the default) starts the helper thread that prepares
the log's pages only where a rank has a CPU to spare: more CPUs in its affinity
mask than threads of the node's ranks sharing that mask.  The log's header says
whether the helper ran (RankLog.log_helper).  Expectations are computed from
this machine's own affinity mask, so the tests hold on any number of cores."""

import os

import pytest

import mpi_env
from mpigraph.trace import logs as trace

SHIM_PROGRAMS = os.path.join(os.path.dirname(__file__), "shim_programs")
CPUS = len(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def programs(wheel, builder):
    """MPI only, and MPI + OpenMP (linked with the OpenMP runtime)."""
    return {"plain": builder.build(os.path.join(SHIM_PROGRAMS, "many_calls.c"), wheel.mpicc),
            "openmp": builder.build(os.path.join(SHIM_PROGRAMS, "hybrid_calls.c"), wheel.mpicc, flags=("-fopenmp",))}


def helper_ran(wheel, tmp_path, ranks, argv, rank_env=None):
    """Whether each rank's log says its helper thread ran."""
    out = tmp_path / "run"
    env = {"MPIGRAPH_ANALYZE": "off", **(rank_env or {})}
    result = mpi_env.mpirun(wheel, ranks, argv + ["1000"], out=out, rank_env=env)
    assert result.returncode == 0 and result.stdout == "done 1000\n", result.stderr
    return [trace.open_log(out / "raw" / ("rank-%d.log" % r)).log_helper for r in range(ranks)]


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_auto_counts_the_ranks_sharing_the_cpus(wheel, programs, tmp_path, ranks):
    assert helper_ran(wheel, tmp_path, ranks, [programs["plain"]]) == [ranks < CPUS] * ranks


def test_auto_leaves_a_rank_bound_to_one_cpu_without_helper(wheel, programs, tmp_path):
    one_cpu = str(min(os.sched_getaffinity(0)))
    assert helper_ran(wheel, tmp_path, 1, ["taskset", "-c", one_cpu, programs["plain"]]) == [False]


@pytest.mark.parametrize("omp_threads, expected", [(None, False), ("1", 1 < CPUS), (str(CPUS), False)])
def test_auto_counts_the_openmp_threads(wheel, programs, tmp_path, omp_threads, expected):
    """An OpenMP runtime without OMP_NUM_THREADS takes every CPU of the mask."""
    env = {"OMP_NUM_THREADS": omp_threads} if omp_threads else {}
    assert helper_ran(wheel, tmp_path, 1, [programs["openmp"]], env) == [expected]


def test_auto_ignores_openmp_settings_of_a_program_without_openmp(wheel, programs, tmp_path):
    assert helper_ran(wheel, tmp_path, 1, [programs["plain"]], {"OMP_NUM_THREADS": str(CPUS)}) == [1 < CPUS]


@pytest.mark.parametrize("setting, expected", [("on", True), ("off", False)])
def test_on_and_off_override_auto(wheel, programs, tmp_path, setting, expected):
    env = {"MPIGRAPH_LOG_HELPER": setting}
    assert helper_ran(wheel, tmp_path, 2, [programs["plain"]], env) == [expected] * 2
    assert helper_ran(wheel, tmp_path / "one", 1, [programs["plain"]], env) == [expected]
