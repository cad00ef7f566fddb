"""The Python API (mpigraph.load, mpigraph.analyze, Run) on a real run: the bundled demo on 2 ranks.

The tables loaded must hold exactly what the report's files hold: every Parquet-loaded
DataFrame is checked cell by cell against the CSV file of the same table, parsed with Python's
csv module and the report's documented CSV format (times as seconds with 9 decimals, booleans
as true/false, floats with 6 decimals, empty for missing).  The facts are checked against
numbers derived from the demo's source (mpigraph/shim/demo.c) and from the ranks table.
"""

import csv
import math
import os
import re
import shutil
import socket
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mpi_env
import mpigraph
from mpigraph.trace import logs as trace

NPROCS = 2
ITERATIONS = 20          # demo.c's default
# demo.c: MPI_Init, MPI_Bcast, per iteration MPI_Allreduce + MPI_Send + MPI_Recv, MPI_Reduce,
# MPI_Barrier, MPI_Finalize (MPI_Comm_rank and MPI_Comm_size are not recorded).
CALLS_PER_RANK = 5 + 3 * ITERATIONS
TABLES_WITH_CSV = ["ranks", "functions", "calls", "collectives", "waitstates", "critical_path", "unmatched"]
EXAMPLE = os.path.join(mpi_env.REPO, "examples", "explore_demo.py")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A real run directory: `mpigraph demo -n 2 --quiet`, analysed inside the job."""
    out = tmp_path_factory.mktemp("api") / "demo-run"
    result = mpi_env.mpigraph(["demo", "-n", NPROCS, "--out", out, "--quiet"], cwd=str(out.parent))
    assert result.returncode == 0, result.stdout + result.stderr
    # --quiet: the demo's own line and nothing of mpigraph's.
    assert result.stdout == "demo: %d ranks, %d iterations, checksum %d\n" % (
        NPROCS, ITERATIONS, _demo_checksum(NPROCS, ITERATIONS)), result.stdout
    return out


def _demo_checksum(size, iterations):
    """demo.c's checksum: each rank adds the token of its left neighbour, total + left, per iteration."""
    total = 0
    for it in range(iterations):
        allreduce = sum((r + 1) * (it + 1) for r in range(size))
        total += sum(allreduce + (r - 1) % size for r in range(size))
    return total


def copy_run(demo, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(demo, target)
    return target


# ---- the tables ---------------------------------------------------------------------------


def csv_cell(value, column):
    """The report's CSV text of a Parquet cell (mpigraph.report.writer's documented format)."""
    if column.endswith("_ns"):
        sign, ns = ("-" if value < 0 else ""), abs(int(value))
        return "%s%d.%09d" % (sign, ns // 10**9, ns % 10**9)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else "%.6f" % value
    return str(value)


@pytest.mark.parametrize("name", TABLES_WITH_CSV)
def test_every_table_loads_as_its_files_hold_it(demo, name):
    run = mpigraph.load(demo)
    frame = getattr(run, name)
    assert frame.equals(pq.read_table(demo / (name + ".parquet")).to_pandas())
    assert run.table(name).equals(pq.read_table(demo / (name + ".parquet")))
    with open(demo / (name + ".csv"), newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    # The same columns in both files: x_ns in Parquet is x_s in CSV.
    assert header == [c[:-3] + "_s" if c.endswith("_ns") else c for c in frame.columns]
    assert len(body) == len(frame)
    records = frame.astype(object).where(frame.notna(), float("nan")).to_dict("records")
    assert [[csv_cell(rec[c], c) for c in frame.columns] for rec in records] == body


def test_the_tables_hold_the_demo(demo):
    run = mpigraph.load(demo)
    assert run.ranks["rank"].tolist() == list(range(NPROCS))
    assert run.ranks["calls"].tolist() == [CALLS_PER_RANK] * NPROCS
    assert len(run.calls) == NPROCS * CALLS_PER_RANK
    counts = dict(zip(run.functions["function"], run.functions["calls"]))
    assert counts == {"MPI_Init": NPROCS, "MPI_Bcast": NPROCS, "MPI_Allreduce": NPROCS * ITERATIONS,
                      "MPI_Send": NPROCS * ITERATIONS, "MPI_Recv": NPROCS * ITERATIONS, "MPI_Reduce": NPROCS,
                      "MPI_Barrier": NPROCS, "MPI_Finalize": NPROCS}
    # One collective instance per collective call on every rank: Bcast, the Allreduces, Reduce, Barrier.
    assert len(run.collectives) == 1 + ITERATIONS + 2
    assert len(run.unmatched) == 0 and list(run.unmatched.columns)[:3] == ["rank", "what", "reason"]
    path = run.critical_path
    assert path["order"].tolist() == list(range(len(path)))
    assert (path["end_ns"] - path["start_ns"]).equals(path["duration_ns"])


def test_tables_are_read_on_first_access_only(demo, tmp_path):
    run_dir = copy_run(demo, tmp_path)
    shutil.rmtree(run_dir / "calls.parquet")      # the analysis ranks' parts: one bad file instead
    (run_dir / "calls.parquet").write_bytes(b"not parquet")
    run = mpigraph.load(run_dir)                  # reads nothing yet
    assert run.ranks["calls"].sum() == NPROCS * CALLS_PER_RANK
    with pytest.raises(pa.ArrowInvalid):
        run.calls
    assert run.frame("ranks") is run.ranks        # kept once read


def test_a_parquet_dataset_directory_loads_like_a_file(demo, tmp_path):
    run_dir = copy_run(demo, tmp_path)
    whole = pq.read_table(run_dir / "calls.parquet")
    shutil.rmtree(run_dir / "calls.parquet")
    os.mkdir(run_dir / "calls.parquet")
    half = whole.num_rows // 2
    pq.write_table(whole.slice(0, half), run_dir / "calls.parquet" / "part-0.parquet")
    pq.write_table(whole.slice(half), run_dir / "calls.parquet" / "part-1.parquet")
    run = mpigraph.load(run_dir)
    assert run.table("calls").num_rows == whole.num_rows
    assert run.calls.equals(whole.to_pandas())
    assert "calls" in run.tables
    # The same directory without the suffix.
    os.rename(run_dir / "calls.parquet", run_dir / "calls")
    run = mpigraph.load(run_dir)
    assert "calls" in run.tables and "raw" not in run.tables
    assert run.calls.equals(whole.to_pandas())


def test_a_table_with_only_a_csv_file_and_any_other_table(demo, tmp_path):
    run_dir = copy_run(demo, tmp_path)
    os.remove(run_dir / "unmatched.parquet")
    (run_dir / "extra.csv").write_text("a,b\n1,x\n2,y\n")
    run = mpigraph.load(run_dir)
    # An empty CSV still has its schema's types (mpigraph.schema), not types guessed from no rows.
    assert len(run.unmatched) == 0 and str(run.table("unmatched").schema.field("rank").type) == "int64"
    assert "extra" in run.tables and run["extra"]["b"].tolist() == ["x", "y"]
    with pytest.raises(KeyError, match="no table 'nothing'"):
        run["nothing"]


# ---- facts, summary, repr ----------------------------------------------------------------


def test_facts(demo):
    run = mpigraph.load(demo)
    facts, ranks = run.facts, run.ranks
    assert facts["job_id"] == trace.find_run(str(demo)).job_id
    assert facts["ranks"] == NPROCS and facts["finalized"] == NPROCS
    assert facts["hosts"] == [socket.gethostname()]
    assert facts["run_time_ns"] == ranks["program_end_ns"].max() - ranks["program_start_ns"].min()
    assert facts["mpi_time_ns"] == ranks["mpi_time_ns"].sum()
    assert facts["calls"] == NPROCS * CALLS_PER_RANK
    assert facts["algorithm"] == "dijkstra" and facts["clock_method"] == "pingpong"    # the defaults
    assert facts["critical_path_ns"] == run.critical_path["duration_ns"].sum()
    assert facts["critical_path_segments"] == len(run.critical_path)
    assert sorted(os.listdir(demo)) == sorted(["raw"] + facts["files"])
    # The head of summary.txt says the same.
    assert "job id         %s" % facts["job_id"] in run.summary
    assert "run time       %.6f s" % (facts["run_time_ns"] / 1e9) in run.summary


def test_summary_and_repr(demo):
    run = mpigraph.load(demo)
    assert run.summary == (demo / "summary.txt").read_text()
    text = repr(run)
    assert text.startswith("<mpigraph.Run %s: %d ranks on 1 host, run time " % (demo, NPROCS))
    assert ("%d calls, dijkstra; tables: calls, callsite_sizes, callsite_waitstates, callsites, collectives, commmatrix, "
            "communicators, "
            "critical_path"
            % (NPROCS * CALLS_PER_RANK)) in text


def test_a_report_without_run_json_gives_the_same_facts(demo, tmp_path):
    run_dir = copy_run(demo, tmp_path)
    os.remove(run_dir / "run.json")
    facts, full = mpigraph.load(run_dir).facts, mpigraph.load(demo).facts
    for key in ("job_id", "ranks", "finalized", "hosts", "run_time_ns", "mpi_time_ns", "calls", "records"):
        assert facts[key] == full[key], key
    assert facts["algorithm"] is None


def test_not_a_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="not an mpigraph run directory"):
        mpigraph.load(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="analyse the run first"):
        mpigraph.load(tmp_path).summary
    assert repr(mpigraph.load(tmp_path)) == "<mpigraph.Run %s: no report (KeyError); tables: none>" % tmp_path


# ---- analyze ---------------------------------------------------------------------------------


def test_analyze_returns_the_run(demo, tmp_path, capsys):
    from mpi4py import MPI

    out = tmp_path / "toposort"
    run = mpigraph.analyze(demo, algorithm="toposort", out_dir=out, comm=MPI.COMM_SELF)
    assert capsys.readouterr().out == ""            # the function prints nothing; print(run.summary) does
    assert isinstance(run, mpigraph.Run) and run.run_dir == str(out)
    first = mpigraph.load(demo)
    assert run.facts["algorithm"] == "toposort" and run.facts["job_id"] == first.facts["job_id"]
    # The same logs: the same ranks, calls per function and run time; both paths are the longest.
    columns = [c for c in first.ranks.columns if c != "time_on_path_ns"]
    assert run.ranks[columns].equals(first.ranks[columns])
    assert run.functions["calls"].tolist() == first.functions["calls"].tolist()
    assert run.facts["critical_path_ns"] == first.facts["critical_path_ns"]
    # Again into the same directory: an earlier report may be written over.
    assert mpigraph.analyze(demo, out_dir=out, comm=MPI.COMM_SELF).facts["algorithm"] == "dijkstra"


def test_analyze_refuses_a_directory_of_other_files(demo, tmp_path):
    from mpi4py import MPI

    from mpigraph.report.outdir import OutputDirError

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.txt").write_text("my notes\n")
    with pytest.raises(OutputDirError, match="not an mpigraph run directory"):
        mpigraph.analyze(demo, out_dir=mine, comm=MPI.COMM_SELF)
    assert os.listdir(mine) == ["summary.txt"] and (mine / "summary.txt").read_text() == "my notes\n"


def test_analyze_under_mpiexec_returns_the_run_on_rank_0_only(demo, tmp_path):
    out = tmp_path / "parallel"
    code = ("import sys, mpigraph\nfrom mpi4py import MPI\n"
            "run = mpigraph.analyze(sys.argv[1], out_dir=sys.argv[2])\n"
            "line = '%d %s %s' % (MPI.COMM_WORLD.rank, type(run).__name__, run.facts['ranks'] if run else '-')\n"
            "lines = MPI.COMM_WORLD.gather(line)\n"      # one writer: two ranks' prints can interleave
            "print('\\n'.join(lines) if lines else '', end='\\n' if lines else '', flush=True)\n")
    result = subprocess.run([mpi_env.wheel_mpi().mpiexec, "-n", "2", sys.executable, "-c", code, str(demo),
                             str(out)], capture_output=True, text=True, env=mpi_env.base_env())
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["0 Run %d" % NPROCS, "1 NoneType -"]


# ---- the package ---------------------------------------------------------------------------


def test_import_mpigraph_loads_no_heavy_module():
    code = ("import sys, mpigraph; mpigraph.load; "
            "print(sorted(m for m in ('numpy', 'mpi4py', 'pyarrow', 'pandas') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=mpi_env.base_env())
    assert result.stdout.strip() == "[]", result.stderr


def test_typed_package():
    package = os.path.dirname(mpigraph.__file__)
    assert os.path.isfile(os.path.join(package, "py.typed"))
    with open(os.path.join(mpi_env.REPO, "pyproject.toml")) as f:
        assert re.search(r'^"mpigraph" = \[[^]\n]*"py.typed"', f.read(), re.M)     # shipped as package data


def test_the_example_runs_on_the_demo(demo):
    result = subprocess.run([sys.executable, EXAMPLE, str(demo)], capture_output=True, text=True,
                            env=mpi_env.base_env())
    assert result.returncode == 0, result.stderr
    run = mpigraph.load(demo)
    assert "%d ranks" % NPROCS in result.stdout
    # It names the rank with the most time on the critical path, as the ranks table says.
    top = int(run.ranks.sort_values("time_on_path_ns", kind="stable").iloc[-1]["rank"])
    assert "most time on the critical path: rank %d" % top in result.stdout


def test_the_notebook_runs_on_the_demo(demo):
    """examples/explore_demo.ipynb's code cells, in order, as one script in the directory that holds demo-run."""
    import json

    with open(os.path.join(mpi_env.REPO, "examples", "explore_demo.ipynb")) as f:
        notebook = json.load(f)
    cells = ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert 'mpigraph.load("demo-run")' in cells[0] and demo.name == "demo-run"
    result = subprocess.run([sys.executable, "-c", "\n\n".join(cells)], capture_output=True, text=True,
                            cwd=str(demo.parent), env=mpi_env.base_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout == (demo / "summary.txt").read_text() + "\n"      # the last cell prints the summary


# ---- calls.csv and collectives.csv: written for runs up to MAX_CSV_ROWS calls ---------------------


def test_calls_csv_made_a_few_rows_at_a_time_is_the_same_file(demo, tmp_path, monkeypatch):
    from mpi4py import MPI

    from mpigraph.report import writer

    whole = mpigraph.analyze(demo, out_dir=tmp_path / "whole", comm=MPI.COMM_SELF)
    monkeypatch.setattr(writer, "CALLS_CSV_BLOCK_ROWS", 7)      # 130 calls: 19 blocks, the last of 4 rows
    pieces = mpigraph.analyze(demo, out_dir=tmp_path / "pieces", comm=MPI.COMM_SELF)
    assert (tmp_path / "pieces" / "calls.csv").read_bytes() == (tmp_path / "whole" / "calls.csv").read_bytes()
    for part in os.listdir(tmp_path / "whole" / "calls.parquet"):        # the analysis ranks' parts
        name = os.path.join("calls.parquet", part)
        assert (tmp_path / "pieces" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    assert pieces.calls.equals(whole.calls)


def test_big_runs_get_no_calls_csv(demo, tmp_path, monkeypatch):
    from mpi4py import MPI

    from mpigraph.report import writer

    monkeypatch.setattr(writer, "MAX_CSV_ROWS", NPROCS * CALLS_PER_RANK - 1)
    run = mpigraph.analyze(demo, out_dir=tmp_path / "big", comm=MPI.COMM_SELF)
    names = os.listdir(tmp_path / "big")
    assert "calls.csv" not in names and "collectives.csv" not in names
    assert "calls.parquet" in names and "collectives.parquet" in names and "critical_path.csv" in names
    assert sorted(names) == run.facts["files"]
    assert run.summary.endswith("\ncalls.csv and collectives.csv not written: the run has %d calls, more than %d "
                                "(the same rows are in calls.parquet and collectives.parquet)\n"
                                % (NPROCS * CALLS_PER_RANK, NPROCS * CALLS_PER_RANK - 1))
    assert len(run.calls) == NPROCS * CALLS_PER_RANK             # from calls.parquet
    # At the limit they are written, and the summary says nothing of them.
    monkeypatch.setattr(writer, "MAX_CSV_ROWS", NPROCS * CALLS_PER_RANK)
    run = mpigraph.analyze(demo, out_dir=tmp_path / "limit", comm=MPI.COMM_SELF)
    assert "calls.csv" in run.facts["files"] and "not written" not in run.summary


def test_a_path_longer_than_max_csv_rows_gets_no_critical_path_csv(demo, tmp_path, monkeypatch):
    """A pipelined program's path has a segment per call: its CSV would be gigabytes of text."""
    from mpi4py import MPI

    from mpigraph.report import writer

    whole = mpigraph.analyze(demo, out_dir=tmp_path / "whole", comm=MPI.COMM_SELF)
    segments = len(whole.critical_path)
    monkeypatch.setattr(writer, "MAX_CSV_ROWS", segments - 1)
    run = mpigraph.analyze(demo, out_dir=tmp_path / "long", comm=MPI.COMM_SELF)
    names = os.listdir(tmp_path / "long")
    assert "critical_path.csv" not in names and "critical_path.parquet" in names
    assert sorted(names) == run.facts["files"]
    assert ("critical_path.csv not written: the path has %d segments, more than %d (the same rows are in "
            "critical_path.parquet)" % (segments, segments - 1)) in run.summary
    assert run.critical_path.equals(whole.critical_path)          # from critical_path.parquet
    monkeypatch.setattr(writer, "MAX_CSV_ROWS", segments)
    run = mpigraph.analyze(demo, out_dir=tmp_path / "limit", comm=MPI.COMM_SELF)
    assert "critical_path.csv" in run.facts["files"] and "critical_path.csv not written" not in run.summary
