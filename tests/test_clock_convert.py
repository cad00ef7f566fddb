"""The clock stage's arithmetic on known numbers: ticks -> ns, a rank's line to rank 0's clock,
the run's start found from every rank's first record, and a log's calls.

The answers are worked out by hand below each case (numpy's rint rounds halves to even).
"""

import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mpigraph.clock import models as clock  # noqa: E402
from mpigraph.match import core, link  # noqa: E402
from mpigraph.trace import logs as trace  # noqa: E402
from mpigraph.trace import record  # noqa: E402
from tracebuild import part, rec, write_rank  # noqa: E402


def test_ticks_convert_on_the_calibration_line_rounding_halves_to_even():
    conversion = clock.Conversion(ticks0=1000, ns0=500, ns_per_tick=0.5)
    ticks = np.array([1000, 1001, 1003, 999, 1010], np.int64)
    # (ticks - 1000) * 0.5 = 0, 0.5, 1.5, -0.5, 5 -> rint 0, 0, 2, -0, 5 -> + 500
    assert clock.convert(conversion, ticks).tolist() == [500, 500, 502, 500, 505]
    assert ticks.tolist() == [1000, 1001, 1003, 999, 1010]           # the input is left as it was


def test_a_rank_on_rank_0s_line_keeps_its_times_and_another_moves_by_its_rounded_offset():
    lines = clock.Lines(ref=[0, 100], offset=[0.0, 10.4], drift=[0.0, 0.01])
    ns = np.array([5, 7], np.int64)
    assert lines.to_global(0, ns) is ns                              # offset and drift 0: nothing to subtract
    # rank 1: 10.4 + 0.01 * (0, 50, 250) = 10.4, 10.9, 12.9 -> 10, 11, 13
    assert lines.to_global(1, np.array([100, 150, 350])).tolist() == [90, 139, 337]
    assert lines.to_global(1, np.array([100, 150, 350])).tolist() == [
        int(t - np.rint(lines.at(1, t))) for t in (100, 150, 350)]


def test_the_run_starts_at_the_earliest_first_record_end_of_any_rank(tmp_path):
    # Rank 1's MPI_Init ends first (200 ns); rank 2 counts TSC ticks, 2 per ns from tick 1000 at ns 0.
    calib = [(record.CALIB_INIT_A, 1000, 1), (record.CALIB_FINAL, 1_001_000, 500_001)]
    ends = {0: 300, 1: 200, 2: 250}
    for r, end in ends.items():
        scale, zero = (2, 998) if r == 2 else (1, 0)       # rank 2: ticks = 998 + 2 ns (calibration: 1000 at 1)
        rows = [rec("MPI_Init", zero + scale * 100, zero + scale * end),
                rec("MPI_Barrier", zero + scale * 1000, zero + scale * 1100, seq=1),
                rec("MPI_Finalize", zero + scale * 2000, zero + scale * 2000)]
        write_rank(tmp_path, r, 3, rows, host="node%d" % r, clock_source=record.CLOCK_TSC if r == 2
                   else record.CLOCK_MONOTONIC, calib=calib if r == 2 else None)
    calls, info = link.aligned_calls(MPI.COMM_WORLD, trace.open_run(str(tmp_path)).logs, "none")
    assert info.origin_ns == 200
    assert calls[0].start_ns.tolist() == [-100, 800, 1800] and calls[0].end_ns.tolist() == [100, 900, 1800]
    assert calls[1].start_ns.tolist() == [-100, 800, 1800]
    assert calls[2].end_ns.tolist() == [50, 900, 1800]


def test_a_logs_calls_are_its_records_without_part_records(tmp_path):
    wait = rec("MPI_Waitall", 40, 50)
    rows = [rec("MPI_Init", 0, 10), rec("MPI_Irecv", 20, 25, request=1), wait, part(wait, record.RECV, request=1),
            part(wait, record.RECV, request=2), rec("MPI_Finalize", 60, 60)]
    write_rank(tmp_path, 0, 1, rows)
    log = trace.open_run(str(tmp_path)).logs[0]
    times = np.arange(6, dtype=np.int64) * 10
    calls = core.rank_calls(log, times, times + 1)
    assert calls.start_ns.tolist() == [0, 10, 20, 50] and calls.end_ns.tolist() == [1, 11, 21, 51]
    assert calls.record_call.tolist() == [0, 1, 2, 2, 2, 3]         # a part belongs to the call before it

    write_rank(tmp_path, 0, 1, [rec("MPI_Init", 0, 10), rec("MPI_Finalize", 60, 60)])
    log = trace.open_run(str(tmp_path)).logs[0]
    calls = core.rank_calls(log, np.array([0, 60]), np.array([10, 60]))
    assert calls.record_call.tolist() == [0, 1] and calls.start_ns.tolist() == [0, 60]


def test_times_of_a_batch_of_ranks_are_each_ranks_own_conversion_and_line():
    """RowConversions and Lines.rows_to_global (aligned_calls' batches of ranks) convert each row
    with its own rank's clock and line: the same as clock.convert and Lines.to_global rank by rank
    (TSC slopes, offsets and drifts)."""
    rng = np.random.default_rng(3)
    lengths = np.array([3, 0, 5, 2])
    conversions = [clock.Conversion(1000, 5 * 10**12, 0.37), clock.IDENTITY, clock.Conversion(-7, 10**9, 1.9),
                   clock.IDENTITY]
    logs = [type("Log", (), {"clock": c})() for c in conversions]
    ticks = rng.integers(10**12, 10**13, lengths.sum())
    lines = clock.Lines(rng.integers(0, 10**12, 6), rng.normal(0, 1e6, 6), rng.normal(0, 1e-4, 6))
    ranks = np.array([5, 1, 0, 3])
    got = lines.rows_to_global(ranks, lengths, clock.RowConversions(logs, lengths).to_ns(ticks))
    bounds = np.r_[0, np.cumsum(lengths)]
    want = np.concatenate([lines.to_global(int(r), clock.convert(c, ticks[a:b]))
                           for r, c, a, b in zip(ranks, conversions, bounds[:-1], bounds[1:])])
    assert np.array_equal(got, want) and got.dtype == np.int64
