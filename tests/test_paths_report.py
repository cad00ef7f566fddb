"""The path stage inside the pipeline: files, columns and words of the report."""

import csv

from mpi4py import MPI

from mpigraph import analysis, config, graph
from pathbuild import deps
from tracebuild import rec, write_rank

QUIET = config.Config(quiet=True)


def write_late_sender_run(run_dir):
    write_rank(run_dir, 0, 2, [rec("MPI_Init", 0, 10), rec("MPI_Send", 100, 110, peer=1),
                               rec("MPI_Finalize", 500, 510)])
    write_rank(run_dir, 1, 2, [rec("MPI_Init", 0, 10), rec("MPI_Recv", 20, 105, peer=0),
                               rec("MPI_Finalize", 900, 910)], host="node1")


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_report_has_the_path_when_dependencies_are_known(tmp_path, monkeypatch):
    write_late_sender_run(tmp_path)
    # Stand-in for the match stage: the one late-sender edge, on the rank owning its destination.
    monkeypatch.setattr(analysis, "match_dependencies",
                        lambda comm, logs, times: deps((0, 1, 0, 1, 1, graph.LATE_SENDER)))
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


def test_report_says_why_there_is_no_path(tmp_path, monkeypatch):
    write_late_sender_run(tmp_path)
    monkeypatch.setattr(analysis, "match_dependencies", lambda comm, logs, times: None)
    text = analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET)
    assert "Critical path: not computed (message matching (mpigraph.match) is not available)" in text
    assert not (tmp_path / "critical_path.csv").exists()
    assert {r["time_on_path_s"] for r in read(tmp_path / "ranks.csv")} == {"0.000000000"}
