"""Polling compacted at the source: failed MPI_Iprobe / MPI_Test calls in a row share a record.

tests/programs/polling.c on 2 ranks makes N failed MPI_Iprobe calls per rank,
then M failed MPI_Test calls, then the exchange that lets its last test
succeed; it prints its own count of each.  functions.csv must hold exactly
those counts while the logs hold a few records; with MPIGRAPH_POLL_GAP_NS=0
(no merging) the same program writes a record per call.  The path tables
merge runs of touching segments (paths/segments.py: merge_runs).
"""

import re

import numpy as np
import pyarrow.parquet as pq
import pytest

import count_calls
import mpi_env
from mpigraph.paths import segments as cp
from mpigraph.trace import functions as F
from mpigraph.trace import logs
from mpigraph.trace import record as R
from mpigraph.util.names import Labels

NPROCS = 2
PROBES = 2_500_000       # per rank: 5e6 failed MPI_Iprobe calls in the run
TESTS = 100_000


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    return mpi, builder.build("polling.c", mpi.mpicc), count_calls.build(builder, mpi)


def run(program, out, probes, tests, **rank_env):
    """The program's own counts per rank; the independent counter's totals must equal them."""
    mpi, exe, counter = program
    result = mpi_env.mpirun(mpi, NPROCS, [exe, str(probes), str(tests)], out=out,
                            rank_env={**count_calls.preload(counter), **rank_env})
    assert result.returncode == 0, result.stderr
    independent = count_calls.totals(result.stderr)
    own = {}
    for m in re.finditer(r"polling: rank (\d+) MPI_Iprobe (\d+) MPI_Test (\d+) got (-?\d+)", result.stdout):
        rank, iprobe, test, got = (int(g) for g in m.groups())
        assert got == 1 - rank
        own[rank] = {"MPI_Iprobe": iprobe, "MPI_Test": test}
    assert sorted(own) == list(range(NPROCS)), result.stdout
    for name in ("MPI_Iprobe", "MPI_Test"):
        assert independent[name] == sum(o[name] for o in own.values()), (name, independent)
    return own


def records_of(out):
    run = logs.open_run(str(out))
    return {rank: np.asarray(log.records) for rank, log in run.logs.items()}


@pytest.fixture(scope="module")
def compacted(program, tmp_path_factory):
    out = tmp_path_factory.mktemp("polling") / "run"
    return run(program, out, PROBES, TESTS), out


def test_counts_are_the_programs_own(compacted):
    own, out = compacted
    counts = mpi_env.read_functions_csv(out / "functions.csv")
    assert counts["MPI_Iprobe"] == sum(o["MPI_Iprobe"] for o in own.values()) == NPROCS * PROBES
    assert counts["MPI_Test"] == sum(o["MPI_Test"] for o in own.values())


def test_records_are_at_most_one_percent_of_calls(compacted):
    own, out = compacted
    calls = sum(o["MPI_Iprobe"] + o["MPI_Test"] for o in own.values())
    records = sum(len(r) for r in records_of(out).values())
    assert records <= 0.01 * calls, (records, calls)
    r = pq.read_table(out / "ranks.parquet").to_pydict()
    assert sum(r["records"]) == records and sum(r["calls"]) >= calls


def test_each_merged_record_stands_for_its_calls(compacted):
    own, out = compacted
    for rank, records in records_of(out).items():
        per_call = R.call_counts(records["flags"], records["seq"])
        for name in ("MPI_Iprobe", "MPI_Test"):
            mine = records["func"] == F.BY_NAME[name].id
            assert per_call[mine].sum() == own[rank][name]
        repeated = (records["flags"] & R.REPEAT) != 0
        assert repeated.any() and (records["seq"][repeated] >= 2).all()
        # a merged run spans its first call's start to its last call's end: never empty, never overlapping
        assert (records["t_end"] >= records["t_start"]).all()
        calls = (records["flags"] & R.PART) == 0
        assert (records["t_start"][calls][1:] >= records["t_end"][calls][:-1]).all()


def test_the_path_is_not_a_segment_per_call(compacted):
    own, out = compacted
    calls = sum(o["MPI_Iprobe"] + o["MPI_Test"] for o in own.values())
    path = pq.read_table(out / "critical_path.parquet").to_pydict()
    assert len(path["rank"]) <= 0.01 * calls
    assert len(path["rank"]) > 0


def test_without_merging_every_call_has_its_record(program, tmp_path):
    out = tmp_path / "run"
    own = run(program, out, 20_000, 2_000, MPIGRAPH_POLL_GAP_NS=0)
    counts = mpi_env.read_functions_csv(out / "functions.csv")
    assert counts["MPI_Iprobe"] == sum(o["MPI_Iprobe"] for o in own.values())
    assert counts["MPI_Test"] == sum(o["MPI_Test"] for o in own.values())
    for records in records_of(out).values():
        assert not (records["flags"] & R.REPEAT).any()


# ---- merge_runs, by hand -----------------------------------------------------------

def test_merge_runs_joins_touching_segments_of_one_rank_kind_and_function():
    kinds = Labels(np.array([1, 0, 1, 0, 1, 0, 1], np.int8), cp.KINDS)           # mpi, compute, mpi, ...
    names = np.array(["MPI_Iprobe", "MPI_Recv", ""], object)
    functions = Labels(np.array([0, 2, 0, 2, 0, 2, 1]), names)
    rank = np.zeros(7, np.int64)
    # Iprobe [0,5], empty compute at 5, Iprobe [5,9], compute [9,12], Iprobe [12,13], empty compute, Recv [13,20]
    start = np.array([0, 5, 5, 9, 12, 13, 13])
    end = np.array([5, 5, 9, 12, 13, 13, 20])
    table = cp.segments(rank, kinds, functions, start, end)
    assert list(table["kind"]) == ["mpi", "compute", "mpi", "compute", "mpi"]
    assert list(table["function"]) == ["MPI_Iprobe", "", "MPI_Iprobe", "", "MPI_Recv"]
    assert table["start"].tolist() == [0, 9, 12, 13, 13]
    assert table["end"].tolist() == [9, 12, 13, 13, 20]
    assert table["order"].tolist() == list(range(5))
    assert table["duration"].sum() == 20


def test_merge_runs_keeps_other_ranks_and_messages_apart():
    table = cp.segments([0, 1, 1], np.array(["mpi", "message", "mpi"], object),
                        np.array(["MPI_Send", "MPI_Recv", "MPI_Recv"], object), [0, 4, 6], [4, 6, 8],
                        peer=[-1, 0, -1])
    assert len(table["rank"]) == 3


def test_merge_runs_joins_only_rows_that_follow_each_other_on_the_path():
    """An analysis rank's part of a path found where it lies (paths/walk.py) has other ranks' rows
    between its own: rows that would merge but do not follow each other stay apart."""
    kinds = Labels(np.array([1, 0, 1, 1, 1], np.int8), cp.KINDS)           # mpi, empty compute, mpi, mpi, mpi
    functions = Labels(np.array([0, 1, 0, 0, 0]), np.array(["MPI_Iprobe", ""], object))
    rank = np.zeros(5, np.int64)
    start, end = np.array([0, 5, 5, 9, 12]), np.array([5, 5, 9, 12, 13])
    whole = cp.segments(rank, kinds, functions, start, end)
    assert whole["start"].tolist() == [0] and whole["end"].tolist() == [13]
    # Another rank's rows lie between the third and fourth: the fourth and fifth merge apart.
    part = cp.merge_runs(rank, kinds, functions, rank - 1, start, end, follows=np.array([True, True, False, True]))
    assert part[4].tolist() == [0, 9] and part[5].tolist() == [9, 13]
    # ... and between the first and the empty compute: it is not dropped, nothing merges across it.
    part = cp.merge_runs(rank, kinds, functions, rank - 1, start, end, follows=np.array([False, True, True, True]))
    assert part[4].tolist() == [0, 5, 5] and part[5].tolist() == [5, 5, 13]


def test_calls_parquet_rows_count_their_calls(compacted):
    own, out = compacted
    calls = pq.read_table(out / "calls.parquet").to_pydict()
    function, n = np.array(calls["function"], object), np.array(calls["calls"])
    for name in ("MPI_Iprobe", "MPI_Test"):
        assert n[function == name].sum() == sum(o[name] for o in own.values())
    assert (np.array(calls["seq"])[n > 1] == 0).all()      # a merged poll has no collective number
