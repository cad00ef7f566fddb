"""Critical-path algorithms on synthetic bulk-synchronous runs of growing size.

    python benchmarks/bench_path.py [--sizes 1e5,1e6,1e7] [--ranks 16] [--budget 120]
    mpiexec -n 2 python benchmarks/bench_path.py --algorithms parallel-delta-stepping

Each size is a target edge count; the run (mpigraph.testing.synth.ring_run: compute with a
slow rank per phase, ring send/receive, an Allreduce every 4th
phase) gets as many phases as that takes.  For every algorithm the
graph is built and searched, splits on; printed: build and total seconds
(slowest analysis rank), edges per second of the whole call, bucket rounds
(delta-stepping) or settled vertices (Dijkstra), and the path's length.  An
algorithm whose last size took more than --budget seconds is not run on the
next, ten times bigger one (the line says so).
"""

import argparse
import os
import sys
import time

from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpigraph import paths
from mpigraph.paths import graph, segments
from mpigraph.testing import synth  # noqa: E402

EDGES_PER_RANK_ITERATION = 6.5      # measured on this generator: used only to choose iterations


def run_once(comm, inp, algorithm, splits):
    comm.Barrier()
    started = time.perf_counter()
    stats = {}
    path = paths.critical_path(comm, inp, algorithm, splits, stats=stats)
    seconds = comm.allreduce(time.perf_counter() - started, op=MPI.MAX)
    path = segments.whole(comm, path)       # the distributed searches' parts, for the row counts
    return seconds, stats, path


def build_seconds(comm, inp):
    comm.Barrier()
    started = time.perf_counter()
    graph.build(comm, inp)
    return comm.allreduce(time.perf_counter() - started, op=MPI.MAX)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7", help="target edge counts, comma-separated")
    parser.add_argument("--ranks", type=int, default=16, help="trace ranks of the synthetic run")
    parser.add_argument("--algorithms", default=",".join(paths.GRAPH_ALGORITHMS))
    parser.add_argument("--budget", type=float, default=120.0, help="seconds; see the module doc")
    parser.add_argument("--no-splits", action="store_true")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    algorithms = args.algorithms.split(",")
    too_slow = {}
    if comm.rank == 0:
        print("analysis ranks %d, trace ranks %d, splits %s" % (comm.size, args.ranks, not args.no_splits))
        print("%-10s %-24s %10s %9s %9s %12s %10s %12s" % ("edges", "algorithm", "vertices", "build s", "total s",
                                                           "edges/s", "rounds", "path s"))
    for size in (int(float(s)) for s in args.sizes.split(",")):
        iterations = max(1, int(size / (EDGES_PER_RANK_ITERATION * args.ranks)))
        sim = synth.ring_run(args.ranks, iterations, sync_every=4, seed=1, clock_noise_ns=2_000)
        inp = synth.path_input(sim, comm.size, comm.rank)
        del sim
        build = build_seconds(comm, inp)
        for algorithm in algorithms:
            if algorithm in too_slow:
                if comm.rank == 0:
                    print("%-10s %-24s skipped: %.1f s at the previous size" % ("%.0e" % size, algorithm,
                                                                                too_slow[algorithm]))
                continue
            seconds, stats, path = run_once(comm, inp, algorithm, not args.no_splits)
            if comm.rank == 0:
                print("%-10d %-24s %10d %9.2f %9.2f %12.0f %10d %12.6f" % (
                    stats["edges"], algorithm, stats["vertices"], build, seconds, stats["edges"] / seconds,
                    stats["rounds"], path["duration"].sum() / 1e9), flush=True)
            if seconds > args.budget:
                too_slow[algorithm] = seconds


if __name__ == "__main__":
    main()
