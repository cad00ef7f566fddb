"""Under mpiexec: callsites.stats.Sites.share resolves each object's sites on one analysis rank
and gives every rank the places and ids that one Sites of every trace rank gives.

    python callsites_share_check.py RAW_DIR N_TRACE_RANKS

Each analysis rank reads its own trace ranks' sites unresolved (as the report stage does), then
shares.  Prints one line per analysis rank: "rank R resolved N"; exits 1 with the difference
where a rank's places or ids differ from the serial ones.
"""

import sys

import numpy as np
from mpi4py import MPI

from mpigraph.callsites import resolve, stats
from mpigraph.comm.parallel import Ownership


def main():
    raw, n_trace_ranks = sys.argv[1], int(sys.argv[2])
    comm = MPI.COMM_WORLD
    serial = stats.Sites(raw, range(n_trace_ranks))
    resolve.object_index.cache_clear()
    asked = []
    locate = resolve.locate
    resolve.locate = lambda path, offset: asked.append((path, offset)) or locate(path, offset)
    mine = Ownership(n_trace_ranks, comm.size).ranks_of(comm.rank)
    shared = stats.Sites(raw, mine, resolved=False).share(comm)
    resolve.locate = locate
    failed = []
    if shared.places != serial.places:
        failed.append("places %r != %r" % (shared.places, serial.places))
    for rank in mine:
        if not np.array_equal(shared.lut[rank], serial.lut[rank]):
            failed.append("trace rank %d ids %r != %r" % (rank, shared.lut[rank], serial.lut[rank]))
    print("rank %d resolved %d" % (comm.rank, len(asked)), flush=True)
    if failed:
        print("\n".join(failed), flush=True)
        comm.Abort(1)


if __name__ == "__main__":
    main()
