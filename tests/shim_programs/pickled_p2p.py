"""mpi4py object messages (comm.send/recv), which use MPI_Mprobe and MPI_Mrecv.

Run on 3 ranks by tests/test_shim.py: each rank sends 5 objects to its right
neighbour, receives 5 from its left with wildcards, then one more by irecv.
"""
from mpi4py import MPI
c = MPI.COMM_WORLD
r, n = c.rank, c.size
for i in range(5):
    c.send({"i": i, "r": r}, dest=(r + 1) % n, tag=i)
    got = c.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
req = c.irecv(source=(r - 1) % n, tag=99)
c.send(r, dest=(r + 1) % n, tag=99)
x = req.wait()
if r == 0:
    print("ok", got["r"], x)
