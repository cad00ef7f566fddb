"""Checks of parallel-toposort that need several processes: run under mpiexec.

Not collected by a plain ``pytest tests`` (the name does not start with
test_): tests/test_toposort.py runs it with 1, 2, 3 and 4 ranks::

    MPIGRAPH_TEST_RUNS=dir1:dir2 mpiexec -n 3 python -m pytest -q -p no:cacheprovider tests/mpi_toposort_checks.py

MPIGRAPH_TEST_RUNS lists run directories (hand-built traces, a real recorded
run).  Every check compares on analysis rank 0 and broadcasts the verdict,
so all ranks pass or fail together (none is left waiting in a collective).
"""

import os

import numpy as np
import pytest
from mpi4py import MPI

from mpigraph import analysis, config
from mpigraph.clock import models as clock
from mpigraph.comm import parallel
from mpigraph.comm import shuffle
from mpigraph.paths import toposort
from mpigraph.trace import logs as trace

RUNS = [d for d in os.environ.get("MPIGRAPH_TEST_RUNS", "").split(os.pathsep) if d]
WORLD = MPI.COMM_WORLD


def owned(run_dir, comm):
    """(info, owned logs, their times) as the pipeline's trace and clock stages give them."""
    info = trace.find_run(run_dir)
    logs = trace.open_logs(info, parallel.Ownership(info.world_size, comm.size).ranks_of(comm.rank))
    times = {r: (clock.to_ns(log, log.records["t_start"]), clock.to_ns(log, log.records["t_end"]))
             for r, log in logs.items()}
    return info, logs, times


def agree(comm, verdict):
    """Rank 0's verdict (None = fine, else a message) on every rank."""
    verdict = comm.bcast(verdict, root=0)
    assert verdict is None, verdict


def table_difference(a, b):
    """None if the two path tables are equal in every column, else what differs."""
    if len(a["order"]) != len(b["order"]):
        return "sequential path has %d segments, parallel %d" % (len(a["order"]), len(b["order"]))
    for name in a:
        if not np.array_equal(a[name], b[name]):
            i = int(np.flatnonzero(a[name] != b[name])[0])
            return "column %s differs first at segment %d: %r vs %r" % (name, i, a[name][i], b[name][i])
    return None


def test_runs_given():
    assert len(RUNS) >= 5, "MPIGRAPH_TEST_RUNS lists %d runs" % len(RUNS)


@pytest.mark.parametrize("threshold", [0.0, 3e-6])
@pytest.mark.parametrize("compress", [0, 3])
@pytest.mark.parametrize("run_dir", RUNS, ids=[os.path.basename(d) for d in RUNS])
def test_parallel_equals_sequential(run_dir, threshold, compress):
    info, logs, times = owned(run_dir, WORLD)
    tables = {}
    for algorithm in toposort.ALGORITHMS:
        settings = config.Config(algorithm=algorithm, threshold=threshold, compress=compress, quiet=True)
        tables[algorithm] = toposort.path_stage(WORLD, settings, logs, times).table
    verdict = None
    if WORLD.rank == 0:
        verdict = table_difference(tables["toposort"], tables["parallel-toposort"])
        if verdict is None and len(tables["toposort"]["rank"]) == 0 and threshold == 0:
            verdict = "empty path for %s" % run_dir
    agree(WORLD, verdict)


def ranges_of_largest_group(run_dir):
    """How many analysis ranks' time ranges the most widely spread group touches."""
    info, logs, times = owned(run_dir, WORLD)
    intervals = toposort.local_intervals(logs, times)
    mine, _ = shuffle.shuffle_by_key(WORLD, intervals, "start")
    firsts = WORLD.gather(mine["start"][0] if len(mine["start"]) else None, root=0)
    everything, _ = shuffle.gather(WORLD, intervals, root=0)
    if WORLD.rank != 0:
        return None
    rows = toposort.sort_intervals(everything)
    opens = toposort.group_starts(rows["start"], rows["end"])
    group = np.cumsum(opens) - 1
    group_first_start = rows["start"][opens]
    # A range whose first interval lies in a group that began before it continues that group.
    spread = np.ones(len(group_first_start), np.int64)
    for first in firsts[1:]:
        if first is not None:
            g = group[np.searchsorted(rows["start"], first)]
            spread[g] += group_first_start[g] < first
    return int(spread.max())


def test_a_group_spans_several_ranges():
    """The spanning trace really exercises the scan: one group over every range."""
    spanning = [d for d in RUNS if os.path.basename(d) == "spanning"]
    assert spanning, "no run named spanning"
    spread = ranges_of_largest_group(spanning[0])
    agree(WORLD, None if WORLD.rank != 0 or spread >= min(WORLD.size, 3)
          else "largest group spans %d of %d ranges" % (spread, WORLD.size))


def test_pipeline_writes_the_path_and_shuffle_statistics():
    run_dir = RUNS[0]
    settings = config.Config(algorithm="parallel-toposort", quiet=True)
    text = analysis.analyze(run_dir, WORLD, settings)
    verdict = None
    if WORLD.rank == 0:
        path_csv = os.path.join(run_dir, "critical_path.csv")
        for needle in ("Critical path:", "found by parallel-toposort over %d analysis rank" % WORLD.size,
                       "shuffle over %d ranks" % WORLD.size, "on the wire", "rows per rank"):
            if needle not in text:
                verdict = "summary lacks %r:\n%s" % (needle, text)
        if not os.path.exists(path_csv):
            verdict = "no %s" % path_csv
    agree(WORLD, verdict)
