"""calls_py.py: an mpi4py program with a known number of MPI calls per rank.

    mpiexec -n P python calls_py.py        (P >= 2)

The calls the script makes are listed in tests/programs/expected.py
(calls_py); mpi4py adds its own at import and at exit.  Rank 0 prints lines
that depend only on P.
"""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
check = 0

# 1. Bcast 1
param = np.array([42 if rank == 0 else 0], dtype="i")
comm.Bcast(param, root=0)
check += int(param[0])

# 2. Blocking ring: Send 1, Recv 1 (even ranks send first)
out, got = np.array([100 + rank], dtype="i"), np.empty(1, dtype="i")
if rank % 2 == 0:
    comm.Send(out, dest=right, tag=11)
    comm.Recv(got, source=left, tag=11)
else:
    comm.Recv(got, source=left, tag=11)
    comm.Send(out, dest=right, tag=11)
check += int(got[0])

# 3. Irecv 1, Isend 1, Waitall 1
nb_in, nb_out = np.empty(1, dtype="i"), np.array([7 * rank], dtype="i")
reqs = [comm.Irecv(nb_in, source=left, tag=12), comm.Isend(nb_out, dest=right, tag=12)]
MPI.Request.Waitall(reqs)
check += int(nb_in[0])

# 4. Allreduce 2 (world, then sub-communicator), Comm_split 1, Comm_free 1
total = np.empty(1, dtype="i")
comm.Allreduce(np.array([rank + 1], dtype="i"), total, op=MPI.SUM)
half = comm.Split(color=rank % 2, key=rank)
hsum = np.empty(1, dtype="i")
half.Allreduce(np.array([rank], dtype="i"), hsum, op=MPI.SUM)
half.Free()
check += int(total[0]) + 10 * int(hsum[0])

# 5. Barrier 1, Gather 1
comm.Barrier()
checks = np.empty(size, dtype="i") if rank == 0 else None
comm.Gather(np.array([check], dtype="i"), checks, root=0)
if rank == 0:
    print("calls_py: %d ranks" % size)
    for r in range(size):
        print("calls_py: rank %d checksum %d" % (r, checks[r]))
