"""Topological-sort critical path: time and intervals/s of toposort and parallel-toposort as the
number of intervals grows.

    python benchmarks/bench_toposort.py                          # one analysis rank
    mpiexec -n 2 python benchmarks/bench_toposort.py --sizes 1e5 1e6 4e6

The intervals are synthetic but shaped like a bulk-synchronous run of
--trace-ranks ranks: phases of one long compute interval per rank (jittered,
one slow rank per phase) followed by a few short intervals between MPI calls
(ns times, as the clock stage gives them).  Every analysis rank builds the
intervals of the trace ranks it owns, so nothing is read from disk: what is
timed is the path stage proper (gather or shuffle, sort, groups, scans, the
path on rank 0), best of --repeat runs, the slowest rank's time.  The shuffle
statistics (bytes raw and on the wire) are those of the last run.
"""

import argparse
import time

import numpy as np
from mpi4py import MPI

from mpigraph.comm import parallel
from mpigraph.comm import shuffle
from mpigraph.paths import toposort
from mpigraph.comm.codec import Codec

SHORT_PER_PHASE = 4          # short intervals between the MPI calls of a phase


def trace_rank_intervals(rank, n, n_ranks, seed=0):
    """About n intervals of one trace rank: phases of one long and SHORT_PER_PHASE short ones."""
    rng = np.random.default_rng([seed, rank])
    per_phase = SHORT_PER_PHASE + 1
    phases = max(n // per_phase, 1)
    slow = (np.arange(phases) % n_ranks) == rank
    long_ns = (1_000_000 * (1 + 0.1 * rng.random(phases)) * np.where(slow, 3, 1)).astype(np.int64)
    short_ns = rng.integers(200, 2_000, (phases, SHORT_PER_PHASE))
    call_ns = rng.integers(300, 3_000, (phases, per_phase))
    # Phases start together on all ranks (the collective that closes a phase releases everyone).
    phase_len = 3_300_000 + per_phase * 3_000 + SHORT_PER_PHASE * 2_000
    durations = np.concatenate([long_ns[:, None], short_ns], axis=1)
    offsets = np.cumsum(np.concatenate([np.zeros((phases, 1), np.int64), (durations + call_ns)[:, :-1]], axis=1),
                        axis=1)
    start = (np.arange(phases)[:, None] * phase_len + offsets).ravel() + rng.integers(0, 500)
    end = start + durations.ravel()
    m = len(start)
    return {"start": start.astype(np.int64), "end": end.astype(np.int64), "rank": np.full(m, rank, np.int32),
            "call": np.arange(m, dtype=np.int64), "before": np.full(m, 7, np.uint16),
            "after": np.full(m, 8, np.uint16)}


def owned_intervals(comm, total, n_trace_ranks):
    ownership = parallel.Ownership(n_trace_ranks, comm.Get_size())
    parts = [trace_rank_intervals(r, total // n_trace_ranks, n_trace_ranks) for r in ownership.ranks_of(comm.rank)]
    return shuffle.concat_batches(parts, like=toposort.empty_intervals())


def timed(comm, intervals, algorithm, codec, repeat):
    best, result = float("inf"), None
    for _ in range(repeat):
        comm.Barrier()
        t = time.perf_counter()
        chosen, stats = toposort.critical_path_of(comm, intervals, algorithm, codec)
        if comm.rank == 0:
            toposort.path_from_chosen(chosen, 0, int(chosen["end"].max()) if len(chosen["end"]) else 0)
        best = min(best, comm.allreduce(time.perf_counter() - t, op=MPI.MAX))
        result = (chosen, stats)
    return best, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6, 4e6],
                        help="total intervals over all trace ranks")
    parser.add_argument("--trace-ranks", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--level", type=int, default=3, help="zstandard level of the compressed runs")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        print("toposort benchmark: %d analysis rank(s), %d trace ranks, best of %d" % (
            comm.size, args.trace_ranks, args.repeat))
        print("%-18s %-5s %10s %9s %12s %7s %12s %12s %6s %9s" % (
            "algorithm", "zstd", "intervals", "seconds", "intervals/s", "groups", "raw bytes", "wire bytes",
            "ratio", "max/mean"))
    for size in args.sizes:
        intervals = owned_intervals(comm, int(size), args.trace_ranks)
        n = comm.allreduce(len(intervals["start"]))
        paths = {}
        for algorithm in toposort.ALGORITHMS:
            for level in (args.level, None):
                codec = Codec(level, hints=toposort.CODEC_HINTS)
                seconds, (chosen, stats) = timed(comm, intervals, algorithm, codec, args.repeat)
                summary = shuffle.summarize(comm, stats)
                paths[algorithm] = chosen
                if comm.rank == 0:
                    print("%-18s %-5s %10d %9.4f %12.3g %7d %12d %12d %5.1fx %9.3f" % (
                        algorithm, level or "off", n, seconds, n / seconds, len(chosen["start"]),
                        summary.total("raw_bytes_sent"), summary.total("wire_bytes_sent"),
                        summary.compression_ratio, summary.imbalance))
        if comm.rank == 0:   # a benchmark of a wrong answer is worthless
            assert all(np.array_equal(paths["toposort"][c], paths["parallel-toposort"][c])
                       for c in paths["toposort"]), "parallel and sequential paths differ"


if __name__ == "__main__":
    main()
