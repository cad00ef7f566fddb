"""Open MPI: a shim built against Open MPI's headers records and analyses an Open MPI program.

Open MPI's ABI differs from MPICH's, so the installed (MPICH-ABI) shim cannot
serve it; csrc/build.py builds one with MPIGRAPH_MPICC=mpicc.openmpi.  Needs
Debian's openmpi-bin and libopenmpi-dev (.ci/run installs them).
"""

import csv
import os
import shutil
import subprocess
import sys

import pytest

import mpi_env

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

pytestmark = pytest.mark.skipif(shutil.which("mpicc.openmpi") is None or shutil.which("mpirun.openmpi") is None,
                                reason="Open MPI (Debian openmpi-bin, libopenmpi-dev) is not installed")

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def openmpi_shim(tmp_path_factory):
    work = tmp_path_factory.mktemp("openmpi")
    sys.path.insert(0, os.path.join(REPO, "csrc"))
    try:
        from build import build_shim
    finally:
        sys.path.pop(0)
    return build_shim(str(work / "mpigraph"), str(work / "build"), mpicc="mpicc.openmpi")


def test_openmpi_program_is_recorded_and_analysed(openmpi_shim, tmp_path):
    exe = tmp_path / "calls"
    subprocess.run(["mpicc.openmpi", "-o", str(exe), os.path.join(HERE, "shim_programs", "records.c")], check=True)
    out = tmp_path / "run"
    env = dict(os.environ, **ROOT_ENV)
    ranks_env = {"LD_PRELOAD": openmpi_shim, "MPIGRAPH_OUT": str(out), "MPIGRAPH_QUIET": "1",
                 "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cmd = ["mpirun.openmpi", "-np", "4", "--oversubscribe"]
    for name, value in ranks_env.items():
        cmd += ["-x", "%s=%s" % (name, value)]
    result = subprocess.run(cmd + [str(exe)], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "records done\n"
    counts = {row["function"]: int(row["calls"]) for row in csv.DictReader(open(out / "functions.csv"))}
    # records.c, per rank: Send 1, Recv 1, Irecv 3, Isend 3, Startall 2, Comm_split 1, Bcast 1
    assert counts["MPI_Send"] == 4 and counts["MPI_Recv"] == 4
    assert counts["MPI_Isend"] == 12 and counts["MPI_Irecv"] == 12
    assert counts["MPI_Startall"] == 8 and counts["MPI_Comm_split"] == 4 and counts["MPI_Bcast"] == 4
    assert sorted(os.listdir(out / "raw")) == mpi_env.raw_files(4)
