"""The OTF2 export read by pipit (hpcgroup/pipit, Trace.from_otf2): its communication matrix
equals commmatrix.csv's point-to-point rows, on the demo (a ring of Send/Recv) and on
traffic.c's all-to-all (Isend/Recv of a distinct size per pair: 8 * (1 + 4 * src + dst) bytes).

pipit is not on PyPI (the "pipit" there is an empty 0.0.1): ``pip install '.[pipit]'`` installs it
from its repository.  benchmarks/check_pipit.py prints the same comparison for any run."""

import numpy as np
import pytest

import mpi_env

pipit = pytest.importorskip("pipit.readers.otf2_reader",
                            reason="pipit is not on PyPI: pip install '.[pipit]' (its GitHub repository)")

ITER = 2


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("demo") / "run")
    result = mpi_env.mpigraph(["demo", "--out", out])
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def _export(run_dir, where):
    archive = str(where)
    result = mpi_env.mpigraph(["export", run_dir, "--otf2", archive])
    assert result.returncode == 0, result.stdout + result.stderr
    return archive


def _pipit_matrices(archive):
    import pipit

    trace = pipit.Trace.from_otf2(archive, num_processes=1)
    return trace.comm_matrix("count").astype(np.int64), trace.comm_matrix("size").astype(np.int64)


def _our_matrices(run_dir, p):
    import mpigraph

    m = mpigraph.load(run_dir).comm_matrix
    m = m[m["kind"] == "p2p"]
    messages, nbytes = np.zeros((p, p), np.int64), np.zeros((p, p), np.int64)
    np.add.at(messages, (m["src"].to_numpy(), m["dst"].to_numpy()), m["messages"].to_numpy())
    np.add.at(nbytes, (m["src"].to_numpy(), m["dst"].to_numpy()), m["bytes"].to_numpy())
    return messages, nbytes


def test_pipit_reads_the_demo_with_our_communication_matrix(demo, tmp_path):
    out = demo
    messages, nbytes = _pipit_matrices(_export(out, tmp_path / "otf2"))
    ours = _our_matrices(out, 4)
    assert np.array_equal(messages, ours[0]) and np.array_equal(nbytes, ours[1])
    # The demo is a ring: rank r sends to r + 1 only, and it sends something.
    assert messages.sum() > 0 and np.array_equal(messages != 0, np.roll(np.eye(4, dtype=bool), 1, axis=1))


def test_pipit_reads_an_all_to_all_with_the_known_sizes(tmp_path):
    mpi = mpi_env.wheel_mpi()
    exe = mpi_env.Builder(str(tmp_path / "programs")).build("traffic.c", mpi.mpicc)
    run = str(tmp_path / "alltoall")
    result = mpi_env.mpirun(mpi, 4, [exe, "alltoall", ITER], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    messages, nbytes = _pipit_matrices(_export(run, tmp_path / "otf2"))
    src, dst = np.meshgrid(np.arange(4), np.arange(4), indexing="ij")
    off = src != dst
    assert np.array_equal(messages, ITER * off)
    assert np.array_equal(nbytes, ITER * off * 8 * (1 + 4 * src + dst))
    ours = _our_matrices(run, 4)
    assert np.array_equal(messages, ours[0]) and np.array_equal(nbytes, ours[1])


def test_to_pipit_gives_the_trace_of_a_run(demo):
    """mpigraph.export.pipit_trace.to_pipit: the run as a pipit Trace, its archive gone; the demo's
    matrix, and an Enter per call of calls.parquet."""
    import mpigraph
    from mpigraph.export import pipit_trace

    out = demo
    trace = pipit_trace.to_pipit(out)
    assert np.array_equal(trace.comm_matrix("count").astype(np.int64), _our_matrices(out, 4)[0])
    assert int((trace.events["Event Type"] == "Enter").sum()) == len(mpigraph.load(out).calls)
