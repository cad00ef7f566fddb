"""The big tables as Parquet datasets, a part per analysis rank (mpigraph.report.datasets), and
the same report for K = 1, 2 and 3 analysis ranks on the test programs (issue 28)."""

import errno
import filecmp
import os

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import mpi_env
from mpigraph.report import datasets

# (program, its arguments, ranks, analyze's options): the last one's path found where it lies, in
# parts (paths/walk.py), and moved to the ranks writing its blocks (datasets.path_block).
PROGRAMS = [("calls.c", [], 4, []), ("slow_phases.c", ["3"], 4, []), ("unreceived.c", [], 2, []),
            ("scaling.c", ["4", "20000"], 3, []),
            ("calls.c", [], 4, ["--algorithm", "parallel-dijkstra"])]
PARQUET_TABLES = ["calls.parquet", "waitstates.parquet", "critical_path.parquet", "ranks.parquet",
                  "collectives.parquet", "callsites.parquet", "callsite_sizes.parquet"]
# calls.csv and critical_path.csv are joined from every rank's text, each copied at its offset
# (datasets.join_csv): byte for byte one rank's.
TEXT_FILES = ["summary.txt", "calls.csv", "collectives.csv", "ranks.csv", "functions.csv", "waitstates.csv",
              "unmatched.csv", "critical_path.csv",
              "callsites.csv", "communicators.csv", "callsite_waitstates.csv", "callsite_sizes.csv"]
KS = (1, 2, 3)


@pytest.fixture(scope="module", params=PROGRAMS, ids=[" ".join([p[0]] + p[3]) for p in PROGRAMS])
def reports(request, wheel, builder, tmp_path_factory):
    """{K: report directory} of one program's run analysed offline on K analysis ranks."""
    source, args, ranks, options = request.param
    exe = builder.build(source, wheel.mpicc)
    run = tmp_path_factory.mktemp(source.replace(".", "_"))
    result = mpi_env.mpirun(wheel, ranks, [exe] + args, out=run / "run", rank_env={"MPIGRAPH_ANALYZE": "off"})
    assert result.returncode == 0, result.stderr
    out = {}
    for k in KS:
        out[k] = run / ("k%d" % k)
        done = mpi_env.mpigraph(["analyze", run / "run", "--out", out[k], "--quiet"] + options, nprocs=k, mpi=wheel)
        assert done.returncode == 0, done.stderr
    return out


def test_big_tables_are_a_part_per_analysis_rank(reports):
    for k, out in reports.items():
        for name in datasets.NAMES:
            assert sorted(os.listdir(out / name)) == [datasets.part_name(a, k) for a in range(k)], (k, name)
        assert not [n for n in os.listdir(out) if n.startswith(".")], "no CSV part is left"


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_a_part_is_copied_at_its_offset(tmp_path, monkeypatch, kernel_copy):
    """join_csv's copy of a rank's CSV text into the file at its offset: by copy_file_range, or
    read and written where the kernel cannot (another file system: EXDEV), the same bytes."""
    if not kernel_copy:
        def refused(*args):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        monkeypatch.setattr(os, "copy_file_range", refused, raising=False)
    text = bytes(range(256)) * 40000          # 10 MB: more than one of the fallback's 4 MB chunks
    (tmp_path / "part").write_bytes(text)
    (tmp_path / "file").write_bytes(b"head" + b"\0" * len(text) + b"tail")
    datasets._copy_at(str(tmp_path / "part"), str(tmp_path / "file"), 4, len(text))
    assert (tmp_path / "file").read_bytes() == b"head" + text + b"tail"


def test_the_report_is_the_same_for_every_k(reports):
    one = reports[1]
    for k in KS[1:]:
        for name in PARQUET_TABLES:
            assert ds.dataset(reports[k] / name).to_table().equals(ds.dataset(one / name).to_table()), (k, name)
        for name in TEXT_FILES:
            assert filecmp.cmp(reports[k] / name, one / name, shallow=False), (k, name)


def test_call_sites_are_summed_over_every_analysis_rank(reports):
    """The callsites table rank 0 makes from every analysis rank's sums: per call site, its count
    and bytes are the calls table's (whichever analysis rank wrote those calls), its ranks the
    trace ranks that called there; and the program's call sites are named (not 0, unknown)."""
    for k, out in reports.items():
        sites = pq.read_table(out / "callsites.parquet").to_pydict()
        calls = datasets.read(out / "calls.parquet").select(["rank", "callsite", "function", "calls", "bytes"])
        calls = calls.to_pydict()
        assert 0 not in sites["callsite"], (k, sites["name"])
        # The communicators' creating calls are named by their creator's site, which for K > 1 an
        # analysis rank other than rank 0 read: the site is one of the table's, of that function.
        comms = pq.read_table(out / "communicators.parquet").to_pydict()
        named = {(site, name) for site, name in zip(sites["callsite"], sites["name"])}
        for function, site, name in zip(comms["function"], comms["callsite"], comms["callsite_name"]):
            if function != "MPI_Init":
                assert site > 0 and (site, name) in named and name.startswith(function + " "), (k, name)
        for site, function, count, nbytes, ranks in zip(sites["callsite"], sites["function"], sites["count"],
                                                         sites["bytes"], sites["ranks"]):
            mine = [i for i, (s, f) in enumerate(zip(calls["callsite"], calls["function"]))
                    if s == site and f == function]
            assert sum(calls["calls"][i] for i in mine) == count, (k, site)
            assert sum(calls["bytes"][i] for i in mine) == nbytes, (k, site)
            assert len({calls["rank"][i] for i in mine}) == ranks, (k, site)


def test_wait_states_per_call_site_add_up_to_the_wait_state_table(reports):
    """callsite_waitstates (summed on rank 0 from every analysis rank's sums): per (function,
    kind), its calls and time add up to waitstates.parquet's (written a part per analysis rank)."""
    import collections

    for k, out in reports.items():
        twin = pq.read_table(out / "callsite_waitstates.parquet").to_pydict()
        table = datasets.read(out / "waitstates.parquet").to_pydict()
        sums = [collections.Counter(), collections.Counter()]
        for rows, sign in ((twin, 1), (table, -1)):
            for function, kind, calls, time in zip(rows["function"], rows["kind"], rows["calls"], rows["time_ns"]):
                sums[0][(function, kind)] += sign * calls
                sums[1][(function, kind)] += sign * time
        assert not any(sums[0].values()) and not any(sums[1].values()), (k, sums)
        assert len(twin["kind"]) > 0 or len(table["kind"]) == 0, k


def test_a_dataset_reads_as_one_table_in_row_order(reports):
    out = reports[3]
    calls = pq.read_table(out / "calls.parquet")            # pyarrow.parquet reads the directory too
    assert calls.equals(datasets.read(out / "calls.parquet"))
    rank, call = calls.column("rank").to_numpy(), calls.column("call").to_numpy()
    # (rank, call) order: what one file written by one rank held.
    assert ((rank[1:] > rank[:-1]) | ((rank[1:] == rank[:-1]) & (call[1:] > call[:-1]))).all()
    path = pq.ParquetDataset(out / "critical_path.parquet").read()      # the reader pandas uses
    assert path.equals(datasets.read(out / "critical_path.parquet"))


def test_part_names_sort_in_rank_order():
    assert datasets.part_name(3, 4) == "part-0003.parquet"
    names = [datasets.part_name(a, 12000) for a in (2, 999, 10000, 11999)]
    assert names == sorted(names) and len(set(map(len, names))) == 1


def test_a_path_column_travels_in_the_narrowest_integer_type_that_holds_it():
    """path_block sends integer columns narrowed and casts them back: every value must fit."""
    import numpy as np

    cases = [([0, 127], np.int8), ([-128, 5], np.int8), ([0, 128], np.int16), ([-1, 40000], np.int32),
             ([0, 2**31], np.int64), ([-2**63, 2**63 - 1], np.int64), ([], np.int64)]
    for values, expected in cases:
        array = np.array(values, np.int64)
        travel = datasets._travel_dtype(array)
        assert travel == np.dtype(expected), values
        assert np.array_equal(array.astype(travel).astype(np.int64), array)
    assert datasets._travel_dtype(np.array([0.5])) == np.float64
    assert datasets._travel_dtype(np.array([2**64 - 1], np.uint64)) == np.uint64


def test_prepare_removes_what_an_earlier_analysis_left(tmp_path):
    (tmp_path / "calls.parquet").write_text("an old single file")
    (tmp_path / "waitstates.parquet").mkdir()
    (tmp_path / "waitstates.parquet" / "part-0007.parquet").write_text("a part of another K")
    datasets.prepare(str(tmp_path))
    for name in datasets.NAMES:
        assert (tmp_path / name).is_dir() and not os.listdir(tmp_path / name)


@pytest.mark.parametrize("failing", ["write_path_part", "write_calls_part"])
def test_a_part_that_fails_beside_another_names_its_file(tmp_path, monkeypatch, failing):
    """The path's and wait states' parts are written on another thread while the calls part is:
    a disk error in either reaches the caller naming that part's file, after both writers have
    stopped, and no dataset is left half written."""
    import mpigraph
    from mpigraph.report.writer import ReportError
    from mpigraph.testing import synth

    synth.generate(str(tmp_path / "run"), 4, 2_000)
    written = []

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    for name in ("write_path_part", "write_calls_part", "write_waitstates_part"):
        real = getattr(datasets, name)
        monkeypatch.setattr(datasets, name, full_disk if name == failing else
                            lambda *a, _real=real, _name=name, **k: (_real(*a, **k), written.append(_name)))
    with pytest.raises(ReportError) as error:
        mpigraph.analyze(tmp_path / "run", out_dir=tmp_path / "report")
    part = {"write_path_part": datasets.PATH, "write_calls_part": datasets.CALLS}[failing]
    assert os.path.join(str(tmp_path / "report"), part, "part-0000.parquet") in str(error.value)
    assert "No space left on device" in str(error.value)
    # The other writers ran to their end before the error was raised; then every dataset went.
    assert sorted(written) == sorted({"write_path_part", "write_calls_part", "write_waitstates_part"} - {failing})
    assert not any((tmp_path / "report" / name).exists() for name in datasets.NAMES)
