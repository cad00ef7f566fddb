"""A Python program whose MPI_Finalize does not go through the shim: it calls the library's
PMPI_Finalize itself, as a binding bound past the preloaded wrapper would."""

import ctypes
import os

from mpi4py import MPI

from mpigraph.comm import launch

MPI.COMM_WORLD.Barrier()
ctypes.CDLL(launch.loaded_libmpi(), mode=os.RTLD_NOLOAD).PMPI_Finalize()
