"""The path stage inside the pipeline: files, columns and words of the report."""

import csv

from mpi4py import MPI

from mpigraph import analysis, config
from mpigraph import record as R
from tracebuild import rec, write_rank

QUIET = config.Config(quiet=True)


def write_late_sender_run(run_dir):
    """Rank 1 waits in MPI_Recv from 20 ns until rank 0's send at 100 ns arrives."""
    write_rank(run_dir, 0, 2, [rec("MPI_Init", 0, 10), rec("MPI_Send", 100, 110, R.SEND, peer=1, tag=5, bytes=8),
                               rec("MPI_Finalize", 500, 510)])
    write_rank(run_dir, 1, 2, [rec("MPI_Init", 0, 10), rec("MPI_Recv", 20, 105, R.RECV, peer=0, tag=5, bytes=8),
                               rec("MPI_Finalize", 900, 910)], host="node1")


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_report_has_the_path_of_the_matched_run(tmp_path):
    """The match stage finds the late sender; the graph algorithms put its message on the path."""
    write_late_sender_run(tmp_path)
    for algorithm in ("dijkstra", "parallel-delta-stepping"):
        text = analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET.with_overrides(algorithm=algorithm))
        path = read(tmp_path / "critical_path.csv")
        assert [(r["rank"], r["kind"], r["function"], r["duration_s"]) for r in path] == [
            ("0", "compute", "", "0.000000090"), ("1", "message", "MPI_Recv", "0.000000005"),
            ("1", "compute", "", "0.000000795")]
        assert [r["time_on_path_s"] for r in read(tmp_path / "ranks.csv")] == ["0.000000090", "0.000000800"]
        functions = {r["function"]: r["time_on_path_s"] for r in read(tmp_path / "functions.csv")}
        assert functions["MPI_Recv"] == "0.000000005" and functions["MPI_Send"] == "0.000000000"
        assert "Critical path: 0.000001 s in 3 segments; compute 99.4%" in text
        assert (tmp_path / "critical_path.parquet").exists()
