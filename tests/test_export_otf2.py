"""mpigraph export --otf2: the demo's archive read back by the otf2 package has the events
calls.parquet implies, and the messages of the communication matrix."""

import os

import pytest

import mpi_env

otf2 = pytest.importorskip("otf2", reason="the otf2 package is in the test extra: pip install '.[test]'")


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


def test_the_demo_read_back_has_the_event_counts_of_calls_parquet(demo, tmp_path):
    import mpigraph
    from mpigraph.export import readback
    from mpigraph.trace import functions as mf

    counts, _ = readback.read(_export(demo, tmp_path / "otf2"))
    calls = mpigraph.load(demo).calls
    kind = calls["function"].map(lambda name: mf.BY_NAME[name].kind)
    blocking = calls["function"].map(lambda name: not mf.BY_NAME[name].nonblocking)
    collective = kind.isin([mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN]) & blocking
    # The demo's messages are blocking Send/Recv pairs: a send event per send call, a receive per receive.
    assert set(kind[kind.isin([mf.ISEND, mf.IRECV, mf.SENDRECV])]) == set()
    assert counts["Enter"] == counts["Leave"] == len(calls)
    assert counts["MpiSend"] == int((kind == mf.SEND).sum())
    assert counts["MpiRecv"] == int((kind == mf.RECV).sum())
    assert counts["MpiCollectiveBegin"] == counts["MpiCollectiveEnd"] == int(collective.sum())
    assert set(counts) == {"Enter", "Leave", "MpiSend", "MpiRecv", "MpiCollectiveBegin", "MpiCollectiveEnd"}


def _p2p_matrix(run_dir):
    import mpigraph

    m = mpigraph.load(run_dir).comm_matrix
    m = m[m["kind"] == "p2p"]
    return {(int(s), int(d)): (int(n), int(b)) for s, d, n, b in zip(m["src"], m["dst"], m["messages"], m["bytes"])}


def test_the_archive_s_messages_are_the_communication_matrix(demo, tmp_path):
    from mpigraph.export import readback

    _, pairs = readback.read(_export(demo, tmp_path / "otf2"))
    assert pairs == _p2p_matrix(demo)
    assert pairs      # the demo sends messages: an empty equality would prove nothing


def test_messages_on_a_split_communicator_name_their_world_ranks(tmp_path):
    """traffic.c colls: a Send from rank 0 to rank 1 of each half of an even/odd split; OTF2's
    receiver is the rank in the communicator, which the reader maps back through its group."""
    from mpigraph.export import readback

    mpi = mpi_env.wheel_mpi()
    exe = mpi_env.Builder(str(tmp_path / "programs")).build("traffic.c", mpi.mpicc)
    run = str(tmp_path / "colls")
    result = mpi_env.mpirun(mpi, 4, [exe, "colls", 2], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    _, pairs = readback.read(_export(run, tmp_path / "otf2"))
    assert pairs == {(0, 2): (2, 10), (1, 3): (2, 10)} == _p2p_matrix(run)


def test_an_unanalysed_directory_and_an_existing_archive_are_user_errors(demo, tmp_path):
    archive = _export(demo, tmp_path / "otf2")
    again = mpi_env.mpigraph(["export", demo, "--otf2", archive])
    assert again.returncode == 2 and "already holds an OTF2 archive" in again.stderr
    empty = tmp_path / "empty"
    os.makedirs(empty / "raw")
    missing = mpi_env.mpigraph(["export", str(empty), "--otf2", str(tmp_path / "x")])
    assert missing.returncode == 2, missing.stderr


def test_regions_are_per_call_site_with_its_file_and_line(demo, tmp_path):
    """A region per (MPI function, call site): named after the function, its description the call
    site's name, its source file and line the site's (the demo is built with -g); each region's
    Enter events are the call site's count in callsites.csv."""
    import collections

    import mpigraph

    archive = _export(demo, tmp_path / "otf2")
    sites = mpigraph.load(demo).callsites
    entered = collections.Counter()
    with otf2.reader.open(os.path.join(archive, "traces.otf2")) as trace:
        regions = {r.description: r for r in trace.definitions.regions if r.paradigm == otf2.Paradigm.MPI}
        for _, event in trace.events:
            if isinstance(event, otf2.events.Enter) and event.region.paradigm == otf2.Paradigm.MPI:
                entered[event.region.description] += 1
    assert set(regions) == set(sites["name"])
    for row in sites.itertuples():
        region = regions[row.name]
        assert region.name == row.function and os.path.basename(region.source_file) == "demo.c"
        assert region.begin_line_number == row.line > 0
        assert entered[row.name] == row.count, row.name
