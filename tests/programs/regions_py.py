"""Named regions from Python (tests/test_regions.py): mpigraph.phase around "short" (SHORT_MS of
CPU work, an Allreduce) and mpigraph.phase_begin/phase_end around "long" (LONG_MS, an
Allreduce).  Runs with or without the shim; rank 0 prints "regions ok"."""
import time

import numpy as np
from mpi4py import MPI

import mpigraph

SHORT_MS = 20
LONG_MS = 300


def busy(ms):
    """Spin (no sleep) until the wall clock has moved on by `ms` milliseconds."""
    end, x = time.perf_counter() + ms / 1e3, 0.0
    while time.perf_counter() < end:
        x += sum(range(1000)) * 1e-9
    return x


comm = MPI.COMM_WORLD
x, y = np.zeros(1), np.zeros(1)
with mpigraph.phase("short"):
    x[0] = busy(SHORT_MS)
    comm.Allreduce(x, y)
mpigraph.phase_begin("long")
x[0] = busy(LONG_MS)
comm.Allreduce(x, y)
mpigraph.phase_end("long")
if comm.rank == 0:
    print("regions ok")
