"""Known answers for one-sided synchronisation beyond MPI_Win_wait: MPI_Win_test loops closing a
post/start/complete/wait exposure epoch, and exclusive passive-target locks (recorded, not
matched: docs/concepts.md says why).

tests/programs/rma_sync.c runs on 4 ranks under the shim, ITERATIONS iterations, each after an
MPI_Barrier (see its header).  From the design alone:

    test_early  origin 3 computes DELAY between MPI_Win_start and MPI_Put; the target polls
                MPI_Win_test: the successful test (flag 1, ITERATIONS of them) ends each epoch, so
                the target's loop is released by origin 3's MPI_Win_complete and the critical path
                takes origin 3's delay (at least 0.9 of ITERATIONS x DELAY: it is wall time);
    test_late   the target computes DELAY before MPI_Win_post: every origin waits about DELAY
                per iteration (late post), the path takes the target's delay;
    both        whatif's graph: one rma_early_wait edge per origin and epoch (P - 1 per
                iteration: without the test closing the epoch there would be none), T(0) the
                report's path length, and far out (dL = 1 s) 2 latencies per N-to-N instance
                (5 barriers and MPI_Win_create, d = ceil(log2 4) = 2) plus 2 per iteration: the
                post reaches an origin's MPI_Win_start or MPI_Put (both end after the post
                started: test_early's origin 3 computes before its put), whose MPI_Win_complete then
                ends the loop; test_late: 2 where an origin waited for the post in its
                MPI_Win_start or MPI_Put, 1 where only in its complete (read from the run:
                test_whatif_sync.waited_before_complete).
    lock        every MPI_Win_lock record says exclusive (tag 1) and names target 0; no wait
                state is claimed for the lock (not matched).
The runs use MPIGRAPH_CLOCK=none: one host's clock.
"""

import numpy as np
import pyarrow.parquet as pq
import pytest

import mpi_env
from test_whatif_sync import waited_before_complete

RANKS = 4
ITERATIONS = 4
DELAY_NS = 50e6                  # DELAY_MS of rma_sync.c
MIN_SHARE = 0.6                  # a waiting rank waits at least this share of the delay (test_neighbor_rma.py)
HUBS = ITERATIONS + 2            # the barriers (one per iteration, one before MPI_Win_free) and MPI_Win_create


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("programs")))
    return mpi, builder.build("rma_sync.c", mpi.mpicc)


_RUNS = {}


def run_mode(mode, program, tmp_path_factory):
    """(mode, run directory) of one mode, run once per session."""
    if mode not in _RUNS:
        mpi, exe = program
        out = tmp_path_factory.mktemp(mode) / "run"
        done = mpi_env.mpirun(mpi, RANKS, [exe, mode, ITERATIONS], out=out,
                              rank_env={"MPIGRAPH_CLOCK": "none", "MPIGRAPH_QUIET": "1"})
        assert done.returncode == 0, done.stdout + done.stderr
        _RUNS[mode] = str(out)
    return mode, _RUNS[mode]


@pytest.fixture
def run(request, program, tmp_path_factory):
    return run_mode(request.param, program, tmp_path_factory)


def table(run_dir, name):
    t = pq.read_table("%s/%s.parquet" % (run_dir, name)).to_pydict()
    return {k: np.array(v, object if isinstance(v[0], str) else None) for k, v in t.items()}


@pytest.mark.parametrize("run", ["test_early", "test_late"], indirect=True)
def test_win_test_loop_ends_the_epoch(run):
    mode, run_dir = run
    calls = table(run_dir, "calls")
    tests = calls["function"] == "MPI_Win_test"
    assert (calls["rank"][tests] == 0).all() and tests.sum() >= ITERATIONS
    assert (calls["tag"][tests] == 1).sum() == ITERATIONS          # one successful test per epoch
    ranks = table(run_dir, "ranks")
    late = RANKS - 1 if mode == "test_early" else 0
    assert ranks["time_on_path_ns"][late] >= 0.9 * ITERATIONS * DELAY_NS, ranks["time_on_path_ns"]
    if mode == "test_late":
        for origin in range(1, RANKS):
            assert ranks["late_post_ns"][origin] >= MIN_SHARE * ITERATIONS * DELAY_NS, ranks["late_post_ns"]


@pytest.mark.parametrize("run", ["test_early", "test_late"], indirect=True)
def test_whatif_graph_of_a_win_test_loop(run):
    from mpigraph.whatif import build, whatif

    mode, run_dir = run
    graph = build.build(build.matched_run(run_dir, "none"))
    assert (graph.kind == build.KIND_NAMES.index("rma_early_wait")).sum() == ITERATIONS * (RANKS - 1)
    assert (graph.kind == build.KIND_NAMES.index("rma_late_post")).sum() == ITERATIONS * (RANKS - 1)
    result = whatif(run_dir, latency=(0.0, 1.0), clock="none")
    chain = 2 * ITERATIONS if mode == "test_early" else (1 + waited_before_complete(run_dir)).sum()
    assert result.pieces[-1]["lambda_L"] == 2 * HUBS + chain, result.pieces
    path = pq.read_table(run_dir + "/critical_path.parquet").to_pydict()
    assert result.T0_s == pytest.approx(sum(path["duration_ns"]) * 1e-9, abs=1e-9)
    assert result.T0_s == pytest.approx(result.measured_s, abs=1e-9)


def test_exclusive_locks_are_recorded_not_matched(program, tmp_path_factory):
    _, run_dir = run_mode("lock", program, tmp_path_factory)
    calls = table(run_dir, "calls")
    lock = calls["function"] == "MPI_Win_lock"
    assert lock.sum() == ITERATIONS * (RANKS - 1)
    assert (calls["tag"][lock] == 1).all() and (calls["peer"][lock] == 0).all()
    for name in ("MPI_Win_lock", "MPI_Put", "MPI_Win_flush", "MPI_Win_unlock"):
        assert (calls["wait_state"][calls["function"] == name] == "").all()
