"""Known answers for the waits of every collective pattern, in the tables and the graph (issue 27).

tests/programs/collective_patterns.c runs on 3 ranks under the shim, one mode per run
(see its header): one rank computes DELAY_MS (IDELAY_MS for iallreduce) more than the
others before the collective.  Each rank prints when it really called the collective
(CLOCK_MONOTONIC, one clock on one host), so the expected wait of every member comes from
the program, not from the trace: a member waits for the rank its pattern names,
    1-to-N (Bcast, Scatter, root 1 late): the non-roots wait max(0, root call - own call),
                                           the root 0;
    N-to-1 (Reduce, Gather, root 0, rank 2 late): the root waits max(0, latest other call -
                                           own call); a non-root its MPI held (it left after
                                           the root came, as MPICH's do) max(0, root call -
                                           own call), the others 0;
    Scan (rank 1 late): rank i waits max(0, latest call of ranks < i - own call), the ranks
                        of the communicator (one that reverses the world ranks too), or
                        for the latest call of all where its MPI held it until then (it
                        left after that came: MPICH's recursive doubling holds rank 0);
    Iallreduce + compute + Wait (rank 2 late): the Wait of rank i waits max(0, latest
                                           Iallreduce call - own Wait call), the
                                           Iallreduce itself 0;
    Ibcast + Wait (root 1 late): the Wait of a non-root waits max(0, root's Ibcast call -
                                           own Wait call), the root's 0;
    Ireduce/Ibcast of 8 MiB + Wait: a Wait the MPI held until a member came waits for it as
                                           a blocking member does, from the Wait's call;
each within the call's duration.  The program's clock reading and the shim's differ by
the shim's overhead (microseconds) unless a rank is descheduled in between, which a loaded
machine does now and then: the waits must agree within TOLERANCE (a tenth of the delay) for
most members, and the expected waits must be real ones (the rank waited for came at least
half the delay later, and the waits are at least twice the tolerance), so a rule that gets the
pattern wrong (a barrier's max start - start for all, as before) fails.

The modes run under the mpich wheel, and the checks of the waits, the path and the user
tables again under Open MPI where it is installed (.ci/run installs it): its algorithms hold
other members than MPICH's, and the numbers must follow what its trace shows.

The runs use MPIGRAPH_CLOCK=none: the ranks share one host's clock, and the clock model's
estimate is not what these tests test.
"""

import csv
import os
import re
import shutil
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

import mpi_env
from mpigraph.paths import segments as critical_path

RANKS = 3
ITERATIONS = 10
DELAY_NS = 20e6                   # DELAY_MS of collective_patterns.c
IDELAY_NS, COMPUTE_NS = 8e6, 1e6  # IDELAY_MS, COMPUTE_MS
TOLERANCE = 0.1                   # of the delay: a member's wait against the program's clock
ALGORITHMS = ("dijkstra", "delta-stepping", "parallel-dijkstra", "parallel-delta-stepping")

# mode: (function, late rank, root, wait state of a waiting member (N-to-1: of the root, of the
# others), the ranks that wait about the delay (some only where their MPI holds them: HELD_ONLY),
# the ranks whose wait is 0 exactly: they wait for nobody, or for a rank that came before)
MODES = {
    "bcast": ("MPI_Bcast", 1, 1, "late_broadcast", [0, 2], [1]),
    "scatter": ("MPI_Scatter", 1, 1, "late_broadcast", [0, 2], [1]),
    # Rank 1 comes with the root: what it waits for the root is a little either way.
    "reduce": ("MPI_Reduce", 2, 0, ("early_reduce", "held"), [0], [2]),
    "gather": ("MPI_Gather", 2, 0, ("early_reduce", "held"), [0], [2]),
    # Scan: rank 0, by its pattern waiting for nobody, exchanges with the late rank 1 in MPICH.
    "scan": ("MPI_Scan", 1, -1, "early_scan", [0, 2], [1]),
    # Scan on a communicator whose rank order is MPI_COMM_WORLD's reversed: its order counts.
    "scan_reversed": ("MPI_Scan", 1, -1, "early_scan", [0, 2], [1]),
    "iallreduce": ("MPI_Wait", 2, -1, "wait_nxn", [0, 1], [2]),
    "ibcast": ("MPI_Wait", 1, 1, "late_broadcast", [0, 2], [1]),
    # A late member of a 1-to-N collective: nobody waits about the delay (a barrier's rule, as
    # before, had the others wait for the late rank).  A late root of an N-to-1: the non-roots
    # wait for it where their MPI held them until it came, as MPICH's shared-memory Reduce does.
    "bcast_late_member": ("MPI_Bcast", 2, 1, "late_broadcast", [], [1, 2]),
    "reduce_late_root": ("MPI_Reduce", 0, 0, ("early_reduce", "held"), [1, 2], [0]),
    # 8 MiB: MPICH holds the root and rank 1 until the late rank 2 comes, beyond the pattern.
    "bcast_big": ("MPI_Bcast", 2, 0, ("held", "late_broadcast"), [0, 1], [2]),
    "reduce_big": ("MPI_Reduce", 2, 0, ("early_reduce", "held"), [0, 1], [2]),
    # The same in a Wait: MPICH keeps an 8 MiB MPI_Ireduce's non-roots in their MPI_Wait until
    # the late root comes, and an 8 MiB MPI_Ibcast's root until the late rank 2 comes.
    "ireduce_big": ("MPI_Wait", 0, 0, ("early_reduce", "held"), [1, 2], [0]),
    "ibcast_big": ("MPI_Wait", 2, 0, ("held", "late_broadcast"), [0], [2]),
}

# The waiting ranks of MODES that wait only because their MPI held them beyond the pattern, as
# MPICH does (the others wait by the pattern, on any MPI).
HELD_ONLY = {"scan": [0], "scan_reversed": [2], "reduce_late_root": [1, 2], "bcast_big": [0, 1], "reduce_big": [1],
             "ireduce_big": [1, 2], "ibcast_big": [0]}

# The collective of the modes whose members complete in an MPI_Wait (MODES' function).
NONBLOCKING = {"iallreduce": "MPI_Iallreduce", "ibcast": "MPI_Ibcast", "ireduce_big": "MPI_Ireduce",
               "ibcast_big": "MPI_Ibcast"}
ROOTED_OR_SCAN = ("MPI_Bcast", "MPI_Scatter", "MPI_Reduce", "MPI_Gather", "MPI_Scan", "MPI_Ibcast", "MPI_Ireduce")


def collective(mode):
    return NONBLOCKING.get(mode, MODES[mode][0])


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


_RUNS = {}


@pytest.fixture
def run(request, builder, tmp_path_factory):
    """(mode, run directory, program's times {name: (iterations, ranks) array}, MPI name) of one
    mode ("openmpi:MODE": under Open MPI, whose algorithms hold other members than MPICH's: the
    numbers must follow its trace), run once."""
    key = request.param
    mpi_name, mode = mpi_env.mpi_of(key)
    if key not in _RUNS:
        mpi, _ = mpi_env.mpi_for(request, key)
        exe = builder.build("collective_patterns.c", mpi.mpicc)      # once per MPI: the builder keeps it
        out = tmp_path_factory.mktemp("runs") / key.replace(":", "-")
        result = mpi_env.mpirun(mpi, RANKS, [exe, mode, ITERATIONS], out=out,
                                rank_env={"MPIGRAPH_CLOCK": "none", "MPIGRAPH_QUIET": "1"})
        assert result.returncode == 0, result.stdout + result.stderr
        _RUNS[key] = out, program_times(result.stdout)
    return (mode,) + _RUNS[key] + (mpi_name,)


def program_times(stdout):
    """{late, call, wait: (iterations, ranks) float arrays of ns} from the program's lines."""
    times = {name: np.full((ITERATIONS, RANKS), np.nan) for name in ("late", "call", "wait")}
    pattern = re.compile(r"collective_patterns: iteration (\d+) rank (\d+) late_ns (\d+) call_ns (\d+) wait_ns (\d+)")
    for it, rank, late, call, wait in pattern.findall(stdout):
        for name, value in (("late", late), ("call", call), ("wait", wait)):
            times[name][int(it), int(rank)] = float(value)
    assert not any(np.isnan(t).any() for t in times.values()), stdout
    return times


def traced(run_dir, function):
    """{column: (iterations, ranks) array} of the calls of `function` in calls.parquet."""
    calls = pq.read_table(run_dir / "calls.parquet").to_pydict()
    function_col = np.array(calls["function"])
    out = {}
    for name in ("start_ns", "end_ns", "wait_before_ns", "wait_after_ns", "execution_ns", "wait_state", "rank"):
        column = np.array(calls[name])
        per_rank = [column[(function_col == function) & (np.array(calls["rank"]) == r)] for r in range(RANKS)]
        assert all(len(p) == ITERATIONS for p in per_rank), (function, [len(p) for p in per_rank])
        out[name] = np.stack(per_rank, axis=1)
    return out


def arrivals(run_dir, mode):
    """(iterations, ranks) starts of the mode's collective calls in the trace: when each member came."""
    return traced(run_dir, collective(mode))["start_ns"]


def held_members(t, arrived, root):
    """(by the root, by the last member): (iterations, ranks) masks of the members whose traced
    calls `t` (the collective's, or the Waits that completed it) ended after the root came, after
    the last member came (`arrived`: arrivals): their MPI held them so long."""
    return t["end_ns"] >= arrived[:, [max(root, 0)]], t["end_ns"] >= arrived.max(axis=1, keepdims=True)


def expected_waits(mode, times, held, lead=False):
    """Each member's wait by the pattern's rule, from the program's clock (ns; lead=True: how
    long after the rank it waits for it came, negative, by their collective calls).  `held`:
    held_members; a member of a rooted collective or a Scan held until the last member came
    waits for it, from its call or, completed in a Wait, from its Wait's call."""
    call = times["call"]
    own = times["wait"] if mode in NONBLOCKING and not lead else call      # where its wait begins
    expect = np.zeros_like(call)
    function, late, root = MODES[mode][:3]
    by_root, by_last = held
    if mode in ("bcast", "scatter", "bcast_late_member", "bcast_big", "ibcast", "ibcast_big"):
        expect = call[:, [root]] - own
        expect[:, root] = 0
    elif mode in ("reduce", "gather", "reduce_late_root", "reduce_big", "ireduce_big"):
        expect = np.where(by_root, call[:, [root]] - own, 0)
        others = np.delete(call, root, axis=1)
        expect[:, root] = others.max(axis=1) - own[:, root]
    elif mode in ("scan", "scan_reversed"):
        for i in range(RANKS):
            # world rank r is rank RANKS - 1 - r in the reversed one: the ranks after it go first
            earlier = call[:, :i] if mode == "scan" else call[:, i + 1:]
            expect[:, i] = earlier.max(axis=1) - call[:, i] if earlier.shape[1] else -np.inf
        expect[np.isinf(expect)] = 0
    else:       # the Wait of each rank waits for the last MPI_Iallreduce
        expect = call.max(axis=1, keepdims=True) - times["wait"]
    if collective(mode) in ROOTED_OR_SCAN:
        expect = np.where(by_last, np.maximum(expect, call.max(axis=1, keepdims=True) - own), expect)
    return expect if lead else np.maximum(expect, 0)


def delay(mode):
    return IDELAY_NS - COMPUTE_NS if mode == "iallreduce" else DELAY_NS


@pytest.mark.parametrize("run", mpi_env.also_under_openmpi(MODES), indirect=True)
def test_each_member_waits_for_whom_its_pattern_says(run):
    mode, run_dir, times, mpi_name = run
    function, late, root, state, waiting, zero = MODES[mode]
    t = traced(run_dir, function)
    duration = t["end_ns"] - t["start_ns"]
    arrived = arrivals(run_dir, mode)
    held = held_members(t, arrived, root)
    want = np.minimum(expected_waits(mode, times, held), duration)
    # The members the pattern lets go without waiting: nothing at all (a barrier's rule
    # gave the early ones max start - start: the late rank's lead over them).  That is, the
    # members that wait for nobody, and those that came clearly after the ranks they wait for
    # (by the program's clock: a loaded machine now and then holds another rank back longer
    # than the designed delay, and then the late rank rightly waits for it).
    lead = expected_waits(mode, times, held, lead=True)[:, zero]
    sure = (lead == 0) | (lead <= -TOLERANCE * delay(mode))
    assert np.mean(sure) >= 0.7, lead
    assert (t["wait_before_ns"][:, zero][sure] == 0).all(), t["wait_before_ns"]
    # The members waiting by the pattern: the rank they wait for really came late by about the
    # delay, and their waits are real ones (a Wait waits less: its collective call took part of
    # it); the members that wait only where their MPI held them: held by MPICH, which holds them
    # all (another MPI may let them go: they wait for nobody then, as the rule says) ...
    held_only = HELD_ONLY.get(mode, [])
    by_pattern = [r for r in waiting if r not in held_only]
    if by_pattern:
        came = expected_waits(mode, times, held, lead=True)[:, by_pattern]
        assert np.median(came) >= delay(mode) / 2, came
    for ranks in (by_pattern, held_only if mpi_name == "mpich" else []):
        if ranks:
            assert np.median(want[:, ranks]) >= 2 * TOLERANCE * delay(mode), want
    # ... and every wait is what the program's clock says, within a tenth of the delay for most.
    error = np.abs(t["wait_before_ns"] - want)
    assert np.median(error) <= TOLERANCE * delay(mode), (t["wait_before_ns"], want)
    assert np.mean(error <= TOLERANCE * delay(mode)) >= 0.7, (t["wait_before_ns"], want)
    # Wait states name the pattern; no wait after but for N-to-N; execution the rest, never negative.
    if isinstance(state, tuple):
        state = np.where(np.arange(RANKS) == root, *state)
    if collective(mode) in ("MPI_Bcast", "MPI_Scatter", "MPI_Ibcast"):   # a non-root held for another than the root
        by_last = held[1] & (arrived[:, [root]] < arrived.max(axis=1, keepdims=True))
        state = np.where(by_last, "held", state)
    assert ((t["wait_state"] == state) == (t["wait_before_ns"] > 0)).all(), t["wait_state"]
    assert (t["wait_after_ns"] == 0).all()
    assert (t["execution_ns"] == duration - t["wait_before_ns"]).all() and (t["execution_ns"] >= 0).all()


@pytest.mark.parametrize("run", ["iallreduce"], indirect=True)
def test_a_nonblocking_collective_is_all_execution_and_an_instance(run):
    mode, run_dir, times, _ = run
    t = traced(run_dir, "MPI_Iallreduce")
    assert (t["wait_before_ns"] == 0).all() and (t["execution_ns"] == t["end_ns"] - t["start_ns"]).all()
    inst = pq.read_table(run_dir / "collectives.parquet").to_pydict()
    mine = [i for i, f in enumerate(inst["function"]) if f == "MPI_Iallreduce"]
    assert len(mine) == ITERATIONS and all(inst["members"][i] == RANKS for i in mine)
    # The last rank is the one the program's clock says came last where it came clearly last;
    # the designed late rank at most instances.
    last = np.array([inst["last_rank"][i] for i in mine])
    order = np.sort(times["call"], axis=1)
    clear = order[:, -1] - order[:, -2] > TOLERANCE * delay(mode)
    assert (last[clear] == times["call"].argmax(axis=1)[clear]).all(), (last, times["call"])
    assert np.mean(last == MODES[mode][1]) >= 0.7, last
    # An instance's wait is its members' waits, charged to their Waits.
    waits = traced(run_dir, "MPI_Wait")["wait_before_ns"].sum(axis=1)
    assert [inst["wait_total_ns"][i] for i in mine] == waits.tolist()


@pytest.mark.parametrize("run", mpi_env.also_under_openmpi(MODES), indirect=True)
def test_the_critical_path_runs_through_the_late_rank(run):
    """The graph's edges follow the same rule: the path goes back from the waiting members to
    the late rank's arrival and through its long compute, which is nearly all of the run: of
    each iteration, the late rank computes the delay, the others at most BASE_MS (2 ms) or
    COMPUTE_MS (1 ms) that overlaps it.  The big collectives take long themselves (8 MiB each):
    there the path holds the late rank's compute, and the others only their calls' execution."""
    mode, run_dir, _, _ = run
    late = MODES[mode][1]
    ranks = read_csv(run_dir / "ranks.csv")
    on_path = np.array([float(r["time_on_path_s"]) for r in ranks])
    if mode.endswith("_big"):
        compute = np.array([float(r["compute_s"]) for r in ranks])
        assert on_path[late] >= 0.9 * ITERATIONS * DELAY_NS / 1e9, on_path
        execution = np.array([float(r["execution_s"]) for r in ranks])
        assert (np.delete(on_path, late) <= np.delete(execution + compute, late)).all(), (on_path, execution)
        return
    assert on_path.argmax() == late and on_path[late] >= 0.6 * on_path.sum(), on_path


# The modes whose graphs every algorithm searches: one per kind of edge (scatter, gather, scan
# and bcast_late_member have bcast's, reduce's and scan_reversed's kinds; six analyses a mode).
ALGORITHM_MODES = [mode for mode in MODES if mode not in ("scatter", "gather", "scan", "bcast_late_member")]


@pytest.mark.parametrize("run", ALGORITHM_MODES, indirect=True)
def test_every_graph_algorithm_gives_the_same_path(run, tmp_path):
    mode, run_dir, _, _ = run
    want = read_csv(run_dir / critical_path.CSV_NAME)
    for algorithm in ALGORITHMS[1:]:
        assert analyse_copy(run_dir, tmp_path / algorithm, algorithm) == want, algorithm
    # Global synchronisation points (the Barriers) split the graph or not: the same path.
    assert analyse_copy(run_dir, tmp_path / "no-splits", "dijkstra", splits="off") == want
    assert analyse_copy(run_dir, tmp_path / "toposort", "toposort") == \
        analyse_copy(run_dir, tmp_path / "parallel-toposort", "parallel-toposort")


@pytest.mark.parametrize("run", ["scan", "iallreduce", "reduce_late_root", "ireduce_big"], indirect=True)
def test_two_analysis_ranks_give_the_same_tables(run, tmp_path):
    """The members of an instance meet on its owner as partials and their waits as sums: the
    tables of 2 analysis ranks (rank 0's trace ranks on one, the others on the other) are those of 1."""
    _, run_dir, _, _ = run
    analyse_copy(run_dir, tmp_path / "one", "dijkstra")
    analyse_copy(run_dir, tmp_path / "two", "dijkstra", nprocs=2)
    for name in ("calls.parquet", "collectives.parquet", "waitstates.parquet", "ranks.parquet"):
        assert pq.read_table(tmp_path / "two" / name).equals(pq.read_table(tmp_path / "one" / name)), name


def analyse_copy(run_dir, where, algorithm, clock="none", nprocs=None, splits="on"):
    """`mpigraph analyze` on a copy of the raw logs (with the run's clock method); returns the path rows."""
    shutil.copytree(run_dir / "raw", where / "raw")
    result = mpi_env.mpigraph(["analyze", where, "--algorithm", algorithm, "--quiet"], nprocs=nprocs,
                              env_extra={"MPIGRAPH_CLOCK": clock, "MPIGRAPH_SPLITS": splits})
    assert result.returncode == 0, result.stdout + result.stderr
    return read_csv(where / critical_path.CSV_NAME)


@pytest.mark.parametrize("run", mpi_env.also_under_openmpi(MODES), indirect=True)
def test_user_tables_hold_no_negative_execution_and_shares_within_0_to_100(run):
    _, run_dir, _, _ = run
    check_user_tables(run_dir)


def check_user_tables(run_dir):
    """ranks.csv, functions.csv and summary.txt: execution >= 0, imbalance within [0, 1]."""
    for row in read_csv(run_dir / "ranks.csv"):
        assert float(row["execution_s"]) >= 0 and float(row["wait_s"]) <= float(row["mpi_time_s"]) + 1e-9, row
        assert 0 <= float(row["imbalance"]) <= 1, row
    for row in read_csv(run_dir / "functions.csv"):
        assert float(row["execution_s"]) >= 0, row
    lines = (run_dir / "summary.txt").read_text().splitlines()
    for title in ("Imbalance and wait states per process", "Top imbalanced collectives"):
        at = [i for i, line in enumerate(lines) if line.startswith(title)]
        if not at:
            assert title.startswith("Top") and "Collectives: none" in lines, title
            continue
        header = lines[at[0] + 1].split("  ")
        header = [h.strip() for h in header if h.strip()]
        body = []
        for line in lines[at[0] + 2:]:
            if not line.strip():
                break
            body.append(line.split())
        assert body, title
        percent = [float(cell[:-1]) for row in body for cell in row if cell.endswith("%")]
        assert len(percent) == len(body) and all(0 <= p <= 100 for p in percent), (title, body)
        exec_col = header.index("execution s")
        assert all(float(row[exec_col + (len(row) - len(header))]) >= 0 for row in body), (title, body)


# ---- the other test programs and the demo ---------------------------------------------------

# program: (ranks, arguments); calls.c has every collective kind, MPI_Ibarrier among them.
OTHER_PROGRAMS = {"calls.c": (3, []), "slow_phases.c": (3, [4]), "unreceived.c": (2, []), "calls_py.py": (3, [])}


@pytest.fixture(scope="module")
def other_runs(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("other_programs")))
    runs = {}
    for source, (ranks, args) in OTHER_PROGRAMS.items():
        out = tmp_path_factory.mktemp("runs") / source.replace(".", "_")
        argv = [sys.executable, os.path.join(mpi_env.PROGRAMS, source)] if source.endswith(".py") \
            else [builder.build(source, mpi.mpicc)]
        result = mpi_env.mpirun(mpi, ranks, argv + args, out=out,
                                rank_env={"MPIGRAPH_QUIET": "1"})
        assert result.returncode == 0, result.stdout + result.stderr
        runs[source] = out
    out = tmp_path_factory.mktemp("runs") / "demo"
    result = mpi_env.mpigraph(["demo", "--out", out])
    assert result.returncode == 0, result.stdout + result.stderr
    runs["demo"] = out
    return runs


@pytest.mark.parametrize("name", list(OTHER_PROGRAMS) + ["demo"])
def test_other_programs_hold_no_negative_execution_and_shares_within_0_to_100(other_runs, name):
    check_user_tables(other_runs[name])


def test_the_nonblocking_barrier_of_calls_c_is_an_instance_completed_in_its_wait(other_runs):
    """calls.c step 10: MPI_Ibarrier then MPI_Wait on every rank: one complete instance, whose
    wait is charged to the Waits (wait states of a barrier), none to the MPI_Ibarrier calls."""
    run_dir = other_runs["calls.c"]
    inst = pq.read_table(run_dir / "collectives.parquet").to_pydict()
    ibarrier = [i for i, f in enumerate(inst["function"]) if f == "MPI_Ibarrier"]
    assert len(ibarrier) == 1 and inst["members"][ibarrier[0]] == 3 and inst["complete"][ibarrier[0]]
    calls = pq.read_table(run_dir / "calls.parquet").to_pydict()
    rows = [i for i, f in enumerate(calls["function"]) if f == "MPI_Ibarrier"]
    assert all(calls["wait_before_ns"][i] == 0 and calls["wait_state"][i] == "" for i in rows)
    # The Wait right after each rank's MPI_Ibarrier completed it: its wait, if any, is a barrier's.
    waits = [i + 1 for i in rows]
    assert all(calls["function"][i] == "MPI_Wait" for i in waits)
    assert all(calls["wait_state"][i] in ("", "wait_barrier") for i in waits)
    assert sum(calls["wait_before_ns"][i] for i in waits) == inst["wait_total_ns"][ibarrier[0]]


@pytest.mark.parametrize("name", ["calls.c"])
def test_every_graph_algorithm_gives_the_same_path_on_other_programs(other_runs, tmp_path, name):
    run_dir = other_runs[name]
    want = read_csv(run_dir / critical_path.CSV_NAME)
    for algorithm in ALGORITHMS[1:]:
        got = analyse_copy(run_dir, tmp_path / algorithm, algorithm, clock="pingpong")
        assert got == want, algorithm
