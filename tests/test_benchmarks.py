"""The benchmarks run from an install and print the tables docs/benchmarks.md shows.

Each benchmark runs here at a size that takes seconds, with the MPI mpigraph was installed
with.  No figure is compared with a time (timings are the benchmarks' business, not the
tests'): what is checked is that each table is printed, has a row for every configuration
asked for, and that its cells are figures of the right form, with the counts that are
exact (records written, rows) exact.
"""

import os
import re
import subprocess
import sys

import pytest

import mpi_env

BENCHMARKS = os.path.join(mpi_env.REPO, "benchmarks")
SECONDS_AND_RATE = re.compile(r"^\d+\.\d{2,3} s \(\d+\.\d{2} M/s\)$")
ANALYSIS_STAGES = ["trace", "clock", "match", "metrics", "path", "report"]


def run_benchmark(wheel, script, *args):
    """stdout of benchmarks/<script> run with the wheel's mpiexec and mpicc; it must succeed."""
    env = mpi_env.base_env({"MPIGRAPH_MPIEXEC": wheel.mpiexec, "MPIGRAPH_MPICC": wheel.mpicc})
    out = subprocess.run([sys.executable, os.path.join(BENCHMARKS, script)] + list(args), capture_output=True,
                         text=True, env=env, cwd=mpi_env.NEUTRAL_CWD)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def markdown_table(stdout, first_column):
    """(header cells, rows of cells) of the markdown table whose first header cell is first_column."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| %s |" % first_column))
    assert set(lines[start + 1].replace("|", "").split()) == {"---"}, lines[start + 1]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    header = [cell.strip() for cell in lines[start].strip().strip("|").split("|")]
    assert all(len(row) == len(header) for row in rows), (header, rows)
    return header, rows


def test_bench_analysis_prints_a_row_per_configuration(wheel):
    out = run_benchmark(wheel, "bench_analysis.py", "--records", "2e4", "--nprocs", "1", "2", "--repeat", "1",
                        "--trace-ranks", "5", "--algorithms", "toposort", "parallel-dijkstra", "--prefault")
    assert out.startswith("machine: ")
    assert out.splitlines()[1].startswith("memory: ")
    header, rows = markdown_table(out, "records")
    assert header == (["records", "trace ranks", "K", "algorithm", "memory"] + ANALYSIS_STAGES
                      + ["whole analysis", "peak RSS of a rank", "MB per M records"])
    configurations = {(row[2], row[3], row[4]) for row in rows}
    assert configurations == {(k, a, m) for k in ("1", "2") for a in ("toposort", "parallel-dijkstra")
                              for m in ("fresh", "pre-faulted")}
    assert len(rows) == len(configurations)
    assert len({row[0] for row in rows}) == 1 and int(rows[0][0].replace(",", "")) >= 20000
    assert {row[1] for row in rows} == {"5"}        # --trace-ranks
    for row in rows:
        cells = dict(zip(header, row))
        for stage in ANALYSIS_STAGES + ["whole analysis"]:
            assert SECONDS_AND_RATE.match(cells[stage]), (stage, cells[stage])
        assert re.match(r"^[1-9]\d* MB$", cells["peak RSS of a rank"]), cells["peak RSS of a rank"]
        # Growth per million records is measured on fresh memory only.
        assert re.match(r"^\d+$" if cells["memory"] == "fresh" else r"^-$", cells["MB per M records"])


def test_bench_analysis_analyses_a_recorded_run_and_leaves_it(wheel, tmp_path):
    """--run: a run on disk (a real program's; here a synthetic one) is analysed as it is, its
    records counted from its logs, and left in place."""
    from mpigraph.testing import synth

    synth.generate(str(tmp_path / "run"), 6, 40, "halo")
    out = run_benchmark(wheel, "bench_analysis.py", "--run", str(tmp_path / "run"), "--nprocs", "1", "2",
                        "--repeat", "1", "--algorithms", "parallel-dijkstra")
    header, rows = markdown_table(out, "records")
    assert [(row[1], row[2]) for row in rows] == [("6", "1"), ("6", "2")]
    verdicts = [line for line in out.splitlines() if " ok: records " in line]
    assert verdicts and all(re.search(r"; rank 0's CPU (\d+\.\d\dx the ranks' mean \(at most 2x: (yes|NO)\)"
                                      r"|: none spent)$", line) for line in verdicts), verdicts
    records = synth.Params(ranks=6, calls=40, structure="halo").records_per_rank * 6
    assert {row[0] for row in rows} == {"{:,}".format(records)}
    assert sorted(p.name for p in (tmp_path / "run" / "raw").glob("rank-*.log")) == ["rank-%d.log" % r
                                                                                    for r in range(6)]


def test_bench_analysis_says_rank_0s_cpu_against_the_ranks_mean():
    """Issue 28's bar: no stage on analysis rank 0 above twice its mean over the ranks."""
    sys.path.insert(0, BENCHMARKS)
    import bench_analysis

    assert bench_analysis.rank0_line([0.3, 0.1, 0.1, 0.1]) == "rank 0's CPU 2.00x the ranks' mean (at most 2x: yes)"
    assert bench_analysis.rank0_line([0.5, 0.1, 0.1, 0.1]) == "rank 0's CPU 2.50x the ranks' mean (at most 2x: NO)"
    assert bench_analysis.rank0_line([0.2]) == "rank 0's CPU 1.00x the ranks' mean (at most 2x: yes)"
    assert bench_analysis.rank0_line([0.0, 0.0]) == "rank 0's CPU: none spent"


def test_bench_kscale_prints_each_stages_cpu_against_one_rank_for_old_and_new(wheel):
    """Per stage and code (this tree standing for the old checkout too): K=1's CPU, each K's sum
    over the ranks with its largest rank, and the ratio sum / K=1 of the printed figures."""
    out = run_benchmark(wheel, "bench_kscale.py", "--records", "2e4", "--nprocs", "1", "2", "--rounds", "1",
                        "--old", mpi_env.REPO)
    header, rows = markdown_table(out, "records")
    assert header == ["records", "stage", "code", "K=1 CPU s", "K=2 sum (largest rank) s", "ratio K=2"]
    stages = ["trace", "clock", "match", "metrics", "traffic", "path", "report", "all"]
    assert [(row[1], row[2]) for row in rows] == [(s, c) for s in stages for c in ("old", "new")]
    for row in rows:
        one = float(row[3])
        total, largest = map(float, re.match(r"^(\d+\.\d{3}) \((\d+\.\d{3})\)$", row[4]).groups())
        assert largest <= total and re.match(r"^\d+\.\d{2}$", row[5]), row
        if one >= 0.005:       # the ratio of the unrounded figures; the cells are rounded to 0.0005 s
            bound = 0.005 + 0.0005 * (1 + total / one) / (one - 0.0005)
            assert abs(float(row[5]) - total / one) <= bound, row
    # the whole analysis is its stages added up
    for code in ("old", "new"):
        mine = {row[1]: row for row in rows if row[2] == code}
        assert abs(float(mine["all"][3]) - sum(float(mine[s][3]) for s in stages[:-1])) <= 0.001 * len(stages), code


def test_bench_kscale_measures_a_recorded_run_with_both_codes(wheel, tmp_path):
    """--run with --old: the recorded run, named by its directory, analysed by both codes."""
    from mpigraph.testing import synth

    synth.generate(str(tmp_path / "halo-run"), 6, 40, "halo")
    out = run_benchmark(wheel, "bench_kscale.py", "--run", str(tmp_path / "halo-run"), "--nprocs", "1", "2",
                        "--rounds", "1", "--old", mpi_env.REPO)
    header, rows = markdown_table(out, "records")
    assert {row[0] for row in rows} == {"halo-run"}
    assert [row[2] for row in rows if row[1] == "all"] == ["old", "new"]
    assert all(float(row[3]) > 0 for row in rows if row[1] == "all")


@pytest.fixture(scope="module")
def analysed_halo(wheel, tmp_path_factory):
    """A small analysed synthetic run (4 ranks of 30 calls)."""
    from mpigraph.testing import synth

    run = tmp_path_factory.mktemp("halo")
    synth.generate(str(run), 4, 30, "halo")
    done = mpi_env.mpigraph(["analyze", run, "--quiet"], nprocs=1, mpi=wheel)
    assert done.returncode == 0, done.stderr
    return run


def test_bench_parquet_prints_the_writer_options_and_every_column(wheel, analysed_halo):
    """A report's calls table written again: a row per writer option set, then per column."""
    import pyarrow.parquet as pq

    tmp_path = analysed_halo
    out = run_benchmark(wheel, "bench_parquet.py", str(tmp_path), "--rounds", "1")
    header, rows = markdown_table(out, "writer options")
    assert header == ["writer options", "seconds", "ns per row", "file MB"]
    assert rows[0][0].startswith("the report's") and len(rows) == 6
    assert rows[-1][0] == "every column nullable"
    header, rows = markdown_table(out, "column")
    names = pq.read_schema(next((tmp_path / "calls.parquet").glob("*.parquet"))).names
    assert [row[0] for row in rows] == names
    assert all(float(row[3]) >= 0 and float(row[4]) >= 0 for row in rows)


def test_bench_csv_prints_each_way_and_finds_the_same_bytes(wheel, analysed_halo):
    """A report's calls table as CSV again: a row per way of making the text, and the same text."""
    out = run_benchmark(wheel, "bench_csv.py", str(analysed_halo), "--rounds", "1")
    header, rows = markdown_table(out, "made by")
    assert header == ["made by", "wall s", "CPU s", "CPU ns per row", "MB"]
    assert [row[0].split(",")[0] for row in rows] == ["the C kernel", "pyarrow's string kernels", "the C kernel"]
    assert len({row[4] for row in rows}) == 1 and all(float(row[3]) > 0 for row in rows)
    assert "the same bytes every way: yes" in out


def test_bench_intercept_prints_both_calls_with_and_without_the_helper(wheel):
    out = run_benchmark(wheel, "bench_intercept.py", "--calls", "20000", "--rounds", "1")
    assert out.startswith("machine: ")
    header, rows = markdown_table(out, "call")
    assert header == ["call", "shim", "log helper", "bare ns/call", "with shim ns/call", "added ns", "added CPU ns",
                      "added process CPU ns"]
    assert [(row[0], row[1]) for row in rows] == [
        ("MPI_Iprobe on MPI_COMM_SELF", "shim"), ("MPI_Iprobe on MPI_COMM_SELF", "shim, helper off"),
        ("MPI_Iprobe on MPI_COMM_SELF", "shim, polls not merged"),
        ("0-byte MPI_Sendrecv on MPI_COMM_SELF", "shim"), ("0-byte MPI_Sendrecv on MPI_COMM_SELF", "shim, helper off"),
        ("0-byte MPI_Sendrecv on MPI_COMM_SELF", "shim, polls not merged")]
    for row in rows:
        # The log header says whether the helper ran: never with MPIGRAPH_LOG_HELPER=off.
        assert row[2] == "off" if row[1] == "shim, helper off" else row[2] in ("on", "off")
        for cell in row[3:]:
            float(cell)
        assert float(row[3]) > 0 and float(row[4]) > 0


def test_bench_overhead_prints_the_empty_programs_row(wheel):
    out = run_benchmark(wheel, "bench_overhead.py", "--only", "empty", "--rounds", "1")
    assert out.startswith("machine: ")
    header, rows = markdown_table(out, "program")
    assert header == ["program", "kind", "bare s", "record s", "full s", "record %", "full %", "records",
                      "calls/s per rank"]
    assert [row[0] for row in rows] == ["empty"]
    cells = dict(zip(header, rows[0]))
    # 2 ranks, each recording its MPI_Init and MPI_Finalize and nothing else.
    assert cells["records"] == "4"
    for column in ("bare s", "record s", "full s"):
        assert float(cells[column]) > 0
    for column in ("record %", "full %"):
        assert re.match(r"^-?\d+\.\d%$", cells[column]), cells[column]
    assert "wall seconds of each round" in out and "the benchmark took" in out


def test_bench_startup_prints_a_row_per_rank_count(wheel):
    out = run_benchmark(wheel, "bench_startup.py", "--nprocs", "2", "--rounds", "1", "--breakdown")
    assert out.startswith("machine: ")
    header, rows = markdown_table(out, "ranks")
    assert header == ["ranks", "bare s", "record s", "analysis s", "analysis - record s", "CPU analysis - record s",
                      "analysis ranks"]
    assert [row[0] for row in rows] == ["2"]
    cells = dict(zip(header, rows[0]))
    for column in ("bare s", "record s", "analysis s"):
        best, median = (float(x) for x in cells[column].split(" / "))
        assert 0 < best <= median
    # 4 records (MPI_Init and MPI_Finalize of 2 ranks): one analysis rank.
    assert cells["analysis ranks"] == "1"
    stages = re.findall(r"^  stage (\S+) ", out, re.M)
    assert stages[0] == "trace" and stages[-1] == "report", out
    assert re.search(r"^    import mpigraph\.analysis +\d+\.\d{3} s$", out, re.M), out
