"""whatif --overhead: the tracing's cost per call, estimated from the trace and taken off the
compute edges (mpigraph/whatif/overhead.py, docs/whatif.md "The recording's own cost").

Known answers: synthetic halo runs (mpigraph.testing.synth) whose gaps between the calls of
a halo exchange are exactly gap_ns (the program does nothing between Irecv, Irecv, Isend,
Isend and Waitall), so the estimate must be gap_ns, and T(0) must fall by gap_ns per compute
edge on the critical path.
"""

import numpy as np
import pytest

from mpigraph.whatif import overhead
from mpigraph.whatif.build import CALL, COMPUTE, WhatifError

GAP_NS = 137          # not a round number: the estimate cannot be a default that happens to match
NS = 1e-9


def make_run(tmp_path_factory, name, **params):
    from mpigraph.testing import synth

    out = tmp_path_factory.mktemp(name)
    expected = synth.generate(str(out), 4, 62, "halo", gap_ns=GAP_NS, **params)   # 10 phases
    return str(out), expected


@pytest.fixture(scope="module")
def halo(tmp_path_factory):
    """synth's halo with its default jitter of compute times."""
    return make_run(tmp_path_factory, "halo")


@pytest.fixture(scope="module")
def even_halo(tmp_path_factory):
    """No jitter (jitter_ns = exit_ns = 1: every draw is 0): the path is the same in every phase."""
    return make_run(tmp_path_factory, "even", jitter_ns=1, exit_ns=1)


def test_recording_cost_by_hand():
    """Per rank the 5th percentile (numpy's linear interpolation), the minimum over ranks:
    rank 0's gaps 1..100 ns give 1 + 0.05 * 99 = 5.95, rank 1's 10..109 give 14.95; rank 2
    computes between every call (gaps of 5 and 6 us) and is not the minimum."""
    gaps = np.r_[np.arange(1, 101), np.arange(10, 110), [5000, 6000]].astype(float)
    rank = np.r_[np.zeros(100), np.ones(100), [2, 2]]
    perm = np.random.default_rng(3).permutation(len(gaps))        # the order of the edges does not matter
    assert overhead.recording_cost(gaps[perm], rank[perm]) == pytest.approx(5.95, abs=1e-12)
    assert overhead.recording_cost([], []) == 0.0


def test_no_back_to_back_calls_take_nothing_off():
    # An Allreduce loop with 30 us of work between every pair of calls: the low gaps are the
    # program's work, not the recording's; a rank with back-to-back calls still sets it.
    gaps = np.concatenate([30000 + np.arange(100.0), 31000 + np.arange(100.0)])
    ranks = np.repeat([0, 1], 100)
    assert overhead.recording_cost(gaps, ranks) == 0.0
    assert overhead.Overhead(0.0, "auto").describe().startswith("0 ns per call (auto: no rank has calls back")
    assert overhead.recording_cost(np.concatenate([gaps, 50 + np.arange(100.0)]), np.repeat([0, 1, 2], 100)) \
        == pytest.approx(54.95)


def test_shorten_never_below_zero():
    """Compute edges lose o (never below 0); other edges keep their weight; the input is not changed."""
    c = np.array([50.0, 300.0, 10.0, 1000.0])
    kind = np.array([COMPUTE, COMPUTE, CALL, COMPUTE])
    np.testing.assert_array_equal(overhead.shorten(c, kind, 100.0), [0.0, 200.0, 10.0, 900.0])
    np.testing.assert_array_equal(c, [50.0, 300.0, 10.0, 1000.0])


@pytest.mark.parametrize("spec, want", [("none", ("none", 0.0)), (None, ("none", 0.0)), ("auto", ("auto", None)),
                                        ("AUTO", ("auto", None)), (70, ("given", 70.0)), ("70", ("given", 70.0)),
                                        ("70ns", ("given", 70.0)), ("0.07us", ("given", 70.0)),
                                        (0, ("none", 0.0)), ("0ns", ("none", 0.0))])
def test_parse(spec, want):
    source, ns = overhead.parse(spec)
    assert source == want[0]
    if want[1] is None:
        assert np.isnan(ns)
    else:
        assert ns == pytest.approx(want[1], rel=1e-12)


@pytest.mark.parametrize("spec", ["fast", "-5ns", "-1", "1e400", "nan", "10 parsecs", True, [70]])
def test_parse_rejects(spec):
    with pytest.raises(WhatifError, match="auto, none"):
        overhead.parse(spec)


def test_auto_is_the_back_to_back_gap(halo):
    """4 of each rank's 6 gaps per phase are gap_ns exactly: o_rec = gap_ns."""
    from mpigraph.whatif import whatif

    run_dir, _ = halo
    result = whatif(run_dir, latency=(0, 50e-6), overhead="auto")
    assert result.overhead_source == "auto"
    assert result.overhead_ns == pytest.approx(GAP_NS, abs=1e-6)


def test_T0_falls_by_o_per_compute_edge_on_the_path(halo):
    """T(0) with auto = T(0) without - (compute edges on the critical path) x o_rec; without, T(0)
    is the run's measured time; the slope does not change (the compute edges carry no latency)."""
    from mpigraph.whatif import whatif

    run_dir, expected = halo
    starts = [v["program_start"] for v in expected.ranks.values()]
    ends = [v["program_end"] for v in expected.ranks.values()]
    plain = whatif(run_dir, latency=(0, 50e-6))
    auto = whatif(run_dir, latency=(0, 50e-6), overhead="auto")
    assert plain.T0_s == pytest.approx((max(ends) - min(starts)) * NS, abs=20e-9)
    assert auto.T0_traced_s == pytest.approx(plain.T0_s, abs=1e-15)
    assert plain.T0_traced_s == plain.T0_s and plain.overhead_ns == 0.0
    assert auto.path_compute_edges > 0
    assert auto.T0_s == pytest.approx(plain.T0_s - auto.path_compute_edges * GAP_NS * NS, abs=1e-15)
    assert auto.lambda_L == plain.lambda_L


def test_known_path_count(even_halo):
    """Without jitter the critical path, as the model graph has it, holds per phase two compute
    edges: the late sender's, from its Allreduce (or MPI_Init) to its first Irecv (whose post
    releases the slow rank's Waitall: that Waitall also completes the slow rank's Isend to the
    late sender, posted before the Irecv, a late-receiver edge, tight at dL = 0), and the slow
    rank's, from its Waitall to its Allreduce; then the final rank's to MPI_Finalize.  All are
    compute_ns (20 us) or more, far above o: T falls by (2 phases + 1) o exactly, for auto's
    o = gap_ns and for a given 400 ns alike, at every dL (one line: the same path)."""
    from mpigraph.whatif import whatif

    run_dir, expected = even_halo
    edges = 2 * expected.params.phases + 1
    plain = whatif(run_dir, latency=(0, 50e-6))
    for spec, o in (("auto", GAP_NS), ("400ns", 400.0), (400, 400.0)):
        got = whatif(run_dir, latency=(0, 50e-6), overhead=spec)
        assert got.overhead_ns == pytest.approx(o, abs=1e-6)
        assert got.path_compute_edges == edges
        assert got.T0_s == pytest.approx(plain.T0_s - edges * o * NS, abs=1e-15)
        assert len(got.pieces) == len(plain.pieces) == 1
        assert got.pieces[0]["C_s"] == pytest.approx(plain.pieces[0]["C_s"] - edges * o * NS, abs=1e-15)
        assert got.pieces[0]["lambda_L"] == plain.pieces[0]["lambda_L"]


def test_cli_zero_is_none_and_paragraph(halo, tmp_path, capsys):
    """--overhead 0 writes the same files as none (the default); auto says what it took off and
    T(0) with and without, in the printed paragraph and whatif.txt."""
    from mpigraph import cli

    run_dir, _ = halo
    dirs = {}
    for spec in ("none", "0", "auto"):
        dirs[spec] = tmp_path / spec
        assert cli.main(["whatif", run_dir, "--latency", "0:20us", "--overhead", spec, "--out", str(dirs[spec])]) == 0
    printed = capsys.readouterr().out
    for name in ("whatif_pieces.csv", "tolerance.csv", "critical_messages.csv", "whatif.txt", "whatif.svg"):
        assert (dirs["0"] / name).read_bytes() == (dirs["none"] / name).read_bytes(), name
    assert "Recording overhead: none taken off" in (dirs["none"] / "whatif.txt").read_text()
    text = (dirs["auto"] / "whatif.txt").read_text()
    assert "%d ns per call (auto" % GAP_NS in text and text in printed
    from mpigraph.whatif import whatif

    auto = whatif(run_dir, latency=(0, 20e-6), overhead="auto")
    assert "%.6f s with it taken off, %.6f s without" % (auto.T0_s, auto.T0_traced_s) in text


@pytest.mark.parametrize("bad", ["fast", "-5ns"])
def test_cli_bad_value_is_a_user_error(halo, tmp_path, capsys, bad):
    from mpigraph import cli

    run_dir, _ = halo
    assert cli.main(["whatif", run_dir, "--overhead=" + bad, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--overhead" in err and "auto, none" in err


def test_same_files_on_two_analysis_ranks(halo, tmp_path):
    """`mpiexec -n 2 mpigraph whatif --overhead auto`: analysis rank 0 estimates and takes off the
    cost, the pieces are solved on both ranks: the same files, byte for byte, as on one."""
    import filecmp
    import os

    import mpi_env

    run_dir, _ = halo
    outs = []
    for k in (1, 2):
        out = tmp_path / ("K%d" % k)
        done = mpi_env.mpigraph(["whatif", run_dir, "--out", out, "--overhead", "auto"], nprocs=k)
        assert done.returncode == 0, done.stderr
        outs.append(out)
    names = sorted(os.listdir(outs[0]))
    match, mismatch, errors = filecmp.cmpfiles(outs[0], outs[1], names, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
    assert "%d ns per call (auto" % GAP_NS in (outs[1] / "whatif.txt").read_text()
