"""Device buffers (csrc/gpu.c): with a CUDA driver in the process, a call whose buffer the driver
says is device memory has device_buffer true in calls.parquet; without one, every row is false.

No GPU needed: tests/programs/fake_cuda.c stands in for libcuda.so, answering "device" for the
one array tests/programs/device_buffers.c registers and "host" for every other pointer."""

import numpy as np
import pyarrow.parquet as pq
import pytest

import mpi_env
from mpigraph.trace import logs, record

# (rank, function, tag) -> device_buffer, by the program's design (tests/programs/device_buffers.c):
# the tag-1 message and the first Allreduce use the registered array; a Wait has no buffer.
EXPECTED = {(0, "MPI_Init", -1): False, (0, "MPI_Send", 1): True, (0, "MPI_Send", 2): False,
            (1, "MPI_Init", -1): False, (1, "MPI_Irecv", 1): True, (1, "MPI_Wait", -1): False,
            (1, "MPI_Recv", 2): False}


@pytest.fixture(scope="module")
def runs(wheel, builder, tmp_path_factory):
    exe = builder.build("device_buffers.c", wheel.mpicc, ["-ldl"])
    fake = builder.build("fake_cuda.c", "cc", ["-shared", "-fPIC"])
    out = {}
    for name, argv in (("fake", [exe, fake]), ("plain", [exe])):
        out[name] = tmp_path_factory.mktemp("runs") / name
        result = mpi_env.mpirun(wheel, 2, argv, out=out[name], rank_env={"MPIGRAPH_QUIET": "1"})
        assert result.returncode == 0, result.stdout + result.stderr
        out[name + "_stdout"] = result.stdout
    return out


def _calls(run_dir):
    return pq.read_table(run_dir / "calls.parquet").to_pandas()


def _expected_row(rank, function, tag, allreduces):
    if function == "MPI_Allreduce":
        allreduces[rank] = allreduces.get(rank, 0) + 1
        return allreduces[rank] == 1        # the first one sends from the device array
    return EXPECTED.get((rank, function, tag), False)


def test_the_device_buffers_are_flagged(runs):
    calls = _calls(runs["fake"])
    allreduces = {}
    expected = [_expected_row(r, f, t, allreduces) for r, f, t in zip(calls["rank"], calls["function"], calls["tag"])]
    assert calls["device_buffer"].tolist() == expected
    assert int(calls["device_buffer"].sum()) == 4
    assert calls["device_buffer"].dtype == bool


def test_the_shim_asks_the_driver_once_per_buffer(runs):
    # Rank 0: two Sends, two Allreduces of two buffers each; rank 1: Irecv, Recv and the same.
    # (The wheel's MPICH asks the driver nothing itself.)
    lines = [line for line in runs["fake_stdout"].splitlines() if line.startswith("rank ")]
    assert sorted(lines) == ["rank 0 queries 6", "rank 1 queries 6"]


def test_the_wait_completing_a_device_receive_carries_the_flag_in_its_part(runs):
    log = logs.open_log(logs.log_path(runs["fake"], 1))
    records = np.asarray(log.records)
    parts = records[(records["flags"] & record.PART) != 0]
    assert len(parts) == 1            # the Wait's part for the Irecv's request
    assert parts["flags"][0] & record.DEVICE and parts["flags"][0] & record.RECV


def test_without_a_driver_nothing_is_flagged(runs):
    calls = _calls(runs["plain"])
    assert len(calls) == len(_calls(runs["fake"]))
    assert not calls["device_buffer"].any()
    assert "queries -1" in runs["plain_stdout"]


def test_functions_and_summary_count_the_device_calls(runs):
    calls = _calls(runs["fake"])
    expected = calls.groupby("function")["device_buffer"].sum().astype(int).to_dict()
    assert expected == {"MPI_Allreduce": 2, "MPI_Finalize": 0, "MPI_Init": 0, "MPI_Irecv": 1, "MPI_Recv": 0,
                        "MPI_Send": 1, "MPI_Wait": 0}
    functions = pq.read_table(runs["fake"] / "functions.parquet").to_pandas()
    assert dict(zip(functions["function"], functions["device_calls"])) == expected
    assert "device buffers 4 calls with a GPU device buffer" in (runs["fake"] / "summary.txt").read_text()
    assert "device buffers" not in (runs["plain"] / "summary.txt").read_text()
    plain = pq.read_table(runs["plain"] / "functions.parquet").to_pandas()
    assert (plain["device_calls"] == 0).all()
