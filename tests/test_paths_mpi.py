"""The distributed path algorithms under mpiexec with 1, 2 and 3 analysis ranks.

Serial pytest starts tests/path_mpi_check.py under mpiexec, which compares every
algorithm (splits on and off, distributed over the job's ranks) with the serial
reference on rank 0, and asserts on its report.
"""

import os
import sys

import pytest

import mpi_env

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "path_mpi_check.py")


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_distributed_paths_equal_the_serial_reference(ranks):
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK], ranks)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert "path_mpi_check on %d ranks: OK" % ranks in stdout, stdout[-4000:]
    assert stdout.count("all 8 equal") == 10, stdout
