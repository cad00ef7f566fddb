"""late_sender_py.py: mpi4py's lowercase send / recv with a late sender (issue 27: probes).

    mpiexec -n 2 python late_sender_py.py [rounds] [delay_ms]     (default 3 rounds of 200 ms)

Each round both ranks leave an MPI_Barrier; rank 1 computes `delay_ms` (a busy
loop on the wall clock, no MPI inside) and then sends a Python object with
comm.send; rank 0 receives it at once with comm.recv, which mpi4py does with
MPI_Mprobe + MPI_Mrecv: rank 0 waits about `delay_ms` for a late sender in its
MPI_Mprobe.  Rank 1 prints the delays it measured around its compute:
"late_sender_py: delay_ns N" (their sum).
"""
import sys
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
delay = (float(sys.argv[2]) if len(sys.argv) > 2 else 200.0) * 1e-3
measured = 0.0
for i in range(rounds):
    comm.Barrier()
    if rank == 1:
        began = time.perf_counter()
        x = 1.0
        while time.perf_counter() - began < delay:
            x = x * 0.999999 + 1e-6
        measured += time.perf_counter() - began
        comm.send({"round": i, "x": x}, dest=0, tag=7)
    elif rank == 0:
        got = comm.recv(source=1, tag=7)
        assert got["round"] == i
if rank == 1:
    print("late_sender_py: delay_ns %d" % round(measured * 1e9))
    sys.stdout.flush()
