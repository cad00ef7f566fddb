"""The per-call-site twins of the per-phase function table and the size histograms (issue 32):
phase_callsites.csv and callsite_sizes.csv.

tests/programs/callsite_phases.c (built with callsites_halo.c) calls MPI_Sendrecv at one site
(callsites_halo.c) and MPI_Allreduce at another (callsite_phases.c), ROUNDS1 times in phase 1
with SMALL doubles exchanged and 1 double reduced, ROUNDS2 times in phase 2 with BIG doubles
exchanged and WIDE doubles reduced.  The expected rows come from those constants (read from the
source), the ranks and the size bins they fall in; the sums are checked against callsites.csv and
sizes.csv of the same report, and the report is the same for K = 1, 2, 3 analysis ranks.
"""

import csv
import filecmp
import os
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

import mpi_env
from mpigraph.traffic import sizes

RANKS = 3
KS = (1, 2, 3)
SOURCE = "callsite_phases.c"
DOUBLE = 8


def _define(name):
    with open(os.path.join(mpi_env.PROGRAMS, SOURCE)) as f:
        return int(re.search(r"#define\s+%s\s+(\d+)" % name, f.read()).group(1))


def _line_of(source, marker):
    with open(os.path.join(mpi_env.PROGRAMS, source)) as f:
        lines = [i + 1 for i, text in enumerate(f) if marker in text]
    assert len(lines) == 1, (source, marker, lines)
    return lines[0]


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _bin(nbytes):
    """The power-of-two bin of a size, by hand: [2**k, 2**(k+1) - 1] with 2**k <= nbytes."""
    k = nbytes.bit_length() - 1
    return (1 << k, (1 << (k + 1)) - 1)


@pytest.fixture(scope="module")
def reports(wheel, builder, tmp_path_factory):
    """{K: report directory} of one run of the program, analysed offline on K analysis ranks."""
    exe = builder.build(SOURCE, wheel.mpicc, flags=["-g", os.path.join(mpi_env.PROGRAMS, "callsites_halo.c")])
    tmp = tmp_path_factory.mktemp("callsite_twins")
    result = mpi_env.mpirun(wheel, RANKS, [exe], out=tmp / "run", rank_env={"MPIGRAPH_ANALYZE": "off"})
    assert result.returncode == 0, result.stderr
    out = {}
    for k in KS:
        # K = 1 in the run directory itself: `mpigraph decompose` reads the report beside raw/.
        out[k] = tmp / "run" if k == 1 else tmp / ("k%d" % k)
        done = mpi_env.mpigraph(["analyze", tmp / "run", "--out", out[k], "--quiet"], nprocs=k, mpi=wheel)
        assert done.returncode == 0, done.stderr
    out["run"] = tmp / "run"
    return out


def _names():
    return {"MPI_Sendrecv": "MPI_Sendrecv at callsites_halo.c:%d" % _line_of("callsites_halo.c", "site: sendrecv"),
            "MPI_Allreduce": "MPI_Allreduce at %s:%d" % (SOURCE, _line_of(SOURCE, "site: allreduce"))}


def test_phase_callsites_rows_are_the_designed_calls(reports):
    """Each phase has one row per call site of the program's two: the calls it made there (rounds
    x ranks) with the bytes each call sent (a Sendrecv's call record counts the bytes it sent, an
    Allreduce's the bytes it passed), made by every rank."""
    rows = _rows(reports[1] / "phase_callsites.csv")
    names = _names()
    designed = {(1, "MPI_Sendrecv"): (_define("ROUNDS1"), _define("SMALL") * DOUBLE),
                (1, "MPI_Allreduce"): (_define("ROUNDS1"), 1 * DOUBLE),
                (2, "MPI_Sendrecv"): (_define("ROUNDS2"), _define("BIG") * DOUBLE),
                (2, "MPI_Allreduce"): (_define("ROUNDS2"), _define("WIDE") * DOUBLE)}
    found = {(int(r["phase"]), r["function"]): r for r in rows if r["function"] in names}
    assert sorted(found) == sorted(designed)
    for (phase, function), (rounds, nbytes) in designed.items():
        r = found[(phase, function)]
        assert r["callsite_name"] == names[function]
        assert int(r["level"]) == phase and r["name"] == ""     # MPI_Pcontrol(1), MPI_Pcontrol(2)
        assert int(r["count"]) == rounds * RANKS
        assert int(r["bytes"]) == rounds * RANKS * nbytes
        assert int(r["ranks"]) == RANKS
    # Phase 0 is MPI_Init alone; each MPI_Pcontrol starts (and belongs to) its own phase.
    assert {r["function"] for r in rows if r["phase"] == "0"} == {"MPI_Init"}
    assert {int(r["phase"]) for r in rows if r["function"] == "MPI_Pcontrol"} == {1, 2}


def test_phase_callsites_sum_to_callsites_over_the_phases(reports):
    """Summed over the phases, each (call site, function)'s count, time, wait, bytes and path time
    are callsites.parquet's, exactly (integer ns), for every K."""
    for k in KS:
        by_phase = pq.read_table(reports[k] / "phase_callsites.parquet").to_pydict()
        whole = pq.read_table(reports[k] / "callsites.parquet").to_pydict()
        keys = list(zip(by_phase["callsite"], by_phase["function"]))
        assert set(keys) == set(zip(whole["callsite"], whole["function"]))
        for i, key in enumerate(zip(whole["callsite"], whole["function"])):
            mine = [j for j, kj in enumerate(keys) if kj == key]
            for column in ("count", "time_ns", "wait_ns", "bytes", "path_time_ns"):
                assert sum(by_phase[column][j] for j in mine) == whole[column][i], (k, key, column)


def test_callsite_sizes_bins_are_the_designed_sizes(reports):
    """callsite_sizes.csv: the Sendrecv site has a send and a receive per call of SMALL or BIG
    doubles, the Allreduce site a member per call of 1 or WIDE doubles, each in its power-of-two
    bin; no other rows."""
    names = _names()
    small, big, wide = (_define(n) * DOUBLE for n in ("SMALL", "BIG", "WIDE"))
    r1, r2 = _define("ROUNDS1"), _define("ROUNDS2")
    designed = {("MPI_Sendrecv",) + _bin(small): (2 * r1 * RANKS, 2 * r1 * RANKS * small),
                ("MPI_Sendrecv",) + _bin(big): (2 * r2 * RANKS, 2 * r2 * RANKS * big),
                ("MPI_Allreduce",) + _bin(DOUBLE): (r1 * RANKS, r1 * RANKS * DOUBLE),
                ("MPI_Allreduce",) + _bin(wide): (r2 * RANKS, r2 * RANKS * wide)}
    rows = _rows(reports[1] / "callsite_sizes.csv")
    found = {(r["function"], int(r["bin_lo"]), int(r["bin_hi"])): r for r in rows}
    assert len(found) == len(rows) == len(designed)
    assert sorted(found) == sorted(designed)
    for key, (count, nbytes) in designed.items():
        r = found[key]
        assert (int(r["count"]), int(r["bytes"])) == (count, nbytes), key
        assert r["callsite_name"] == names[key[0]] and r["comm"] == "world"


def test_callsite_sizes_sum_to_sizes_over_the_call_sites(reports):
    for k in KS:
        by_site = pq.read_table(reports[k] / "callsite_sizes.parquet").to_pydict()
        whole = pq.read_table(reports[k] / "sizes.parquet").to_pydict()
        key = ("function", "comm_id", "bin_lo", "bin_hi")
        summed = {}
        for i in range(len(by_site["count"])):
            at = tuple(by_site[c][i] for c in key)
            count, nbytes = summed.get(at, (0, 0))
            summed[at] = (count + by_site["count"][i], nbytes + by_site["bytes"][i])
        assert summed == {tuple(whole[c][i] for c in key): (whole["count"][i], whole["bytes"][i])
                          for i in range(len(whole["count"]))}


def test_the_twins_are_the_same_for_every_k(reports):
    for k in KS[1:]:
        for name in ("phase_callsites", "callsite_sizes"):
            assert filecmp.cmp(reports[k] / (name + ".csv"), reports[1] / (name + ".csv"), shallow=False), (k, name)
            assert pq.read_table(reports[k] / (name + ".parquet")).equals(
                pq.read_table(reports[1] / (name + ".parquet"))), (k, name)


def test_api_reads_the_twins(reports):
    import mpigraph

    run = mpigraph.load(reports[2])
    assert run.phase_callsites["count"].sum() == run.callsites["count"].sum()
    assert run.callsite_sizes["bytes"].sum() == run.sizes["bytes"].sum()
    assert {"phase_callsites", "callsite_sizes"} <= set(run.tables)


def test_phase_option_keeps_that_phase_s_call_sites(reports, wheel, tmp_path):
    """--phase 2: phase_callsites.csv holds phase 2's rows alone, as analysed without it."""
    out = tmp_path / "phase2"
    done = mpi_env.mpigraph(["analyze", reports["run"], "--out", out, "--quiet", "--phase", "2"], nprocs=2, mpi=wheel)
    assert done.returncode == 0, done.stderr
    mine = _rows(out / "phase_callsites.csv")
    every = [r for r in _rows(reports[1] / "phase_callsites.csv") if r["phase"] == "2"]
    assert mine == every and len(mine) >= 2


def test_decomposition_per_call_site_sums_to_the_per_rank_table(reports, tmp_path):
    """`mpigraph decompose`: decomposition_callsites.csv has the program's two call sites by name
    with callsites.csv's counts; summed over the call sites, each function's sums are
    decomposition.csv's summed over the ranks (every column: per-call sums keyed two ways)."""
    out = tmp_path / "dec"
    done = mpi_env.mpigraph(["decompose", reports["run"], "--out", out])
    assert done.returncode == 0, done.stderr
    by_site = pq.read_table(out / "decomposition_callsites.parquet").to_pydict()
    by_rank = pq.read_table(out / "decomposition.parquet").to_pydict()
    sums = [c for c in by_rank if c not in ("rank", "function")]

    def per_function(table):
        totals = {}
        for i, f in enumerate(table["function"]):
            totals[f] = [a + table[c][i] for a, c in zip(totals.get(f, [0] * len(sums)), sums)]
        return totals

    assert per_function(by_site) == per_function(by_rank)
    names = _names()
    counts = {r["name"]: int(r["count"]) for r in _rows(reports["run"] / "callsites.csv")}
    for function, name in names.items():
        i = by_site["name"].index(name)
        assert by_site["function"][i] == function and by_site["calls"][i] == counts[name]
    assert by_site["calls"][by_site["name"].index(names["MPI_Sendrecv"])] == \
        (_define("ROUNDS1") + _define("ROUNDS2")) * RANKS


def test_named_regions_split_the_call_sites_as_phase_functions_does(wheel, builder, tmp_path):
    """tests/programs/regions.c (phase API regions "short", "long", "long/exchange", "tail"):
    phase_callsites is made from the calls table, phase_functions from the records; per phase and
    function they agree exactly (calls, time), and the Allreduce of "short" and of "long" are two
    call sites, each made once per rank."""
    include = os.path.join(os.path.dirname(sizes.__file__), os.pardir, "include")
    exe = builder.build("regions.c", wheel.mpicc, ["-g", "-I", include])
    out = tmp_path / "regions"
    result = mpi_env.mpirun(wheel, 2, [exe], out=out, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    by_site = pq.read_table(out / "phase_callsites.parquet").to_pydict()
    by_function = pq.read_table(out / "phase_functions.parquet").to_pydict()
    summed = {}
    for i in range(len(by_site["count"])):
        at = (by_site["phase"][i], by_site["name"][i], by_site["function"][i])
        count, time = summed.get(at, (0, 0))
        summed[at] = (count + by_site["count"][i], time + by_site["time_ns"][i])
    assert summed == {(by_function["phase"][i], by_function["name"][i], by_function["function"][i]):
                      (by_function["calls"][i], by_function["time_total_ns"][i])
                      for i in range(len(by_function["calls"]))}
    reduces = {by_site["name"][i]: (by_site["callsite"][i], by_site["count"][i])
               for i in range(len(by_site["count"])) if by_site["function"][i] == "MPI_Allreduce"}
    assert sorted(reduces) == ["long", "short"]
    assert reduces["long"][0] != reduces["short"][0]
    assert reduces["long"][1] == reduces["short"][1] == 2


def test_site_keyed_histogram_relabels_to_run_ids():
    """sizes.relabelled: two ranks' shim ids that are one call site of the run add up into one row;
    summed over sites, the table without sites."""
    func = np.array([5, 5, 5, 7])
    comm = np.array([0, 0, 0, 3])
    nbytes = np.array([8, 12, 100, 0])
    keyed = sizes.histogram(func, comm, nbytes, sizes.site_key([0, 1, 1, 0], [2, 9, 9, 4]))
    run_ids = {(0, 2): 1, (1, 9): 1, (0, 4): 2}
    out = sizes.relabelled(keyed, lambda r, s: np.array([run_ids[(a, b)] for a, b in zip(r, s)]))
    rows = sorted(zip(out["site"].tolist(), out["func"].tolist(), out["comm"].tolist(), out["bin_lo"].tolist(),
                      out["count"].tolist(), out["bytes"].tolist()))
    # 8 and 12 bytes share the bin [8, 15]; 100 is in [64, 127]; 0 bytes is a bin of its own.
    assert rows == [(1, 5, 0, 8, 2, 20), (1, 5, 0, 64, 1, 100), (2, 7, 3, 0, 1, 0)]
    plain = sizes.histogram(func, comm, nbytes)
    assert sorted(plain["count"].tolist()) == sorted(out["count"].tolist())
