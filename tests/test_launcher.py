"""`mpigraph run`: every MPIGRAPH_* setting has a flag, and the flags reach the ranks."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mpigraph.trace import record as R
from mpigraph.cli import RUN_SETTINGS, setting_flag
from mpigraph.shim.launcher import find_mpi_tool

HERE = os.path.dirname(os.path.abspath(__file__))


def mpigraph(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mpigraph"] + list(args), capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    exe = tmp_path_factory.mktemp("build") / "records"
    subprocess.run([find_mpi_tool("mpicc"), "-o", str(exe), os.path.join(HERE, "shim_programs", "records.c")],
                   check=True)
    return str(exe)


def test_every_setting_but_out_has_a_flag():
    flags = {setting_flag(s.name) for s in RUN_SETTINGS}
    assert {"--analyze", "--algorithm", "--clock", "--threshold", "--splits", "--compress", "--quiet",
            "--verbose", "--record", "--clock-source", "--python"} <= flags


def test_flags_reach_the_shim(program, tmp_path):
    out = tmp_path / "run"
    result = mpigraph("run", "-n", "4", "--out", str(out), "--analyze", "off", "--clock-source", "monotonic",
                      "--", program, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "records done\n"   # no summary: the analysis was off
    assert "analysis off" in result.stderr and not (out / "summary.txt").exists()
    header = np.fromfile(out / "raw" / "rank-0.log", R.HEADER_DTYPE, count=1)[0]
    assert header["clock_source"] == R.CLOCK_MONOTONIC


def test_a_bad_flag_value_stops_before_the_launch(program, tmp_path):
    result = mpigraph("run", "-n", "4", "--out", str(tmp_path / "run"), "--clock", "sundial", "--", program,
                      cwd=str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == ("mpigraph: error: MPIGRAPH_CLOCK='sundial' is not valid; "
                                     "accepted: pingpong, barrier, none")
    assert not (tmp_path / "run").exists()


def test_run_prints_the_summary_once_after_the_program(program, tmp_path):
    result = mpigraph("run", "-n", "4", "--out", str(tmp_path / "run"), "--", program, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("records done\n")
    assert result.stdout.count("mpigraph %s report" % __import__("mpigraph").__version__) == 1


def test_run_quiet_prints_only_the_program(program, tmp_path):
    out = tmp_path / "run"
    result = mpigraph("run", "-n", "4", "--quiet", "--out", str(out), "--", program, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "records done\n" and result.stderr == ""
    assert (out / "summary.txt").is_file()      # quiet, not idle: the report is there


def test_run_verbose_prints_the_stages(program, tmp_path):
    result = mpigraph("run", "-n", "4", "--verbose", "--out", str(tmp_path / "run"), "--", program,
                      cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    stages = [line.split()[1] for line in result.stderr.splitlines() if line.startswith("mpigraph: ")
              and len(line.split()) > 2 and line.split()[2].replace(".", "").isdigit()]
    assert stages == ["trace", "clock", "match", "metrics", "traffic", "path", "report"], result.stderr
    assert result.stdout.count("mpigraph %s report" % __import__("mpigraph").__version__) == 1


def users_directory(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.txt").write_text("my summary\n")
    (mine / "ranks.csv").write_text("my ranks\n")
    return mine


def assert_untouched(mine):
    assert sorted(os.listdir(mine)) == ["ranks.csv", "summary.txt"]
    assert (mine / "summary.txt").read_text() == "my summary\n" and (mine / "ranks.csv").read_text() == "my ranks\n"


def test_run_refuses_a_directory_of_the_users_files_before_the_program_starts(program, tmp_path):
    mine = users_directory(tmp_path)
    result = mpigraph("run", "-n", "4", "--out", str(mine), "--", program, cwd=str(tmp_path))
    assert result.returncode == 2
    assert result.stdout == ""       # the program did not run
    assert result.stderr == ("mpigraph: error: %s is not an mpigraph run directory (it holds ranks.csv, summary.txt "
                             "and no raw/): refusing to write a run over its files; name a new or empty directory "
                             "with --out\n" % mine)
    assert_untouched(mine)


def test_the_shim_refuses_a_directory_of_the_users_files_at_mpi_init(program, tmp_path):
    """MPIGRAPH_OUT set by hand (no launcher): the program runs on without profiling."""
    import mpi_env

    mine = users_directory(tmp_path)
    result = mpi_env.mpirun(mpi_env.wheel_mpi(), 4, [program], out=mine)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "records done\n"
    assert ("rank 0: %s is not an mpigraph run directory (it holds files and no raw/): refusing to write a run "
            "over its files (choose a new or empty MPIGRAPH_OUT); the program runs on without profiling" % mine
            in result.stderr), result.stderr
    assert_untouched(mine)


def test_an_empty_or_run_directory_is_used(program, tmp_path):
    import mpi_env

    empty = tmp_path / "empty"
    empty.mkdir()
    result = mpi_env.mpirun(mpi_env.wheel_mpi(), 4, [program], out=empty, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert sorted(os.listdir(empty / "raw")) == mpi_env.raw_files(4)
    assert (empty / "summary.txt").is_file()
    # A run directory whose raw/ is empty (the logs moved away): the next run goes in.
    for log in os.listdir(empty / "raw"):
        os.remove(empty / "raw" / log)
    result = mpigraph("run", "-n", "4", "--quiet", "--out", str(empty), "--", program, cwd=str(tmp_path))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert sorted(os.listdir(empty / "raw")) == mpi_env.raw_files(4)
