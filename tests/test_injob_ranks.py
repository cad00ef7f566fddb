"""In the job a small run is analysed by fewer ranks than the program has (issue 28): the shim
gives the analysis ceil(records / 1e6) ranks (MPIGRAPH_ANALYSIS_RECORDS), at most one per CPU of
a node, spread over the nodes (csrc/analysis_ranks.c), and the others leave MPI_Finalize at
once.  The report is the one an offline analysis writes."""

import filecmp
import os
import re
import sys

import pyarrow.dataset as ds

import mpi_env

EMPTY = os.path.join(mpi_env.REPO, "benchmarks", "init_finalize.c")


def test_an_empty_program_is_analysed_by_one_rank(wheel, builder, tmp_path):
    exe = builder.build(EMPTY, wheel.mpicc)
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 4, [exe], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    # 4 ranks x (MPI_Init, MPI_Finalize) = 8 records: one analysis rank, one part per dataset.
    for name in ("calls.parquet", "waitstates.parquet", "critical_path.parquet"):
        assert os.listdir(run / name) == ["part-0000.parquet"], name
    offline = tmp_path / "offline"
    done = mpi_env.mpigraph(["analyze", run, "--out", offline, "--quiet"])
    assert done.returncode == 0, done.stderr
    for name in ("calls.parquet", "critical_path.parquet", "ranks.parquet"):
        assert ds.dataset(run / name).to_table().equals(ds.dataset(offline / name).to_table()), name
    assert filecmp.cmp(run / "functions.csv", offline / "functions.csv", shallow=False)


def test_a_python_program_is_analysed_by_one_rank(wheel, tmp_path):
    program = os.path.join(mpi_env.PROGRAMS, "calls_py.py")
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 3, [sys.executable, program], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists()
    assert os.listdir(run / "calls.parquet") == ["part-0000.parquet"]
    assert "ranks          3 (all finalized)" in (run / "summary.txt").read_text()


# Says after MPI_Finalize whether this rank ran the analysis (the shim imported it here).
WHO_ANALYSED = """
import os
import sys
from mpi4py import MPI

rank = MPI.COMM_WORLD.rank
for _ in range(%d):
    MPI.COMM_WORLD.Barrier()
MPI.Finalize()
os.write(1, b"rank %%d analysed: %%s\\n" %% (rank, b"True" if "mpigraph.analysis" in sys.modules else b"False"))
"""


def analysed(stdout):
    """The world ranks that said they analysed, and every rank that spoke."""
    said = dict(re.findall(r"rank (\d+) analysed: (True|False)", stdout))
    return sorted(int(r) for r, yes in said.items() if yes == "True"), len(said)


def run_who_analysed(wheel, tmp_path, nprocs, barriers, records_per_rank, **launch):
    program = tmp_path / "who.py"
    program.write_text(WHO_ANALYSED % barriers)
    run = tmp_path / ("run-%d" % len(list(tmp_path.glob("run-*"))))
    result = mpi_env.mpirun(wheel, nprocs, [sys.executable, program], out=run,
                            rank_env={"MPIGRAPH_QUIET": "1", "MPIGRAPH_ANALYSIS_RECORDS": str(records_per_rank)},
                            **launch)
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists(), result.stderr
    ranks, spoke = analysed(result.stdout)
    assert spoke == nprocs, result.stdout
    assert len(os.listdir(run / "calls.parquet")) == len(ranks)       # a part per analysis rank
    return run, ranks


def test_a_node_runs_at_most_an_analysis_rank_per_cpu_of_its_ranks(wheel, tmp_path):
    # A record per analysis rank asks for every rank; pinned to one CPU, the 3 ranks get one.
    run, ranks = run_who_analysed(wheel, tmp_path, 3, 0, 1, prefix=("taskset", "-c", "0"))
    assert ranks == [0]
    _, ranks = run_who_analysed(wheel, tmp_path, 3, 0, 1)
    assert ranks == list(range(min(3, len(os.sched_getaffinity(0)))))
    # The report of one analysis rank of three is the offline one's.
    offline = tmp_path / "offline"
    done = mpi_env.mpigraph(["analyze", run, "--out", offline, "--quiet"])
    assert done.returncode == 0, done.stderr
    for name in ("calls.parquet", "critical_path.parquet", "ranks.parquet"):
        assert ds.dataset(run / name).to_table().equals(ds.dataset(offline / name).to_table()), name


def test_the_analysis_ranks_are_spread_over_the_nodes(wheel, tmp_path):
    # Two hosts of one machine are two nodes to MPI (hydra starts a proxy per host name): ranks
    # 0, 1 on one, 2, 3 on the other.  4 x 1000 barriers at 2500 records per analysis rank ask
    # for two: each node's first rank, not world ranks 0 and 1 (one node).
    _, ranks = run_who_analysed(wheel, tmp_path, 4, 1000, 2500,
                                mpiexec_args=("-hosts", "localhost,127.0.0.1", "-ppn", "2"))
    assert ranks == [0, 2]
