"""whatif --pairs: netprobe's per host pair latencies in the loggps model, known answers by hand.

The run (raw logs written by hand, tests/tracebuild.py; times in ns, every rank's MPI_Init
ends at 100, the origin): ranks 0 and 1 on host hA, rank 2 on hB, rank 3 on hC.

    rank 0: Send -> 2 [200, 210], Send -> 1 [300, 310], Finalize at 400
    rank 1: Recv <- 0 [150, 1400], Send -> 3 [1500, 1510], Recv <- 3 [1600, 4000],
            Send -> 3 [4100, 4110], Finalize at 4200
    rank 2: Recv <- 0 [150, 2000], Send -> 3 [2100, 2110], Finalize at 2200
    rank 3: Recv <- 1 [150, 3000], Send -> 1 [3100, 3110], Recv <- 1 [3200, 5000],
            Recv <- 2 [5100, 7000], Finalize at 7500

loggps with o = 0 and G = 0: calls cost nothing, a message costs its latency, the gaps
between a rank's calls are as measured.  With a = the latency of hA-hA (the same host: L0),
b = hA-hB, c = hA-hC, d = hB-hC, forward from the origin:

    rank 1: E(Recv <- 0) = 190 + a (rank 0's second Send starts at 190), its Send -> 3 at 290 + a
    rank 3: E(Recv <- 1) = 290 + a + c, Send -> 1 at 390 + a + c
    rank 1: E(Recv <- 3) = 390 + a + 2c, Send -> 3 at 490 + a + 2c
    rank 3: E(Recv <- 1) = 490 + a + 3c, Recv <- 2 starts at 590 + a + 3c
    rank 2: E(Recv <- 0) = 100 + b, Send -> 3 at 200 + b
    rank 3: E(Recv <- 2) = max(590 + a + 3c, 200 + b + d), Finalize 500 later (the last one)

so T = 500 + max(590 + a + 3c, 200 + b + d): path P2 (one same-host message, three hA-hC
ones) against path P1 (one hA-hB, one hB-hC).  dT/dl is the messages of the pair on the
winning path.  With one L for every message P2 wins (4 messages against 2); netprobe's
latencies can make P1 win.
"""

import csv
import dataclasses

import numpy as np
import pytest

from tracebuild import rec, write_rank

from mpigraph.trace import record

HOSTS = ["hA", "hA", "hB", "hC"]
O_G = {"o_ns": 0.0, "G0_ns": 0.0}


def t_hand(a, b, c, d):
    """T (ns) of the run by hand (the module doc)."""
    return 500 + max(590 + a + 3 * c, 200 + b + d)


def path_hand(a, b, c, d):
    """{pair: messages on the critical path}, the same-host messages on it."""
    if 590 + a + 3 * c > 200 + b + d:
        return {("hA", "hB"): 0, ("hA", "hC"): 3, ("hB", "hC"): 0}, 1
    return {("hA", "hB"): 1, ("hA", "hC"): 0, ("hB", "hC"): 1}, 0


def write_run(run_dir, hosts=HOSTS):
    S, R = record.SEND, record.RECV
    ranks = {
        0: [rec("MPI_Init", 0, 100), rec("MPI_Send", 200, 210, S, peer=2, tag=1, bytes=8),
            rec("MPI_Send", 300, 310, S, peer=1, tag=2, bytes=8), rec("MPI_Finalize", 400, 400)],
        1: [rec("MPI_Init", 0, 100), rec("MPI_Recv", 150, 1400, R, peer=0, tag=2, bytes=8),
            rec("MPI_Send", 1500, 1510, S, peer=3, tag=3, bytes=8),
            rec("MPI_Recv", 1600, 4000, R, peer=3, tag=4, bytes=8),
            rec("MPI_Send", 4100, 4110, S, peer=3, tag=5, bytes=8), rec("MPI_Finalize", 4200, 4200)],
        2: [rec("MPI_Init", 0, 100), rec("MPI_Recv", 150, 2000, R, peer=0, tag=1, bytes=8),
            rec("MPI_Send", 2100, 2110, S, peer=3, tag=6, bytes=8), rec("MPI_Finalize", 2200, 2200)],
        3: [rec("MPI_Init", 0, 100), rec("MPI_Recv", 150, 3000, R, peer=1, tag=3, bytes=8),
            rec("MPI_Send", 3100, 3110, S, peer=1, tag=4, bytes=8),
            rec("MPI_Recv", 3200, 5000, R, peer=1, tag=5, bytes=8),
            rec("MPI_Recv", 5100, 7000, R, peer=2, tag=6, bytes=8), rec("MPI_Finalize", 7500, 7500)],
    }
    for r, rows in ranks.items():
        write_rank(run_dir, r, 4, rows, host=hosts[r])
    return str(run_dir)


def write_pairs(path, latencies, se=None):
    """pairs.csv as netprobe writes it (the columns whatif reads and some it does not)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x", "y", "measured", "rtt_measured_s", "rtt_predicted_s", "rtt_se_s", "latency_s"])
        for (x, y), lat in latencies.items():
            w.writerow([x, y, "plan", 2 * lat * 1e-9, 2 * lat * 1e-9, (se or 0.0) * 2e-9, "%.17g" % (lat * 1e-9)])
    return str(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("pairs_run"))


def analyse(run_dir, pairs, L0, **kw):
    from mpigraph.whatif import whatif

    return whatif(run_dir, latency=(0, 10e-6), model="loggps", loggps=dict(O_G, L0_ns=L0), pairs=pairs,
                  clock="none", **kw)


# (a = L0, b = hA-hB, c = hA-hC, d = hB-hC) in ns: P1 wins, P2 wins, P2 wins at a larger L0
CASES = [(1000, 5000, 2000, 3000), (1000, 1500, 2500, 1200), (4000, 6000, 500, 6500)]


@pytest.mark.parametrize("a,b,c,d", CASES)
def test_T_is_the_longest_path_at_per_pair_latencies(run, tmp_path, a, b, c, d):
    pairs = write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d})
    r = analyse(run, pairs, a)
    assert r.T0_s == pytest.approx(t_hand(a, b, c, d) * 1e-9, rel=1e-12)
    # one L0 for every message, as whatif without --pairs
    assert r.pair_notes["T_uniform_s"] == pytest.approx(t_hand(a, a, a, a) * 1e-9, rel=1e-12)
    expected, same_host = path_hand(a, b, c, d)
    got = {(p["x"], p["y"]): p["dT_dl"] for p in r.pair_rows}
    assert got == expected
    assert {(p["x"], p["y"]): p["path_messages"] for p in r.pair_rows} == expected
    assert {(p["x"], p["y"]): p["messages"] for p in r.pair_rows} == {("hA", "hB"): 1, ("hA", "hC"): 3,
                                                                      ("hB", "hC"): 1}
    assert r.pair_notes["same_host_path"] == same_host
    assert r.lambda_L == sum(expected.values()) + same_host
    # the path's latency: each message at its own latency
    lat = {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d}
    path_latency = sum(n * lat[p] for p, n in expected.items()) + same_host * a
    assert r.rho_L == pytest.approx(path_latency / t_hand(a, b, c, d), rel=1e-12)


def lp_check(run_dir, pairs_path, L0):
    """(T, {pair: dT/dl}) by LLAMP's LP with a latency variable per host pair (pairs.lp_reference)
    on the graph built here, independently of whatif's forward pass."""
    from mpigraph.whatif import build, pairs

    matched = build.matched_run(run_dir, "none")
    params = build.default_params(matched, "loggps", dict(O_G, L0_ns=L0))
    graph = build.build(matched, "loggps", params)
    pl = pairs.assign(graph, matched.hosts, pairs.read_pairs(pairs_path), L0)
    graph.edges = dataclasses.replace(graph.edges, c=pairs.fold(graph.edges.c, graph.edges.m, pl))
    return pairs.lp_reference(graph, pl)


@pytest.mark.parametrize("seed", range(4))
def test_sensitivities_equal_the_lp(run, tmp_path, seed):
    """Random latencies of 0.1-8 us per pair; the two paths differ by far more than rounding,
    so the critical path (and the LP's dual) is unique."""
    rng = np.random.default_rng(seed)
    a, b, c, d = (float(x) for x in rng.uniform(100, 8000, 4).round(1))
    assert abs((590 + a + 3 * c) - (200 + b + d)) > 10, "a tie: the split between pairs would not be unique"
    pairs_path = write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d})
    r = analyse(run, pairs_path, a)
    T_lp, sens = lp_check(run, pairs_path, a)
    assert r.T0_s == pytest.approx(T_lp * 1e-9, rel=1e-9)
    assert r.T0_s == pytest.approx(t_hand(a, b, c, d) * 1e-9, rel=1e-12)
    assert {(p["x"], p["y"]): p["dT_dl"] for p in r.pair_rows} == pytest.approx(sens, abs=1e-6)


def test_sweep_adds_dL_to_every_message(run, tmp_path):
    """At L = L0 + x every message's latency grows by x: T = 500 + max(590 + a + 3c + 4x,
    200 + b + d + 2x); with the first case P1 (slope 2) is critical up to x = (8200 - 7590) / 2
    = 305 ns, then P2 (slope 4)."""
    a, b, c, d = CASES[0]
    r = analyse(run, write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d}), a)
    assert [p["lambda_L"] for p in r.pieces] == [2, 4]
    assert r.pieces[0]["L_to_s"] == pytest.approx((a + 305) * 1e-9, rel=1e-9)
    for p in r.pieces:
        x = p["L_to_s"] / 1e-9 - a
        assert p["T_to_s"] == pytest.approx(t_hand(a + x, b + x, c + x, d + x) * 1e-9, rel=1e-9)
    # the reference moved to L0 + 1 us: every message 1 us slower there, and one L for all is that L
    at = analyse(run, write_pairs(tmp_path / "p2.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d}), a,
                 at=(a + 1000) * 1e-9)
    assert at.T0_s == pytest.approx(t_hand(a + 1000, b + 1000, c + 1000, d + 1000) * 1e-9, rel=1e-9)
    assert at.pair_notes["T_uniform_s"] == pytest.approx(t_hand(*[a + 1000] * 4) * 1e-9, rel=1e-9)
    assert {(p["x"], p["y"]): p["dT_dl"] for p in at.pair_rows} == path_hand(a + 1000, b + 1000, c + 1000,
                                                                             d + 1000)[0]


def test_each_pairs_tolerance_by_hand(run, tmp_path):
    """One pair's latency the parameter, the others fixed (the first case: T0 = 8700 ns):
    hA-hB: T = 500 + max(7590, 3200 + b), so b_x = (1 + x) 8700 - 3700;
    hB-hC: T = 500 + max(7590, 5200 + d), so d_x = (1 + x) 8700 - 5700;
    hA-hC: T = 500 + max(1590 + 3c, 8200), so c_x = ((1 + x) 8700 - 2090) / 3."""
    a, b, c, d = CASES[0]
    r = analyse(run, write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d}), a,
                tolerance=(1, 2, 5))
    assert r.T0_s == pytest.approx(8700e-9, rel=1e-12)
    got = {(p["x"], p["y"]): [p["latency_%dpct_s" % x] for x in (1, 2, 5)] for p in r.pair_rows}
    for x, i in ((0.01, 0), (0.02, 1), (0.05, 2)):
        assert got[("hA", "hB")][i] == pytest.approx(((1 + x) * 8700 - 3700) * 1e-9, rel=1e-9)
        assert got[("hB", "hC")][i] == pytest.approx(((1 + x) * 8700 - 5700) * 1e-9, rel=1e-9)
        assert got[("hA", "hC")][i] == pytest.approx(((1 + x) * 8700 - 2090) / 3 * 1e-9, rel=1e-9)
    assert "before the run slows by 1%: (hA, hB) 5.09 us (x1.02)" in r.text


@pytest.mark.parametrize("option", ["hA,hC,2", ("hC", "hA", 2)])
def test_scale_pair_k_times_slower(run, tmp_path, option):
    a, b, c, d = CASES[0]
    pairs_path = write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d}, se=50)
    r = analyse(run, pairs_path, a, scale_pair=[option])
    assert r.T0_s == pytest.approx(t_hand(a, b, 2 * c, d) * 1e-9, rel=1e-12)
    assert r.pair_notes["T_unscaled_s"] == pytest.approx(t_hand(a, b, c, d) * 1e-9, rel=1e-12)
    row = {(p["x"], p["y"]): p for p in r.pair_rows}[("hA", "hC")]
    assert (row["scale"], row["dT_dl"]) == (2.0, 3.0)
    assert row["latency_s"] == pytest.approx(2 * c * 1e-9) and row["latency_se_s"] == pytest.approx(50e-9)
    assert "2 times slower" in r.text


def test_cli_writes_whatif_pairs_csv(run, tmp_path, capsys):
    from mpigraph import cli

    a, b, c, d = CASES[0]
    pairs_path = write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d})
    out = tmp_path / "out"
    assert cli.main(["whatif", run, "--model", "loggps", "--loggps", "L=%gns,o=0,G=0ns" % a, "--latency", "0:10us",
                     "--pairs", pairs_path, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Per host pair latencies from %s" % pairs_path in text and "(hA, hB) 1" in text
    with open(out / "whatif_pairs.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["x"], r["y"], float(r["dT_dl"])) for r in rows][:2] == [("hA", "hB", 1.0), ("hB", "hC", 1.0)]
    assert float(rows[0]["path_latency_s"]) == pytest.approx(b * 1e-9)
    assert "whatif_pairs.csv" in (out / "whatif.txt").read_text()


def test_netprobe_pairs_csv_feeds_whatif(run, tmp_path, capsys):
    """netprobe --simulate on a network whose terminals are the run's hosts: its pairs.csv as it is."""
    from mpigraph import cli

    topo = tmp_path / "topo.json"
    topo.write_text('{"terminals": ["hA", "hB", "hC"], "switches": ["s1", "s2"], "links": '
                    '[["hA", "s1"], ["hB", "s1"], ["s1", "s2"], ["hC", "s2"]], "routing": "shortest"}')
    assert cli.main(["netprobe", "--simulate", str(topo), "--out", str(tmp_path / "np"), "--seed", "3"]) == 0
    capsys.readouterr()
    with open(tmp_path / "np" / "pairs.csv") as f:
        lat = {(r["x"], r["y"]): float(r["latency_s"]) / 1e-9 for r in csv.DictReader(f)}
    b, c, d = lat[("hA", "hB")], lat[("hA", "hC")], lat[("hB", "hC")]
    r = analyse(run, str(tmp_path / "np" / "pairs.csv"), 1000.0)
    assert r.T0_s == pytest.approx(t_hand(1000.0, b, c, d) * 1e-9, rel=1e-12)


def test_host_names_match_exactly_then_by_short_name(tmp_path):
    from mpigraph.whatif import WhatifError, pairs

    pf = pairs.read_pairs(write_pairs(tmp_path / "p.csv", {("hA", "hB.cluster"): 1000, ("hA", "n1.a"): 1,
                                                            ("hA", "n1.b"): 2}))
    assert pairs.map_hosts(["hA", "hA.cluster.org", "hB", "hB.cluster"], pf) == ["hA", "hA", "hB.cluster",
                                                                                "hB.cluster"]
    with pytest.raises(WhatifError, match="host n1 is not in the file"):
        pairs.map_hosts(["hA", "n1"], pf)                  # n1.a or n1.b: ambiguous


def test_fqdn_hosts_in_the_trace(tmp_path):
    """The trace's host names are fully qualified, the file's short (a topology's terminal names)."""
    run_dir = write_run(tmp_path / "run", [h + ".example.org" for h in HOSTS])
    a, b, c, d = CASES[0]
    r = analyse(run_dir, write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c,
                                                             ("hB", "hC"): d}), a)
    assert r.T0_s == pytest.approx(t_hand(a, b, c, d) * 1e-9, rel=1e-12)


BAD = [
    ("missing", None, [], "write it with 'mpigraph netprobe'"),
    ("header", "x,y,rtt\nhA,hB,1e-6\n", [], "need a header with x, y, latency_s"),
    ("text", "x,y,latency_s\nhA,hB,fast\nhA,hC,1e-6\nhB,hC,1e-6\n", [], "row 2 (hA, hB): latency_s 'fast'"),
    ("negative", "x,y,latency_s\nhA,hB,1e-6\nhA,hC,-1e-6\nhB,hC,1e-6\n", [], "row 3 (hA, hC)"),
    ("empty-latency", "x,y,latency_s\nhA,hB,\nhA,hC,1e-6\nhB,hC,1e-6\n", [], "row 2 (hA, hB): latency_s empty"),
    ("empty-host", "x,y,latency_s\nhA,hB,1e-6\nhA, ,1e-6\nhB,hC,1e-6\n", [], "row 3 has no host name"),
    ("empty-file", "", [], "need a header with x, y, latency_s"),
    ("no-rows", "x,y,latency_s\n", [], "no rows"),
    ("twice", "x,y,latency_s\nhA,hB,1e-6\nhB,hA,2e-6\nhA,hC,1e-6\nhB,hC,1e-6\n", [],
     "(hA, hB) is listed twice with different latencies"),
    ("host", "x,y,latency_s\nhA,hB,1e-6\n", [], "the run's host hC is not in the file"),
    ("pair", "x,y,latency_s\nhA,hB,1e-6\nhB,hC,1e-6\n", [], "no latency for the host pair (hA, hC)"),
    ("delta", "x,y,latency_s\nhA,hB,1e-6\nhA,hC,1e-6\nhB,hC,1e-6\n", ["--model", "delta"], "need --model loggps"),
    ("scale", "x,y,latency_s\nhA,hB,1e-6\nhA,hC,1e-6\nhB,hC,1e-6\n", ["--scale-pair", "hA,hC"], "give X,Y,K"),
    ("scale-host", "x,y,latency_s\nhA,hB,1e-6\nhA,hC,1e-6\nhB,hC,1e-6\n", ["--scale-pair", "hA,hZ,2"],
     "hZ is not a host of"),
]


@pytest.mark.parametrize("name,text,extra,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_user_error(run, tmp_path, capsys, name, text, extra, message):
    from mpigraph import cli

    path = tmp_path / "pairs.csv"
    if text is not None:
        path.write_text(text)
    args = ["whatif", run, "--model", "loggps", "--pairs", str(path), "--out", str(tmp_path / "out")]
    assert cli.main(args + extra if "--model" not in extra else args[:2] + extra + args[4:]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mpigraph: error: ") and message in err, err


def test_scale_pair_without_pairs_is_a_user_error(run, tmp_path, capsys):
    from mpigraph import cli

    assert cli.main(["whatif", run, "--model", "loggps", "--scale-pair", "hA,hB,2", "--out", str(tmp_path)]) == 2
    assert "give the pairs.csv too" in capsys.readouterr().err


def test_two_analysis_ranks_write_the_same_files(run, tmp_path):
    """`mpiexec -n 2 mpigraph whatif --pairs`: rank 0 computes the pair rows and sends them on;
    the files are those of one analysis rank, byte for byte."""
    import filecmp
    import os

    import mpi_env

    a, b, c, d = CASES[0]
    pairs_path = write_pairs(tmp_path / "pairs.csv", {("hA", "hB"): b, ("hA", "hC"): c, ("hB", "hC"): d})
    outs = []
    for k in (1, 2):
        out = tmp_path / ("K%d" % k)
        done = mpi_env.mpigraph(["whatif", run, "--model", "loggps", "--loggps", "L=%gns,o=0,G=0ns" % a,
                                 "--pairs", pairs_path, "--scale-pair", "hB,hC,3", "--out", out], nprocs=k)
        assert done.returncode == 0, done.stderr
        outs.append(out)
    names = sorted(os.listdir(outs[0]))
    assert "whatif_pairs.csv" in names
    match, mismatch, errors = filecmp.cmpfiles(outs[0], outs[1], names, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
    with open(outs[1] / "whatif_pairs.csv") as f:
        rows = {(r["x"], r["y"]): float(r["dT_dl"]) for r in csv.DictReader(f)}
    assert rows == path_hand(a, b, c, 3 * d)[0]


# ---- a run with collectives: synth's halo (4 ranks, 10 phases) on two hosts ------------------

@pytest.fixture(scope="module")
def halo_two_hosts(tmp_path_factory):
    """synth's halo run with ranks 0, 1 on synth000 and 2, 3 on synth001 (2 ranks per host)."""
    from mpigraph.testing import synth

    out = tmp_path_factory.mktemp("halo2") / "run"
    old, synth.RANKS_PER_HOST = synth.RANKS_PER_HOST, 2
    try:
        synth.generate(str(out), 4, 62, "halo")
    finally:
        synth.RANKS_PER_HOST = old
    return str(out)


@pytest.mark.parametrize("collectives,cross_messages", [("recdoub", 40), ("dissemination", 100)])
def test_collectives_run_against_the_lp(halo_two_hosts, tmp_path, collectives, cross_messages):
    """Cross-host messages by hand: per phase the ring's 1 <-> 2 and 3 <-> 0 halo messages, 4;
    with dissemination rounds each Allreduce adds round 1's 3 -> 0 and 1 -> 2 and round 2's
    four p - 2 -> p: 6 (the hubs of recdoub name no pair and keep L0).  At l = L0 T is whatif's
    without --pairs; at l = 5 L0 it is the LP's with a latency per host pair, and every critical
    message is a pair's, a same-host one or a collective's latency."""
    from mpigraph.whatif import whatif

    L0 = 3000.0
    common = dict(latency=(0, 10e-6), model="loggps", loggps={"L0_ns": L0, "o_ns": 200.0}, collectives=collectives)
    plain = whatif(halo_two_hosts, **common)
    same = whatif(halo_two_hosts, pairs=write_pairs(tmp_path / "same.csv", {("synth000", "synth001"): L0}), **common)
    assert same.T0_s == pytest.approx(plain.T0_s, rel=1e-12) and same.lambda_L == plain.lambda_L
    slow_path = write_pairs(tmp_path / "slow.csv", {("synth000", "synth001"): 5 * L0})
    slow = whatif(halo_two_hosts, pairs=slow_path, **common)
    (row,) = slow.pair_rows
    assert row["messages"] == cross_messages
    assert slow.T0_s > plain.T0_s
    n = slow.pair_notes
    assert row["dT_dl"] + n["same_host_path"] + n["collective_path"] == slow.lambda_L
    assert slow.pair_notes["T_uniform_s"] == pytest.approx(plain.T0_s, rel=1e-12)
    from mpigraph.whatif import build, pairs

    matched = build.matched_run(halo_two_hosts)
    graph = build.build(matched, "loggps", build.default_params(matched, "loggps", common["loggps"]), collectives)
    pl = pairs.assign(graph, matched.hosts, pairs.read_pairs(slow_path), L0)
    graph.edges = dataclasses.replace(graph.edges, c=pairs.fold(graph.edges.c, graph.edges.m, pl))
    T_lp, _ = pairs.lp_reference(graph, pl)
    assert slow.T0_s == pytest.approx(T_lp * 1e-9, rel=1e-9)
