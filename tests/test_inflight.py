"""Calls in flight when a run ends badly: a deadlock killed from outside, a rank calling MPI_Abort.

The shim writes a blocking call's start into the log header before the call
(csrc/shim.h: mg_begin); `mpigraph analyze` of the killed run names, per
rank, the call it was in, and the cycle of ranks blocked on each other.
Programs: tests/programs/deadlock.c, abort.c.  Hang guards only stop a broken
run; no assertion depends on how long anything takes.
"""

import csv
import os
import signal
import subprocess
import time

import numpy as np
import pytest

import mpi_env
from mpigraph.trace import functions as F
from mpigraph.trace import inflight
from mpigraph.trace import record as R

HANG_GUARD = 300   # seconds: only to stop a run that hangs


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    return mpi, builder


def launch(mpi, exe, nprocs, out):
    """The program under the shim in its own session (so the whole job can be killed)."""
    cmd = [mpi.mpiexec, "-n", str(nprocs), "-genv", "LD_PRELOAD", mpi_env.shim_path(), "-genv", "MPIGRAPH_OUT",
           str(out), exe]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=mpi_env.base_env(),
                            cwd=mpi_env.NEUTRAL_CWD, start_new_session=True)


def header(path):
    with open(path, "rb") as f:
        data = f.read(R.HEADER_DTYPE.itemsize)
    return np.frombuffer(data, R.HEADER_DTYPE)[0] if len(data) == R.HEADER_DTYPE.itemsize else None


def in_flight(out, rank):
    """The function names in flight in rank's log header right now."""
    path = out / "raw" / ("rank-%d.log" % rank)
    h = header(path) if path.exists() else None
    return [] if h is None else [F.name_of(f) for f in h["inflight"]["func"] if f]


def wait_for(condition, what):
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        assert time.monotonic() < deadline, "hang guard: %s never happened" % what
        time.sleep(0.05)


def read_inflight_csv(run_dir):
    with open(run_dir / inflight.CSV_NAME, newline="") as f:
        return list(csv.DictReader(f))


# ---- the wait-for graph, by hand -------------------------------------------------------

def edges(pairs):
    src, dst = zip(*pairs) if pairs else ((), ())
    return np.array(src, np.int64), np.array(dst, np.int64)


def test_deadlocks_are_ranks_waiting_for_each_other():
    # 0 <-> 1, 2 -> 3 -> 4 -> 2, 6 -> 5 (5 waits for nobody), 7 -> 7 (a receive from itself)
    src, dst = edges([(0, 1), (1, 0), (2, 3), (3, 4), (4, 2), (6, 5), (7, 7)])
    rows = np.array([0, 1, 2, 3, 4, 6, 7])
    row_deadlock, found = inflight.deadlocks(rows, src, dst, 8)
    assert found == [[0, 1], [2, 3, 4], [7]]
    assert row_deadlock.tolist() == [0, 0, 1, 1, 1, -1, 2]
    # a chain into a cycle: only the cycle is deadlocked, the rank behind it waits on it
    row_deadlock, found = inflight.deadlocks(np.array([0, 1, 2, 3]), *edges([(0, 1), (1, 2), (2, 3), (3, 2)]), 4)
    assert found == [[2, 3]] and row_deadlock.tolist() == [-1, -1, 0, 0]
    assert inflight.deadlocks(np.array([0]), *edges([]), 2)[1] == []


def table(rows):
    """An in-flight table from (rank, function, peer, comm, seq, root) rows."""
    names = ("rank", "function", "peer", "comm", "seq", "root")
    t = {n: np.array([r[i] for r in rows], object if n == "function" else np.int64) for i, n in enumerate(names)}
    t["func"] = np.array([F.BY_NAME[f].id for f in t["function"]], np.int64)
    return t


def test_wait_edges_of_point_to_point_and_collective_calls():
    world = {0: np.arange(4)}
    # rank 0 in MPI_Recv from 1; ranks 1 and 2 in the same barrier (#3 on world); rank 3 computes
    src, dst = inflight.wait_edges(table([(0, "MPI_Recv", 1, 0, 0, -1), (1, "MPI_Barrier", -1, 0, 3, -1),
                                          (2, "MPI_Barrier", -1, 0, 3, -1)]), world)
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (1, 0), (1, 3), (2, 0), (2, 3)]
    # a non-root in a broadcast waits for its root only; the root of a reduce for the others
    src, dst = inflight.wait_edges(table([(1, "MPI_Bcast", -1, 0, 2, 0), (0, "MPI_Reduce", -1, 0, 5, 0),
                                          (2, "MPI_Reduce", -1, 0, 5, 0)]), world)
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (0, 3), (1, 0)]
    # any source, a scan, a communicator whose members are unknown: no edge
    src, dst = inflight.wait_edges(table([(0, "MPI_Recv", R.PEER_ANY, 0, 0, -1), (1, "MPI_Scan", -1, 0, 4, -1),
                                          (2, "MPI_Barrier", -1, 77, 1, -1)]), world)
    assert len(src) == 0


# ---- real runs ---------------------------------------------------------------------------

def test_killed_deadlock_shows_both_blocked_receives(wheel, tmp_path):
    mpi, builder = wheel
    exe = builder.build("deadlock.c", mpi.mpicc)
    out = tmp_path / "run"
    job = launch(mpi, exe, 2, out)
    try:
        wait_for(lambda: all(in_flight(out, r) == ["MPI_Recv"] for r in (0, 1)), "both ranks in MPI_Recv")
    finally:
        os.killpg(job.pid, signal.SIGKILL)      # what a batch system's time limit does
        job.communicate()
    result = mpi_env.mpigraph(["analyze", out, "--quiet"])
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.txt").read_text()
    assert "deadlock: 0 -> 1 -> 0" in summary, summary
    assert "rank 0: MPI_Recv, peer 1, tag 99, comm 0" in summary
    assert "rank 1: MPI_Recv, peer 0, tag 99, comm 0" in summary
    rows = read_inflight_csv(out)
    assert [(r["rank"], r["function"], r["peer"], r["tag"], r["deadlock"]) for r in rows] == [
        ("0", "MPI_Recv", "1", "99", "0"), ("1", "MPI_Recv", "0", "99", "0")]
    # since: after the barrier that both left, on the rank's own clock from its MPI_Init
    assert all(float(r["since_s"]) > 0 for r in rows)


def test_abort_names_the_rank_and_its_error_code(wheel, tmp_path):
    mpi, builder = wheel
    exe = builder.build("abort.c", mpi.mpicc)
    out = tmp_path / "run"
    job = launch(mpi, exe, 3, out)
    try:
        job.wait(HANG_GUARD)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
    assert job.returncode != 0
    h = header(out / "raw" / "rank-1.log")
    assert h["flags"] & R.HEADER_ABORTED and h["abort_code"] == 7
    result = mpi_env.mpigraph(["analyze", out, "--quiet"])
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.txt").read_text()
    assert "rank 1 called MPI_Abort (error code 7)" in summary, summary
    assert "deadlock" not in summary
    counts = mpi_env.read_functions_csv(out / "functions.csv")
    assert counts["MPI_Abort"] == 1
    # Rank 1 may be shown in its MPI_Abort (killed inside it), with the code as its tag; the ranks
    # the abort took down each in its receive from rank 1, when they were still alive to show it,
    # or still in the barrier before it (rank 1 left the barrier and aborted before they returned
    # from it: a descheduled rank).
    for row in read_inflight_csv(out) if (out / inflight.CSV_NAME).exists() else []:
        if row["rank"] == "1":
            assert (row["function"], row["tag"]) == ("MPI_Abort", "7"), row
        else:
            assert (row["function"], row["peer"], row["tag"]) in (("MPI_Recv", "1", "5"),
                                                                   ("MPI_Barrier", "-1", "-1")), row


def test_deadlock_through_a_barrier(wheel, tmp_path):
    """deadlock_coll.c: rank 0 in MPI_Recv from 1, ranks 1 and 2 in a barrier rank 0 never joins."""
    mpi, builder = wheel
    exe = builder.build("deadlock_coll.c", mpi.mpicc)
    out = tmp_path / "run"
    job = launch(mpi, exe, 3, out)
    try:
        wait_for(lambda: in_flight(out, 0) == ["MPI_Recv"] and in_flight(out, 1) == ["MPI_Barrier"]
                 and in_flight(out, 2) == ["MPI_Barrier"], "rank 0 in MPI_Recv, ranks 1 and 2 in MPI_Barrier")
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
    result = mpi_env.mpigraph(["analyze", out, "--quiet"])
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.txt").read_text()
    assert "deadlock: 0 -> 1 -> 0" in summary, summary
    rows = {r["rank"]: r for r in read_inflight_csv(out)}
    assert (rows["0"]["function"], rows["0"]["peer"], rows["0"]["deadlock"]) == ("MPI_Recv", "1", "0")
    assert (rows["1"]["function"], rows["1"]["seq"], rows["1"]["deadlock"]) == ("MPI_Barrier", "1", "0")
    # rank 2 waits for rank 0 too, but no one waits for it: blocked behind the deadlock, not in it
    assert (rows["2"]["function"], rows["2"]["deadlock"]) == ("MPI_Barrier", "-1")
