"""netprobe's ping-pongs (mpigraph.network.runner.ping_pongs) on 2 ranks with a responder that
is always late: one pair, an emulated spin of SPIN seconds, and the responder's spin made to end
LATE_BY seconds past its intended end in every round trip, as a spin descheduled at its end is.

    mpiexec -n 2 python netprobe_late_responder.py SPIN LATE_BY

Rank 0 prints: the pair's minimum RTT, the round trips counted late, the round trips.
"""

import sys

import numpy as np
from mpi4py import MPI

from mpigraph.network import runner

SPIN, LATE_BY = float(sys.argv[1]), float(sys.argv[2])
on_time = runner._spin
runner._spin = lambda mpi, until: on_time(mpi, until + LATE_BY)
schedule = runner.Schedule(rounds=[np.array([[0, 1]])], pair_ids=[np.array([0])], spin=np.array([SPIN]))
out = runner.ping_pongs(MPI.COMM_WORLD, schedule, warmup=1, repeats=6, passes=2)
if MPI.COMM_WORLD.Get_rank() == 0:
    rtt, _, late, trips = out[0]
    print(rtt, late, trips)
