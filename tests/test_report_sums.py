"""The report's sums made cheaper (issue 28): keys numbered through a table over their span, the
call sites' wait-state sums made from the calls table's blocks as they pass, and the Parquet
statistics written for the columns a reader can skip row groups by."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from mpigraph.callsites import stats
from mpigraph.report import writer
from mpigraph.schema import Column, WAIT_STATES
from mpigraph.trace import functions as mf
from mpigraph.util import arrays
from mpigraph.util.names import Labels


@pytest.mark.parametrize("values, uniq, codes", [
    ([7, 3, 7, 5], [3, 5, 7], [2, 0, 2, 1]),                    # a small span: the table
    ([-2, 3, -2], [-2, 3], [0, 1, 0]),                          # below zero
    ([10**12, 0, 5, 0], [0, 5, 10**12], [2, 0, 1, 0]),          # a span far above 4 per value: the sort
    ([], [], []),
])
def test_unique_codes_numbers_the_distinct_values_in_order(values, uniq, codes):
    got_uniq, got_codes = arrays.unique_codes(np.array(values, np.int64))
    assert got_uniq.tolist() == uniq and got_codes.tolist() == codes
    assert got_uniq.dtype == np.int64


class _One:
    """A comm of one analysis rank."""
    rank, size = 0, 1


def _recv_block(rank, state, state_time, other_time):
    """Calls of MPI_Recv (shim site 0: unknown, run id 0) with the given wait states (-1: none)."""
    n = len(rank)
    recv = list(mf.names_array()).index("MPI_Recv")
    names = np.array([""] + list(WAIT_STATES), object)
    return {"rank": np.array(rank), "callsite": np.zeros(n, np.int64),
            "function": Labels(np.full(n, recv), mf.names_array()), "start": np.zeros(n, np.int64),
            "end": np.full(n, 100, np.int64), "calls": np.ones(n, np.int64), "wait_before": np.array(state_time),
            "wait_after": np.zeros(n, np.int64), "bytes": np.zeros(n, np.int64), "on_path": np.zeros(n, bool),
            # as run_tables.call_block gives it: Labels whose code 0 is "no state"
            "wait_state": Labels(np.array(state) + 1, names), "wait_state_time": np.array(state_time, np.int64),
            "other_state_time": np.array(other_time, np.int64)}


def test_wait_state_sums_per_call_site_come_from_the_blocks(tmp_path):
    """Three receives of rank 0 and one of rank 1, in two blocks: late sender 5 ns (2 ns of it
    charged to late receiver as well), none, late sender 4 ns; rank 1: late receiver 7 ns.  Per
    (site 0, MPI_Recv): late sender 2 calls, 9 ns; late receiver 2 charges, 2 + 7 = 9 ns."""
    (tmp_path / "raw").mkdir()
    acc = stats.Accumulator(stats.Sites(str(tmp_path / "raw"), range(2)), 2)
    late_sender, late_receiver = WAIT_STATES.index("late_sender"), WAIT_STATES.index("late_receiver")
    acc.add(_recv_block([0, 0], [late_sender, -1], [5, 0], [2, 0]))
    acc.add(_recv_block([0, 1], [late_sender, late_receiver], [4, 7], [0, 0]))
    table = stats.combined_waitstates(_One(), acc.waitstate_sums(), acc.sites)
    rows = sorted(zip(table["callsite"].tolist(), table["function"].tolist(), table["kind"].tolist(),
                      table["calls"].tolist(), table["time"].tolist()))
    assert rows == [(0, "MPI_Recv", "late_receiver", 2, 9), (0, "MPI_Recv", "late_sender", 2, 9)]


def test_no_blocks_no_wait_state_sums(tmp_path):
    (tmp_path / "raw").mkdir()
    acc = stats.Accumulator(stats.Sites(str(tmp_path / "raw"), range(1)), 1)
    keys, sums = acc.waitstate_sums()
    assert len(keys) == len(sums["calls"]) == len(sums["time"]) == 0


def test_statistics_only_for_the_columns_rows_are_ordered_by(tmp_path):
    columns = [Column("rank", "int", ""), Column("start", "time", ""), Column("wait_before", "time", ""),
               Column("function", "str", "")]
    table = {"rank": np.array([0, 0, 1]), "start": np.array([5, 9, 2]), "wait_before": np.array([1, 0, 3]),
             "function": np.array(["MPI_Send", "MPI_Recv", "MPI_Send"], object)}
    writer.write_parquet(tmp_path / "t.parquet", table, columns)
    group = pq.ParquetFile(tmp_path / "t.parquet").metadata.row_group(0)
    have = {group.column(i).path_in_schema: group.column(i).statistics for i in range(group.num_columns)}
    assert (have["rank"].min, have["rank"].max) == (0, 1)
    assert (have["start_ns"].min, have["start_ns"].max) == (2, 9)
    assert have["wait_before_ns"] is None and have["function"] is None
    back = pq.read_table(tmp_path / "t.parquet").to_pydict()
    assert back == {"rank": [0, 0, 1], "start_ns": [5, 9, 2], "wait_before_ns": [1, 0, 3],
                    "function": ["MPI_Send", "MPI_Recv", "MPI_Send"]}


def test_state_sums_per_rank_from_the_wait_state_table():
    """The rank table's per-state columns from the wait-state rows (rank, function, kind, calls,
    time), in the order of the ranks asked for: rank 3 has late sender 5 ns under one function and
    2 ns under another, rank 7 wait_nxn 4 ns; every other state 0, and rank 5 has no rows."""
    from mpigraph.metrics import profile

    late_sender, nxn = WAIT_STATES.index("late_sender"), WAIT_STATES.index("wait_nxn")
    sums = profile.state_sums({"rank": np.array([3, 3, 7]), "function": np.array([1, 2, 9]),
                               "kind": np.array([late_sender, late_sender, nxn]), "calls": np.array([1, 1, 1]),
                               "time": np.array([5, 2, 4])}, [7, 5, 3])
    expected3, expected7 = [0] * len(WAIT_STATES), [0] * len(WAIT_STATES)
    expected3[late_sender], expected7[nxn] = 7, 4
    assert sums.tolist() == [expected7, [0] * len(WAIT_STATES), expected3]


def test_segment_sites_of_overlapping_threads_and_ranks_not_owned():
    """callsites.path.owned_sites: segments of several ranks in any order, grouped by rank; the
    calls of trace rank 2 overlap (threads: ends out of order), so they are looked up by end.  A
    message segment names the call holding its end: end 10 -> call 1 (shim site 2), 25 -> call 2
    (site 3), 30 -> call 0 (site 1), 40 -> none (0).  Trace rank 5 is another analysis rank's: 0."""
    from types import SimpleNamespace

    from mpigraph.callsites import path as path_sites

    records = np.zeros(3, [("site", np.uint16), ("flags", np.uint16)])
    records["site"] = [1, 2, 3]
    calls = SimpleNamespace(start_ns=np.array([0, 5, 20]), end_ns=np.array([30, 10, 25]), records=records,
                            record_call=np.arange(3), n_calls=3)
    linked = SimpleNamespace(calls={2: calls})
    # A run id per (rank, shim site): 10 * site + rank.
    sites = SimpleNamespace(run_ids=lambda rank, shim: np.asarray(shim, np.int64) * 10 + rank)
    asked = {"index": np.arange(5), "rank": np.array([2, 5, 2, 2, 2]), "message": np.ones(5, bool),
             "start": np.zeros(5, np.int64), "end": np.array([10, 10, 25, 30, 40])}
    assert path_sites.owned_sites(asked, linked, sites).tolist() == [22, 0, 32, 12, 0]


def test_time_text_taken_from_the_span_is_each_values_own():
    """A time column spanning few integers (waits mostly 0) takes its CSV text from the span's
    texts: the same fields as each value's own text, negative ones too ("-0.000000003")."""
    rng = np.random.default_rng(7)
    values = np.where(rng.random(20_000) < 0.9, 0, rng.integers(-3, 2_000, 20_000)).astype(np.int64)
    values[5] = -3
    column = Column("wait_after", "time", "")
    taken = writer._csv_text(column, values, slice(None)).to_pylist()
    assert taken == writer._seconds_text(values).to_pylist()
    assert taken[int(np.flatnonzero(values == -3)[0])] == "-0.000000003"
    assert set(taken[i] for i in np.flatnonzero(values == 0)) == {"0.000000000"}
