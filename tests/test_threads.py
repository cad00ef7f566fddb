"""MPI from 4 threads per rank under MPI_THREAD_MULTIPLE: no record lost or torn, each with its thread.

tests/shim_programs/threads.c: every worker thread t runs ITERATIONS rounds
of Sendrecv (tag t) and Isend + Irecv + Waitall (tag 100 + t) with the same
thread of the other rank, while the others do the same.  The records of a
thread must be exactly its calls, in its order, with its tags; each part
record must follow its own call record; the requests a Waitall completes must
be the ones its own thread started just before.
"""

import os

import numpy as np
import pytest

import mpi_env
from mpigraph.trace import functions as F
from mpigraph.trace import record as R
from mpigraph.trace import logs as trace

THREADS, ITERATIONS = 4, 2000
FID = {name: F.BY_NAME[name].id for name in ("MPI_Sendrecv", "MPI_Isend", "MPI_Irecv", "MPI_Waitall",
                                             "MPI_Init_thread", "MPI_Allreduce", "MPI_Finalize")}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    exe = builder.build(os.path.join(os.path.dirname(__file__), "shim_programs", "threads.c"), mpi.mpicc,
                        flags=["-pthread"])
    out = tmp_path_factory.mktemp("run") / "run"
    result = mpi_env.mpirun(mpi, 2, [exe], out=out, rank_env={"MPIGRAPH_ANALYZE": "off"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "threads ok\n"
    return [trace.open_log(out / "raw" / ("rank-%d.log" % r)) for r in range(2)]   # validated: parts follow calls


def test_header_records_thread_multiple(logs):
    for log in logs:
        assert log.header["thread_level"] == 3   # MPI_THREAD_MULTIPLE in MPICH


def test_main_thread_calls_are_thread_0(logs):
    for log in logs:
        main = log.records[log.records["thread"] == 0]
        assert main["func"].tolist() == [FID["MPI_Init_thread"], FID["MPI_Allreduce"], FID["MPI_Finalize"]]


def test_every_worker_thread_has_all_its_calls(logs):
    for log in logs:
        records = log.records
        calls = records[(records["flags"] & R.PART) == 0]
        workers = sorted(set(calls["thread"].tolist()) - {0})
        assert len(workers) == THREADS
        for thread in workers:
            mine = calls[calls["thread"] == thread]
            # Its calls in its own order: Sendrecv, Isend, Irecv, Waitall, ITERATIONS times.
            pattern = [FID["MPI_Sendrecv"], FID["MPI_Isend"], FID["MPI_Irecv"], FID["MPI_Waitall"]]
            assert mine["func"].tolist() == pattern * ITERATIONS
            # One tag per thread, the same in every record: nothing of another thread mixed in.
            tags = set(mine["tag"][mine["func"] == FID["MPI_Sendrecv"]].tolist())
            assert len(tags) == 1
            (tag,) = tags
            assert set(mine["tag"][mine["func"] == FID["MPI_Isend"]].tolist()) == {100 + tag}
            assert (mine["peer"][mine["func"] != FID["MPI_Waitall"]] == 1 - log.rank).all()
            assert (mine["bytes"][mine["func"] == FID["MPI_Isend"]] == 4).all()
        total_tags = {int(calls["tag"][(calls["thread"] == t) & (calls["func"] == FID["MPI_Sendrecv"])][0])
                      for t in workers}
        assert total_tags == set(range(THREADS))


def test_parts_belong_to_their_own_threads_call(logs):
    for log in logs:
        records = log.records
        owner = trace.call_index(records)
        parts = np.flatnonzero((records["flags"] & R.PART) != 0)
        assert (records["thread"][parts] == records["thread"][owner[parts]]).all()
        # A Waitall's two parts complete the two requests its thread's Isend and Irecv just started.
        waitalls = np.flatnonzero(((records["flags"] & R.PART) == 0) & (records["func"] == FID["MPI_Waitall"]))
        assert len(waitalls) == THREADS * ITERATIONS
        assert ((records["flags"][waitalls + 1] & R.PART) != 0).all()
        assert ((records["flags"][waitalls + 2] & R.PART) != 0).all()
        completed = np.sort(np.stack([records["request"][waitalls + 1], records["request"][waitalls + 2]]), axis=0)
        calls = records[(records["flags"] & R.PART) == 0]
        for thread in set(calls["thread"].tolist()) - {0}:
            mine = calls[calls["thread"] == thread]
            started = np.sort(np.stack([mine["request"][mine["func"] == FID["MPI_Isend"]],
                                        mine["request"][mine["func"] == FID["MPI_Irecv"]]]), axis=0)
            in_thread = records["thread"][waitalls] == thread
            assert (completed[:, in_thread] == started).all()


def test_record_counts_add_up(logs):
    for log in logs:
        # Init_thread, Allreduce, Finalize; per round: Sendrecv + part, Isend, Irecv, Waitall + 2 parts.
        assert log.n_records == 3 + THREADS * ITERATIONS * 7
        assert (log.records["t_end"] >= log.records["t_start"]).all()
