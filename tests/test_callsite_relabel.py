"""callsites.stats.Accumulator.add relabels a block's shim site ids rank by rank, a slice per run
of one rank's rows: in any order of the rows (a rank in several runs, runs of one row)."""

import numpy as np

from mpigraph.callsites import stats
from mpigraph.callsites.stats import Accumulator, Sites, N_SHIM_IDS
from mpigraph.trace import functions as mf
from mpigraph.util.names import Labels


def test_interleaved_ranks_get_their_own_ids(tmp_path):
    (tmp_path / "raw").mkdir()
    sites = Sites(str(tmp_path / "raw"), [])
    # Shim id 3 is run id 1 on rank 0 and run id 2 on rank 1; shim id 5 on rank 1 is run id 4;
    # rank 2 wrote no sites: 0 (unknown) for all of its calls.
    sites.lut = {0: np.zeros(N_SHIM_IDS, np.int64), 1: np.zeros(N_SHIM_IDS, np.int64)}
    sites.lut[0][3], sites.lut[1][3], sites.lut[1][5] = 1, 2, 4
    sites.places = [stats.UNKNOWN] * 5       # run ids 0 to 4, places unknown
    rank = np.array([0, 1, 1, 0, 2, 1, 0, 0])
    shim = np.array([3, 3, 5, 3, 3, 5, 3, 3])
    n = len(rank)
    send = list(mf.names_array()).index("MPI_Send")
    block = {"rank": rank, "callsite": shim.copy(), "function": Labels(np.full(n, send), mf.names_array()),
             "start": np.zeros(n, np.int64), "end": np.full(n, 10, np.int64), "calls": np.ones(n, np.int64),
             "wait_before": np.zeros(n, np.int64), "wait_after": np.zeros(n, np.int64),
             "bytes": np.zeros(n, np.int64), "on_path": np.zeros(n, bool), "wait_state": np.full(n, -1),
             "wait_state_time": np.zeros(n, np.int64), "other_state_time": np.zeros(n, np.int64)}
    out = Accumulator(sites, 3).add(block)
    assert out["callsite"].tolist() == [1, 2, 4, 1, 0, 4, 1, 1]
    acc = Accumulator(sites, 3)
    acc.add(dict(block, callsite=shim.copy()))
    table = acc.table()
    # Per (call site, MPI_Send): site 1 has rank 0's 4 calls, site 2 rank 1's 1, site 4 rank 1's 2, site 0 rank 2's 1.
    counts = dict(zip(table["callsite"].tolist(), table["count"].tolist()))
    assert counts == {1: 4, 2: 1, 4: 2, 0: 1}
    assert dict(zip(table["callsite"].tolist(), table["time"].tolist())) == {1: 40, 2: 10, 4: 20, 0: 10}


def test_an_empty_block():
    class NoSites:
        def run_ids(self, rank, ids):
            raise AssertionError("no rank to relabel")

    block = {"rank": np.zeros(0, np.int64), "callsite": np.zeros(0, np.int64),
             "function": Labels(np.zeros(0, np.int64), mf.names_array()), "start": np.zeros(0, np.int64),
             "end": np.zeros(0, np.int64), "calls": np.zeros(0, np.int64), "wait_before": np.zeros(0, np.int64),
             "wait_after": np.zeros(0, np.int64), "bytes": np.zeros(0, np.int64), "on_path": np.zeros(0, bool),
             "wait_state": np.zeros(0, np.int64), "wait_state_time": np.zeros(0, np.int64),
             "other_state_time": np.zeros(0, np.int64)}
    assert Accumulator(NoSites(), 1).add(block)["callsite"].tolist() == []


def test_run_ids_past_a_ranks_sites_are_unknown_and_its_table_is_small(tmp_path):
    (tmp_path / "raw").mkdir()
    sites = Sites(str(tmp_path / "raw"), [])
    place = ("/bin/app", "main", "app.c", 10, "")
    sites._found = {("/bin/app", 16, ""): place, ("/bin/app", 32, ""): place[:3] + (20, "")}
    sites._named = {("/bin/app", 16, ()): ("/bin/app", 16, ""), ("/bin/app", 32, ()): ("/bin/app", 32, "")}
    sites._raw = {0: (np.array([1, 4]), [("/bin/app", 16, ()), ("/bin/app", 32, ())]), 1: (np.zeros(0, np.int64), [])}
    sites._number()
    assert sites.run_ids(0, np.array([1, 4, 2, 5, 9000, 65535])).tolist() == [1, 2, 0, 0, 0, 0]
    assert sites.run_ids(1, np.array([1, 4])).tolist() == [0, 0]      # wrote no sites
    assert sites.run_ids(7, np.array([1])).tolist() == [0]            # not read here
    # A table as long as the rank's ids, not 2**16 entries: thousands of ranks held 0.5 MB each.
    assert len(sites.lut[0]) <= 6 and len(sites.lut[1]) <= 1
