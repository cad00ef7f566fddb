"""Critical path by topological sorting: toposort and parallel-toposort.

Serial tests check the pieces against a brute-force reference and the path
on bulk-synchronous runs (hand-built and a real C program).  The checks that
need several analysis ranks live in tests/mpi_toposort_checks.py and run
under mpiexec with 1, 2, 3 and 4 ranks from test_parallel_equals_sequential_under_mpiexec.
"""

import csv
import os
import shutil
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_env  # noqa: E402
import toposort_traces  # noqa: E402
import tracebuild as tb  # noqa: E402
from mpigraph import analysis, config
from mpigraph.paths import segments as critical_path
from mpigraph.trace import functions as mpi_functions
from mpigraph.paths import toposort
from mpigraph.trace import logs as trace  # noqa: E402

import pytest  # noqa: E402


# -- a brute-force reference ---------------------------------------------------------

def reference_path_intervals(rows):
    """Best (start, end, rank, call) of each group, groups in time order, by definition:
    groups are the connected components of "overlap or start together"; best is the
    longest, then earliest start, lowest rank, lowest call.  O(n^2), for small inputs."""
    n = len(rows)
    parent = list(range(n))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            (s1, e1), (s2, e2) = rows[i][:2], rows[j][:2]
            if (s1 < e2 and s2 < e1) or s1 == s2:
                parent[root(i)] = root(j)
    groups = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(rows[i])
    best = [min(g, key=lambda r: (-(r[1] - r[0]), r[0], r[2], r[3])) for g in groups.values()]
    return sorted(best, key=lambda r: min(x[0] for x in groups[root(rows.index(r))]))


interval_rows = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 12)),
                         min_size=0, max_size=40)


def columns_of(rows):
    """Interval columns from (rank, start, length) triples; call = position on its rank."""
    calls = {}
    out = toposort.empty_intervals()
    values = {name: [] for name in out}
    for rank, start, length in rows:
        calls[rank] = calls.get(rank, -1) + 1
        for name, v in (("start", start), ("end", start + length), ("rank", rank), ("call", calls[rank]),
                        ("before", 1), ("after", 2)):
            values[name].append(v)
    return {name: np.array(values[name], dtype=out[name].dtype) for name in out}


@settings(max_examples=300, deadline=None)
@given(interval_rows)
def test_groups_and_best_intervals_match_the_definition(rows):
    columns = columns_of(rows)
    chosen = toposort.choose(toposort.sort_intervals(columns))
    got = list(zip(chosen["start"].tolist(), chosen["end"].tolist(), chosen["rank"].tolist(),
                   chosen["call"].tolist()))
    as_rows = list(zip(columns["start"].tolist(), columns["end"].tolist(), columns["rank"].tolist(),
                       columns["call"].tolist()))
    assert got == reference_path_intervals(as_rows)
    # the order the rows arrive in does not matter (the parallel version sees ties differently)
    backwards = toposort.choose(toposort.sort_intervals({n: c[::-1] for n, c in columns.items()}))
    assert all(np.array_equal(backwards[n], chosen[n]) for n in chosen)


def test_equal_starts_share_a_group_whatever_their_order():
    # [5,5] then [5,10]: touching by order alone would split them; equal starts must not
    start, end = np.array([5, 5, 10]), np.array([5, 10, 12])
    assert toposort.group_starts(start, end).tolist() == [True, False, True]
    assert toposort.group_starts(start[[1, 0, 2]], end[[1, 0, 2]]).tolist() == [True, False, True]
    # a carried furthest end swallows later starts; a carried equal start continues the group
    assert toposort.group_starts(np.array([7, 20]), np.array([8, 21]), carry_end=15).tolist() == [False, True]
    assert toposort.group_starts(np.array([7]), np.array([7]), carry_end=7, carry_start=7).tolist() == [False]


# -- intervals from a log -------------------------------------------------------------

def open_rank(tmp_path, rows, world_size=1, rank=0):
    tb.write_rank(tmp_path, rank, world_size, rows)
    log = trace.open_log(trace.log_path(str(tmp_path), rank))
    return log, (log.records["t_start"].astype(np.int64), log.records["t_end"].astype(np.int64))


def test_rank_intervals_skip_parts_and_apply_the_threshold(tmp_path):
    wait = tb.rec("MPI_Waitall", 3000, 3500)
    rows = [tb.rec("MPI_Init", 50, 1000), tb.rec("MPI_Isend", 1200, 1300),
            wait, tb.part(wait, request=1), tb.part(wait, request=2),
            tb.rec("MPI_Barrier", 3400, 4000, seq=1),      # starts before the Waitall ends: threaded
            tb.rec("MPI_Finalize", 9000, 9100)]
    log, times = open_rank(tmp_path, rows)
    got = toposort.rank_intervals(log, *times)
    # the parts are not calls; Waitall -> Barrier is negative
    assert got["start"].tolist() == [1000, 1300, 4000]
    assert got["end"].tolist() == [1200, 3000, 9000]
    assert got["call"].tolist() == [0, 1, 3]
    names = mpi_functions.names_array()
    assert names[got["before"]].tolist() == ["MPI_Init", "MPI_Isend", "MPI_Barrier"]
    assert names[got["after"]].tolist() == ["MPI_Isend", "MPI_Waitall", "MPI_Finalize"]
    assert toposort.rank_intervals(log, *times, threshold_ns=201)["start"].tolist() == [1300, 4000]


def test_path_from_chosen_alternates_and_covers_the_run():
    chosen = {"start": np.array([100, 500]), "end": np.array([300, 900]), "rank": np.array([2, 0]),
              "call": np.array([0, 3]), "before": np.array([tb.FID["MPI_Init"], tb.FID["MPI_Allreduce"]]),
              "after": np.array([tb.FID["MPI_Allreduce"], tb.FID["MPI_Finalize"]])}
    path = toposort.path_from_chosen(chosen, run_start=100, run_end=1000)
    assert path["kind"].tolist() == ["compute", "mpi", "compute", "mpi"]     # the empty first mpi is left out
    assert path["rank"].tolist() == [2, 0, 0, 0]
    assert path["function"].tolist() == ["", "MPI_Allreduce", "", "MPI_Finalize"]
    assert path["start"].tolist() == [0, 200, 400, 800] and path["end"].tolist() == [200, 400, 800, 900]
    assert path["duration"].sum() == 900


# -- bulk-synchronous runs: the slow rank of each phase --------------------------------

def compute_ranks(path, longer_than_ns):
    long_work = (path["kind"] == "compute") & (path["duration"] > longer_than_ns)
    return path["rank"][long_work].tolist()


def analyse(run_dir, algorithm, threshold=0.0):
    settings_ = config.Config(algorithm=algorithm, threshold=threshold, quiet=True)
    text = analysis.analyze(str(run_dir), config=settings_)
    with open(os.path.join(str(run_dir), critical_path.CSV_NAME)) as f:
        return text, list(csv.DictReader(f))


@pytest.mark.parametrize("algorithm", toposort.ALGORITHMS)
def test_hand_built_bsp_path_runs_through_the_slow_rank_of_each_phase(tmp_path, algorithm):
    toposort_traces.bsp(tmp_path, ranks=5, phases=6)
    text, rows = analyse(tmp_path, algorithm)
    long_work = [int(r["rank"]) for r in rows if r["kind"] == "compute"
                 and float(r["duration_s"]) * 1e9 > 1.5 * toposort_traces.BSP_BASE_NS]
    assert long_work == [toposort_traces.bsp_slow_rank(p, 5) for p in range(6)]
    ranks = list(csv.DictReader(open(tmp_path / "ranks.csv")))
    run_time = max(float(r["program_end_s"]) for r in ranks) - min(float(r["program_start_s"]) for r in ranks)
    assert sum(float(r["duration_s"]) for r in rows) == pytest.approx(run_time, abs=1e-9)
    assert "found by %s over 1 analysis rank" % algorithm in text and "on the wire" in text


def test_threshold_merges_short_gaps(tmp_path):
    toposort_traces.random_run(tmp_path)
    _, everything = analyse(tmp_path, "toposort")
    _, coarse = analyse(tmp_path, "toposort", threshold=20e-6)
    short = [r for r in coarse if r["kind"] == "compute" and float(r["duration_s"]) < 20e-6]
    assert not short and len(coarse) < len(everything)


class SlowPhasesRun:
    """slow_phases.c on 3 ranks under the shim, analysed in the job with parallel-toposort."""

    PHASES = 6

    def __init__(self, out, stdout):
        self.out = out
        self.measured = {}        # (phase, rank) -> ns of compute the program measured itself
        for line in stdout.splitlines():
            words = line.split()
            if words[:2] == ["slow_phases:", "phase"]:
                self.measured[int(words[2]), int(words[4])] = float(words[6])

    def slowest(self, phase):
        """The rank that computed longest in `phase`, by the program's own clock."""
        return max(range(3), key=lambda rank: self.measured[phase, rank])


@pytest.fixture(scope="module")
def slow_phases_run(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    exe = mpi_env.Builder(str(tmp_path_factory.mktemp("programs"))).build("slow_phases.c", mpi.mpicc)
    out = tmp_path_factory.mktemp("runs") / "slow_phases"
    result = mpi_env.mpirun(mpi, 3, [exe, SlowPhasesRun.PHASES], out=out,
                            rank_env={"MPIGRAPH_ALGORITHM": "parallel-toposort", "MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    run = SlowPhasesRun(out, result.stdout)
    assert len(run.measured) == 3 * SlowPhasesRun.PHASES, result.stdout
    return run


def read_path(run_dir):
    with open(os.path.join(str(run_dir), critical_path.CSV_NAME)) as f:
        return list(csv.DictReader(f))


def test_real_bsp_program_path_picks_the_slow_rank_per_phase(slow_phases_run, tmp_path):
    """The designed slow rank computes 20 ms, the others 5 ms; on a loaded machine a rank
    descheduled between two calls can really be slower, so the oracle is the program's own
    measurement of each rank's compute per phase."""
    in_job = read_path(slow_phases_run.out)
    # A phase's compute is followed by the MPI_Allreduce that waited for it (what runs from
    # MPI_Init to the MPI_Barrier before the phases is start-up, not a phase).
    phases = [int(r["rank"]) for r, after in zip(in_job, in_job[1:]) if r["kind"] == "compute"
              and float(r["duration_s"]) > 10e-3 and after["function"] == "MPI_Allreduce"]
    assert phases == [slow_phases_run.slowest(p) for p in range(SlowPhasesRun.PHASES)], in_job
    # offline, sequential, on a copy of the raw logs: the same path as in the job
    copy = tmp_path / "copy"
    shutil.copytree(slow_phases_run.out / "raw", copy / "raw")
    result = mpi_env.mpigraph(["analyze", copy, "--algorithm", "toposort", "--quiet"])
    assert result.returncode == 0, result.stderr
    assert read_path(copy) == in_job


# -- several analysis ranks ------------------------------------------------------------------

@pytest.fixture(scope="module")
def test_runs(tmp_path_factory, slow_phases_run):
    """Every hand-built trace, and the real run, each in its own directory."""
    base = tmp_path_factory.mktemp("toposort-traces")
    runs = []
    for name, build in toposort_traces.TRACES.items():
        build(base / name)
        runs.append(str(base / name))
    real = base / "slow_phases"
    shutil.copytree(slow_phases_run.out / "raw", real / "raw")
    return runs + [str(real)]


N_MPI_CHECKS = 1 + 8 * 2 * 2 + 1 + 1   # runs given; 8 runs x 2 thresholds x 2 codecs; spanning; pipeline


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_parallel_equals_sequential_under_mpiexec(test_runs, ranks):
    returncode, stdout, stderr = mpi_env.run_mpi_checks(
        "mpi_toposort_checks.py", ranks, {"MPIGRAPH_TEST_RUNS": os.pathsep.join(test_runs)})
    assert returncode == 0, stdout[-6000:] + stderr[-4000:]
    assert stdout.count("%d passed" % N_MPI_CHECKS) == ranks, stdout[-4000:]
