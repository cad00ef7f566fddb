"""Per-stage figures of each analysis rank (mpigraph.comm.meter) and the benchmark's per-rank
shares (issue 28: a rank-0 funnel shows even on 2 cores)."""

import os
import re
import sys

import pytest

import mpi_env
from test_benchmarks import run_benchmark
from mpigraph.comm import meter as counting

sys.path.insert(0, os.path.join(mpi_env.REPO, "benchmarks"))
import bench_analysis  # noqa: E402


def test_a_stage_gets_the_bytes_counted_while_it_ran():
    meter = counting.Meter()
    counting.count(sent=5)                       # before the stage: not its own
    with meter.stage("one"):
        counting.count(sent=100, received=7)
        counting.count(received=3)
    with meter.stage("two"):
        pass
    assert [(s.name, s.sent, s.received) for s in meter.stages] == [("one", 100, 10), ("two", 0, 0)]
    assert all(s.wall_s >= 0 and s.cpu_s >= 0 for s in meter.stages)


@pytest.mark.parametrize("values, expected", [
    ([10], True), ([0, 0], True), ([1, 1, 1, 1], True),
    ([3, 2], True),                 # 1.2x and 0.8x of 1/K
    ([3, 1], False),                # 1.5x and 0.5x: rank 1 below 1/1.5 of its share
    ([4, 0, 0, 0], False),          # a funnel: everything on one rank
])
def test_within_one_and_a_half_of_the_fair_share(values, expected):
    k = len(values)
    shares = [bench_analysis.ratio(v, sum(values), k) for v in values]
    assert bench_analysis.within(shares) is expected


def test_cpu_is_judged_from_above_only():
    """A rank with less CPU than its share is no funnel: CPU only has an upper bound."""
    assert bench_analysis.within([1.4, 0.3], upper_only=True) is True
    assert bench_analysis.within([1.6, 0.4], upper_only=True) is False
    assert bench_analysis.within([1.4, 0.3]) is False


def test_ratio_cell_is_a_multiple_of_the_fair_share():
    assert bench_analysis.ratio_cell(bench_analysis.ratio(3, 4, 2)) == "1.50x"
    assert bench_analysis.ratio_cell(bench_analysis.ratio(0, 0, 2)) == "-"


STAGE_ROW = re.compile(r"^  (\w+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+\S+\s+([0-9.]+)\s+(\d+)\s+\S+\s+(\d+)\s+\S+\s+(\d+)\s+\S+$")


def test_bench_analysis_prints_every_rank_of_every_stage(wheel):
    out = run_benchmark(wheel, "bench_analysis.py", "--records", "2e4", "--nprocs", "2", "--repeat", "1",
                        "--algorithms", "dijkstra")
    rows = [m.groups() for m in map(STAGE_ROW.match, out.splitlines()) if m]
    stages = {}
    for name, rank, wall, cpu, in_mpi, records, sent, received in rows:
        assert 0 <= float(in_mpi) <= float(cpu) + 1e-3, (name, rank, cpu, in_mpi)     # a part of the CPU
        stages.setdefault(name, {})[int(rank)] = (int(records), int(sent), int(received))
    assert list(stages) == ["trace", "clock", "match", "metrics", "traffic", "path", "report", "whole"]
    total = int(re.search(r"^generated .*: \d+ ranks, (\d+) records", out, re.M).group(1))
    for name, ranks in stages.items():
        assert sorted(ranks) == [0, 1]
        assert ranks[0][0] + ranks[1][0] == total                 # every record owned once
        # Two ranks: what one sends the other receives.
        assert ranks[0][1] == ranks[1][2] and ranks[1][1] == ranks[0][2], (name, ranks)
    # The whole analysis moves what its stages move.
    for column in (1, 2):
        assert stages["whole"][0][column] == sum(r[0][column] for n, r in stages.items() if n != "whole")
    # dijkstra gathers the graph to rank 0: bytes go there.
    assert stages["path"][1][1] > 0 and stages["path"][0][2] > 0
    # The report: rank 0 hands rank 1 its share of the path's segments to write and asks it the
    # call sites of those on its trace ranks; rank 1 answers, 16 bytes a segment (position and
    # id; at most a segment per record it owns), and sends no calls (each rank writes its own
    # part of calls.parquet: a call's row is tens of bytes).
    assert stages["report"][0][1] > 0
    assert 0 < stages["report"][1][1] <= 16 * stages["report"][1][0]
    assert len(re.findall(r"^  \w+\s+ok: records yes, cpu (yes|NO), bytes (yes|NO); rank 0's CPU "
                          r"(\d+\.\d\dx the ranks' mean \(at most 2x: (yes|NO)\)|: none spent)$", out, re.M)) == len(stages)
