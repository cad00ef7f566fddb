"""Call sites (tests/test_callsites.py): an mpi4py program calling MPI_Barrier STEPS times.

mpi4py's extension module makes the MPI calls: their call site is its frame (the object and
function inside mpi4py), not this file's line."""
from mpi4py import MPI

STEPS = 9

comm = MPI.COMM_WORLD
for _ in range(STEPS):
    comm.Barrier()
