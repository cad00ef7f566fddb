"""mpigraph.whatif: T(L) of a model graph, exactly (seed 000, spec whatif.md).

Known answers: the paper's Fig. 4 example (by hand from its equation 2), and on
random DAGs the LP (scipy HiGHS) that LLAMP solves.
"""

import numpy as np
import pytest

from mpigraph.whatif import lp
from mpigraph.whatif.cuts import split
from mpigraph.whatif.envelope import Edges, Model, add_pieces, evaluate_pieces

US = 1.0            # the Fig. 4 example in microseconds


@pytest.fixture(params=["c", "numpy"])
def pass_kind(request, monkeypatch):
    """Every test that takes it runs with the C pass (kernel.py) and with numpy's."""
    from mpigraph.whatif import kernel

    if request.param == "numpy":
        monkeypatch.setenv("MPIGRAPH_WHATIF_KERNEL", "numpy")
        assert kernel.load() is None
    else:
        assert kernel.load() is not None, "the C pass did not compile (is there a C compiler, cc or $CC?)"
    return request.param
G_FIG4 = 0.005      # 5 ns per byte, in us


def fig4(c0):
    """Fig. 4a: rank 0 computes c0, sends (o), computes c1; rank 1 computes c2, receives, computes c3.

    Vertices: 0 the start, 1 rank 0's send, 2 rank 1's receive posted, 3 received, 4 the end.
    Paths (eq. 2 with o = 0): c0 + o + c1;  c2 + o + c3;  c0 + o + L + (s-1)G + o + c3.
    The paper's message costs (s-1)G: b = s - 1 = 3 bytes' worth."""
    o, s, c1, c2, c3 = 0.0, 4, 1.0, 0.5, 1.0
    src, dst = [0, 1, 0, 2, 1, 3], [1, 4, 2, 3, 3, 4]
    c = [c0, o + c1, c2, o, 2 * o, c3]
    m = [0, 0, 0, 0, 1, 0]
    b = [0, 0, 0, 0, s - 1, 0]
    start = np.full(5, -np.inf)
    start[0] = 0.0
    return Edges(5, src, dst, c, m, b, start, 4)


def test_fig4_late_sender_line(pass_kind):
    """c0 = 1 us: T = L + 2.015 us, lambda_L = 1 for every L."""
    model = Model(fig4(1.0))
    got = model.forward([0.0, 0.5, 3.0], fixed=G_FIG4, with_other=True)
    np.testing.assert_allclose(got.T, np.array([0.0, 0.5, 3.0]) + 2.015, rtol=1e-12)
    np.testing.assert_array_equal(got.right, [1, 1, 1])
    pieces = model.envelope(0.0, 10.0, fixed=G_FIG4)
    assert len(pieces) == 1
    assert pieces[0].slope == 1 and pieces[0].intercept == pytest.approx(2.015, abs=1e-12)
    assert got.other[0] == 3             # lambda_G: the message's (s-1) bytes


def test_fig4_overlapped_then_critical(pass_kind):
    """c0 = 0.1 us: T = max(L + 1.115, 1.5); critical latency 0.385; T(0.5) = 1.615;
    max L with T <= 2 us = 0.885; 1/2/5% tolerances from 0.5: 0.5162/0.5323/0.5808 us."""
    model = Model(fig4(0.1))
    pieces = model.envelope(0.0, 2.0, fixed=G_FIG4)
    assert [p.slope for p in pieces] == [0, 1]
    assert pieces[0].intercept == pytest.approx(1.5, abs=1e-12)
    assert pieces[1].intercept == pytest.approx(1.115, abs=1e-12)
    assert pieces[0].hi == pytest.approx(0.385, abs=1e-12)          # the critical latency
    assert model.forward([0.5], fixed=G_FIG4).T[0] == pytest.approx(1.615, abs=1e-12)
    tol, t0 = model.tolerance(0.5, [0.01, 0.02, 0.05], fixed=G_FIG4)
    assert t0 == pytest.approx(1.615)
    np.testing.assert_allclose(tol, [0.5162, 0.5323, 0.5808], atol=5e-5)
    np.testing.assert_allclose(tol, 0.5 + np.array([0.01, 0.02, 0.05]) * 1.615, rtol=1e-12)   # slope 1 there
    # the largest L with T <= 2 us (the paper's Fig. 6): target 2 = (1 + x) T(0.5)
    two, _ = model.tolerance(0.5, [2.0 / 1.615 - 1], fixed=G_FIG4)
    assert two[0] == pytest.approx(0.885, abs=1e-12)
    assert lp.max_latency(fig4(0.1), 2.0, 0.0, G_FIG4) == pytest.approx(0.885, abs=1e-9)
    # left and right slopes at the breakpoint
    at = model.forward([0.385], fixed=G_FIG4)
    assert (at.left[0], at.right[0]) == (0, 1)
    # the critical path at 0.5: c0, the message, c3
    np.testing.assert_array_equal(model.critical_edges(0.5, fixed=G_FIG4), [0, 4, 5])


def random_dag(seed, n=40, p_edge=0.12, max_m=2):
    """A random DAG: vertex 0 the source (start 0), n-1 the sink, every vertex reachable."""
    rng = np.random.default_rng(seed)
    u, v = np.triu_indices(n, 1)
    keep = rng.random(len(u)) < p_edge
    u, v = u[keep], v[keep]
    # every vertex has an edge from an earlier one and one to a later one
    first = np.arange(1, n)
    u = np.r_[u, rng.integers(0, first), np.arange(n - 1)]
    v = np.r_[v, first, np.full(n - 1, n - 1)]
    ne = len(u)
    c = rng.integers(0, 200, ne).astype(float)
    m = np.where(rng.random(ne) < 0.4, rng.integers(1, max_m + 1, ne), 0)
    b = np.where(m > 0, rng.integers(0, 5000, ne), 0).astype(float)
    start = np.full(n, -np.inf)
    start[0] = 0.0
    return Edges(n, u, v, c, m, b, start, n - 1)


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_dags_equal_the_lp(seed, pass_kind):
    """T, lambda_L and the 1/2/5% tolerances equal HiGHS's objective, l's reduced cost and
    the max-l LP; slopes are integers and nondecreasing (T convex)."""
    edges = random_dag(seed)
    model = Model(edges)
    G = 0.01
    pieces = model.envelope(0.0, 400.0, fixed=G)
    slopes = np.array([p.slope for p in pieces])
    assert (slopes == np.round(slopes)).all()
    assert (np.diff(slopes) > 0).all()
    assert pieces[0].lo == 0 and pieces[-1].hi == 400
    for a, b in zip(pieces[:-1], pieces[1:]):
        assert a.hi == b.lo
        assert a.at(a.hi) == pytest.approx(b.at(b.lo), rel=1e-12)
    # inside each piece (not at a breakpoint, where l's reduced cost is ambiguous)
    for p in pieces:
        L = 0.5 * (p.lo + p.hi)
        t_lp, rc = lp.solve(edges, L, G)
        got = model.forward([L], fixed=G)
        assert got.T[0] == pytest.approx(t_lp, rel=1e-9)
        assert got.right[0] == got.left[0] == pytest.approx(rc[0], abs=1e-7) == p.slope
        assert evaluate_pieces(pieces, L) == pytest.approx(t_lp, rel=1e-9)
    L0 = 0.25 * pieces[-1].hi if len(pieces) > 1 else 10.0
    tol, t0 = model.tolerance(L0, [0.01, 0.02, 0.05], fixed=G)
    for x, lx in zip([0.01, 0.02, 0.05], tol):
        ref = lp.max_latency(edges, (1 + x) * t0, L0, G)
        assert lx == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_bandwidth_sweep_equals_the_lp(seed, pass_kind):
    """Sweeping G at fixed L: T and lambda_G (bytes on the critical path) against the LP."""
    edges = random_dag(seed)
    model = Model(edges)
    L = 30.0
    for G in (0.0, 0.013, 0.05):
        got = model.forward([G], param="G", fixed=L)
        t_lp, _ = lp.solve(edges, L, G)
        assert got.T[0] == pytest.approx(t_lp, rel=1e-9)
        # lambda_G by finite difference of the LP (a piece is wide: 1e-6 stays inside it
        # unless G sits on a breakpoint; then right slope = the forward difference)
        h = 1e-6
        t_h, _ = lp.solve(edges, L, G + h)
        assert got.right[0] == pytest.approx((t_h - t_lp) / h, rel=1e-4, abs=1e-3)


def test_lambda_g_is_bytes_of_critical_messages(pass_kind):
    edges = random_dag(3)
    model = Model(edges)
    got = model.forward([25.0], fixed=0.01, with_other=True)
    on = model.critical_edges(25.0, fixed=0.01)
    assert got.other[0] == edges.b[on].sum()
    assert got.right[0] == edges.m[on].sum()


def chain_of_pieces(seeds, sizes=None):
    """Random DAGs joined sink to source: the joints are cuts every path crosses (sizes: the
    vertices of each, default 25)."""
    parts = [random_dag(s, n=n) for s, n in zip(seeds, sizes or [25] * len(seeds))]
    src, dst, c, m, b = [], [], [], [], []
    base, joints = 0, []
    for i, e in enumerate(parts):
        off = base - (1 if i else 0)         # piece i's source is the previous piece's sink
        ids = np.arange(e.n_vertices) + off
        ids[0] = base - 1 if i else 0
        src.append(ids[e.src]), dst.append(ids[e.dst])
        c.append(e.c), m.append(e.m), b.append(e.b)
        joints.append(int(ids[-1]))
        base = int(ids[-1]) + 1
    n = base
    start = np.full(n, -np.inf)
    start[0] = 0.0
    whole = Edges(n, np.concatenate(src), np.concatenate(dst), np.concatenate(c), np.concatenate(m),
                  np.concatenate(b), start, joints[-1])
    return whole, joints[:-1]


def test_split_pieces_add_up(pass_kind):
    whole, joints = chain_of_pieces([5, 6, 7, 8])
    pieces, kept = split(whole, joints)
    assert list(kept) == joints and len(pieces) == 4
    env = Model(whole).envelope(0.0, 300.0, fixed=0.02)
    total = None
    for part in pieces:
        pe = Model(part).envelope(0.0, 300.0, fixed=0.02)
        total = pe if total is None else add_pieces(total, pe)
    Ls = np.linspace(0, 300, 61)
    np.testing.assert_allclose(evaluate_pieces(total, Ls), evaluate_pieces(env, Ls), rtol=1e-12)
    assert [p.slope for p in total] == [p.slope for p in env]
    # an edge around the second joint: that joint is no cut any more, the rest still are
    extra = Edges(whole.n_vertices, np.r_[whole.src, joints[1] - 3], np.r_[whole.dst, joints[1] + 3],
                  np.r_[whole.c, 50.0], np.r_[whole.m, 1], np.r_[whole.b, 0], whole.start, whole.sink)
    pieces, kept = split(extra, joints)
    assert list(kept) == [joints[0], joints[2]]
    t = sum(Model(p).forward([40.0], fixed=0.02).T[0] for p in pieces)
    assert t == pytest.approx(Model(extra).forward([40.0], fixed=0.02).T[0], rel=1e-12)


# ---- the model graph of a run (synthetic raw logs, exactly as the shim writes them) ----------

@pytest.fixture(scope="module")
def halo_run(tmp_path_factory):
    from mpigraph.testing import synth

    out = tmp_path_factory.mktemp("halo")
    expected = synth.generate(str(out), 4, 62, "halo")      # 10 phases of a halo exchange + Allreduce
    return str(out), expected


def test_delta_T0_is_the_measured_run_time(halo_run):
    """delta mode: the forward pass at dL = 0 gives the measured times back: T(0) = the run's time
    from the earliest end of MPI_Init to the latest start of MPI_Finalize (within clock error)."""
    from mpigraph.whatif import whatif

    run_dir, expected = halo_run
    starts = [v["program_start"] for v in expected.ranks.values()]
    ends = [v["program_end"] for v in expected.ranks.values()]
    result = whatif(run_dir, latency=(0, 50e-6))
    assert result.T0_s == pytest.approx((max(ends) - min(starts)) * 1e-9, abs=20e-9)
    assert result.T0_s == pytest.approx(result.measured_s, abs=1e-12)


def every_time_back(run_dir):
    """delta mode at dL = 0: the forward pass gives every measured call start and end back
    (those after each rank's end of MPI_Init, where the model starts)."""
    from mpigraph.whatif import build as build_module

    graph = build_module.build(build_module.matched_run(run_dir))
    _, (t, _) = Model(graph.edges).forward([0.0], keep=True)
    measured = graph.vertex_time
    reached = np.isfinite(t) & np.isfinite(measured)
    assert reached.sum() > 0.9 * np.isfinite(measured).sum()
    np.testing.assert_allclose(t[reached], measured[reached], rtol=0, atol=1e-3)


def test_delta_gives_every_measured_time_back(halo_run, pass_kind):
    every_time_back(halo_run[0])


@pytest.mark.parametrize("algorithm, depth", [("recdoub", 2), ("ring", 6)])
def test_halo_slope_counts_the_path_messages(halo_run, algorithm, depth):
    """synth's documented path: per phase the late sender's message to the slow rank and the
    Allreduce (latency depth ceil(log2 4) = 2, ring 2 (4 - 1) = 6): lambda_L = phases (1 + d)."""
    from mpigraph.whatif import whatif

    run_dir, expected = halo_run
    result = whatif(run_dir, latency=(0, 50e-6), collectives=algorithm)
    phases = expected.params.phases
    assert result.lambda_L == phases * (1 + depth)
    assert result.pieces[0]["lambda_L"] == phases * (1 + depth)
    assert result.pieces[0]["T_from_s"] == pytest.approx(result.T0_s)
    p2p = sum(r["messages"] for r in result.critical if r["kind"] == "p2p")
    coll = sum(r["messages"] for r in result.critical if r["kind"] == "collective")
    assert (p2p, coll) == (phases, phases * depth)
    # the 1% tolerance on a single line: T0 * 1% / lambda_L
    one = result.tolerances[0]
    assert one["added_latency_s"] == pytest.approx(0.01 * result.T0_s / result.lambda_L, rel=1e-9)


def test_lp_per_rank_pair_adds_up_to_lambda_L(halo_run):
    """The LP with a latency per rank pair on a run's graph: the pairs' reduced costs add up to
    lambda_L.  (Which pair gets which message is not unique here: the synthetic run's
    messages all take exactly 1200 ns, so paths of equal length cross different pairs; with
    continuous costs the split is the critical path's, see the random-graph test above.)"""
    from mpigraph.whatif import build as build_module, whatif

    run_dir, _ = halo_run
    graph = build_module.build(build_module.matched_run(run_dir))
    got = lp.pairwise_sensitivity(graph, 2000.0)
    result = whatif(run_dir, latency=(0, 50e-6), at=2e-6)
    assert sum(got.values()) == pytest.approx(result.lambda_L)
    assert min(got.values()) >= -1e-9
    assert got[(-1, -1)] == pytest.approx(sum(r["messages"] for r in result.critical if r["kind"] == "collective"))


def test_loggps_mode_slopes_are_integers_and_T_grows_with_L(halo_run):
    from mpigraph.whatif import whatif

    run_dir, _ = halo_run
    result = whatif(run_dir, latency=(0, 100e-6), model="loggps",
                    loggps={"o_ns": 200.0, "L0_ns": 1000.0, "G0_ns": 0.02, "S_bytes": 65536})
    slopes = [p["lambda_L"] for p in result.pieces]
    assert all(s == int(s) for s in slopes) and slopes == sorted(slopes)
    assert result.reference_s == pytest.approx(1e-6)


def test_cli_writes_the_files(halo_run, tmp_path, capsys):
    from mpigraph import cli

    run_dir, _ = halo_run
    out = tmp_path / "wi"
    assert cli.main(["whatif", run_dir, "--latency", "0:20us", "--bandwidth", "0.02:0.1ns", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "lambda_L" in text and "tolerance" in text
    for name in ("whatif_pieces.csv", "tolerance.csv", "critical_messages.csv", "whatif_bandwidth.csv",
                 "whatif.svg", "whatif.txt"):
        assert (out / name).stat().st_size > 0
    header = (out / "whatif_pieces.csv").read_text().splitlines()[0].split(",")
    assert header[:5] == ["dL_from_s", "dL_to_s", "L_from_s", "L_to_s", "lambda_L"]
    import xml.etree.ElementTree as ET

    svg = ET.fromstring((out / "whatif.svg").read_text())          # well-formed
    assert svg.tag.endswith("svg") and len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 3
    # the paragraph goes into the report's summary.txt, once however often whatif runs
    (out / "summary.txt").write_text("run time 1 s\n")
    for _ in range(2):
        assert cli.main(["whatif", run_dir, "--latency", "0:20us", "--out", str(out)]) == 0
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("run time 1 s\n\nWhat if the network were slower")
    assert summary.count("What if the network were slower") == 1


def test_measured_points_are_drawn(halo_run, tmp_path):
    from mpigraph import cli

    run_dir, _ = halo_run
    points = tmp_path / "points.csv"
    points.write_text("dL_s,T_s\n0,0.00067\n1e-5,0.00097\n2e-5,0.0013\n")
    assert cli.main(["whatif", run_dir, "--latency", "0:20us", "--measured", str(points), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "whatif.svg").read_text().count("<circle") == 3


def test_cli_user_errors(halo_run, tmp_path, capsys):
    from mpigraph import cli

    run_dir, _ = halo_run
    assert cli.main(["whatif", run_dir, "--latency", "100us:0", "--out", str(tmp_path)]) == 2
    assert "lo < hi" in capsys.readouterr().err
    assert cli.main(["whatif", run_dir, "--params", str(tmp_path / "none.csv"), "--out", str(tmp_path)]) == 2
    assert "mpigraph calibrate" in capsys.readouterr().err
    assert cli.main(["whatif", run_dir, "--latency", "0:100 parsecs", "--out", str(tmp_path)]) == 2
    assert "write a time like 100us" in capsys.readouterr().err
    assert cli.main(["whatif", run_dir, "--loggps", "L=1us,S=lots", "--out", str(tmp_path)]) == 2
    assert "write a size like" in capsys.readouterr().err


def test_params_csv(tmp_path):
    from mpigraph.whatif import load_params

    path = tmp_path / "params.csv"
    path.write_text("protocol,latency_s,per_byte_s,latency_lo_s,latency_hi_s,per_byte_lo_s,per_byte_hi_s,"
                    "threshold_bytes,host_pair\n"
                    "eager,2e-6,1e-10,1.9e-6,2.1e-6,0.9e-10,1.1e-10,65536,a-b\n"
                    "rendezvous,5e-6,2e-11,4e-6,6e-6,1e-11,3e-11,65536,a-b\n")
    got = load_params(str(path))
    assert got["L0_ns"] == pytest.approx(2000) and got["G0_ns"] == pytest.approx(0.02)
    assert got["S_bytes"] == 65536


def test_split_union_is_the_whole_graph(pass_kind):
    """The pieces side by side in one graph (each from its own source to its own sink): T, the
    slopes, lambda_G and the critical edges are the whole graph's; a claimed piece that an
    edge contradicts drops the cut."""
    from mpigraph.whatif.cuts import split_union, valid_cuts

    whole, joints = chain_of_pieces([1, 2, 3, 4, 9])
    union, kept, edge_piece = split_union(whole, joints)
    assert list(kept) == joints
    a, b = Model(whole), Model(union)
    assert b.n_levels < a.n_levels
    Ls = [0.0, 17.0, 55.5, 250.0]
    ga, gb = a.forward(Ls, fixed=0.01, with_other=True), b.forward(Ls, fixed=0.01, with_other=True)
    for f in ("T", "right", "left", "other"):
        np.testing.assert_allclose(getattr(gb, f), getattr(ga, f), rtol=1e-12)
    for L in Ls:
        np.testing.assert_array_equal(b.critical_edges(L, fixed=0.01), a.critical_edges(L, fixed=0.01))
    # each piece's breakpoints searched on its own, then added: the whole graph's envelope
    per_piece = Model(union, edge_piece)
    assert per_piece.n_units == 5
    env_a, env_c = a.envelope(0.0, 300.0, fixed=0.01), per_piece.envelope(0.0, 300.0, fixed=0.01)
    assert len(env_a) == len(env_c) > 2
    for x, y in zip(env_a, env_c):
        assert (x.lo, x.hi, x.slope, x.intercept) == pytest.approx((y.lo, y.hi, y.slope, y.intercept), rel=1e-12)
    # tolerances read off the envelope = Newton's on the graph
    from mpigraph.whatif.envelope import tolerance_from_pieces

    got, t0 = tolerance_from_pieces(env_c, 20.0, [0.01, 0.05, 0.2])
    ref, t0_ref = a.tolerance(20.0, [0.01, 0.05, 0.2], fixed=0.01)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert t0 == pytest.approx(t0_ref, rel=1e-12)
    # claim the piece after joint 2 is the one before it: the edges out of joint 2 contradict
    # it, so joint 2 goes (its two pieces merge), the rest stay exact
    from mpigraph.whatif.cuts import _piece_of

    piece = _piece_of(a, np.array(joints))
    bad = piece.copy()
    bad[piece == 3] = 2
    bad[joints[3]] = 3
    cuts, renumbered = valid_cuts(whole, joints, bad)
    assert list(cuts) == [joints[0], joints[1], joints[3]]
    union, _, _ = split_union(whole, joints, bad)
    np.testing.assert_allclose(Model(union).forward(Ls, fixed=0.01).T, ga.T, rtol=1e-12)


# ---- real 2-rank runs under the shim (tests/whatif_programs) ---------------------------------
#
# What these check does not depend on the machine's load: the slope far out (every chain of
# messages that can become critical has) is the longest chain of messages in the program,
# fixed by its structure.  Timings against injected latency: benchmarks/validate_whatif.py.

import os  # noqa: E402

import mpi_env  # noqa: E402

WHATIF_PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "whatif_programs")


def traced(wheel, builder, tmp_path, program, *args):
    exe = builder.build(os.path.join(WHATIF_PROGRAMS, program + ".c"), wheel.mpicc)
    run_dir = tmp_path / program
    done = mpi_env.mpirun(wheel, 2, [exe, *args], out=run_dir, rank_env={"MPIGRAPH_ANALYZE": "off"})
    assert done.returncode == 0, done.stderr
    return str(run_dir)


def far_slope(run_dir):
    from mpigraph.whatif import whatif

    result = whatif(run_dir, latency=(0.0, 0.05))       # 50 ms of added latency: every chain counts
    assert result.T0_s == pytest.approx(result.measured_s, rel=1e-9)
    return result, result.pieces[-1]["lambda_L"]


def test_real_pingpong_has_2N_messages_on_the_path(wheel, builder, tmp_path):
    run_dir = traced(wheel, builder, tmp_path, "pingpong", "30")
    every_time_back(run_dir)
    result, slope = far_slope(run_dir)
    assert slope == 60
    # at dL = 0 only the messages whose receiver was waiting are critical: how many depends on
    # the machine's load while the run was traced
    assert 0 <= result.lambda_L <= 60


def test_real_halo_overlap_then_one_message_per_iteration(wheel, builder, tmp_path):
    run_dir = traced(wheel, builder, tmp_path, "halo", "20", "200")
    every_time_back(run_dir)
    result, slope = far_slope(run_dir)
    assert slope == 20          # one message per iteration: the two directions run side by side
    assert result.pieces[0]["lambda_L"] < 20
    pairs = {(r["src_rank"], r["dst_rank"]) for r in result.critical}
    assert pairs <= {(0, 1), (1, 0)}


def test_real_allreduce_one_latency_per_instance(wheel, builder, tmp_path):
    run_dir = traced(wheel, builder, tmp_path, "allreduce", "25", "20")
    every_time_back(run_dir)
    result, slope = far_slope(run_dir)
    assert slope == 25          # d = ceil(log2 2) = 1 per Allreduce
    from mpigraph.whatif import whatif

    rounds = whatif(run_dir, latency=(0.0, 0.05), collectives="dissemination")
    assert rounds.pieces[-1]["lambda_L"] == 25      # one exchange per Allreduce: the same far out


def test_run_graph_split_changes_nothing(halo_run, pass_kind):
    """The synthetic halo run's graph with and without the split at its Allreduces (every
    one a cut): the same pieces of T(L), the same critical edges."""
    from mpigraph.whatif import build as build_module
    from mpigraph.whatif.cuts import split_union

    run_dir, expected = halo_run
    graph = build_module.build(build_module.matched_run(run_dir))
    union, kept, edge_piece = split_union(graph.edges, graph.cuts, graph.piece)
    assert len(kept) == expected.params.phases        # an Allreduce per phase
    whole, parts = Model(graph.edges), Model(union, edge_piece)
    assert Model(union).n_levels < whole.n_levels
    for a, b in zip(whole.envelope(0, 1e5), parts.envelope(0, 1e5)):
        assert (a.lo, a.hi, a.slope) == pytest.approx((b.lo, b.hi, b.slope))
        assert a.intercept == pytest.approx(b.intercept, rel=1e-12)
    np.testing.assert_array_equal(whole.critical_edges(3000.0), parts.critical_edges(3000.0))


def test_lp_latency_per_edge_group_counts_critical_messages(pass_kind):
    """The LP with a latency per group of edges (a rank pair, say): each group's reduced cost
    is the messages of that group on the critical path (what critical_messages.csv lists per
    pair).  Continuous random costs: no two paths tie."""
    rng = np.random.default_rng(11)
    base = random_dag(11, n=30)
    edges = Edges(base.n_vertices, base.src, base.dst, rng.random(len(base.src)) * 200, base.m, base.b,
                  base.start, base.sink)
    groups = rng.integers(0, 3, len(edges.src))
    model = Model(edges)
    for L in (5.0, 40.0, 150.0):
        t_lp, rc = lp.solve(edges, [L, L, L], 0.01, groups=groups)
        on = model.critical_edges(L, fixed=0.01)
        per_group = np.bincount(groups[on], weights=edges.m[on], minlength=3)
        np.testing.assert_allclose(rc, per_group, atol=1e-7)
        assert t_lp == pytest.approx(model.forward([L], fixed=0.01).T[0], rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_c_pass_equals_numpy_pass(seed):
    """The C kernel and numpy's level-by-level pass: the same T, slopes, bytes, critical edges."""
    edges = random_dag(seed, n=60)
    c_model, np_model = Model(edges), Model(edges, use_kernel=False)
    assert c_model.kernel is not None and np_model.kernel is None
    Ls = [0.0, 3.0, 41.5, 300.0]
    a = c_model.forward(Ls, fixed=0.01, with_other=True)
    b = np_model.forward(Ls, fixed=0.01, with_other=True)
    for f in ("T", "right", "left", "other"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=1e-12)
    for L in Ls:
        np.testing.assert_array_equal(c_model.critical_edges(L, fixed=0.01), np_model.critical_edges(L, fixed=0.01))


def test_dissemination_rounds_bound_by_the_hub(halo_run, pass_kind):
    """--collectives dissemination: the Allreduces as their message rounds.  T(0) is still the
    measured time and every measured time comes back; with added latency T stays at or below
    the hub's (a member waits for the messages that reach it, at most d = ceil(log2 P) of
    them after the last arrival), and the slopes grow to the hub's far out."""
    from mpigraph.whatif import build as build_module, whatif

    run_dir, expected = halo_run
    graph = build_module.build(build_module.matched_run(run_dir), collective_algorithm="dissemination")
    assert (graph.kind == build_module.ROUND_MESSAGE).sum() == expected.params.phases * 4 * 2   # P = 4: d = 2
    _, (t, _) = Model(graph.edges).forward([0.0], keep=True)
    ok = np.isfinite(t) & np.isfinite(graph.vertex_time)
    np.testing.assert_allclose(t[ok], graph.vertex_time[ok], rtol=0, atol=1e-3)
    hub = whatif(run_dir, latency=(0, 1e-3))
    rounds = whatif(run_dir, latency=(0, 1e-3), collectives="dissemination")
    assert rounds.T0_s == pytest.approx(hub.T0_s, rel=1e-12)
    xs = np.linspace(0, 1e-3, 41)
    t_hub = evaluate_pieces([Piece_(p) for p in hub.pieces], xs)          # convex: the max of its lines
    t_rounds = evaluate_pieces([Piece_(p) for p in rounds.pieces], xs)
    assert (t_rounds <= t_hub * (1 + 1e-12)).all() and (t_rounds < t_hub).any()
    assert rounds.pieces[-1]["lambda_L"] == hub.pieces[-1]["lambda_L"]
    assert rounds.lambda_L <= hub.lambda_L


def Piece_(row):
    from mpigraph.whatif.envelope import Piece

    return Piece(row["dL_from_s"], row["dL_to_s"], row["lambda_L"], row["C_s"])
