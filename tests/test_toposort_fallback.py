"""toposort on a run that is not bulk-synchronous (issue 27, item 8): it says so and the graph finds the path.

tests/programs/halo.c without its MPI_Allreduce (a ring halo with persistent
requests: each rank is coupled to its neighbours only, so a rank computes
while its neighbours' messages arrive) runs on 4 ranks; `mpigraph analyze`
with toposort (1 analysis rank) and parallel-toposort (2) must warn on stderr
and in summary.txt, name the graph algorithm it fell back to (dijkstra,
parallel-dijkstra), and write exactly dijkstra's path.  A bulk-synchronous
run (slow_phases.c: compute, then MPI_Allreduce) keeps toposort's own path,
without a warning.
"""

import shutil

import pytest

import mpi_env
from mpigraph.paths import segments as critical_path

NPROCS = 4


def run_program(tmp_path_factory, builder, wheel, source, args):
    exe = builder.build(source, wheel.mpicc)
    out = tmp_path_factory.mktemp("run") / source.split(".")[0]
    result = mpi_env.mpirun(wheel, NPROCS, [exe, *args], out=out,
                            rank_env={"MPIGRAPH_QUIET": "1", "MPIGRAPH_ALGORITHM": "dijkstra"})
    assert result.returncode == 0, result.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def pipeline_like(tmp_path_factory, builder, wheel):
    return run_program(tmp_path_factory, builder, wheel, "halo.c", ["30", "400", "0"])


@pytest.fixture(scope="module")
def bsp(tmp_path_factory, builder, wheel):
    return run_program(tmp_path_factory, builder, wheel, "slow_phases.c", ["4"])


def analyse_copy(run_dir, where, algorithm, nprocs=None):
    """`mpigraph analyze` of a copy of the raw logs: (summary text, stderr, path csv text)."""
    shutil.copytree(run_dir / "raw", where / "raw")
    result = mpi_env.mpigraph(["analyze", where, "--algorithm", algorithm, "--quiet"], nprocs=nprocs)
    assert result.returncode == 0, result.stderr[-4000:]
    return (where / "summary.txt").read_text(), result.stderr, (where / critical_path.CSV_NAME).read_text()


@pytest.mark.parametrize("algorithm, nprocs, fallback", [("toposort", None, "dijkstra"),
                                                         ("parallel-toposort", 2, "parallel-dijkstra")])
def test_toposort_warns_and_takes_the_graph_path(pipeline_like, tmp_path, algorithm, nprocs, fallback):
    text, stderr, path = analyse_copy(pipeline_like, tmp_path / "topo", algorithm, nprocs)
    _, _, dijkstra = analyse_copy(pipeline_like, tmp_path / "graph", "dijkstra")
    warning = "%s: the run is not bulk-synchronous" % algorithm
    assert warning in text and "the path was found by %s instead" % fallback in text
    assert "found by %s; the path segment by segment" % fallback in text
    assert "mpigraph: warning: " + warning in stderr
    # Its own count: most of the halo's messages arrive while a neighbour still computes.
    inside, total = [int(w) for w in text.split("bulk-synchronous (")[1].split(" point-to-point")[0].split(" of ")]
    assert total == 2 * NPROCS * 30 and 0 < inside <= total
    assert path == dijkstra


def test_a_bulk_synchronous_run_keeps_toposorts_path(bsp, tmp_path):
    text, stderr, path = analyse_copy(bsp, tmp_path / "topo", "toposort")
    assert "bulk-synchronous" not in text and "warning" not in stderr
    assert "found by toposort over 1 analysis rank" in text
    assert "compute" in path


@pytest.mark.parametrize("seed", range(20))
def test_group_spans_joined_across_ranges_equal_the_sequential_ones(seed):
    """parallel-toposort's group spans, each range's joined on rank 0, are the spans of all intervals
    in one piece (the ranges cut anywhere, a group over several whole ranges included)."""
    import numpy as np
    from mpigraph.paths import toposort

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    start = np.sort(rng.integers(0, 1000, n))
    rows = {"start": start, "end": start + rng.integers(0, 200 if seed % 2 else 30, n)}
    whole = toposort.merge_spans([toposort.group_spans(rows)])
    cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(1, 6))))
    parts, carry_end, carry_start = [], toposort._MIN, toposort._MIN
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, n]):
        piece = {k: v[a:b] for k, v in rows.items()}
        parts.append(toposort.group_spans(piece, carry_end, carry_start))
        if b > a:
            carry_end, carry_start = max(carry_end, int(piece["end"].max())), int(piece["start"][-1])
    joined = toposort.merge_spans(parts)
    assert [x.tolist() for x in joined] == [x.tolist() for x in whole]
