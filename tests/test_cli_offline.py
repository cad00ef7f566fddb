"""The mpigraph command, offline: analyse saved logs as a real subprocess, serially and under mpiexec.

Also the CLI's contract with the launcher side (launcher.run, demo.run_demo,
_lib.library_path), checked in-process with those functions replaced.
"""

import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import mpigraph
from mpigraph import cli
from mpigraph.trace import record
from tracebuild import part, rec, write_rank

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 120   # a hang is a failure, not a stuck test run


def env(**extra):
    """The environment for a subprocess: this source tree first, no MPIGRAPH_* or shim from outside."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("MPIGRAPH_") and k != "LD_PRELOAD"}
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e.update(extra)
    return e


def mpigraph_cmd(*args, nprocs=None, **extra_env):
    cmd = [sys.executable, "-m", "mpigraph"] + [str(a) for a in args]
    if nprocs:
        cmd = ["mpiexec", "-n", str(nprocs)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env(**extra_env))


def rank_rows(rank):
    """A small but varied log: rank-dependent compute, a ring of Isend/Irecv + Waitall, an Allreduce."""
    t = 1000 * rank
    wait = rec("MPI_Waitall", t + 3000, t + 3500 + 100 * rank)
    return [
        rec("MPI_Init", t, t + 200),
        rec("MPI_Isend", t + 1000, t + 1100, record.SEND, bytes=100 * (rank + 1), request=1),
        rec("MPI_Irecv", t + 1200, t + 1250, record.RECV, bytes=4096, request=2),
        wait, part(wait, record.SEND, request=1, bytes=100 * (rank + 1)),
        part(wait, record.RECV, request=2, bytes=100 * rank + 1),
        rec("MPI_Allreduce", t + 4000, 9000, bytes=8, seq=1),
        rec("MPI_Finalize", 9500 + rank, 9500 + rank),
    ]


def write_run(run_dir, world_size=4):
    for r in range(world_size):
        write_rank(run_dir, r, world_size, rank_rows(r), host="node%d" % (r // 2))
    return run_dir


def report_files(run_dir):
    return {name: (run_dir / name).read_bytes() for name in ("ranks.csv", "functions.csv", "summary.txt")}


# ---- analyze as a subprocess ----------------------------------------------------------------


def test_analyze_serial(tmp_path):
    run_dir = write_run(tmp_path / "run")
    result = mpigraph_cmd("analyze", run_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (run_dir / "summary.txt").read_text()
    assert "ranks          4 (all finalized)" in result.stdout
    assert result.stderr == ""
    rows = (run_dir / "ranks.csv").read_text().splitlines()
    assert len(rows) == 5 and rows[0].startswith("rank,host,pid,program_start_s")
    # Rank 3: Init ends at 3200, Finalize starts at 9503; Isend+Irecv+Waitall+Allreduce = 100+50+800+2000.
    assert rows[4].split(",")[:7] == ["3", "node1", "1003", "0.000003000", "0.000009303", "0.000006303",
                                      "0.000002950"]
    assert pq.read_table(run_dir / "ranks.parquet").num_rows == 4
    for table in ("ranks", "calls", "collectives", "waitstates", "critical_path"):
        path = run_dir / ("%s.parquet" % table)
        if path.is_dir():                     # a dataset: one analysis rank, one part
            path = path / "part-0000.parquet"
        columns = pq.ParquetFile(path).metadata.row_group(0)
        assert {columns.column(i).compression for i in range(columns.num_columns)} == {"ZSTD"}, table
        for i in range(columns.num_columns):     # integers and times delta-encoded, strings by dictionary
            column = columns.column(i)
            kind = str(pq.ParquetFile(path).schema_arrow.field(column.path_in_schema).type)
            if kind == "int64":
                assert "DELTA_BINARY_PACKED" in column.encodings, (table, column.path_in_schema)
            if kind == "string":
                assert "RLE_DICTIONARY" in column.encodings, (table, column.path_in_schema)


@pytest.mark.parametrize("nprocs", [2, 3])
def test_analyze_under_mpiexec_gives_the_same_report(tmp_path, nprocs):
    serial = write_run(tmp_path / "serial")
    parallel = write_run(tmp_path / "parallel")
    assert mpigraph_cmd("analyze", serial, "--quiet").returncode == 0
    result = mpigraph_cmd("analyze", parallel, nprocs=nprocs)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("mpigraph 0.1.0 report") == 1          # printed by analysis rank 0 only
    files_serial, files_parallel = report_files(serial), report_files(parallel)
    assert files_parallel["ranks.csv"] == files_serial["ranks.csv"]
    assert files_parallel["functions.csv"] == files_serial["functions.csv"]
    assert (files_parallel["summary.txt"].replace(str(parallel).encode(), b"DIR")
            == files_serial["summary.txt"].replace(str(serial).encode(), b"DIR"))
    assert pq.read_table(parallel / "ranks.parquet").equals(pq.read_table(serial / "ranks.parquet"))


def test_more_analysis_ranks_than_trace_ranks(tmp_path):
    run_dir = write_run(tmp_path / "run", world_size=1)
    result = mpigraph_cmd("analyze", run_dir, "--quiet", nprocs=2)
    assert result.returncode == 0, result.stderr
    assert len((run_dir / "ranks.csv").read_text().splitlines()) == 2


def assert_one_clean_error(result, expected):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("mpigraph: error: ")]
    assert len(errors) == 1, result.stderr
    assert expected in errors[0], errors[0]
    return errors[0]


def test_bad_log_is_one_line(tmp_path):
    run_dir = write_run(tmp_path / "run")
    rows = rank_rows(2)
    rows[3]["t_end"] = rows[3]["t_start"] - 1
    write_rank(run_dir, 2, 4, rows, host="node1")
    result = mpigraph_cmd("analyze", run_dir)
    assert result.returncode == 2
    assert_one_clean_error(result, "%s: record 3: ends before it starts" % (run_dir / "raw" / "rank-2.log"))
    assert not (run_dir / "summary.txt").exists()


def test_bad_log_under_mpiexec_is_one_line_and_no_hang(tmp_path):
    run_dir = write_run(tmp_path / "run")
    with open(run_dir / "raw" / "rank-3.log", "r+b") as f:   # owned by analysis rank 1 of 2
        f.truncate(record.HEADER_SIZE + 2 * record.RECORD_SIZE)
    result = mpigraph_cmd("analyze", run_dir, nprocs=2)
    assert_one_clean_error(result, "rank-3.log: truncated: the header counts 8 records but the file holds "
                                   "only 2 complete records")


def test_missing_rank_under_mpiexec(tmp_path):
    run_dir = write_run(tmp_path / "run")
    os.remove(run_dir / "raw" / "rank-1.log")
    result = mpigraph_cmd("analyze", run_dir, nprocs=2)
    assert_one_clean_error(result, "missing the logs of rank 1 (world size 4, from rank-0.log)")


def test_not_a_run_directory(tmp_path):
    result = mpigraph_cmd("analyze", tmp_path / "nothing")
    assert result.returncode == 2
    assert_one_clean_error(result, "is not a directory: not an mpigraph run directory")


def test_bad_setting_is_one_line(tmp_path):
    run_dir = write_run(tmp_path / "run")
    result = mpigraph_cmd("analyze", run_dir, MPIGRAPH_ALGORITHM="bfs", nprocs=2)
    assert_one_clean_error(result, "MPIGRAPH_ALGORITHM='bfs' is not valid; accepted: auto, dijkstra, delta-stepping")


def test_bad_algorithm_option(tmp_path):
    result = mpigraph_cmd("analyze", write_run(tmp_path / "run"), "--algorithm", "bfs")
    assert result.returncode == 2 and "invalid choice: 'bfs'" in result.stderr


def test_analyze_verbose_prints_stages(tmp_path):
    result = mpigraph_cmd("analyze", write_run(tmp_path / "run"), "--verbose", "--quiet")
    assert result.returncode == 0 and result.stdout == ""
    assert [line.split()[1] for line in result.stderr.splitlines()] == ["trace", "clock", "match", "metrics", "traffic", "path",
                                                                        "report"]
    result = mpigraph_cmd("analyze", write_run(tmp_path / "run2"))
    assert result.returncode == 0 and result.stderr == ""    # small runs: no progress unless asked


def test_report_prints_the_summary_again(tmp_path):
    run_dir = write_run(tmp_path / "run")
    assert mpigraph_cmd("report", run_dir).returncode == 2      # not analysed yet
    assert_one_clean_error(mpigraph_cmd("report", run_dir), "summary.txt does not exist")
    mpigraph_cmd("analyze", run_dir, "--quiet")
    result = mpigraph_cmd("report", run_dir)
    assert result.returncode == 0 and result.stdout == (run_dir / "summary.txt").read_text()


def test_config_command():
    result = mpigraph_cmd("config", MPIGRAPH_THRESHOLD="0.5")
    assert result.returncode == 0
    assert "MPIGRAPH_ALGORITHM" in result.stdout and "MPIGRAPH_THRESHOLD=0.5" in result.stdout
    assert_one_clean_error(mpigraph_cmd("config", MPIGRAPH_THRESHOLD="soon"), "MPIGRAPH_THRESHOLD='soon'")


def test_version_and_help():
    assert mpigraph_cmd("--version").stdout.strip() == "mpigraph " + mpigraph.__version__
    help_text = mpigraph_cmd("--help").stdout
    for command in ("lib", "demo", "run", "analyze", "report", "config"):
        assert command in help_text


def test_import_is_lean():
    # The shim imports mpigraph at MPI_Finalize of every rank; the CLI parses before it imports.
    code = ("import sys, mpigraph, mpigraph.cli, mpigraph.config; "
            "print(sorted(m for m in ('numpy', 'mpi4py', 'pyarrow') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(),
                            timeout=TIMEOUT)
    assert result.stdout.strip() == "[]", result.stderr


# ---- the contract with the launcher side, in-process -----------------------------------------


def test_run_calls_launcher(monkeypatch):
    import mpigraph.shim.launcher

    calls = []
    monkeypatch.setattr(mpigraph.shim.launcher, "run", lambda *a, **k: calls.append((a, k)) or 7)
    monkeypatch.delenv("MPIGRAPH_ALGORITHM", raising=False)
    code = cli.main(["run", "-n", "3", "--out", "/tmp/o", "--algorithm", "toposort", "--mpiexec", "/x/mpiexec",
                     "--", "./app", "-v", "--flag"])
    assert code == 7
    assert calls == [((["./app", "-v", "--flag"], 3),
                      dict(out="/tmp/o", options={"MPIGRAPH_ALGORITHM": "toposort"}, mpiexec="/x/mpiexec"))]


def test_run_without_program(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "-n", "2", "--"])
    assert info.value.code == 2 and "no program given" in capsys.readouterr().err


def test_run_launcher_error_is_one_line(monkeypatch, capsys):
    import mpigraph.shim.launcher

    def fail(*args, **kwargs):
        raise mpigraph.shim.launcher.LauncherError("no mpiexec found")

    monkeypatch.setattr(mpigraph.shim.launcher, "run", fail)
    assert cli.main(["run", "-n", "2", "--", "./app"]) == 2
    assert capsys.readouterr().err == "mpigraph: error: no mpiexec found\n"


def test_demo_calls_run_demo(monkeypatch):
    import mpigraph.shim.demo

    calls = []
    monkeypatch.setattr(mpigraph.shim.demo, "run_demo", lambda n, out, options: calls.append((n, out, options)) or 0)
    assert cli.main(["demo"]) == 0
    assert cli.main(["demo", "-n", "2", "--out", "d", "--quiet", "--verbose"]) == 0
    assert calls == [(4, None, {}), (2, "d", {"MPIGRAPH_QUIET": "1", "MPIGRAPH_VERBOSE": "1"})]


def test_lib_prints_the_library_path(monkeypatch, capsys):
    import mpigraph.shim.lib

    monkeypatch.setattr(mpigraph.shim.lib, "library_path", lambda: "/opt/mpigraph/libmpigraph.so")
    assert cli.main(["lib"]) == 0
    assert capsys.readouterr().out == "/opt/mpigraph/libmpigraph.so\n"

    def missing():
        raise FileNotFoundError("/x/libmpigraph.so is missing: install mpigraph with pip")

    monkeypatch.setattr(mpigraph.shim.lib, "library_path", missing)
    assert cli.main(["lib"]) == 2
    assert capsys.readouterr().err == "mpigraph: error: /x/libmpigraph.so is missing: install mpigraph with pip\n"


def test_lib_imports_none_of_the_analysis_libraries():
    # `LD_PRELOAD=$(mpigraph lib)` runs before every job: it builds the whole command line (every
    # subcommand's options) and must not pay for numpy (0.15 s), pyarrow or mpi4py.
    heavy = ("numpy", "pyarrow", "mpi4py", "scipy")
    code = "import sys\nfrom mpigraph import cli\ncli.main(['lib'])\nprint(sorted(set(%r) & set(sys.modules)))" % (heavy,)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


# ---- flags shared by subcommands, the output directory, view --out, config ----------------------


def _subparser(name):
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    return sub.choices[name]


def _option(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


def test_shared_flags_mean_the_same_in_every_subcommand():
    for flag in ("--quiet", "--verbose"):
        actions = [_option(_subparser(name), flag) for name in ("run", "demo", "analyze")]
        assert {(a.nargs, a.const, a.help) for a in actions} == {(0, True, actions[0].help)}, flag
    run, analyze = _option(_subparser("run"), "--algorithm"), _option(_subparser("analyze"), "--algorithm")
    assert run.choices == analyze.choices == config_module().ALGORITHMS and run.help == analyze.help
    assert {_option(_subparser(name), "--out").metavar for name in ("run", "demo")} == {"DIR"}
    assert {_option(_subparser(name), "--out").metavar for name in ("analyze", "view")} == {"OUT"}


def config_module():
    from mpigraph import config

    return config


def test_run_quiet_and_verbose_are_flags(monkeypatch):
    import mpigraph.shim.launcher

    calls = []
    monkeypatch.setattr(mpigraph.shim.launcher, "run", lambda *a, **k: calls.append((a, k)) or 0)
    assert cli.main(["run", "-n", "2", "--quiet", "--verbose", "--", "./app", "--quiet"]) == 0
    assert calls == [((["./app", "--quiet"], 2), dict(out=None, options={"MPIGRAPH_QUIET": "1",
                                                                          "MPIGRAPH_VERBOSE": "1"}, mpiexec=None))]


def test_run_quiet_with_the_old_value_is_an_error_not_a_program(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "-n", "2", "--quiet", "1", "--", "./app"])
    assert info.value.code == 2
    assert "'1' before -- is not a program: --quiet and --verbose take no value" in capsys.readouterr().err


def analysed_run(tmp_path):
    run_dir = write_run(tmp_path / "run")
    assert mpigraph_cmd("analyze", run_dir, "--quiet").returncode == 0
    return run_dir


def test_view_out_writes_the_pictures_elsewhere(tmp_path):
    run_dir = analysed_run(tmp_path)
    before = sorted(os.listdir(run_dir))
    result = mpigraph_cmd("view", run_dir, "--out", tmp_path / "pictures", "--perfetto")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path / "pictures")) == ["ranks.svg", "timeline.html", "trace.json"]
    assert sorted(os.listdir(run_dir)) == before
    # Again: a directory of pictures may be written over; one of the user's files may not.
    assert mpigraph_cmd("view", run_dir, "--out", tmp_path / "pictures").returncode == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "ranks.svg").write_text("my chart")
    (tmp_path / "mine" / "notes.txt").write_text("my notes")
    assert_one_clean_error(mpigraph_cmd("view", run_dir, "--out", tmp_path / "mine"),
                           "%s is not an mpigraph run directory" % (tmp_path / "mine"))
    assert (tmp_path / "mine" / "ranks.svg").read_text() == "my chart"


def test_view_on_a_read_only_run_directory_names_the_fix(tmp_path):
    run_dir = analysed_run(tmp_path)
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    subprocess.run(["mount", "--bind", str(run_dir), str(mount_point)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount_point)], check=True)
        error = assert_one_clean_error(mpigraph_cmd("view", mount_point), "cannot write the views")
        assert error == ("mpigraph: error: cannot write the views into %s: Read-only file system (write them "
                         "elsewhere: mpigraph view %s --out <another directory>)" % (mount_point, mount_point))
        result = mpigraph_cmd("view", mount_point, "--out", tmp_path / "pictures")
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "pictures" / "timeline.html").is_file()
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True)


@pytest.mark.parametrize("nprocs", [None, 2])
def test_analyze_out_refuses_a_directory_of_the_users_files(tmp_path, nprocs):
    run_dir = write_run(tmp_path / "run")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.txt").write_text("my summary")
    (mine / "ranks.csv").write_text("my ranks")
    result = mpigraph_cmd("analyze", run_dir, "--out", mine, nprocs=nprocs)
    assert result.returncode == 2
    assert_one_clean_error(result, "%s is not an mpigraph run directory (it holds ranks.csv, summary.txt and no "
                                   "raw/ or mpigraph's run.json): refusing to write a report over its files" % mine)
    assert sorted(os.listdir(mine)) == ["ranks.csv", "summary.txt"]
    assert (mine / "summary.txt").read_text() == "my summary"
    # An earlier report there (its run.json is mpigraph's) may be written over.
    other = tmp_path / "report"
    assert mpigraph_cmd("analyze", run_dir, "--out", other, "--quiet").returncode == 0
    assert mpigraph_cmd("analyze", run_dir, "--out", other, "--quiet", nprocs=nprocs).returncode == 0


def test_what_counts_as_a_run_directory(tmp_path):
    from mpigraph.report import outdir

    (tmp_path / "empty").mkdir()
    (tmp_path / "run" / "raw").mkdir(parents=True)
    (tmp_path / "run" / "summary.txt").write_text("a report next to the logs")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "summary.txt").write_text("mine")
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "run.json").write_text('{"not": "mpigraph"}')
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "run.json").write_text('{"mpigraph_version": "0.1.0"}')
    (tmp_path / "report" / "summary.txt").write_text("")
    (tmp_path / "file").write_text("")
    for name in ("missing", "empty", "run"):
        outdir.check_run_dir(str(tmp_path / name))
        outdir.check_report_dir(str(tmp_path / name))
    outdir.check_report_dir(str(tmp_path / "report"))
    for name in ("mine", "fake", "report", "file"):
        with pytest.raises(outdir.OutputDirError):
            outdir.check_run_dir(str(tmp_path / name))
    for name in ("mine", "fake", "file"):
        with pytest.raises(outdir.OutputDirError):
            outdir.check_report_dir(str(tmp_path / name))


def test_config_lists_the_tool_variables():
    result = mpigraph_cmd("config", MPIGRAPH_MPICC="/opt/mpi/bin/mpicc")
    assert result.returncode == 0
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("MPIGRAPH_")}
    assert "mpicc on PATH" in rows["MPIGRAPH_MPICC"] and "mpiexec on PATH" in rows["MPIGRAPH_MPIEXEC"]
    assert "  MPIGRAPH_MPICC=/opt/mpi/bin/mpicc" in result.stdout.splitlines()
