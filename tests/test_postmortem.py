"""Runs that do not end well: a rank killed with SIGKILL, a segfault, a rank late to MPI_Finalize.

The raw logs must hold every record up to the end, `mpigraph analyze` must
report them (exit 0, a warning naming the ranks that did not finalise) and
the in-job analysis must never wait forever for a rank that does not come.
Programs: tests/shim_programs/crash.c.  Hang guards (HANG_GUARD) only stop a
broken run; no test depends on how long anything takes.
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
from mpigraph.trace import record as R

HERE = os.path.dirname(os.path.abspath(__file__))
NPROCS = 4
SHARED_ITERATIONS, PRIVATE_ITERATIONS = 50, 20   # as in crash.c
HANG_GUARD = 300   # seconds: only to stop a run that hangs


@pytest.fixture(scope="module")
def crash_program(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    return mpi, builder.build(os.path.join(HERE, "shim_programs", "crash.c"), mpi.mpicc)


def launch(mpi, exe, mode, out, *launcher_flags, **rank_env):
    """Start the program under the shim in its own session (so the whole job can be killed)."""
    env_for_ranks = {"LD_PRELOAD": mpi_env.shim_path(), "MPIGRAPH_OUT": str(out), **rank_env}
    cmd = [mpi.mpiexec, *launcher_flags, "-n", str(NPROCS)]
    for name, value in env_for_ranks.items():
        cmd += ["-genv", name, str(value)]
    return subprocess.Popen(cmd + [exe, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=mpi_env.base_env(), cwd=mpi_env.NEUTRAL_CWD, start_new_session=True)


def header(path):
    with open(path, "rb") as f:
        return np.frombuffer(f.read(R.HEADER_DTYPE.itemsize), R.HEADER_DTYPE)[0]


def wait_for(condition, what):
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        assert time.monotonic() < deadline, "hang guard: %s never happened" % what
        time.sleep(0.05)


def log_path(out, rank):
    return out / "raw" / ("rank-%d.log" % rank)


def read_ranks_csv(run_dir):
    with open(run_dir / "ranks.csv", newline="") as f:
        return {int(row["rank"]): row for row in csv.DictReader(f)}


def calls_of(records, name):
    return int(((records["func"] == F.BY_NAME[name].id) & (records["flags"] & R.PART == 0)).sum())


def records_of(path):
    h = header(path)
    return np.fromfile(path, R.RECORD_DTYPE, count=int(h["n_records"]), offset=R.HEADER_SIZE)


def last_call(path):
    records = records_of(path)
    return F.name_of(records["func"][-1]) if len(records) else None


def test_sigkill_of_one_rank_is_reported_with_every_record(crash_program, tmp_path):
    """Rank 2 is killed with SIGKILL mid-run; the others go on to MPI_Finalize.

    -disable-auto-cleanup asks hydra not to kill the other ranks at once.  They
    reach MPI_Finalize, where the shim waits MPIGRAPH_FINALIZE_TIMEOUT for rank
    2, names it and closes their logs; MPICH's own MPI_Finalize then waits for
    rank 2 forever, so the test ends the job as a time limit would.  (Hydra
    sometimes takes the job down by itself after the kill: then the logs of
    ranks 0, 1, 3 end with their MPI_Finalize call, not closed.)
    """
    mpi, exe = crash_program
    out = tmp_path / "run"
    job = launch(mpi, exe, "hang-rank2", out, "-disable-auto-cleanup", MPIGRAPH_FINALIZE_TIMEOUT=3)
    survivors = [0, 1, 3]
    try:
        # Kill rank 2 while it is recording its probes, once the others wait in MPI_Finalize
        # (their logs, read while they run, end with the call).
        wait_for(lambda: all(log_path(out, r).exists() for r in range(NPROCS))
                 and header(log_path(out, 2))["n_records"] > 200
                 and all(last_call(log_path(out, r)) == "MPI_Finalize" for r in survivors),
                 "rank 2 recording its probes, ranks 0, 1, 3 in MPI_Finalize")
        victim = header(log_path(out, 2))
        seen_before_kill = int(victim["n_records"])
        os.kill(int(victim["pid"]), signal.SIGKILL)
        wait_for(lambda: job.poll() is not None
                 or all(header(log_path(out, r))["flags"] & R.HEADER_FINALIZED for r in survivors),
                 "ranks 0, 1, 3 closing their logs, or the job ending")
        time.sleep(0.5)   # rank 0 prints its message just before closing its log
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        _, stderr = job.communicate()
    closed = [bool(header(log_path(out, r))["flags"] & R.HEADER_FINALIZED) for r in range(NPROCS)]
    assert not closed[2]
    if all(closed[r] for r in survivors):
        assert ("mpigraph: rank 2 did not reach MPI_Finalize within 3 s (MPIGRAPH_FINALIZE_TIMEOUT): no analysis "
                "in the job; the raw logs are in %s (once the job is over: mpigraph analyze %s)" % (out, out)
                ) in stderr
    assert not (out / "summary.txt").exists()

    result = mpi_env.mpigraph(["analyze", out, "--quiet"])
    assert result.returncode == 0, result.stderr
    assert ("mpigraph: warning: rank 2 did not reach MPI_Finalize (crashed or killed): their times end at their "
            "last record") in result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    summary = (out / "summary.txt").read_text()
    assert "ranks          4 (3 finalized)" in summary
    ranks = read_ranks_csv(out)
    for rank in range(NPROCS):
        records = records_of(log_path(out, rank))
        assert int(ranks[rank]["records"]) == len(records), "every record of rank %d is in the report" % rank
        assert ranks[rank]["finalized"] == ("false" if rank == 2 else "true")
        assert ranks[rank]["log_closed"] == ("true" if closed[rank] else "false")
        assert calls_of(records, "MPI_Allreduce") == SHARED_ITERATIONS + (0 if rank == 2 else PRIVATE_ITERATIONS)
        assert int(ranks[rank]["incomplete_requests"]) == 1   # the tag-999 Irecv nobody answers
    assert int(ranks[2]["records"]) >= seen_before_kill
    probes = calls_of(records_of(log_path(out, 2)), "MPI_Iprobe")
    assert probes >= seen_before_kill - 1 - 1 - SHARED_ITERATIONS - 2   # Init, Irecv, Allreduces, split + part
    functions = mpi_env.read_functions_csv(out / "functions.csv")
    assert functions["MPI_Allreduce"] == NPROCS * SHARED_ITERATIONS + 3 * PRIVATE_ITERATIONS
    assert functions["MPI_Finalize"] == 3 and functions["MPI_Iprobe"] == probes


def test_segfault_kills_the_job_and_the_logs_still_report_it(crash_program, tmp_path):
    """Rank 1 segfaults; hydra kills the others, blocked in a Barrier (the job is gone, as at a time limit)."""
    mpi, exe = crash_program
    out = tmp_path / "run"
    shimmed = mpi_env.mpirun(mpi, NPROCS, [exe, "segv-rank1"], out=out)
    plain = mpi_env.mpirun(mpi, NPROCS, [exe, "segv-rank1"])
    assert shimmed.returncode == plain.returncode != 0   # the crash is the program's, unchanged

    result = mpi_env.mpigraph(["analyze", out])
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("mpigraph: warning: ")]
    assert warnings == [
        "mpigraph: warning: ranks 0, 1, 2, 3 did not reach MPI_Finalize (crashed or killed): their times end at "
        "their last record",
        "mpigraph: warning: 4 nonblocking operations started and never completed, on ranks 0, 1, 2, 3 (see "
        "incomplete_requests in ranks.csv): cut off by the end of the log, or never waited for"]
    assert "ranks          4 (0 finalized)" in result.stdout
    functions = mpi_env.read_functions_csv(out / "functions.csv")
    # Everything before the crash, on every rank: nothing after it (Barrier never returned, no Finalize).
    # (The tokens' sends return before rank 1 has them: whether their records are written before
    # hydra kills the job is a race, so they are not counted here.)
    sends = functions.pop("MPI_Send", 0)
    assert functions == {"MPI_Allreduce": NPROCS * SHARED_ITERATIONS, "MPI_Init": NPROCS, "MPI_Irecv": NPROCS,
                         "MPI_Recv": 3}
    assert sends <= 3


def test_a_late_rank_does_not_hang_the_analysis(crash_program, tmp_path):
    """Rank 3 reaches MPI_Finalize 4 s after the others; they wait 1 s, then leave the logs for later."""
    mpi, exe = crash_program
    out = tmp_path / "run"
    job = launch(mpi, exe, "late-rank3", out, MPIGRAPH_FINALIZE_TIMEOUT=1)
    try:
        stdout, stderr = job.communicate(timeout=HANG_GUARD)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0, stderr
    # (UCX and MPICH may add warnings of their own about the program's never-completed Irecv, with or
    # without the shim.)
    assert sorted(line for line in stdout.splitlines() if "finalized" in line) == [
        "rank %d finalized" % r for r in range(NPROCS)]
    messages = [line for line in stderr.splitlines() if line.startswith("mpigraph:")]
    assert messages == [
        "mpigraph: rank 3 did not reach MPI_Finalize within 1 s (MPIGRAPH_FINALIZE_TIMEOUT): no analysis in the "
        "job; the raw logs are in %s (once the job is over: mpigraph analyze %s)" % (out, out),
        "mpigraph: rank 3: no answer from rank 0 within 7 s of reaching MPI_Finalize (MPIGRAPH_FINALIZE_TIMEOUT): "
        "no analysis in the job; the raw logs are in %s" % out]
    assert not (out / "summary.txt").exists()
    assert all(header(log_path(out, r))["flags"] & R.HEADER_FINALIZED for r in range(NPROCS))
    result = mpi_env.mpigraph(["analyze", out, "--quiet"])
    assert result.returncode == 0 and "did not reach" not in result.stderr, result.stderr
    assert "ranks          4 (all finalized)" in (out / "summary.txt").read_text()
