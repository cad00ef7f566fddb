"""Open MPI: a shim built against Open MPI's headers records and analyses an Open MPI program.

Open MPI's ABI differs from MPICH's, so the installed (MPICH-ABI) shim cannot
serve it; csrc/build.py builds one with MPIGRAPH_MPICC=mpicc.openmpi.  Needs
Debian's openmpi-bin and libopenmpi-dev (.ci/run installs them).
"""

import csv
import os
import subprocess

import pytest

import mpi_env

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = pytest.mark.skipif(mpi_env.open_mpi() is None,
                                reason="Open MPI (Debian openmpi-bin, libopenmpi-dev) is not installed")


def test_openmpi_program_is_recorded_and_analysed(openmpi, tmp_path):
    exe = tmp_path / "calls"
    subprocess.run([openmpi.mpicc, "-o", str(exe), os.path.join(HERE, "shim_programs", "records.c")], check=True)
    out = tmp_path / "run"
    result = mpi_env.mpirun(openmpi, 4, [exe], out=out, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "records done\n"
    counts = {row["function"]: int(row["calls"]) for row in csv.DictReader(open(out / "functions.csv"))}
    # records.c, per rank: Send 1, Recv 1, Irecv 3, Isend 3, Startall 2, Comm_split 1, Bcast 1
    assert counts["MPI_Send"] == 4 and counts["MPI_Recv"] == 4
    assert counts["MPI_Isend"] == 12 and counts["MPI_Irecv"] == 12
    assert counts["MPI_Startall"] == 8 and counts["MPI_Comm_split"] == 4 and counts["MPI_Bcast"] == 4
    assert sorted(os.listdir(out / "raw")) == mpi_env.raw_files(4)
