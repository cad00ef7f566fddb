"""Named regions and MPI_Pcontrol phases in the exports: OTF2 regions of their own (enter at the
mark, leave at the mark that ends them), trace.json slices per region and rank; the marks are no
MPI calls there.

tests/programs/regions.c (2 ranks): "short", then "long" with "exchange" nested in it, an ignored
second end of "long", then "tail" never ended (left at MPI_Finalize's end).
tests/programs/phases.c: MPI_Pcontrol(1), (2), (0): three phases after phase 0."""

import json
import os

import numpy as np
import pytest

import mpi_env
from mpigraph.trace import functions as mf

otf2 = pytest.importorskip("otf2", reason="the otf2 package is in the test extra: pip install '.[test]'")

RANKS = 2
INCLUDE = os.path.join(os.path.dirname(mf.__file__), os.pardir, "include")
MARKS = ("mpigraph_phase_begin", "mpigraph_phase_end", "MPI_Pcontrol")
# regions.c's region events in order, (event, region); the second end of "long" (mark 7) makes none.
REGION_EVENTS = [("Enter", "short"), ("Leave", "short"), ("Enter", "long"), ("Enter", "exchange"),
                 ("Leave", "exchange"), ("Leave", "long"), ("Enter", "tail"), ("Leave", "tail")]


def _run(tmp_path_factory, source, flags, argv=()):
    mpi = mpi_env.wheel_mpi()
    exe = mpi_env.Builder(str(tmp_path_factory.mktemp("programs"))).build(source, mpi.mpicc, flags)
    out = str(tmp_path_factory.mktemp("runs") / "run")
    result = mpi_env.mpirun(mpi, RANKS, [exe, *argv], out=out, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def regions_run(tmp_path_factory):
    return _run(tmp_path_factory, "regions.c", ["-I", INCLUDE])


@pytest.fixture(scope="module")
def phases_run(tmp_path_factory):
    return _run(tmp_path_factory, "phases.c", [], ["2"])


def _export(run_dir, where):
    result = mpi_env.mpigraph(["export", run_dir, "--otf2", str(where)])
    assert result.returncode == 0, result.stdout + result.stderr
    return str(where)


def _read(archive):
    """{rank: [(event class, region name, paradigm, time)]} of the Enter and Leave events."""
    events = {}
    with otf2.reader.open(os.path.join(archive, "traces.otf2")) as trace:
        rank_of = {loc: i for i, loc in enumerate(trace.definitions.locations)}
        for location, event in trace.events:
            if isinstance(event, (otf2.events.Enter, otf2.events.Leave)):
                events.setdefault(rank_of[location], []).append(
                    (type(event).__name__, event.region.name, event.region.paradigm, event.time))
    return events


def _calls(run_dir):
    import mpigraph

    return mpigraph.load(run_dir).calls


def test_named_regions_enter_and_leave_at_their_marks(regions_run, tmp_path):
    events = _read(_export(regions_run, tmp_path / "otf2"))
    calls = _calls(regions_run)
    shift = max(0, -int(calls["start_ns"].min()))
    for rank in range(RANKS):
        mine = calls[calls["rank"] == rank].sort_values("call")
        user = [e for e in events[rank] if e[2] == otf2.Paradigm.USER]
        assert [(e[0], e[1]) for e in user] == REGION_EVENTS
        # Times: the marks' (the 7th mark, an end of "long" that is not open, makes no event),
        # "tail" left at the end of the rank's last call (MPI_Finalize).
        marks = mine[mine["function"].isin(MARKS)]["start_ns"].to_numpy()
        assert len(marks) == 8
        expected = np.concatenate([np.delete(marks, 6), [mine["end_ns"].iloc[-1]]]) + shift
        assert [e[3] for e in user] == expected.tolist()
        # The marks are no MPI calls: every MPI Enter is a call of calls.parquet that is no mark.
        mpi = [e[1] for e in events[rank] if e[2] == otf2.Paradigm.MPI and e[0] == "Enter"]
        assert mpi == mine[~mine["function"].isin(MARKS)]["function"].tolist()
        assert not set(MARKS) & {e[1] for e in events[rank]}
        # Nesting: the Sendrecv is inside "exchange", inside "long".
        names = [e[1] for e in events[rank]]
        assert names.index("long") < names.index("exchange") < names.index("MPI_Sendrecv")


def test_pcontrol_phases_are_regions_one_after_another(phases_run, tmp_path):
    events = _read(_export(phases_run, tmp_path / "otf2"))
    calls = _calls(phases_run)
    for rank in range(RANKS):
        user = [(e[0], e[1]) for e in events[rank] if e[2] == otf2.Paradigm.USER]
        assert user == [("Enter", "pcontrol 1 (level 1)"), ("Leave", "pcontrol 1 (level 1)"),
                        ("Enter", "pcontrol 2 (level 2)"), ("Leave", "pcontrol 2 (level 2)"),
                        ("Enter", "pcontrol 3 (level 0)"), ("Leave", "pcontrol 3 (level 0)")]
        mine = calls[calls["rank"] == rank]
        assert sum(e[0] == "Enter" and e[2] == otf2.Paradigm.MPI for e in events[rank]) == \
            int((mine["function"] != "MPI_Pcontrol").sum())


def _trace_json(run_dir, tmp_path):
    result = mpi_env.mpigraph(["view", run_dir, "--perfetto", "--out", str(tmp_path / "view")])
    assert result.returncode == 0, result.stdout + result.stderr
    with open(tmp_path / "view" / "trace.json") as f:
        trace = json.load(f)
    # trace.json's ts: microseconds (three decimals), shifted so that the earliest call starts at 0 or later.
    shift_us = max(0, -int(_calls(run_dir)["start_ns"].min())) / 1000
    return trace["traceEvents"], shift_us


def test_trace_json_has_a_slice_per_region_and_rank(regions_run, tmp_path):
    events, shift_us = _trace_json(regions_run, tmp_path)
    calls = _calls(regions_run)
    for rank in range(RANKS):
        mine = calls[calls["rank"] == rank].sort_values("call")
        marks = mine[mine["function"].isin(MARKS)]["start_ns"].to_numpy()
        finalize_end = int(mine["end_ns"].iloc[-1])
        # (name, start, end) in ns from the marks: the 7th mark (an end of "long" not open) is ignored.
        expected = {("short", marks[0], marks[1]), ("long", marks[2], marks[5]), ("exchange", marks[3], marks[4]),
                    ("tail", marks[7], finalize_end)}
        slices = [e for e in events if e["ph"] == "X" and e["pid"] == rank and e.get("tid") == 1]
        got = {(e["name"], round((e["ts"] - shift_us) * 1000), round((e["ts"] - shift_us + e["dur"]) * 1000))
               for e in slices}
        assert got == {(n, int(a), int(b)) for n, a, b in expected}
        assert {e["name"]: e["args"]["depth"] for e in slices} == {"short": 0, "long": 0, "exchange": 1, "tail": 0}
        assert {e["cat"] for e in slices} == {"region"}
        # The marks are no MPI calls; the MPI calls are calls.parquet's, with its times.
        mpi = sorted((e["name"], round((e["ts"] - shift_us) * 1000)) for e in events
                     if e.get("cat") == "mpi" and e["pid"] == rank)
        real = mine[~mine["function"].isin(MARKS)]
        assert mpi == sorted(zip(real["function"], real["start_ns"].astype(int)))


def test_trace_json_pcontrol_phases(phases_run, tmp_path):
    events, _ = _trace_json(phases_run, tmp_path)
    for rank in range(RANKS):
        slices = [e for e in events if e["ph"] == "X" and e["pid"] == rank and e.get("tid") == 1]
        assert sorted((e["ts"], e["name"], e["cat"]) for e in slices)[0][1:] == ("pcontrol 1 (level 1)", "pcontrol")
        assert [e["name"] for e in sorted(slices, key=lambda e: e["ts"])] == \
            ["pcontrol 1 (level 1)", "pcontrol 2 (level 2)", "pcontrol 3 (level 0)"]
        assert not any(e.get("cat") == "mpi" and e["name"] == "MPI_Pcontrol" for e in events)


def test_timeline_page_draws_the_regions_and_no_marks(regions_run, tmp_path):
    """timeline.html: the regions in its header (a slice per region and rank) drawn as bands in
    headless Chromium (tests/headless.py), and the marks gone from its calls."""
    import re

    from headless import Browser

    result = mpi_env.mpigraph(["view", regions_run, "--out", str(tmp_path / "view")])
    assert result.returncode == 0, result.stdout + result.stderr
    html = tmp_path / "view" / "timeline.html"
    meta = json.loads(re.search(r'<script type="application/json" id="mg-meta">(.*?)</script>', html.read_text(),
                                re.S).group(1))
    calls = _calls(regions_run)
    assert meta["calls"] == int((~calls["function"].isin(MARKS)).sum())
    assert not set(MARKS) & {f["name"] for f in meta["functions"]}
    g = meta["regions"]
    assert sorted(zip(g["rank"], [g["names"][k] for k in g["name"]])) == \
        sorted((r, n) for r in range(RANKS) for n in ("short", "long", "exchange", "tail"))
    ready = "window.__mpigraph && (window.__mpigraph.ok || window.__mpigraph.errors.length > 0) && window.__mpigraph"
    with Browser(timeout=180) as browser:
        page = browser.open("file://" + str(html), width=1400, height=800)
        status, _ = page.wait_for(ready, timeout=180)
        errors = page.console_errors
    assert errors == [] and status["errors"] == [], (errors, status)
    assert status["regionsDrawn"] == 4 * RANKS
