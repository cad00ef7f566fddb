"""What the shim writes, record by record, for a real MPI program on 4 ranks.

The analysis is switched off (MPIGRAPH_ANALYZE=off): these tests read the raw
logs with numpy and check the shim alone.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from mpigraph.trace import functions as F
from mpigraph.trace import record as R
from mpigraph.shim.lib import library_path
from mpigraph.shim.launcher import find_mpi_tool

HERE = os.path.dirname(os.path.abspath(__file__))
NPROCS = 4


def fid(name):
    return F.BY_NAME[name].id


@pytest.fixture(scope="module")
def records_program(tmp_path_factory):
    exe = tmp_path_factory.mktemp("build") / "records"
    subprocess.run([find_mpi_tool("mpicc"), "-O1", "-o", str(exe), os.path.join(HERE, "shim_programs", "records.c")],
                   check=True)
    return str(exe)


def run_under_shim(exe, out, nprocs=NPROCS, extra_env=None):
    cmd = [find_mpi_tool("mpiexec"), "-n", str(nprocs), "-genv", "LD_PRELOAD", library_path(),
           "-genv", "MPIGRAPH_OUT", str(out), "-genv", "MPIGRAPH_ANALYZE", "off"]
    for name, value in (extra_env or {}).items():
        cmd += ["-genv", name, value]
    return subprocess.run(cmd + [exe], capture_output=True, text=True, timeout=300)


def read_log(path):
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[: R.HEADER_DTYPE.itemsize], R.HEADER_DTYPE)[0]
    records = np.frombuffer(raw[R.HEADER_SIZE:], R.RECORD_DTYPE)
    assert len(records) == header["n_records"], "the closed log must hold exactly n_records records"
    return header, records


@pytest.fixture(scope="module")
def logs(records_program, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    result = run_under_shim(records_program, out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "records done\n"
    return [read_log(out / "raw" / ("rank-%d.log" % r)) for r in range(NPROCS)]


def calls(records, name):
    return records[(records["func"] == fid(name)) & (records["flags"] & R.PART == 0)]


def parts(records, name):
    return records[(records["func"] == fid(name)) & (records["flags"] & R.PART != 0)]


def test_headers_describe_a_finished_run(logs):
    job_ids = {h["job_id"] for h, _ in logs}
    assert len(job_ids) == 1
    for rank, (header, records) in enumerate(logs):
        assert header["world_rank"] == rank and header["world_size"] == NPROCS
        assert header["flags"] & R.HEADER_FINALIZED
        assert records["func"][0] == fid("MPI_Init") and records["func"][-1] == fid("MPI_Finalize")
        assert (records["t_end"] >= records["t_start"]).all()
        assert (np.diff(records["t_start"]) >= 0).all(), "records are appended in time order"


def test_wildcard_receive_records_real_source_and_tag(logs):
    for rank, (_, records) in enumerate(logs):
        left = (rank + NPROCS - 1) % NPROCS
        recv = calls(records, "MPI_Recv")
        assert len(recv) == 1
        assert recv["peer"][0] == left and recv["tag"][0] == 40 + left and recv["bytes"][0] == 4
        send = calls(records, "MPI_Send")
        assert send["peer"][0] == (rank + 1) % NPROCS and send["tag"][0] == 40 + rank


def test_waitall_writes_one_part_per_request_with_its_id(logs):
    for rank, (_, records) in enumerate(logs):
        irecv, isend = calls(records, "MPI_Irecv")[0], calls(records, "MPI_Isend")[0]
        assert irecv["peer"] == R.PEER_ANY and irecv["flags"] & R.RECV
        first_waitall = np.flatnonzero(records["func"] == fid("MPI_Waitall"))[0]
        done = records[first_waitall + 1: first_waitall + 3]
        assert (done["flags"] & R.PART != 0).all()
        assert sorted(done["request"]) == sorted([irecv["request"], isend["request"]])
        received = done[done["request"] == irecv["request"]][0]
        assert received["peer"] == (rank + NPROCS - 1) % NPROCS and received["tag"] == 7
        assert received["flags"] & R.RECV and received["bytes"] == 4


def test_requests_sharing_a_handle_complete_separately(logs):
    """MPICH gives sends that complete at once one built-in handle."""
    for rank, (_, records) in enumerate(logs):
        left, right = (rank + NPROCS - 1) % NPROCS, (rank + 1) % NPROCS
        isends = calls(records, "MPI_Isend")[1:]  # the pair after the first Isend
        assert [(s["peer"], s["tag"]) for s in isends] == [(right, 11), (left, 12)]
        second_waitall = np.flatnonzero((records["func"] == fid("MPI_Waitall")) & (records["flags"] & R.PART == 0))[1]
        done = records[second_waitall + 1: second_waitall + 5]
        assert (done["flags"] & R.PART != 0).all() and len(set(done["request"])) == 4
        sent = done[done["flags"] & R.SEND != 0]
        assert sorted(zip(sent["request"], sent["peer"])) == sorted(zip(isends["request"], isends["peer"]))
        received = done[done["flags"] & R.RECV != 0]
        assert sorted(zip(received["peer"], received["tag"])) == sorted([(left, 11), (right, 12)])


def test_persistent_requests_keep_their_id_across_starts(logs):
    for _, records in logs:
        inits = np.concatenate([calls(records, "MPI_Recv_init"), calls(records, "MPI_Send_init")])
        ids = set(inits["request"])
        assert len(ids) == 2
        starts = parts(records, "MPI_Startall")
        assert len(starts) == 4 and set(starts["request"]) == ids
        assert (starts["flags"] & R.PERSISTENT != 0).all()
        completed = parts(records, "MPI_Waitall")
        assert np.isin(completed["request"], list(ids)).sum() == 4
        assert set(calls(records, "MPI_Request_free")["request"]) == ids


def test_split_communicators_have_ids_agreed_by_their_members(logs):
    new_ids = [parts(records, "MPI_Comm_split")["comm"][0] for _, records in logs]
    assert new_ids[0] == new_ids[2] and new_ids[1] == new_ids[3]
    assert new_ids[0] != new_ids[1] and 0 not in new_ids
    for rank, (_, records) in enumerate(logs):
        part = parts(records, "MPI_Comm_split")[0]
        assert part["tag"] == rank // 2 and part["bytes"] == 2  # rank in the half, its size
        bcast = calls(records, "MPI_Bcast")[0]
        assert bcast["comm"] == new_ids[rank] and bcast["root"] == 2 + rank % 2


def test_collective_sequence_numbers_agree_per_communicator(logs):
    seen = {}
    for _, records in logs:
        coll = records[(records["seq"] > 0) & (records["flags"] & R.PART == 0)]
        for comm, seq, func in zip(coll["comm"], coll["seq"], coll["func"]):
            seen.setdefault((comm, seq), set()).add(func)
    assert all(len(funcs) == 1 for funcs in seen.values()), "one instance, one function on all members"
    world = sorted(seq for comm, seq in seen if comm == 0)
    assert world == list(range(1, len(world) + 1))


def test_mpi4py_object_receives_are_recorded_as_matched_probes(tmp_path):
    """comm.recv goes through MPI_Mprobe + MPI_Mrecv: each must name the real sender."""
    out = tmp_path / "run"
    program = os.path.join(HERE, "shim_programs", "pickled_p2p.py")
    cmd = [find_mpi_tool("mpiexec"), "-n", "3", "-genv", "LD_PRELOAD", library_path(),
           "-genv", "MPIGRAPH_OUT", str(out), "-genv", "MPIGRAPH_ANALYZE", "off", sys.executable, program]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok 2 2\n"
    for rank in range(3):
        _, records = read_log(out / "raw" / ("rank-%d.log" % rank))
        left = (rank - 1) % 3
        probes, receives = calls(records, "MPI_Mprobe"), calls(records, "MPI_Mrecv")
        assert len(probes) == len(receives) == 5
        assert (receives["peer"] == left).all() and receives["tag"].tolist() == [0, 1, 2, 3, 4]
        assert (receives["flags"] & R.RECV != 0).all() and (receives["bytes"] == probes["bytes"]).all()
        assert (probes["peer"] == left).all()
        # A probe that found its message says so (an Iprobe that found nothing may name a source too).
        assert (probes["flags"] & R.MATCHED != 0).all() and (receives["flags"] & R.MATCHED == 0).all()


def test_unwritable_output_leaves_the_program_untouched(records_program, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run_under_shim(records_program, blocker / "run")
    assert result.returncode == 0
    assert result.stdout == "records done\n"
    messages = [line for line in result.stderr.splitlines() if line.startswith("mpigraph:")]
    assert len(messages) == 1 and "cannot create" in messages[0] and "without profiling" in messages[0]


def test_existing_logs_are_never_overwritten(records_program, tmp_path):
    out = tmp_path / "run"
    assert run_under_shim(records_program, out).returncode == 0
    before = {p: p.stat().st_mtime_ns for p in (out / "raw").iterdir()}
    result = run_under_shim(records_program, out)
    assert result.returncode == 0 and result.stdout == "records done\n"
    assert "already holds the logs of another run" in result.stderr
    assert {p: p.stat().st_mtime_ns for p in (out / "raw").iterdir()} == before
