"""The phase API (named regions) from C, Fortran and Python: tests/programs/regions.c, regions.f90,
regions_py.py.  Each has a region "short" (SHORT_MS of busy work and an Allreduce) and a region
"long" (LONG_MS of busy work and an Allreduce): the per-phase tables hold each region's calls,
their sums equal the run's functions table, the phases' times add up to the ranks' program time,
the critical path's shares add up to the path, "long" holds at least LONG_MS of every rank and of
the path, and `mpigraph analyze --phase NAME` keeps one phase.  The programs also run without the
shim (the header and the Fortran module find it at run time, or do nothing)."""

import csv
import os
import re
import sys

import numpy as np
import pytest

import mpi_env
from mpigraph.phases import regions
from mpigraph.phases.share import path_share, pieces
from mpigraph.trace import functions as mf

RANKS = 2
MS = 1_000_000
INCLUDE = os.path.join(os.path.dirname(mf.__file__), os.pardir, "include")
SUMS = ("calls", "time_total_ns", "wait_before_ns", "wait_after_ns", "execution_ns", "bytes_sent",
        "bytes_received", "bytes_collective")


def _constants(path):
    """(SHORT_MS, LONG_MS) as the program's source states them: the tests check what it was built to do."""
    with open(os.path.join(mpi_env.PROGRAMS, path)) as f:
        text = f.read()
    return tuple(int(re.search(r"\b%s\W+(\d+)" % name, text).group(1)) for name in ("SHORT_MS", "LONG_MS"))


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    return mpi_env.Builder(str(tmp_path_factory.mktemp("programs")))


def _run(tmp_path_factory, name, mpi, argv):
    out = tmp_path_factory.mktemp("runs") / name
    result = mpi_env.mpirun(mpi, RANKS, argv, out=out, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "regions ok" in result.stdout
    import mpigraph

    return mpigraph.load(out), out


@pytest.fixture(scope="module")
def c_program(builder):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    return mpi, builder.build("regions.c", mpi.mpicc, ["-g", "-I", INCLUDE])


@pytest.fixture(scope="module")
def c_run(tmp_path_factory, c_program):
    mpi, exe = c_program
    return _run(tmp_path_factory, "regions_c", mpi, [exe])


@pytest.fixture(scope="module")
def fortran_program(builder):
    mpi = mpi_env.debian_mpich()
    if mpi is None or mpi.mpif90 is None:
        pytest.skip("no mpif90.mpich or no gfortran (apt-get install gfortran libmpich-dev)")
    module = os.path.abspath(os.path.join(INCLUDE, "mpigraph.f90"))
    return mpi, builder.build("regions.f90", mpi.mpif90, [module])


@pytest.fixture(scope="module")
def fortran_run(tmp_path_factory, fortran_program):
    mpi, exe = fortran_program
    return _run(tmp_path_factory, "regions_f90", mpi, [exe])


@pytest.fixture(scope="module")
def python_run(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpiexec found"
    return _run(tmp_path_factory, "regions_py", mpi, [sys.executable, os.path.join(mpi_env.PROGRAMS, "regions_py.py")])


def _calls(run):
    per = run["phase_functions"]
    return {(n, f): int(c) for n, f, c in zip(per["name"].fillna(""), per["function"], per["calls"])}


def _phase(run, name):
    phases = run["phases"]
    rows = phases[phases["name"].fillna("") == name]
    assert len(rows) == 1, (name, phases)
    return rows.iloc[0]


def _check_sums(run):
    """Every call in exactly one phase: the phases' sums are the run's; times add up too."""
    per = run["phase_functions"].groupby("function").sum(numeric_only=True)
    functions = run.functions.set_index("function")
    for column in SUMS:
        assert per[column].sort_index().tolist() == functions[column].sort_index().tolist(), column
    phases = run["phases"]
    assert int(phases["calls"].sum()) == int(run.ranks["calls"].sum())
    assert int(phases["time_ns"].sum()) == int(run.ranks["program_time_ns"].sum())
    assert int(phases["critical_path_ns"].sum()) == int(run.critical_path["duration_ns"].sum())


def _check_lengths(run, short_ms, long_ms):
    """"long" lasts at least long_ms on every rank (a busy loop on the wall clock), and the path
    crosses it: at least long_ms of the path (less the marks' few microseconds) lies in it; "short"
    is 280 ms shorter by design, far above what scheduling moves."""
    long, short = _phase(run, "long"), _phase(run, "short")
    assert long["time_ns"] >= RANKS * long_ms * MS
    assert short["time_ns"] >= RANKS * short_ms * MS
    assert long["critical_path_ns"] >= 0.95 * long_ms * MS
    assert long["critical_path_ns"] > short["critical_path_ns"] + (long_ms - short_ms) * MS / 2
    assert short["critical_path_ns"] >= 0.95 * short_ms * MS


# ---- C -------------------------------------------------------------------------------------

def test_c_regions_hold_their_calls_nested_and_unclosed(c_run):
    run, _ = c_run
    R = RANKS
    assert _calls(run) == {
        # outside: MPI_Init; the ends of short and long and the end of long that closed nothing
        ("", "MPI_Init"): R, ("", "mpigraph_phase_end"): 3 * R,
        ("short", "mpigraph_phase_begin"): R, ("short", "MPI_Allreduce"): R,
        # long: its begin, the end of exchange nested in it, its Allreduce
        ("long", "mpigraph_phase_begin"): R, ("long", "mpigraph_phase_end"): R, ("long", "MPI_Allreduce"): R,
        ("long/exchange", "mpigraph_phase_begin"): R, ("long/exchange", "MPI_Sendrecv"): R,
        # tail is never ended: it runs to MPI_Finalize
        ("tail", "mpigraph_phase_begin"): R, ("tail", "MPI_Barrier"): R, ("tail", "MPI_Finalize"): R}
    assert int(_phase(run, "long/exchange")["bytes_sent"]) == R * 100
    assert set(run["phases"]["phase"]) == {0} and set(run["phases"]["level"]) == {-1}
    summary = run.summary
    assert "note: %d mpigraph_phase_end calls closed no open region" % R in summary
    assert "note: %d regions were still open at the end" % R in summary


def test_c_marks_call_sites_are_the_program_s_lines(c_run):
    """The header's begin and end are macros: a mark's call site is the line of regions.c that
    made it, as the source has it, not a line of mpigraph.h."""
    run, _ = c_run
    with open(os.path.join(mpi_env.PROGRAMS, "regions.c")) as f:
        want = {(m.group(1), n) for n, text in enumerate(f, 1)
                for m in [re.search(r"^\s*(mpigraph_phase_(?:begin|end))\(", text)] if m}
    sites = run["callsites"]
    got = {(f, str(fn), int(ln)) for f, fn, ln in zip(sites["function"], sites["file"], sites["line"])
           if str(f).startswith("mpigraph_phase_")}
    assert {(f, os.path.basename(fn), ln) for f, fn, ln in got} == {(f, "regions.c", ln) for f, ln in want}


def test_c_sums_equal_the_run_s(c_run):
    _check_sums(c_run[0])


def test_c_long_region_is_long(c_run):
    _check_lengths(c_run[0], *_constants("regions.c"))


def test_analyze_phase_keeps_one_phase(c_run, tmp_path):
    run, out = c_run
    result = mpi_env.mpigraph(["analyze", out, "--phase", "long", "--out", tmp_path / "long"])
    assert result.returncode == 0, result.stderr
    assert "Phase long (--phase" in result.stdout
    with open(tmp_path / "long" / "phases.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["name"] for r in rows] == ["long", "long/exchange"]          # the region with what nests in it
    whole = run["phases"].set_index(run["phases"]["name"].fillna(""))
    for r in rows:      # the same numbers as in the whole run's table
        assert int(r["calls"]) == int(whole.loc[r["name"], "calls"])
        assert abs(float(r["critical_path_s"]) * 1e9 - whole.loc[r["name"], "critical_path_ns"]) < 1
    with open(tmp_path / "long" / "phase_functions.csv", newline="") as f:
        assert {r["name"] for r in csv.DictReader(f)} == {"long", "long/exchange"}


@pytest.mark.parametrize("k, options", [(2, []), (3, ["--algorithm", "parallel-dijkstra"])])
def test_more_analysis_ranks_give_the_same_phases(c_run, tmp_path, k, options):
    """The path's time per phase too: with parallel-dijkstra each analysis rank adds up its own
    part of the path (phases/share.py)."""
    _, out = c_run
    result = mpi_env.mpigraph(["analyze", out, "--out", tmp_path / "k", "--quiet"] + options, nprocs=k)
    assert result.returncode == 0, result.stderr
    for name in ("phases.csv", "phase_functions.csv"):
        with open(out / name) as one, open(tmp_path / "k" / name) as two:
            assert one.read() == two.read(), name


def test_analyze_phase_of_no_phase_is_a_user_error(c_run, tmp_path):
    result = mpi_env.mpigraph(["analyze", c_run[1], "--phase", "nosuch", "--out", tmp_path / "x"])
    assert result.returncode == 2
    assert "--phase nosuch: no such phase" in result.stderr and "long/exchange" in result.stderr


def test_a_program_built_against_the_header_runs_without_the_shim(c_program, tmp_path):
    mpi, exe = c_program
    result = mpi_env.mpirun(mpi, RANKS, [exe], cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "regions ok" in result.stdout
    assert os.listdir(tmp_path) == []          # no run directory: nothing recorded


def test_mpigraph_include_prints_the_header_s_directory():
    result = mpi_env.mpigraph(["include"])
    assert result.returncode == 0
    folder = result.stdout.strip()
    assert os.path.isfile(os.path.join(folder, "mpigraph.h")) and os.path.isfile(os.path.join(folder, "mpigraph.f90"))


# ---- Fortran and Python ------------------------------------------------------------------------

def test_fortran_regions(fortran_run):
    run, _ = fortran_run
    calls = _calls(run)
    for name in ("short", "long"):
        assert calls[(name, "mpigraph_phase_begin")] == RANKS
        assert calls[(name, "MPI_Allreduce")] == RANKS
    assert calls[("", "mpigraph_phase_end")] == 2 * RANKS
    _check_sums(run)
    _check_lengths(run, *_constants("regions.f90"))


def test_fortran_program_runs_without_the_shim(fortran_program, tmp_path):
    mpi, exe = fortran_program
    result = mpi_env.mpirun(mpi, RANKS, [exe], cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "regions ok" in result.stdout and os.listdir(tmp_path) == []


def test_python_regions(python_run):
    run, _ = python_run
    calls = _calls(run)
    for name in ("short", "long"):
        assert calls[(name, "mpigraph_phase_begin")] == RANKS
        assert calls[(name, "MPI_Allreduce")] == RANKS
    assert calls[("", "mpigraph_phase_end")] == 2 * RANKS
    _check_sums(run)
    _check_lengths(run, *_constants("regions_py.py"))


def test_python_program_runs_without_the_shim(tmp_path):
    mpi = mpi_env.wheel_mpi()
    result = mpi_env.mpirun(mpi, RANKS, [sys.executable, os.path.join(mpi_env.PROGRAMS, "regions_py.py")],
                            cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "regions ok" in result.stdout


# ---- the rules, by hand --------------------------------------------------------------------------

B, E, P = regions.BEGIN, regions.END, regions.PCONTROL


def test_nesting_rules():
    names = {0: "a", 1: "b", 2: "c"}
    marks = [(B, 0), (B, 1), (E, -1),       # b closed by an end without a name
             (B, 1), (B, 2), (E, 1),        # the end of b closes c opened inside it
             (E, 2),                        # c is not open: ignored
             (P, 7),                        # a new Pcontrol phase; a stays open
             (B, 0)]                        # a inside a, never closed
    func = np.array([m[0] for m in marks])
    tag = np.array([m[1] for m in marks])
    keys, unmatched, unclosed = regions.segment_keys(func, tag, names)
    assert keys == [(0, -1, ""), (0, -1, "a"), (0, -1, "a/b"), (0, -1, "a"), (0, -1, "a/b"), (0, -1, "a/b/c"),
                    (0, -1, "a"), (0, -1, "a"), (1, 7, "a"), (1, 7, "a/a")]
    assert (unmatched, unclosed) == (1, 2)


def test_path_share_cuts_segments_at_the_marks():
    # Rank 0's marks at 10, 20, 30 (absolute ns): its intervals' phases 0, 1, 0, 2.
    bounds = np.array([10, 20, 30])
    segment, interval, length = pieces(bounds, np.array([12, 5]), np.array([35, 8]))
    assert segment.tolist() == [0, 0, 0, 1] and interval.tolist() == [1, 2, 3, 0]
    assert length.tolist() == [8, 10, 5, 3]
    path = {"rank": np.array([0, 1, 0]), "start": np.array([0, 0, 12]), "end": np.array([12, 40, 40])}
    intervals = {0: (bounds + 100, np.array([0, 1, 0, 2])), 1: (np.array([], np.int64), np.array([1]))}
    share = path_share(intervals, path, 100, 3)       # the path's times count from the run's start, 100
    # rank 0 [0,12): 10 in phase 0, 2 in phase 1; rank 1 [0,40): 40 in phase 1; rank 0 [12,40): 8, 10, 10
    assert share.tolist() == [10 + 10, 2 + 40 + 8, 10]
    assert share.sum() == 12 + 40 + 28


# ---- a hand-built run: exact shares ----------------------------------------------------------------

def _hand_built_run(run_dir):
    """Two ranks (ns).  Rank 0 computes 100..6100 with the region "assemble" from 1100 to 5100 (marks
    in the middle of its compute), rank 1 computes 100..5000; both meet in a Barrier (6100..6200:
    rank 0 arrives last), call MPI_Pcontrol(3) at 6500 and MPI_Finalize at 7000.  The path runs
    through rank 0's compute, so "assemble" holds 4000 ns of it."""
    import tracebuild as tb

    barrier = [tb.rec("MPI_Barrier", 6100, 6200, seq=1), tb.rec("MPI_Barrier", 5000, 6200, seq=1)]
    tail = [tb.rec("MPI_Pcontrol", 6500, 6500, tag=3), tb.rec("MPI_Finalize", 7000, 7000)]
    tb.write_rank(run_dir, 0, 2, [tb.rec("MPI_Init", 0, 100), tb.rec("mpigraph_phase_begin", 1100, 1100, tag=0),
                                  tb.rec("mpigraph_phase_end", 5100, 5100, tag=0), barrier[0]] + tail)
    tb.write_rank(run_dir, 1, 2, [tb.rec("MPI_Init", 0, 100), barrier[1]] + tail)
    with open(os.path.join(str(run_dir), "raw", "rank-0.names"), "w") as f:
        f.write("0\tassemble\n")


@pytest.mark.parametrize("algorithm", ["dijkstra", "toposort"])
def test_hand_built_shares_and_times(tmp_path, algorithm):
    from mpigraph import analysis, config

    _hand_built_run(tmp_path)
    analysis.analyze(str(tmp_path), config=config.Config(algorithm=algorithm, quiet=True))
    import mpigraph

    run = mpigraph.load(tmp_path)
    phases = run["phases"]
    got = {(int(p), int(lv), n): (int(t), int(c)) for p, lv, n, t, c in
           zip(phases["phase"], phases["level"], phases["name"].fillna(""), phases["time_ns"],
               phases["critical_path_ns"])}
    # time: rank 0 outside 1000 + 1000 + 100 + 300, in "assemble" 4000, after Pcontrol 500; rank 1 6400 and 500.
    # path (100..7000): outside 1000 + 1000 + 100 (Barrier) + 300, "assemble" 4000, after Pcontrol 500.
    assert got == {(0, -1, ""): (2400 + 6400, 2400), (0, -1, "assemble"): (4000, 4000), (1, 3, ""): (1000, 500)}
    per = run["phase_functions"]
    rows = {(int(p), n, f): int(c)
            for p, n, f, c in zip(per["phase"], per["name"].fillna(""), per["function"], per["calls"])}
    assert rows == {(0, "", "MPI_Init"): 2, (0, "", "MPI_Barrier"): 2, (0, "", "mpigraph_phase_end"): 1,
                    (0, "assemble", "mpigraph_phase_begin"): 1, (1, "", "MPI_Pcontrol"): 2,
                    (1, "", "MPI_Finalize"): 2}


def test_hand_built_phase_selection(tmp_path):
    from mpigraph import analysis, config
    from mpigraph.phases.stage import PhaseError

    _hand_built_run(tmp_path)
    text = analysis.analyze(str(tmp_path), config=config.Config(quiet=True, phase="1"))
    assert "Phase 1 (--phase" in text
    import mpigraph

    phases = mpigraph.load(tmp_path)["phases"]
    assert phases["phase"].tolist() == [1] and phases["critical_path_ns"].tolist() == [500]
    with pytest.raises(PhaseError, match="its phases: 0, 1, assemble"):
        analysis.analyze(str(tmp_path), config=config.Config(quiet=True, phase="2"))


def test_phase_names_select_whole_components():
    from mpigraph.phases.stage import selected_rows

    names = np.array(["", "solve", "solve/halo", "solver", "out/solve"], dtype=object)
    table = {"phase": np.array([0, 0, 0, 0, 2]), "name": names}
    assert selected_rows(table, "solve").tolist() == [False, True, True, False, True]
    assert selected_rows(table, "solve/halo").tolist() == [False, False, True, False, False]
    assert selected_rows(table, "2").tolist() == [False, False, False, False, True]
