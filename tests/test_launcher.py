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
