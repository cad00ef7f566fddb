"""calibrate: the thresholds and per-protocol lines on synthetic ping-pong data with known
answers (two protocols, and three: eager, medium, rendezvous), the params file and its readers,
and a real 2-rank run.  Run with -s to see the figures."""

import csv

import numpy as np
import pytest

import mpi_env
from mpigraph.network import NetworkError
from mpigraph.network.calibrate import choose_pairs, default_sizes, parse_sizes, repeats_for, report
from mpigraph.network.fit import fit, wls
from mpigraph.network.params import COLUMNS, read_params

# A synthetic network: eager 1.5 us + 0.1 ns/B below S = 64 KiB, rendezvous 8 us + 0.08 ns/B
# from S on (a jump of 6.5 - 1.3 = 5.2 us at S): the shape of MPICH's shared-memory times.
EAGER, RENDEZVOUS, S = (1.5e-6, 0.1e-9), (8e-6, 0.08e-9), 64 << 10
# Three protocols (seed 003: mailbox eager, medium "eager RDMA", rendezvous): the same eager and
# rendezvous lines with a medium line 3 us + 0.07 ns/B from M = 8 KiB: a jump of 3.57 - 2.32 =
# 1.25 us at M (25 standard errors of a mean of 60 samples at 5%), the medium line below the
# rendezvous one at S (7.6 against 13.2 us).
MEDIUM, M = (3e-6, 0.07e-9), 8 << 10
TRUTH = {"eager": EAGER, "medium": MEDIUM, "rendezvous": RENDEZVOUS}
# A cache bend (no jump) in the rendezvous line: +0.02 ns/B past H = 1.25 MiB, the shape this
# VM showed (0.16 -> 0.18 ns/B past about 1 MiB), on 0.08 ns/B: 0.10 ns/B past H.
BEND = (1.25 * (1 << 20), 0.02e-9)


def synthetic(seed, sizes=None, n=200, relative=0.05, preempted=0.03, medium=False, bend=None, repeats=None):
    """{size: one-way times}: the known line times (1 + N(0, relative)), the spread growing
    with the time, and a fraction `preempted` of the samples 20-500 us late (another process
    ran): the fit must drop those.  medium: the three-protocol network.  bend (H, gamma): the
    rendezvous time rises by gamma (N - H) past H (a cache bend, no jump).  repeats: n per size
    as calibrate takes them (repeats_for: 10 at 1.3 MiB and above), all default sizes to 4 MiB."""
    rng = np.random.default_rng(seed)
    top = 4 << 20 if repeats else 1 << 20
    sizes = sizes or [s for s in default_sizes() if s <= top]
    out = {}
    for size in sizes:
        alpha, beta = RENDEZVOUS if size >= S else (MEDIUM if medium and size >= M else EAGER)
        n = repeats_for(size, repeats) if repeats else n
        bent = bend[1] * max(0, size - bend[0]) if bend and size >= S else 0.0
        times = (alpha + beta * size + bent) * (1 + relative * rng.standard_normal(n))
        late = rng.random(n) < preempted
        out[size] = times + late * rng.uniform(20e-6, 500e-6, n)
    return out


def test_wls_recovers_an_exact_line_and_fits_rows_at_once():
    x = np.array([0.0, 10, 20, 40])
    y = 3.0 + 0.5 * x
    alpha, beta, chi = wls(x, y, np.ones(4))
    assert (alpha, beta, chi) == pytest.approx((3.0, 0.5, 0.0), abs=1e-12)
    alphas, betas, _ = wls(x, np.stack([y, 2 * y]), np.ones((2, 4)))
    assert alphas == pytest.approx([3.0, 6.0]) and betas == pytest.approx([0.5, 1.0])


def test_threshold_and_lines_of_known_data():
    result = fit(synthetic(seed=1), bootstrap=400, seed=1)
    print("\n" + report("synthetic", result))
    assert result.threshold == S and result.last_eager == 49152
    eager, rendezvous = result.lines
    for line, (alpha, beta) in ((eager, EAGER), (rendezvous, RENDEZVOUS)):
        # One calibration's 95% intervals miss a true value now and then (the next test
        # counts how often); the estimates themselves are within 2%, inside their intervals.
        assert line.alpha_lo <= line.alpha <= line.alpha_hi and line.beta_lo <= line.beta <= line.beta_hi
        assert line.alpha == pytest.approx(alpha, rel=0.02) and line.beta == pytest.approx(beta, rel=0.02)


def test_bootstrap_intervals_cover_the_truth_most_of_the_time():
    """95% intervals over 40 synthetic calibrations: the truth inside at least 80% of the
    time for each of the four parameters (binomial(40, 0.95) is below 32 with p < 0.001)."""
    hits = np.zeros(4)
    trials = 40
    for seed in range(trials):
        result = fit(synthetic(seed + 100, n=60), bootstrap=300, seed=seed)
        assert result.threshold == S
        e, r = result.lines
        hits += [e.alpha_lo <= EAGER[0] <= e.alpha_hi, e.beta_lo <= EAGER[1] <= e.beta_hi,
                 r.alpha_lo <= RENDEZVOUS[0] <= r.alpha_hi, r.beta_lo <= RENDEZVOUS[1] <= r.beta_hi]
    print("\ncoverage of the 95%% intervals (eager alpha, beta, rendezvous alpha, beta): %s" % (hits / trials))
    assert (hits >= 0.8 * trials).all()


def test_three_protocols_of_known_data():
    """Seed 003's three protocols: both thresholds found (each jump bracketed by the sizes
    around it), every line within 2% of the truth and inside its own interval."""
    result = fit(synthetic(seed=1, medium=True), bootstrap=400, seed=1)
    print("\n" + report("synthetic, three protocols", result))
    assert [line.protocol for line in result.lines] == ["eager", "medium", "rendezvous"]
    assert (result.last_before_medium, result.medium) == (6144, M)
    assert (result.last_eager, result.threshold) == (49152, S)
    assert [line.start for line in result.lines] == [0, M, S]
    for line in result.lines:
        alpha, beta = TRUTH[line.protocol]
        assert line.alpha_lo <= line.alpha <= line.alpha_hi and line.beta_lo <= line.beta <= line.beta_hi
        assert line.alpha == pytest.approx(alpha, rel=0.02) and line.beta == pytest.approx(beta, rel=0.02)
    assert list(result.protocol_of([0, M - 1, M, S - 1, S])) == ["eager", "eager", "medium", "medium", "rendezvous"]
    # Every size's mean lies within one spread of the fit: the model describes the data.
    st = result.stats
    assert (np.abs(result.predict(st.sizes) - st.mean) <= st.spread).all()


def test_number_of_protocols_and_coverage_with_three():
    """40 calibrations each of a two- and a three-protocol truth: BIC picks two and three
    every time (the fit.py docstring gives the margin), and the three-protocol 95% intervals
    hold each of the six true parameters at least 80% of the time (binomial(40, 0.95) is below
    32 with p < 0.001)."""
    trials = 40
    hits = np.zeros(6)
    for seed in range(trials):
        two = fit(synthetic(seed + 300, n=60), bootstrap=10, seed=seed)
        assert [line.protocol for line in two.lines] == ["eager", "rendezvous"] and two.threshold == S
        three = fit(synthetic(seed + 100, n=60, medium=True), bootstrap=300, seed=seed)
        assert (three.medium, three.threshold) == (M, S)
        hits += [lo <= true <= hi for line in three.lines
                 for lo, true, hi in ((line.alpha_lo, TRUTH[line.protocol][0], line.alpha_hi),
                                      (line.beta_lo, TRUTH[line.protocol][1], line.beta_hi))]
    print("\ncoverage of the 95%% intervals (alpha, beta of eager, medium, rendezvous): %s" % (hits / trials))
    assert (hits >= 0.8 * trials).all()


def test_at_most_two_protocols_when_asked():
    result = fit(synthetic(seed=4, medium=True), bootstrap=50, max_segments=2)
    assert [line.protocol for line in result.lines] == ["eager", "rendezvous"] and result.medium is None


def test_one_protocol_when_there_is_no_jump():
    rng = np.random.default_rng(3)
    samples = {s: (2e-6 + 0.1e-9 * s) * (1 + 0.05 * rng.standard_normal(100)) for s in default_sizes() if s <= 8192}
    result = fit(samples, bootstrap=100)
    assert result.threshold is None and [l.protocol for l in result.lines] == ["eager"]


def test_bend_of_known_data():
    """Three protocols whose rendezvous line bends at H (BEND, no jump), n per size as calibrate
    takes them: the protocols and thresholds as without the bend, one hinge in rendezvous and
    none elsewhere; H, the slopes before and after it and both pieces' intercepts inside their
    95% intervals; the pieces meet at H; the fit within one spread at every size, where the fit
    without hinges (max_hinges=0: one line a protocol, as before) misses past H."""
    H, gamma = BEND
    samples = synthetic(seed=1, medium=True, bend=BEND, repeats=200)
    result = fit(samples, bootstrap=400, seed=1)
    print("\n" + report("synthetic, three protocols, rendezvous bent", result))
    assert [line.protocol for line in result.lines] == ["eager", "medium", "rendezvous"]
    assert (result.medium, result.threshold) == (M, S)
    eager, medium, rendezvous = result.lines
    assert not eager.pieces and not medium.pieces and len(rendezvous.pieces) == 2
    first, bend = rendezvous.pieces
    assert first.start == S
    truths = ((first.alpha_lo, first.alpha, first.alpha_hi, RENDEZVOUS[0]),
              (first.beta_lo, first.beta, first.beta_hi, RENDEZVOUS[1]),
              (bend.start_lo, bend.start, bend.start_hi, H),
              (bend.beta_lo, bend.beta, bend.beta_hi, RENDEZVOUS[1] + gamma),
              (bend.alpha_lo, bend.alpha, bend.alpha_hi, RENDEZVOUS[0] - gamma * H))
    for lo, value, hi, true in truths:
        assert lo <= true <= hi and lo <= value <= hi
    assert first.beta == pytest.approx(RENDEZVOUS[1], rel=0.03)
    assert first.alpha + first.beta * bend.start == pytest.approx(bend.alpha + bend.beta * bend.start)
    st = result.stats
    assert (np.abs(result.predict(st.sizes) - st.mean) <= st.spread).all()
    plain = fit(samples, bootstrap=50, seed=1, max_hinges=0)
    assert (plain.medium, plain.threshold) == (M, S) and not plain.lines[-1].pieces
    # The protocol's straight line, seed 003's alpha and beta, is the fit without bends.
    assert (rendezvous.alpha, rendezvous.beta) == pytest.approx((plain.lines[-1].alpha, plain.lines[-1].beta))
    assert (result.predict(st.sizes, lines_only=True) == plain.predict(st.sizes)).all()
    missed = st.sizes[np.abs(plain.predict(st.sizes) - st.mean) > st.spread]
    assert len(missed) and (missed > H).all()


def test_bend_coverage():
    """40 calibrations of the bent truth: one hinge and the thresholds M, S every time; the 95%
    intervals of H, of the rendezvous line's alpha and beta before H and of its beta after H
    hold the truth at least 80% of the time (binomial(40, 0.95) is below 32 with p < 0.001)."""
    H, gamma = BEND
    trials = 40
    hits = np.zeros(4)
    for seed in range(trials):
        result = fit(synthetic(seed + 500, medium=True, bend=BEND, repeats=200), bootstrap=200, seed=seed)
        line = result.lines[-1]
        assert (result.medium, result.threshold) == (M, S) and len(line.pieces) == 2
        first, bend = line.pieces
        hits += [bend.start_lo <= H <= bend.start_hi, first.alpha_lo <= RENDEZVOUS[0] <= first.alpha_hi,
                 first.beta_lo <= RENDEZVOUS[1] <= first.beta_hi, bend.beta_lo <= RENDEZVOUS[1] + gamma <= bend.beta_hi]
    print("\ncoverage of the 95%% intervals (H, rendezvous alpha, beta before H, beta after H): %s" % (hits / trials))
    assert (hits >= 0.8 * trials).all()


def test_no_bend_where_the_truth_has_none():
    """200 calibrations of truths without a bend, n per size as calibrate takes them at its
    default --repeats 200 (10 samples at 1.3 MiB and above): 100 two-protocol, 100
    three-protocol, 500 protocols whose bends are sought.  The thresholds are the truths'
    every time, and at most 1% of the protocols bend (one did, at 3 MiB: a piece of two sizes
    of ten samples each; docs/network.md gives the rates at fewer repeats)."""
    bent = protocols = 0
    for seed in range(100):
        two = fit(synthetic(seed + 700, repeats=200), bootstrap=10, seed=seed)
        three = fit(synthetic(seed + 900, medium=True, repeats=200), bootstrap=10, seed=seed)
        assert two.threshold == S and two.medium is None and (three.medium, three.threshold) == (M, S)
        bent += sum(1 for line in two.lines + three.lines if line.pieces)
        protocols += len(two.lines) + len(three.lines)
    print("\nprotocols bent on 200 calibrations without a bend: %d of %d" % (bent, protocols))
    assert protocols == 500 and bent <= 5


def test_bends_in_every_protocol():
    """10 calibrations of a truth whose eager line bends once (+0.05 ns/B past 1.5 KiB) and
    whose rendezvous line bends twice (-0.04 ns/B past 768 KiB, +0.03 past 2.5 MiB: the shapes
    this VM's copies showed), the medium line straight, n per size as calibrate takes them:
    every time the thresholds as without bends, one hinge in eager, none in medium, two in
    rendezvous and the fit within one spread at every size; each H inside its 95% interval in
    at least 7 of the 10 (binomial(10, 0.95) is below 7 with p < 0.002)."""
    truth_bends = {"eager": [(1536, 0.05e-9)], "rendezvous": [(768 << 10, -0.04e-9), (2560 << 10, 0.03e-9)]}
    trials = 10
    hits = np.zeros(3)
    for seed in range(trials):
        samples = synthetic(seed=seed + 40, medium=True, repeats=200)
        for size, times in samples.items():
            protocol = "rendezvous" if size >= S else ("medium" if size >= M else "eager")
            extra = sum(g * max(0, size - h) for h, g in truth_bends.get(protocol, []))
            straight = TRUTH[protocol][0] + TRUTH[protocol][1] * size
            samples[size] = times * (straight + extra) / straight     # the same relative noise on the bent time
        result = fit(samples, bootstrap=100, seed=seed)
        if seed == 0:
            print("\n" + report("synthetic, bends in eager and rendezvous", result))
        assert (result.medium, result.threshold) == (M, S)
        eager, medium, rendezvous = result.lines
        assert (len(eager.pieces), len(medium.pieces), len(rendezvous.pieces)) == (2, 0, 3)
        found = eager.pieces[1:] + rendezvous.pieces[1:]
        hits += [p.start_lo <= h <= p.start_hi for p, (h, _) in zip(found, truth_bends["eager"] + truth_bends["rendezvous"])]
        st = result.stats
        assert (np.abs(result.predict(st.sizes) - st.mean) <= st.spread).all()
    print("\ncoverage of the 95%% intervals of the three H: %s" % (hits / trials))
    assert (hits >= 7).all()


def test_the_cli_default_is_the_fit_default():
    from mpigraph.network import cli, hinge

    assert cli.MAX_HINGES == hinge.MAX_HINGES


def test_a_bend_with_two_protocols_at_most():
    """--max-protocols 2 on a two-protocol truth with the bend: S as without it, the bend a hinge."""
    result = fit(synthetic(seed=1, bend=BEND, repeats=200), bootstrap=100, max_segments=2)
    assert [line.protocol for line in result.lines] == ["eager", "rendezvous"] and result.threshold == S
    bend = result.lines[-1].pieces[1:]
    assert len(bend) == 1 and bend[0].start_lo <= BEND[0] <= bend[0].start_hi


def test_params_file_round_trip(tmp_path):
    from mpigraph.network.calibrate import to_rows
    from mpigraph.network.params import write_params

    result = fit(synthetic(seed=2), bootstrap=100)
    path = tmp_path / "params.csv"
    write_params(str(path), to_rows("same-host", result))
    with open(path) as f:
        assert next(csv.reader(f)) == COLUMNS
    params = read_params(str(path))
    assert params.host_pairs() == ["same-host"] and params.threshold() == S
    sizes = np.array([0, 1024, S - 1, S, 1 << 20])
    assert list(params.protocol_of(sizes)) == ["eager"] * 3 + ["rendezvous"] * 2
    assert params.time(sizes) == pytest.approx(result.predict(sizes), rel=1e-5)
    path.write_text("protocol,latency_s\neager,1e-6\n")
    with pytest.raises(NetworkError, match="mpigraph calibrate"):
        read_params(str(path))


def _three_protocol_file(tmp_path):
    from mpigraph.network.calibrate import to_rows
    from mpigraph.network.params import write_params

    result = fit(synthetic(seed=2, medium=True), bootstrap=100)
    path = tmp_path / "params.csv"
    write_params(str(path), to_rows("same-host", result))
    return path, result


def test_params_file_with_a_medium_row(tmp_path):
    path, result = _three_protocol_file(tmp_path)
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert [r["protocol"] for r in rows] == ["eager", "medium", "rendezvous"]
    # S keeps its meaning on every row (a reader of the two-protocol rule still finds it); M is new.
    assert {r["threshold_bytes"] for r in rows} == {str(S)} and {r["medium_bytes"] for r in rows} == {str(M)}
    params = read_params(str(path))
    assert (params.medium_threshold(), params.threshold()) == (M, S)
    assert params.protocols() == ["eager", "medium", "rendezvous"]
    sizes = np.array([0, M - 1, M, S - 1, S, 1 << 20])
    assert list(params.protocol_of(sizes)) == ["eager", "eager", "medium", "medium", "rendezvous", "rendezvous"]
    assert params.time(sizes) == pytest.approx(result.predict(sizes), rel=1e-5)
    # A medium row without M, or M not below S (hand-written), says what to write.
    text = path.read_text()
    for wrong in (",,\n", ",%d,\n" % S):            # medium_bytes, then from_bytes (empty: no bend)
        path.write_text(text.replace(",%d,\n" % M, wrong))
        with pytest.raises(NetworkError, match="medium_bytes"):
            read_params(str(path))


def test_params_file_of_the_old_columns_reads_as_before(tmp_path):
    """A file without medium_bytes (written before it existed, or by hand) is the two-protocol rule."""
    path = tmp_path / "old.csv"
    path.write_text("protocol,latency_s,per_byte_s,latency_lo_s,latency_hi_s,per_byte_lo_s,per_byte_hi_s,"
                    "threshold_bytes,host_pair\n"
                    "eager,2e-06,1e-10,,,,,8192,same-host\nrendezvous,5e-06,2e-10,,,,,8192,same-host\n")
    params = read_params(str(path))
    assert params.medium_threshold() is None and params.threshold() == 8192
    assert list(params.protocol_of([8191, 8192])) == ["eager", "rendezvous"]
    assert params.time([1000, 10000]) == pytest.approx([2e-6 + 1e-7, 5e-6 + 2e-6])


def test_every_consumer_reads_a_medium_row(tmp_path):
    """whatif --params (LogGPS: L from eager, G from rendezvous, S where the sender waits),
    model --params (the eager row), decompose (an eager message from M on takes the medium
    line, seed 003's medium being an eager protocol; rendezvous its own)."""
    from mpigraph.model import network
    from mpigraph.network import decompose
    from mpigraph.whatif.api import load_params

    path, result = _three_protocol_file(tmp_path)
    eager, medium, rendezvous = result.lines
    loggps = load_params(str(path))
    assert loggps["L0_ns"] == pytest.approx(eager.alpha * 1e9, rel=1e-5)
    assert loggps["G0_ns"] == pytest.approx(rendezvous.beta * 1e9, rel=1e-5) and loggps["S_bytes"] == S
    assert network.read_params(str(path)).latency_s == pytest.approx(eager.alpha, rel=1e-5)
    params, source = decompose.load_params(str(path))
    assert "M = %d B" % M in source        # the summary says the medium line was used
    nbytes = np.array([100, M, 2 * M, S, 2 * S, 2 * S])
    code = np.array([decompose.EAGER] * 3 + [decompose.RENDEZVOUS] * 2 + [decompose.EAGER])
    assert list(decompose.line_names(params, nbytes, code, "same-host")) == \
        ["eager", "medium", "medium", "rendezvous", "rendezvous", "medium"]
    est = decompose.network_ns(params, nbytes, code, np.ones(len(nbytes), bool))
    lines = [eager, medium, medium, rendezvous, rendezvous, medium]
    assert est == pytest.approx([(l.alpha + l.beta * n) * 1e9 for l, n in zip(lines, nbytes)], rel=1e-5)


def _bent_file(tmp_path):
    from mpigraph.network.calibrate import to_rows
    from mpigraph.network.params import write_params

    result = fit(synthetic(seed=2, medium=True, bend=BEND, repeats=200), bootstrap=100)
    assert len(result.lines[-1].pieces) == 2
    path = tmp_path / "params.csv"
    write_params(str(path), to_rows("same-host", result))
    return path, result


def test_a_bend_between_two_byte_counts_starts_its_row_at_the_next_one(tmp_path):
    """A bend between 0 and 1 B (eager's first bytes, seen on this VM): the fit takes a 1-byte
    message on the piece after the bend where the bend lies at or below 1 B, else on the one
    before it; params.csv says the same at every whole size."""
    from mpigraph.network.calibrate import from_bytes, to_rows
    from mpigraph.network.fit import Fit, Line, SizeStats
    from mpigraph.network.hinge import Piece
    from mpigraph.network.params import write_params

    for start, first in ((0.4, 1), (1.0, 1), (1.3, 2)):
        assert from_bytes(Piece(start, 0.0, 0.0)) == first
        # 1.415 us + 25.8 ns/B up to the bend, 0.047 ns/B after it: continuous at the bend.
        before = Piece(0.0, 1.415e-6, 25.8e-9)
        after = Piece(start, before.alpha + (before.beta - 0.047e-9) * start, 0.047e-9)
        line = Line("eager", 1.43e-6, 0.1e-9, pieces=[before, after])
        sizes = np.arange(6.0)
        stats = SizeStats(sizes, np.ones(6), line.time(sizes), np.zeros(6), np.zeros(6))
        result = Fit(stats, [line], None, None)
        path = tmp_path / "params.csv"
        write_params(str(path), to_rows("same-host", result))
        assert read_params(str(path)).time(sizes) == pytest.approx(result.predict(sizes), rel=1e-5), start


def test_params_file_with_a_bend(tmp_path):
    """A hinge row: the protocol's name, thresholds as on every row, from_bytes = H; the
    protocol's own row (from_bytes empty) first.  time(N) is the fit's on both sides of H."""
    path, result = _bent_file(tmp_path)
    rendezvous = result.lines[-1]
    bend = rendezvous.pieces[1]
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert [(r["protocol"], r["from_bytes"]) for r in rows] == [
        ("eager", ""), ("medium", ""), ("rendezvous", ""), ("rendezvous", str(S)),
        ("rendezvous", str(int(np.ceil(bend.start))))]
    assert {r["threshold_bytes"] for r in rows} == {str(S)} and {r["medium_bytes"] for r in rows} == {str(M)}
    params = read_params(str(path))
    assert params.protocols() == ["eager", "medium", "rendezvous"] and params.threshold() == S
    assert params.get("rendezvous").latency_s == pytest.approx(rendezvous.alpha, rel=1e-5)
    assert [r.from_bytes for r in params.pieces("rendezvous")] == [S, int(np.ceil(bend.start))]
    sizes = np.concatenate([result.stats.sizes, [bend.start - 1, bend.start + 1, np.floor(bend.start),
                                                 np.ceil(bend.start), 3.5 * (1 << 20)]])
    assert params.time(sizes) == pytest.approx(result.predict(sizes), rel=1e-5)
    # Hand-written hinge rows that cannot be used say so: below S, or no rendezvous row of its own.
    text = path.read_text()
    last = text.strip().splitlines()[-1]
    for wrong in (last.rsplit(",", 1)[0] + ",%d" % (S // 2), last.replace("rendezvous", "medium", 1)
                  .rsplit(",", 1)[0] + ",%d" % (2 * S)):
        path.write_text(text.replace(last, wrong))
        with pytest.raises(NetworkError, match="from_bytes"):
            read_params(str(path))
    path.write_text(text.replace(last, last + "\n" + last))          # the same bend twice
    with pytest.raises(NetworkError, match="from_bytes"):
        read_params(str(path))


def test_params_file_before_bends_reads_as_before(tmp_path):
    """A file of the columns before from_bytes (medium_bytes last) has no hinge: one line a protocol."""
    path, _ = _three_protocol_file(tmp_path)
    params = read_params(str(path))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(line.rsplit(",", 1)[0] for line in lines) + "\n")
    assert lines[0].endswith(",from_bytes") and not path.read_text().splitlines()[0].endswith(",from_bytes")
    old = read_params(str(path))
    assert all(r.from_bytes is None for r in old.rows) and old.pieces("rendezvous") == []
    sizes = np.array([0, M, S, 4 << 20])
    assert old.time(sizes) == pytest.approx(params.time(sizes))


def test_every_consumer_reads_a_bend(tmp_path):
    """whatif --params and model --params keep each protocol's own line (LogGPS has one L and
    one G; the model one latency and bandwidth): G is the rendezvous protocol's straight-line
    beta.  decompose takes the piece a message's size falls in: a rendezvous message before H
    the first piece's line, past H the bend's, a collective (d - 1) alpha + its piece's time,
    alpha the protocol's own latency."""
    from mpigraph.model import network
    from mpigraph.network import decompose
    from mpigraph.whatif.api import load_params

    path, result = _bent_file(tmp_path)
    eager, medium, rendezvous = result.lines
    first, bend = rendezvous.pieces
    loggps = load_params(str(path))
    assert loggps["L0_ns"] == pytest.approx(eager.alpha * 1e9, rel=1e-5) and loggps["S_bytes"] == S
    assert loggps["G0_ns"] == pytest.approx(rendezvous.beta * 1e9, rel=1e-5)
    assert network.read_params(str(path)).latency_s == pytest.approx(eager.alpha, rel=1e-5)
    params, source = decompose.load_params(str(path))
    assert "rendezvous from %d B" % int(round(bend.start)) in source
    nbytes = np.array([S, 2 * S, 4 << 20, 3 << 20])
    code = np.array([decompose.RENDEZVOUS] * 4)
    est = decompose.network_ns(params, nbytes, code, np.ones(len(nbytes), bool))
    pieces = [first, first, bend, bend]
    assert est == pytest.approx([(p.alpha + p.beta * n) * 1e9 for p, n in zip(pieces, nbytes)], rel=1e-5)
    # Two collectives of 4 MiB a member: 2 members (d = 1) and 4 members (d = 2), one call each.
    members = {"rank": np.array([0, 1, 0, 1, 2, 3]), "call": np.array([0, 0, 1, 1, 0, 0]),
               "done_call": np.array([0, 0, 1, 1, 0, 0])}
    instance = np.array([0, 0, 1, 1, 1, 1])
    offsets = np.array([0, 2, 4, 5])
    coll, _ = decompose.collective_network(members, instance, params, np.full(6, 4 << 20), True, offsets, 6)
    one = (bend.alpha + bend.beta * (4 << 20)) * 1e9
    assert coll[0] == pytest.approx(one, rel=1e-5) and coll[1] == pytest.approx(one + rendezvous.alpha * 1e9, rel=1e-5)


def test_sizes_and_pairs():
    assert parse_sizes("0, 8,1K,64k,1M") == [0, 8, 1024, 65536, 1 << 20]
    with pytest.raises(NetworkError):
        parse_sizes("8,1G")
    sizes = default_sizes()
    assert sizes[:8] == [0, 1, 2, 3, 4, 6, 8, 12] and sizes[-1] == 4 << 20
    assert choose_pairs(["a", "a"]) == [("same-host", 0, 1)]
    assert choose_pairs(["a", "b", "b"]) == [("same-host", 1, 2), ("other-host", 0, 1)]


def test_real_calibrate_on_2_ranks(tmp_path, wheel):
    out = tmp_path / "params.csv"
    result = mpi_env.mpigraph(["calibrate", "--out", out, "--sizes", "0,8,64,512,4K,32K,128K,512K,1M",
                               "--repeats", "60", "--bootstrap", "100"], nprocs=2, mpi=wheel)
    print("\n" + result.stdout)
    assert result.returncode == 0, result.stderr
    params = read_params(str(out))
    assert params.host_pairs() == ["same-host"]
    eager = params.get("eager")
    assert 0 < eager.latency_s < 1e-3 and eager.latency_lo_s <= eager.latency_s <= eager.latency_hi_s
    # The summary line says at how many sizes the fit lies within one spread of the mean.
    line = [l for l in result.stdout.splitlines() if "within one spread" in l][0]
    within, total = (int(w) for w in line.split(" at ")[1].split(" sizes")[0].split(" of "))
    assert total == 9 and within >= 5
    # Whatever number of protocols this machine's load made the fit find, every reader takes the file.
    from mpigraph.model import network
    from mpigraph.network.decompose import load_params as decompose_params
    from mpigraph.whatif.api import load_params as whatif_params

    assert params.protocols()[0] == "eager" and len(params.protocols()) == len(
        [l for l in result.stdout.splitlines() if l.split()[:1] and l.split()[0] in ("eager", "medium", "rendezvous")
         and "[" in l])
    assert np.isfinite(params.time([0, 8, 1 << 20])).all()
    assert whatif_params(str(out))["L0_ns"] == pytest.approx(eager.latency_s * 1e9, rel=1e-5)
    assert network.read_params(str(out)).latency_s == pytest.approx(eager.latency_s, rel=1e-5)
    assert decompose_params(str(out))[0].threshold() == params.threshold()


def test_real_calibrate_to_4_mib_every_consumer_reads(tmp_path, wheel):
    """The default sizes (0 B .. 4 MiB, where this VM's copies leave the caches) on 2 ranks:
    whatever protocols and bends the machine's load gives, params.time(N) of the file is the
    printed fit at every size, a bend's row follows its protocol's, and whatif, model and
    decompose read the file (whatif's G the rendezvous line before any bend)."""
    from mpigraph.model import network
    from mpigraph.network import hinge
    from mpigraph.network.decompose import load_params as decompose_params
    from mpigraph.whatif.api import load_params as whatif_params

    out = tmp_path / "params.csv"
    result = mpi_env.mpigraph(["calibrate", "--out", out, "--repeats", "40", "--bootstrap", "50"], nprocs=2,
                              mpi=wheel)
    print("\n" + result.stdout)
    assert result.returncode == 0, result.stderr
    params = read_params(str(out))
    table = [l.split() for l in result.stdout.splitlines() if l.split()[-1:] in (["yes"], ["NO"])]
    sizes = np.array([int(row[0]) for row in table])
    printed = np.array([float(row[5]) for row in table]) * 1e-6
    assert len(sizes) == len(default_sizes())
    assert params.time(sizes) == pytest.approx(printed, rel=1e-4, abs=2e-9)
    assert list(params.protocol_of(sizes)) == [row[1] for row in table]
    bends = [l.split()[2] for l in result.stdout.splitlines() if l.strip().startswith("bend of")]
    last = params.protocols()[-1]
    for protocol in params.protocols():
        bent = bends.count(protocol)
        assert len(params.pieces(protocol)) == (bent + 1 if bent else 0) and bent <= hinge.MAX_HINGES
    first = params.get(last)
    assert whatif_params(str(out))["G0_ns" if last == "rendezvous" else "L0_ns"] == pytest.approx(
        (first.per_byte_s if last == "rendezvous" else first.latency_s) * 1e9, rel=1e-5)
    assert network.read_params(str(out)).latency_s == pytest.approx(params.get("eager").latency_s, rel=1e-5)
    assert decompose_params(str(out))[0].time(sizes) == pytest.approx(params.time(sizes))


def test_real_calibrate_with_one_protocol_at_most(tmp_path, wheel):
    """--max-protocols 1: one eager line whatever the data, no thresholds, and the readers cope."""
    from mpigraph.whatif.api import load_params as whatif_params

    out = tmp_path / "params.csv"
    result = mpi_env.mpigraph(["calibrate", "--out", out, "--sizes", "0,8,64,512,4K,32K", "--repeats", "20",
                               "--bootstrap", "20", "--max-protocols", "1"], nprocs=2, mpi=wheel)
    assert result.returncode == 0, result.stderr
    params = read_params(str(out))
    assert params.protocols() == ["eager"] and params.threshold() is None and params.medium_threshold() is None
    assert list(params.protocol_of([0, 1 << 20])) == ["eager", "eager"]
    assert "S_bytes" not in whatif_params(str(out))


def test_calibrate_needs_two_ranks(tmp_path):
    result = mpi_env.mpigraph(["calibrate", "--out", tmp_path / "p.csv", "--sizes", "0,8,64,512"])
    assert result.returncode == 2 and "mpiexec -n 2" in result.stderr


@pytest.mark.parametrize("option, value", [("--bootstrap", "0"), ("--repeats", "0"), ("--max-hinges", "-1")])
def test_calibrate_refuses_counts_below_their_least(tmp_path, wheel, option, value):
    """Said before any ping-pong, in one line, and no file written."""
    out = tmp_path / "p.csv"
    result = mpi_env.mpigraph(["calibrate", "--out", out, "--sizes", "0,8,64,512", option, value], nprocs=2, mpi=wheel)
    assert result.returncode == 2 and "%s %s: give" % (option, value) in result.stderr and not out.exists()
    assert "Traceback" not in result.stderr
