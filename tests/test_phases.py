"""MPI_Pcontrol phases (tests/programs/phases.c): the per-phase tables hold the calls of each
region between the Pcontrol calls, and their sums equal the run's functions table."""

import pytest

import mpi_env

RANKS = 4
ITER = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    exe = mpi_env.Builder(str(tmp_path_factory.mktemp("programs"))).build("phases.c", mpi.mpicc)
    out = tmp_path_factory.mktemp("runs") / "phases"
    result = mpi_env.mpirun(mpi, RANKS, [exe, ITER], out=out, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    import mpigraph

    return mpigraph.load(out)


def test_each_phase_holds_the_calls_of_its_region(run):
    phases = run["phases"]
    assert phases["phase"].tolist() == [0, 1, 2, 3]
    assert phases["level"].tolist() == [-1, 1, 2, 0]
    assert phases["ranks"].tolist() == [RANKS] * 4
    per = run["phase_functions"]
    calls = {(int(p), f): int(n) for p, f, n in zip(per["phase"], per["function"], per["calls"])}
    # Each Pcontrol belongs to the phase it starts; every rank sends and receives ITER times in phase 1.
    assert calls == {(0, "MPI_Init"): RANKS, (0, "MPI_Barrier"): RANKS,
                     (1, "MPI_Pcontrol"): RANKS, (1, "MPI_Send"): RANKS * ITER, (1, "MPI_Recv"): RANKS * ITER,
                     (2, "MPI_Pcontrol"): RANKS, (2, "MPI_Allreduce"): RANKS * ITER,
                     (3, "MPI_Pcontrol"): RANKS, (3, "MPI_Barrier"): RANKS, (3, "MPI_Finalize"): RANKS}
    sent = dict(zip(phases["phase"], phases["bytes_sent"]))
    assert sent == {0: 0, 1: RANKS * ITER * 100, 2: 0, 3: 0}
    assert dict(zip(phases["phase"], phases["bytes_collective"]))[2] == RANKS * ITER * 4 * 8


def test_the_phases_sums_equal_the_run_s(run):
    per = run["phase_functions"].groupby("function").sum(numeric_only=True)
    functions = run.functions.set_index("function")
    for column in ("calls", "time_total_ns", "wait_before_ns", "wait_after_ns", "execution_ns", "bytes_sent",
                   "bytes_received", "bytes_collective"):
        assert per[column].sort_index().tolist() == functions[column].sort_index().tolist(), column
    phases = run["phases"]
    assert int(phases["calls"].sum()) == int(run.ranks["calls"].sum())
    assert int(phases["time_total_ns"].sum()) == int(functions["time_total_ns"].sum())
