"""Fixtures shared by the test modules that build and run real MPI programs."""

import pytest

import mpi_env


@pytest.fixture(scope="module")
def wheel():
    """The MPI mpigraph was installed with (the mpich wheel's mpicc and mpiexec)."""
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    return mpi


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    """Compiles test programs into a directory of the module's own."""
    return mpi_env.Builder(str(tmp_path_factory.mktemp("programs")))


@pytest.fixture(scope="session")
def openmpi(tmp_path_factory):
    """Debian's Open MPI with a shim built for its ABI, once per session.  Only the tests that
    mpi_env.also_under_openmpi gave an Open MPI case ask for it, and only where it is installed."""
    return mpi_env.open_mpi(mpi_env.build_openmpi_shim(str(tmp_path_factory.mktemp("openmpi"))))
