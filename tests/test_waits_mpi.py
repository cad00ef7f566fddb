"""Aligned clocks, matching and wait states on real MPI runs (4 ranks, the wheel's MPICH).

- the demo with injected clock offsets (up to 50 ms) and drifts (up to 100 ppm):
  the ping-pong alignment recovers them within 5 us at MPI_Init and at
  MPI_Finalize, or within the error bound the run's own round trips give where
  they are longer (a loaded machine); the barrier-and-median baseline is measured
  beside it;
- the demo with long work (100 ms base, so the imbalance dominates the noise of
  a busy machine): the overloaded rank waits least at the Allreduce and the
  others wait for it by its extra work; rank 0's late sends show up as late-
  sender time on rank 1;
- calls.c: every call record is a row of calls.parquet, nothing is unmatched;
- unreceived.c: the one message nobody receives is listed as unmatched.
Residuals and waits are printed (pytest -s shows them).  No time limits.
"""

import csv
import os
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_env  # noqa: E402
from mpigraph.clock import models as clock
from mpigraph.trace import record
from mpigraph.trace import logs as trace  # noqa: E402

NPROCS = 4
DEMO = os.path.join(mpi_env.REPO, "mpigraph", "shim", "demo.c")
HEAVY = NPROCS - 1
# Injected skew per world rank (rank 0 skewed too: only differences to rank 0 are recoverable).
OFFSETS_NS = [-20_000_000, 50_000_000, -50_000_000, 35_000_000]
DRIFTS_PPM = [30, -100, 100, -70]
TOLERANCE_NS = 5_000
# The injected truth is itself read from the calibration pairs (the middle of two clock reads).
TRUTH_NOISE_NS = 1_000


def run_program(tmp_path_factory, wheel, exe, args=(), **rank_env):
    out = tmp_path_factory.mktemp("run") / "run"
    result = mpi_env.mpirun(wheel, NPROCS, [exe, *args], out=out, rank_env={"MPIGRAPH_QUIET": "1", **rank_env})
    assert result.returncode == 0, result.stderr[-4000:]
    assert (out / "summary.txt").is_file(), result.stderr[-4000:]
    return out


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def calls_table(out):
    return {k: np.array(v) for k, v in pq.read_table(out / "calls.parquet").to_pydict().items()}


# ---- clock recovery ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def skewed_demo(tmp_path_factory, builder, wheel):
    exe = builder.build(DEMO, wheel.mpicc)
    # 6 iterations of ~155 ms: about a second, so 100 ppm drift moves a clock by ~100 us.  A skewed
    # clock is not its host's clock: the ranks pose as ranks of 4 hosts, so they are aligned by
    # the ping-pong model (ranks of one host share one clock: one offset, no drift).
    return run_program(tmp_path_factory, wheel, exe, ["6", "50", "5"], MPIGRAPH_CLOCK_SOURCE="monotonic",
                       MPIGRAPH_TEST_HOSTNAMES=",".join("host%d" % r for r in range(NPROCS)),
                       MPIGRAPH_TEST_CLOCK_OFFSETS_NS=",".join(map(str, OFFSETS_NS)),
                       MPIGRAPH_TEST_CLOCK_DRIFTS_PPM=",".join(map(str, DRIFTS_PPM)))


def injected_skew(log, drift_ppm):
    """(t0, skew at t0, drift) of the skew the shim injected into a log's clock.

    With MPIGRAPH_CLOCK_SOURCE=monotonic each calibration pair is (CLOCK_MONOTONIC,
    skewed clock): their difference is the injected skew, a straight line in
    CLOCK_MONOTONIC (which all ranks share here) of the injected slope.  Its
    level is the median over the pairs (a pair is the middle of two clock reads:
    one preempted between them is off, the median ignores it).
    """
    assert log.header["clock_source"] == record.CLOCK_MONOTONIC
    is_set = log.header["calib_ns"] != 0
    ticks = log.header["calib_ticks"][is_set].astype(np.int64)
    skew = log.header["calib_ns"][is_set].astype(np.int64) - ticks
    drift = drift_ppm * 1e-6
    t0 = int(ticks.min())
    return t0, float(np.median(skew - drift * (ticks - t0))), drift


def true_offsets(logs, samples):
    """Rank r's clock minus rank 0's, as injected, at r's MPI_Init and MPI_Finalize samples."""
    lines = [injected_skew(logs[r], DRIFTS_PPM[r]) for r in range(NPROCS)]
    skew = lambda r, t: lines[r][1] + lines[r][2] * (t - lines[r][0])  # noqa: E731
    truth = []
    for end in ("init", "final"):
        local = samples[end]["local_ns"].astype(float)
        t = local.copy()
        for _ in range(3):                       # invert local = t + skew_r(t)
            t = local - np.array([skew(r, t[r]) for r in range(NPROCS)])
        truth.append(np.array([skew(r, t[r]) - skew(0, t[r]) for r in range(NPROCS)]))
    return truth


def pingpong_bounds(samples):
    """Per rank: how far the ping-pong model may be off rank 0's clock, from the run's own round trips.

    A ping-pong's midpoint offset is within half its round trip of the truth whatever the
    asymmetry of the two legs (the clock read on the other side falls inside the round
    trip).  A rank's line to rank 0 is its line to its parent composed with the parent's
    (models.pingpong_lines), each interpolating between its MPI_Init and MPI_Finalize
    samples: the errors add up the tree, each edge's at most half the longer of its two
    round trips.  On a quiet machine the round trips are a few us and the bound is below
    TOLERANCE_NS; on a loaded one a rank preempted mid-ping-pong has round trips of tens of us
    and no method can do better than this bound there."""
    half = np.maximum(samples["init"]["rtt_ns"], samples["final"]["rtt_ns"]).astype(float) / 2
    bound = np.zeros(len(samples))
    for r in range(1, len(samples)):              # a parent is a lower rank (csrc/clock_sync.c)
        bound[r] = half[r] + bound[int(samples["parent"][r])]
    return bound


def test_pingpong_bounds_compose_up_the_tree():
    samples = np.zeros(4, clock.SAMPLES_DTYPE)
    samples["rank"], samples["parent"] = np.arange(4), [-1, 0, 0, 2]
    samples["init"]["rtt_ns"] = [0, 4_000, 10_000, 42_000]
    samples["final"]["rtt_ns"] = [0, 6_000, 2_000, 8_000]
    assert pingpong_bounds(samples).tolist() == [0, 3_000, 5_000, 26_000]


def test_injected_skew_is_what_the_test_asked_for(skewed_demo):
    for r, log in trace.open_run(str(skewed_demo)).logs.items():
        t0, skew, _ = injected_skew(log, DRIFTS_PPM[r])
        ticks = log.header["calib_ticks"][[record.CALIB_INIT_A, record.CALIB_FINAL]].astype(np.int64)
        ns = log.header["calib_ns"][[record.CALIB_INIT_A, record.CALIB_FINAL]].astype(np.int64)
        slope = float((ns[1] - ticks[1]) - (ns[0] - ticks[0])) / float(ticks[1] - ticks[0])
        assert slope * 1e6 == pytest.approx(DRIFTS_PPM[r], abs=1.0)      # two noisy pairs a second apart
        # The shim starts the drift at MPI_Init's sync, up to seconds before the pairs on a busy node.
        assert skew == pytest.approx(OFFSETS_NS[r], abs=abs(DRIFTS_PPM[r]) * 1e-6 * 60e9)


def test_pingpong_recovers_injected_offsets_and_drifts(skewed_demo):
    logs = trace.open_run(str(skewed_demo)).logs
    samples = clock.samples_of(logs)
    truth_init, truth_final = true_offsets(logs, samples)
    residual = {}
    for method in clock.METHODS:
        init, final = clock.offsets_at_samples(clock.lines_for(method, samples), samples)
        residual[method] = (init - truth_init, final - truth_final)
        print("%-8s residual us at MPI_Init %s, at MPI_Finalize %s" % (
            method, np.round(residual[method][0] / 1e3, 3).tolist(), np.round(residual[method][1] / 1e3, 3).tolist()))
    print("round trips ns: init %s final %s" % (samples["init"]["rtt_ns"].tolist(), samples["final"]["rtt_ns"].tolist()))
    init, final = residual["pingpong"]
    # Within 5 us, or within what the run's own round trips allow where they were long (a busy
    # machine): on a quiet machine the bound is below 5 us and this is the 5 us test.
    tolerance = np.maximum(TOLERANCE_NS, pingpong_bounds(samples) + TRUTH_NOISE_NS)
    print("tolerance us per rank %s" % np.round(tolerance / 1e3, 3).tolist())
    assert (np.abs(init) < tolerance).all() and (np.abs(final) < tolerance).all(), (residual, tolerance)
    # The baseline is measured in the same run (its residuals are printed above) ...
    assert np.isfinite(residual["barrier"][0]).all() and np.isfinite(residual["barrier"][1]).all()
    # ... and no correction at all is off by the injected offsets: the test can fail.
    assert np.abs(residual["none"][0][1:]).min() > 10_000_000


def test_report_shows_the_correction_applied(skewed_demo):
    ranks = read_csv(skewed_demo / "ranks.csv")
    samples = clock.samples_of(trace.open_run(str(skewed_demo)).logs)
    init, _ = clock.offsets_at_samples(clock.pingpong_lines(samples), samples)
    assert [float(r["clock_offset_s"]) * 1e9 for r in ranks] == pytest.approx(init.tolist(), abs=1.5)
    truth_drift = np.array(DRIFTS_PPM, float) - DRIFTS_PPM[0]
    # Within 10 ppm, or within what the offsets' bound at MPI_Init and MPI_Finalize allows over
    # the time between them (a loaded machine's long round trips on a short run).
    span_ns = (samples["final"]["local_ns"] - samples["init"]["local_ns"]).astype(float)
    tolerance = np.maximum(10, 2 * (pingpong_bounds(samples) + TRUTH_NOISE_NS) / span_ns * 1e6)
    drift = np.array([float(r["clock_drift_ppm"]) for r in ranks])
    print("drift ppm %s, tolerance ppm %s" % (drift.round(1).tolist(), tolerance.round(1).tolist()))
    assert (np.abs(drift - truth_drift) <= tolerance).all(), (drift, truth_drift, tolerance)
    text = (skewed_demo / "summary.txt").read_text()
    assert "Clock correction: pingpong" in text and "LEFT" not in text


def test_skewed_run_still_finds_the_overloaded_rank(skewed_demo):
    calls = calls_table(skewed_demo)
    allreduce = calls["function"] == "MPI_Allreduce"
    median = [np.median(calls["wait_before_ns"][allreduce & (calls["rank"] == r)]) for r in range(NPROCS)]
    assert int(np.argmin(median)) == HEAVY, median


# ---- the demo's imbalance and late sender -------------------------------------------------------

BASE_MS, LATE_MS, ITERATIONS = 100, 20, 8


@pytest.fixture(scope="module")
def demo(tmp_path_factory, builder, wheel):
    exe = builder.build(DEMO, wheel.mpicc)
    return run_program(tmp_path_factory, wheel, exe, [str(ITERATIONS), str(BASE_MS), str(LATE_MS)])


def test_overloaded_rank_waits_least_and_the_others_wait_for_its_extra_work(demo):
    calls = calls_table(demo)
    allreduce = calls["function"] == "MPI_Allreduce"
    wait = np.array([calls["wait_before_ns"][allreduce & (calls["rank"] == r)] for r in range(NPROCS)]) / 1e6
    print("Allreduce wait_before ms (row = rank):\n%s" % np.round(wait, 2))
    assert wait.shape == (NPROCS, ITERATIONS)
    assert (np.argmin(wait, axis=0) == HEAVY).mean() >= 0.75, wait
    # The heavy rank computes 2 x BASE_MS more per iteration.  It also leaves the ring LATE_MS
    # before the others (it does not wait for rank 0's late send), so the others wait
    # 2 x BASE_MS - LATE_MS for it; the tolerance is 10% of its extra work.
    extra = 2 * BASE_MS
    others = np.median(wait[:HEAVY])
    print("others wait %.2f ms (median), expected %.1f +- %.1f" % (others, extra - LATE_MS, 0.1 * extra))
    assert abs(others - (extra - LATE_MS)) <= 0.1 * extra


def test_late_sender_is_reported_on_the_receiving_rank(demo):
    states = read_csv(demo / "waitstates.csv")
    late = {r: sum(float(s["time_s"]) for s in states if s["kind"] == "late_sender" and s["rank"] == str(r))
            for r in range(NPROCS)}
    print("late sender s per rank:", late)
    calls = calls_table(demo)
    recv1 = (calls["rank"] == 1) & (calls["function"] == "MPI_Recv")
    assert set(calls["peer"][recv1].tolist()) == {0}          # rank 1 receives from the late rank 0
    assert (calls["wait_state"][recv1] == "late_sender").sum() >= ITERATIONS // 2
    assert late[1] >= 0.5 * ITERATIONS * LATE_MS / 1e3
    assert late[0] < 0.25 * late[1] and late[HEAVY] < 0.25 * late[1]


def test_demo_has_no_unmatched_operation(demo):
    assert read_csv(demo / "unmatched.csv") == []
    assert "Unmatched operations: none" in (demo / "summary.txt").read_text()


# ---- every record reported; unmatched operations ----------------------------------------------------

@pytest.fixture(scope="module")
def calls_c(tmp_path_factory, builder, wheel):
    return run_program(tmp_path_factory, wheel, builder.build("calls.c", wheel.mpicc))


def test_every_call_record_is_a_row_of_calls_parquet(calls_c):
    calls = calls_table(calls_c)
    run = trace.open_run(str(calls_c))
    names = __import__("mpigraph.trace.functions", fromlist=["x"]).names_array()
    for rank, log in run.logs.items():
        is_call = (log.records["flags"] & record.PART) == 0
        mine = calls["rank"] == rank
        assert calls["function"][mine].tolist() == names[log.records["func"][is_call]].tolist(), rank
        assert calls["call"][mine].tolist() == list(range(int(is_call.sum())))
    # A row per call record; failed MPI_Test polls in a row share one (its `calls` counts them).
    assert calls["calls"].sum() == sum(int(r["calls"]) for r in read_csv(calls_c / "ranks.csv"))
    assert (calls["calls"] >= 1).all()


def test_correct_program_has_no_unmatched_operation(calls_c):
    assert read_csv(calls_c / "unmatched.csv") == []
    inst = pq.read_table(calls_c / "collectives.parquet").to_pydict()
    assert all(inst["complete"]) and len(inst["seq"]) > 0


def test_an_unreceived_message_is_reported(tmp_path_factory, builder, wheel):
    out = run_program(tmp_path_factory, wheel, builder.build("unreceived.c", wheel.mpicc))
    rows = read_csv(out / "unmatched.csv")
    assert [(r["rank"], r["what"], r["function"], r["peer"], r["tag"]) for r in rows] == [
        ("0", "send", "MPI_Send", "1", "77")]
    assert "Unmatched operations: 1" in (out / "summary.txt").read_text()
