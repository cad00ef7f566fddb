"""The shim starts the Python of the environment mpigraph is installed in.

A C program knows nothing of Python: the shim must find the interpreter
itself, from its own location (csrc/shim.c, find_python).  Here mpigraph is
installed into a fresh virtual environment that is never activated, and the
program runs with a minimal environment: the analysis must still run in it.
"""

import os
import subprocess
import sys
import sysconfig

import pytest

from mpigraph.shim.launcher import find_mpi_tool

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    path = tmp_path_factory.mktemp("env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    # The venv borrows numpy, mpi4py, pyarrow from the environment running the tests (itself
    # perhaps a virtual environment, whose packages --system-site-packages would not reach):
    # a .pth file puts its site-packages after the venv's own.  mpigraph itself, with its shim,
    # is installed into the venv's own site-packages.
    site = subprocess.run([str(path / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "borrowed.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", REPO],
                   check=True, cwd=str(path))
    return path


def test_c_program_is_analysed_in_the_installing_environment(venv, tmp_path):
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import mpigraph, os; "
                           "print(os.path.dirname(mpigraph.__file__))"],
                          capture_output=True, text=True, check=True, cwd=str(tmp_path)).stdout.strip()
    assert site.startswith(str(venv)), site
    exe = tmp_path / "records"
    subprocess.run([find_mpi_tool("mpicc"), "-o", str(exe), os.path.join(HERE, "shim_programs", "records.c")],
                   check=True)
    out = tmp_path / "run"
    minimal = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    cmd = [find_mpi_tool("mpiexec"), "-n", "4", "-genv", "LD_PRELOAD", os.path.join(site, "libmpigraph.so"),
           "-genv", "MPIGRAPH_OUT", str(out), "-genv", "MPIGRAPH_VERBOSE", "1", str(exe)]
    result = subprocess.run(cmd, env=minimal, capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "analysing with the Python of %s, mpigraph from %s" % (venv, site) in result.stderr
    assert (out / "summary.txt").exists() and (out / "ranks.parquet").exists()
