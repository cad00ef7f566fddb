"""Seed 002's queuing-network model (mpigraph.model): MVA reference numbers of specs/model.md,
the inputs read from report files, switch-delay sources, scaling laws and the written outputs.

No MPI here: run directories are written by hand with known values (tests/test_model_runs.py
models a real strong-scaling series).
"""

import csv
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mpigraph.model import mva, network, scaling
from mpigraph.model.api import model_runs
from mpigraph.model.inputs import read_run
from mpigraph.model.report import write_model
from mpigraph.model.runs import model_run
from mpigraph.util import units

# specs/model.md, Must show 1-2: Z = 1 ms, D_sw = 10 us, S = 20 us, M = 1000.
Z, D_SW, S, M = 1e-3, 10e-6, 20e-6, 1000


# ---- MVA: specs/model.md items 1-3 ----------------------------------------------------------

@pytest.mark.parametrize("p, response_us, total_s", [(1, 20.000, 1.030000), (16, 27.855, 1.037855),
                                                     (64, 282.565, None), (128, 1550.000, 2.560000)])
def test_mva_reference_numbers(p, response_us, total_s):
    r = mva.solve(p, Z, D_SW, S)
    assert r.response * 1e6 == pytest.approx(response_us, abs=5e-4)     # the spec gives 3 decimals
    if total_s is not None:
        assert M * r.cycle == pytest.approx(total_s, abs=5e-7)


def test_contention_per_message_at_16_ranks():
    assert mva.solve(16, Z, D_SW, S).contention * 1e6 == pytest.approx(7.855, abs=5e-4)


def test_throughput_saturates_at_one_over_service():
    # At P = 128 the MPI centre is the bottleneck: X = 1/S = 50,000 messages/s.
    assert mva.solve(128, Z, D_SW, S).throughput == pytest.approx(1 / S, rel=1e-12)


@pytest.mark.parametrize("layout", mva.LAYOUTS)
def test_littles_law_at_every_population(layout):
    for p in range(1, 129):
        r = mva.solve(p, Z, D_SW, S, layout)
        assert r.throughput * (r.think + r.switch + r.response) == pytest.approx(p, rel=1e-12)
        # and in the queue alone: Q = X R
        assert r.queue == pytest.approx(r.throughput * r.response, rel=1e-12)


def test_two_customers_by_hand():
    # Shared centre, n = 2: R = S (1 + Q(1)), Q(1) = S / (Z + D + S).
    # Per-rank, 2 centres of S/2: each R_c = S/2 (1 + Q_c(1)), Q_c(1) = (S/2) / (Z + D + S); total 2 R_c.
    z, d, s = 3e-3, 1e-3, 2e-3
    assert mva.solve(2, z, d, s).response == pytest.approx(s * (1 + s / (z + d + s)), rel=1e-14)
    assert mva.solve(2, z, d, s, mva.PER_RANK).response == pytest.approx(s * (1 + s / 2 / (z + d + s)), rel=1e-14)


@pytest.mark.parametrize("p, mpi_time, service_us, contention_s", [(16, 0.030, 21.106, 0.008894),
                                                                   (64, 0.045, 12.505, 0.032495)])
def test_calibrated_mode_reference_numbers(p, mpi_time, service_us, contention_s):
    s = float(mva.calibrate_service(p, M, Z, D_SW, mpi_time))
    assert s * 1e6 == pytest.approx(service_us, abs=5e-4)
    b = mva.breakdown(p, M, M * Z, D_SW, s)
    assert float(b.contention) == pytest.approx(contention_s, abs=5e-7)
    # Calibrated: service + contention is the MPI time it was calibrated to.
    assert float(b.mpi) == pytest.approx(mpi_time, rel=1e-9)


@pytest.mark.parametrize("layout", mva.LAYOUTS)
def test_one_rank_has_no_contention(layout):
    b = mva.breakdown(1, M, M * Z, D_SW, S, layout)
    assert float(b.contention) == 0.0
    assert float(b.total) == pytest.approx(M * (Z + D_SW + S), rel=1e-14)


@pytest.mark.parametrize("p", [1, 2, 16, 128])
def test_zero_service_has_no_contention(p):
    assert float(mva.breakdown(p, M, M * Z, D_SW, 0.0).contention) == 0.0


@pytest.mark.parametrize("p", [2, 16, 64, 128])
def test_four_parts_add_up_to_the_cycle_time(p):
    b = mva.breakdown(p, M, M * Z, D_SW, S)
    r = mva.solve(p, Z, D_SW, S)
    assert float(b.compute + b.switch + b.service + b.contention) == pytest.approx(M * r.cycle, rel=1e-12)
    assert float(b.total) == pytest.approx(M * r.cycle, rel=1e-12)


def test_response_grows_with_service_and_population():
    # What calibrate_service's bisection relies on: R increasing in S (and in P).
    services = np.linspace(0, 50e-6, 26)
    r = mva.solve_many(32, Z, D_SW, services)[0]
    assert (np.diff(r) > 0).all()
    assert mva.solve(33, Z, D_SW, S).response > mva.solve(32, Z, D_SW, S).response


def test_bad_layout_and_negative_inputs_are_user_errors():
    with pytest.raises(mva.ModelError, match="layout"):
        mva.solve(4, Z, D_SW, S, "mesh")
    with pytest.raises(mva.ModelError, match="negative"):
        mva.solve(4, -1.0, D_SW, S)


# ---- run directories written by hand ---------------------------------------------------------

def write_run(path, app_s, mpi_s, calls, hosts=None):
    """A run directory with ranks.parquet (program and MPI time per rank) and calls.parquet.

    calls: [(rank, function, bytes, execution_s)].
    """
    os.makedirs(path, exist_ok=True)
    p = len(app_s)
    pq.write_table(pa.table({
        "rank": np.arange(p), "host": hosts or ["h"] * p,
        "program_time_ns": np.round(np.asarray(app_s) * 1e9).astype(np.int64),
        "mpi_time_ns": np.round(np.asarray(mpi_s) * 1e9).astype(np.int64)}), os.path.join(path, "ranks.parquet"))
    rank, function, nbytes, execution = zip(*calls)
    pq.write_table(pa.table({
        "rank": np.array(rank, np.int64), "function": list(function), "bytes": np.array(nbytes, np.int64),
        "execution_ns": np.round(np.array(execution) * 1e9).astype(np.int64)}), os.path.join(path, "calls.parquet"))
    return str(path)


@pytest.fixture
def two_rank_run(tmp_path):
    calls = [(0, "MPI_Init", 0, 0.5),              # neither a message nor service
             (0, "MPI_Send", 1000, 0.010), (0, "MPI_Isend", 3000, 0.020),
             (0, "MPI_Recv", 1000, 0.030),          # service, not a message
             (0, "MPI_Allreduce", 8, -0.004),       # a message; execution < 0: no service
             (1, "MPI_Recv", 1000, 0.015), (1, "MPI_Recv", 3000, 0.015), (1, "MPI_Send_c", 2000, 0.005),
             (1, "MPI_Allreduce", 8, 0.002), (1, "MPI_Comm_split", 0, 0.001), (1, "MPI_Finalize", 0, 0.3)]
    return write_run(tmp_path / "r2", [1.0, 0.9], [0.2, 0.1], calls)


def test_inputs_from_the_report_files(two_rank_run):
    i = read_run(two_rank_run)
    assert i.population == 2
    np.testing.assert_array_equal(i.messages, [3, 2])                 # rank 0: Send, Isend, Allreduce
    np.testing.assert_array_equal(i.message_bytes, [4008, 2008])
    assert i.mean_bytes == pytest.approx(6016 / 5)
    np.testing.assert_allclose(i.service, [0.060, 0.038], rtol=1e-12)  # clipped, Init/Finalize out
    np.testing.assert_allclose(i.compute, [0.8, 0.8], rtol=1e-12)
    assert i.wall_clock == 1.0


def test_collective_messages_is_configurable(two_rank_run):
    np.testing.assert_array_equal(read_run(two_rank_run, collective_messages=0).messages, [2, 1])
    np.testing.assert_array_equal(read_run(two_rank_run, collective_messages=2).messages, [4, 3])
    with pytest.raises(mva.ModelError, match=">= 0"):
        read_run(two_rank_run, collective_messages=-1)


def test_measured_parts_of_a_run(two_rank_run):
    measured = model_run(read_run(two_rank_run), network.network()[0]).measured()
    assert measured["compute"] == pytest.approx(0.8)
    assert measured["service"] == pytest.approx((0.060 + 0.038) / 2)
    assert measured["contention"] == pytest.approx(((0.2 - 0.060) + (0.1 - 0.038)) / 2)   # the calls' wait
    assert measured["mpi"] == pytest.approx(0.15)
    assert measured["total"] == 1.0                    # the longest rank's program time
    assert math.isnan(measured["switch"])


def test_public_api_names():
    import mpigraph.model

    assert mpigraph.model.model_runs is model_runs


def test_missing_report_files_say_how_to_make_them(tmp_path):
    with pytest.raises(mva.ModelError, match="mpigraph analyze"):
        read_run(str(tmp_path))


def test_one_rank_run_is_modelled_exactly(tmp_path):
    # P = 1, measured service, no switch delay: T_model = T_comp + T_svc = T_app, no contention.
    run = write_run(tmp_path / "r1", [2.0], [0.5], [(0, "MPI_Send", 100, 0.2), (0, "MPI_Recv", 100, 0.3)])
    m = model_run(read_run(run), network.network()[0])
    assert m.modelled()["contention"] == 0.0
    assert m.modelled()["total"] == pytest.approx(2.0, rel=1e-9)
    assert m.modelled()["service"] == pytest.approx(0.5, rel=1e-9)


def test_calibrated_mode_in_sample_equals_mean_app_time_plus_switch(two_rank_run):
    net = network.Network(1e-6, 1e-9, "given")
    m = model_run(read_run(two_rank_run), net, service="calibrated")
    i = m.inputs
    # specs/model.md: in-sample T_model = T_app + T_sw by construction (mean over ranks).
    assert m.modelled()["total"] == pytest.approx(i.app.mean() + m.messages * m.switch_delay, rel=1e-9)
    assert m.modelled()["mpi"] == pytest.approx(i.mpi.mean(), rel=1e-9)
    # and per rank, each against its own T_mpi
    np.testing.assert_allclose(m.per_rank.mpi, i.mpi, rtol=1e-9)


def test_per_rank_parts_add_up_and_compute_is_never_negative(tmp_path):
    # Rank 1's MPI time exceeds its program time (a clock repair can do that): compute 0, not < 0.
    run = write_run(tmp_path / "r", [1.0, 1.0, 1.0], [0.3, 1.2, 0.4],
                    [(r, "MPI_Send", 64, 0.05) for r in range(3)] * 4)
    m = model_run(read_run(run), network.network(latency="2us", bandwidth="1GB/s")[0])
    b = m.per_rank
    assert (b.compute >= 0).all() and b.compute[1] == 0.0
    np.testing.assert_allclose(b.compute + b.switch + b.service + b.contention, b.total, rtol=1e-14)
    assert m.switch_delay == pytest.approx(2e-6 + 64 / 1e9)
    parts = m.modelled()
    assert parts["total"] == pytest.approx(parts["compute"] + parts["switch"] + parts["service"]
                                           + parts["contention"], rel=1e-14)


# ---- switch delay sources --------------------------------------------------------------------

def test_params_csv_of_mpigraph_calibrate_uses_the_eager_row(tmp_path):
    path = tmp_path / "params.csv"
    path.write_text("protocol,latency_s,per_byte_s,latency_lo_s,latency_hi_s,per_byte_lo_s,per_byte_hi_s,"
                    "threshold_bytes,host_pair\n"
                    "rendezvous,9e-6,1e-10,8e-6,1e-5,9e-11,2e-10,65536,a-b\n"
                    "eager,1.5e-6,2e-10,1e-6,2e-6,1e-10,3e-10,65536,a-b\n")
    net = network.read_params(str(path))
    assert (net.latency_s, net.per_byte_s) == (1.5e-6, 2e-10)
    assert net.delay(1000) == pytest.approx(1.5e-6 + 2e-7)


def test_params_csv_without_eager_row_uses_the_first(tmp_path):
    path = tmp_path / "params.csv"
    path.write_text("latency_s,per_byte_s\n3e-6,1e-9\n5e-6,2e-9\n")
    assert network.read_params(str(path)).latency_s == 3e-6


def test_params_csv_without_the_columns_is_a_user_error(tmp_path):
    path = tmp_path / "params.csv"
    path.write_text("lat,bw\n1,2\n")
    with pytest.raises(mva.ModelError, match="latency_s and per_byte_s"):
        network.read_params(str(path))


@pytest.mark.parametrize("text, seconds", [("1us", 1e-6), ("2.5 ms", 2.5e-3), ("500ns", 5e-7), ("1e-6", 1e-6)])
def test_parse_time(text, seconds):
    assert units.parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, rate", [("10GB/s", 1e10), ("1GiB/s", 2.0 ** 30), ("100Gb/s", 1.25e10),
                                        ("1e9", 1e9), ("200 MB/s", 2e8)])
def test_parse_bandwidth(text, rate):
    assert units.parse_bandwidth(text) == pytest.approx(rate)


def test_bad_bandwidth_is_a_user_error():
    with pytest.raises(units.UnitError, match="10GB/s"):
        units.parse_bandwidth("fast")


def test_defaults_one_host_zero_several_hosts_assumed_with_a_warning():
    one, warn_one = network.network(hosts=1)
    assert one.delay(1e6) == 0.0 and not warn_one
    many, warn_many = network.network(hosts=2)
    assert many.delay(0) == 1e-6 and many.per_byte_s == 1e-10 and "--params" in warn_many[0]


# ---- scaling laws ----------------------------------------------------------------------------

LAWS = dict(a=100.0, b=3.0, c=4e6, d=0.01, e=0.002)
AGG_COMPUTE = 8.0       # aggregate compute constant: perfect strong scaling of compute
NET = network.Network(2e-6, 1e-9, "given")


def lawful_point(p):
    """A run that follows the laws exactly, its wall clock the model's own prediction."""
    laws = scaling.Laws(counts=np.array([1.0, 1024.0]), compute=np.array([AGG_COMPUTE] * 2), **LAWS)
    wall = float(scaling.predict(laws, p, NET).parts.total)
    return scaling.Point(p, LAWS["a"] * p + LAWS["b"] * p * p, LAWS["c"] / p ** 2,
                         LAWS["d"] * p + LAWS["e"] * p * p, AGG_COMPUTE, wall)


def test_laws_are_recovered_from_lawful_runs():
    laws = scaling.fit([lawful_point(p) for p in (2, 4, 8, 16)])
    for name, value in LAWS.items():
        assert getattr(laws, name) == pytest.approx(value, rel=1e-9)


def test_leave_one_out_of_lawful_runs_is_exact_inside_and_warned_outside():
    points = [lawful_point(p) for p in (2, 4, 8)]
    loo = scaling.leave_one_out(points, NET)
    assert [p for p, _, _ in loo] == [2, 4, 8]
    for p, measured, prediction in loo:
        assert prediction.parts.total == pytest.approx(measured, rel=1e-9)
        # P = 2 and 8 are outside the other two counts: compute held there, with a warning.
        assert bool(prediction.warnings) == (p in (2, 8))


def test_compute_is_interpolated_between_measured_counts():
    laws = scaling.Laws(1.0, 0.0, 0.0, 0.0, 0.0, np.array([2.0, 6.0]), np.array([10.0, 14.0]))
    prediction = scaling.predict(laws, 4, network.Network(0.0, 0.0, "none"))
    assert float(prediction.parts.compute) == pytest.approx(12.0 / 4)
    assert not prediction.warnings


def test_prediction_needs_three_counts(two_rank_run, tmp_path):
    other = write_run(tmp_path / "r1", [2.0], [0.5], [(0, "MPI_Send", 100, 0.2)])
    with pytest.raises(mva.ModelError, match="3 or more process counts"):
        model_runs([other, two_rank_run], predict=[8])


# ---- the whole of it, on hand-written runs at P = 1, 2, 4 -------------------------------------

def strong_scaling_runs(tmp_path):
    """Runs with compute 2 s split over P, 10 messages of 4096 B and 1 ms service each per rank."""
    dirs = []
    for p in (1, 2, 4):
        compute, service, wait = 2.0 / p, 0.010, 0.002 * (p - 1)
        calls = [(r, "MPI_Send", 4096, 0.001) for r in range(p) for _ in range(10)]
        dirs.append(write_run(tmp_path / ("p%d" % p), [compute + service + wait] * p, [service + wait] * p, calls))
    return dirs


def test_model_runs_tables_text_and_files(tmp_path):
    dirs = strong_scaling_runs(tmp_path)
    result = model_runs(dirs, latency="1us", bandwidth="1GB/s", predict=[8])
    rows = result.table.to_pylist()
    assert result.table.column_names == ["P", "run", "source", "component", "measured", "modelled", "rel_error"]
    by = {(r["P"], r["source"], r["component"]): r for r in rows}
    for p in (1, 2, 4):
        parts = sum(by[(p, "run", c)]["modelled"] for c in ("compute", "switch", "service", "contention"))
        assert parts == pytest.approx(by[(p, "run", "total")]["modelled"], rel=1e-12)
        assert by[(p, "run", "compute")]["modelled"] == pytest.approx(2.0 / p, rel=1e-9)
        assert by[(p, "run", "switch")]["modelled"] == pytest.approx(10 * (1e-6 + 4096e-9), rel=1e-9)
        assert math.isfinite(by[(p, "loo", "total")]["rel_error"])
    assert by[(1, "run", "contention")]["modelled"] == 0.0
    assert by[(8, "predict", "total")]["measured"] is None
    # Aggregates follow the laws exactly here (messages 10 P, service 0.01 P): the fit finds them.
    assert result.laws.a == pytest.approx(10.0) and result.laws.b == pytest.approx(0.0, abs=1e-9)
    assert result.laws.d == pytest.approx(0.010) and result.laws.e == pytest.approx(0.0, abs=1e-9)
    assert "leave-one-out error" in result.text and "P=8 is outside" in result.text

    out = tmp_path / "out"
    written = write_model(result, str(out))
    assert sorted(os.path.basename(w) for w in written) == ["model.csv", "model.parquet", "model.svg",
                                                             "model.txt", "model_ranks.csv"]
    assert pq.read_table(out / "model.parquet").equals(result.table)
    with open(out / "model.csv", newline="") as f:
        csv_rows = list(csv.DictReader(f))
    assert len(csv_rows) == result.table.num_rows and csv_rows[0]["component"] == "compute"
    svg = ET.parse(out / "model.svg").getroot()
    assert svg.tag.endswith("svg")
    ranks = result.ranks.to_pylist()
    assert len(ranks) == 1 + 2 + 4 and all(r["compute"] >= 0 for r in ranks)


def test_summary_paragraph_replaced_not_repeated(tmp_path):
    dirs = strong_scaling_runs(tmp_path)
    summary = os.path.join(dirs[-1], "summary.txt")
    with open(summary, "w") as f:
        f.write("mpigraph report\nthe run's own summary\n")
    result = model_runs(dirs)
    write_model(result, dirs[-1], summary=True)
    write_model(result, dirs[-1], summary=True)
    text = open(summary).read()
    assert text.startswith("mpigraph report\nthe run's own summary\n")
    assert text.count("Queuing-network model (seed 002)") == 1


def test_cli_user_error_exits_2_with_the_fix(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mpigraph", "model", str(tmp_path / "nothing")],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.startswith("mpigraph: error:") and "mpigraph analyze" in out.stderr
