"""The synthetic trace generator: its logs are valid, the analysis finds exactly what it says, its path holds."""

import csv
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from mpigraph.clock import models as clock
from mpigraph.paths import segments as critical_path
from mpigraph.trace import functions as mpi_functions
from mpigraph.trace import record
from mpigraph.trace import logs as trace
from mpigraph.testing import synth

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 120   # a hang is a failure, not a stuck test run
CASES = [("bsp", "tsc"), ("bsp", "monotonic"), ("halo", "tsc"), ("halo", "monotonic")]


def generate(tmp_path, structure, clock_source="tsc", ranks=5, calls=40, **params):
    out = tmp_path / ("%s-%s" % (structure, clock_source))
    return out, synth.generate(str(out), ranks, calls, structure, clock_source=clock_source, **params)


def analyze(run_dir, nprocs=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIGRAPH_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["MPIGRAPH_QUIET"] = "1"
    cmd = [sys.executable, "-m", "mpigraph", "analyze", str(run_dir)]
    if nprocs:
        cmd = ["mpiexec", "-n", str(nprocs)] + cmd
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert result.returncode == 0, result.stderr


def ns(seconds_text):
    return round(float(seconds_text) * 1e9)


def true_times(log):
    """(start, end) ns of a rank's records, on the generator's true timeline (no clock offsets)."""
    return clock.to_ns(log, log.records["t_start"]), clock.to_ns(log, log.records["t_end"])


# ---- the logs ----------------------------------------------------------------------

@pytest.mark.parametrize("structure,clock_source", CASES)
def test_logs_pass_validation(tmp_path, structure, clock_source):
    out, expected = generate(tmp_path, structure, clock_source)
    run = trace.open_run(str(out))
    p = expected.params
    assert run.world_size == p.ranks and len(run.logs) == p.ranks
    for log in run.logs.values():
        assert log.finalized and not log.recording_dropped
        assert log.n_records == p.records_per_rank
        assert ((log.records["flags"] & record.PART) == 0).sum() == p.calls_per_rank


def test_calls_rounded_to_whole_phases():
    p = synth.Params(ranks=4, calls=100, structure="halo")
    assert p.phases == 16 and p.calls_per_rank == 98 and p.records_per_rank == 162
    assert synth.Params(ranks=4, calls=100, structure="bsp").calls_per_rank == 100


def test_halo_records_as_the_shim_writes_them(tmp_path):
    out, _ = generate(tmp_path, "halo", ranks=4, calls=8)
    log = trace.open_run(str(out)).logs[2]
    r = log.records
    names = [mpi_functions.name_of(f) for f in r["func"]]
    assert names == ["MPI_Init", "MPI_Irecv", "MPI_Irecv", "MPI_Isend", "MPI_Isend"] + ["MPI_Waitall"] * 5 + [
        "MPI_Allreduce", "MPI_Finalize"]
    assert r["peer"][1:5].tolist() == [1, 3, 3, 1] and r["request"][1:5].tolist() == [1, 2, 3, 4]
    parts = r[6:10]
    assert (parts["flags"] & record.PART).all() and (r["flags"][5] & record.PART) == 0
    assert parts["request"].tolist() == [1, 2, 3, 4] and parts["peer"].tolist() == [1, 3, 3, 1]
    assert parts["flags"].tolist() == [record.PART | record.RECV] * 2 + [record.PART | record.SEND] * 2
    assert r["seq"][10] == 1 and r["comm"].max() == 0


def test_sync_samples_follow_the_clock_offsets(tmp_path):
    offsets = np.array([0, 5_000, -7_000, 11_000])
    out, _ = generate(tmp_path, "bsp", ranks=4, calls=10, clock_offsets_ns=offsets)
    run = trace.open_run(str(out))
    for rank, log in run.logs.items():
        parent = int(log.header["sync_parent"])
        if rank:
            assert log.header["sync_init"]["offset_ns"] == offsets[rank] - offsets[parent]
        barrier = log.header["sync_final"]["barrier_ns"]
        assert (barrier[:, 1] >= barrier[:, 0]).all()
    # The same true instant (the path's start) reads differently on each rank by its offset.
    starts = [true_times(run.logs[r])[1][0] for r in range(4)]
    assert np.ptp(np.array(starts) - offsets) < synth.Params().exit_ns


# ---- the analysis finds exactly what the generator says -----------------------------

@pytest.mark.parametrize("structure,clock_source", CASES)
@pytest.mark.parametrize("nprocs", [None, 2])
def test_analysis_counts_and_times(tmp_path, structure, clock_source, nprocs):
    out, expected = generate(tmp_path, structure, clock_source)
    analyze(out, nprocs)
    with open(out / "functions.csv") as f:
        functions = {row["function"]: row for row in csv.DictReader(f)}
    assert set(functions) == set(expected.functions)
    for name, want in expected.functions.items():
        got = functions[name]
        assert int(got["calls"]) == want["calls"], name
        assert [ns(got[c + "_s"]) for c in ("time_total", "time_min", "time_max")] == [
            want["time_total"], want["time_min"], want["time_max"]], name
    ranks = pq.read_table(out / "ranks.parquet").to_pydict()
    p = expected.params
    assert ranks["calls"] == [p.calls_per_rank] * p.ranks
    assert ranks["mpi_time_ns"] == [expected.ranks[r]["mpi_time"] for r in range(p.ranks)]
    run_start = min(expected.ranks[r]["program_start"] for r in range(p.ranks))
    assert ranks["program_end_ns"] == [expected.ranks[r]["program_end"] - run_start for r in range(p.ranks)]
    # The path runs from its first rank's end of MPI_Init to the last MPI_Finalize of the run.
    path = expected.path
    assert path["start"][0] == ranks["program_start_ns"][path["rank"][0]]
    assert path["end"][-1] == max(ranks["program_end_ns"]) == ranks["program_end_ns"][expected.final_rank]


# ---- the known critical path ---------------------------------------------------------

def check_path_against_logs(path, run, run_start):
    """Each segment is where the logs say: calls are records, compute lies between consecutive calls."""
    names = mpi_functions.names_array()
    calls_of = {}
    for rank, log in run.logs.items():
        start, end = true_times(log)
        call = (log.records["flags"] & record.PART) == 0
        calls_of[rank] = (start[call] - run_start, end[call] - run_start, names[log.records["func"][call]])
    for i in range(len(path["rank"])):
        start, end, func = calls_of[int(path["rank"][i])]
        kind, s, e = path["kind"][i], path["start"][i], path["end"][i]
        if kind == "mpi":
            j = np.flatnonzero((start == s) & (end == e))
            assert len(j) == 1 and func[j[0]] == path["function"][i], i
        elif kind == "message":   # ends where the released call ends, starts at an event on the peer
            j = np.flatnonzero(end == e)
            assert len(j) == 1 and func[j[0]] == path["function"][i], i
            peer_start, _, _ = calls_of[int(path["peer"][i])]
            assert (peer_start == s).any(), i
        else:                     # compute: from a call's end to the next call's start, same rank
            j = np.flatnonzero(end == s)
            assert len(j) == 1 and start[j[0] + 1] == e, i


@pytest.mark.parametrize("structure", ["bsp", "halo"])
def test_known_path_is_consistent(tmp_path, structure):
    out, expected = generate(tmp_path, structure, ranks=6, calls=62)
    path = expected.path
    critical_path.segments(path["rank"], path["kind"], path["function"], path["start"], path["end"], path["peer"])
    assert (path["start"][1:] == path["end"][:-1]).all()                   # contiguous
    assert int((path["end"] - path["start"]).sum()) == expected.path_length_ns
    p = expected.params
    messages = path["kind"] == "message"
    assert (path["rank"][messages] != path["peer"][messages]).all()        # messages cross ranks
    # Per phase the slow rank computes right before the collective; the final rank ends the path.
    compute_ranks = path["rank"][path["kind"] == "compute"]
    if structure == "bsp":
        assert compute_ranks[:-1].tolist() == expected.slow_ranks.tolist()
    else:
        waits = path["function"] == "MPI_Waitall"
        assert path["rank"][waits].tolist() == expected.slow_ranks.tolist()
        assert path["peer"][waits].tolist() == expected.late_ranks.tolist()
        assert (expected.late_ranks == (expected.slow_ranks + 1) % p.ranks).all()
    assert path["rank"][-1] == expected.final_rank
    run = trace.open_run(str(out))
    run_start = min(expected.ranks[r]["program_start"] for r in range(p.ranks))
    check_path_against_logs(path, run, run_start)


def test_chosen_slow_ranks(tmp_path):
    slow = np.array([3, 1, 2, 0] * 5)
    out, expected = generate(tmp_path, "bsp", ranks=4, calls=22, slow_ranks=slow)
    assert expected.slow_ranks.tolist() == slow.tolist()
    # The slow rank of each phase starts the collective last.
    run = trace.open_run(str(out))
    starts = np.stack([true_times(run.logs[r])[0][1:-1] for r in range(4)])
    assert starts.argmax(axis=0).tolist() == slow.tolist()
    with pytest.raises(ValueError, match="different slow ranks"):
        synth.Generator(synth.Params(ranks=4, calls=6), slow_ranks=[1, 1, 2, 3])


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="slow_ns too small"):
        synth.Generator(synth.Params(ranks=4, calls=10, slow_ns=10)).rank_records(0)
    with pytest.raises(ValueError, match="late_ns too small"):
        synth.Generator(synth.Params(ranks=4, calls=20, structure="halo", late_ns=0))
    with pytest.raises(ValueError, match="at least 3 ranks"):
        synth.Params(ranks=2, calls=20, structure="halo").check()


def test_cli(tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "mpigraph.testing.synth", str(out), "--ranks", "3",
                             "--calls", "14", "--structure", "halo"], capture_output=True, text=True,
                            timeout=TIMEOUT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(out / "raw")) == ["rank-0.log", "rank-1.log", "rank-2.log"]
    assert (out / "synth.json").exists() and (out / "synth-path.npz").exists()
