"""Shuffle by start time: rounds vs naive order, with and without compression, same run.

    mpiexec -n 4 python benchmarks/bench_shuffle.py [--iterations N] [--repeat R]
    mpiexec -n 4 python benchmarks/bench_shuffle.py --logs RUN_DIR

Every analysis rank holds the compute intervals of its trace ranks (synthetic
ones shaped like a halo-exchange program, N iterations per trace rank, as
many trace ranks as analysis ranks; or those of the raw logs in RUN_DIR,
trace rank t on analysis rank t % K) and the ranks shuffle them by start time
(mpigraph.comm.shuffle.shuffle_by_key) with each method in turn, R times,
interleaved.  Printed: the slowest rank's time (median and best of R), its
exchange time alone, the bytes that crossed the network, and the balance.
"""

import argparse
import os
import statistics
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_codec import compute_intervals, read_logs, synthetic_logs  # noqa: E402

from mpigraph.comm import shuffle  # noqa: E402
from mpigraph.comm.codec import Codec  # noqa: E402

METHODS = [
    ("rounds, encodings + zstd 3", "rounds", Codec(3)),
    ("rounds, zstd 3 on raw bytes", "rounds", Codec(3, transform=False)),
    ("rounds, encodings only", "rounds", Codec(None, transform=True)),
    ("rounds, no compression", "rounds", Codec(None)),
    ("naive, encodings + zstd 3", "naive", Codec(3)),
    ("naive, no compression", "naive", Codec(None)),
]


def local_intervals(comm, args):
    rank, size = comm.Get_rank(), comm.Get_size()
    if args.logs:
        logs = read_logs(args.logs)
        mine = [compute_intervals(t, logs[t]) for t in sorted(logs) if t % size == rank]
    else:
        mine = [compute_intervals(rank, synthetic_logs(size, args.iterations, seed=rank)[rank])]
    if not mine:
        return {"rank": np.zeros(0, np.int32), "t_start": np.zeros(0, np.int64),
                "t_end": np.zeros(0, np.int64), "call": np.zeros(0, np.int64)}
    return {k: np.concatenate([m[k] for m in mine]) for k in mine[0]}


def time_once(comm, columns, order, codec, sample_size):
    comm.Barrier()
    t = MPI.Wtime()
    out, stats = shuffle.shuffle_by_key(comm, columns, "t_start", codec, sample_size=sample_size, order=order)
    elapsed = comm.allreduce(MPI.Wtime() - t, op=MPI.MAX)
    return elapsed, shuffle.summarize(comm, stats), len(out["t_start"])


def break_even(results, size):
    """The network bandwidth per rank below which the codec's CPU time is paid back."""
    def cpu(label):
        return statistics.median(r[1].slowest("encode_seconds") + r[1].slowest("decode_seconds")
                                 for r in results[label])
    on, off = METHODS[0][0], "rounds, no compression"
    saved = (results[off][0][1].total("wire_bytes_sent") - results[on][0][1].total("wire_bytes_sent")) / size
    extra = cpu(on) - cpu(off)
    if extra <= 0:
        return "compression costs no extra CPU time here: it wins at any bandwidth"
    return ("compression saves %.1f MB per rank for %.4f s more CPU: it wins on networks slower "
            "than about %.0f MB/s per rank" % (saved / 1e6, extra, saved / extra / 1e6))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100_000,
                        help="iterations per synthetic trace rank (5 intervals each)")
    parser.add_argument("--logs", help="raw logs of a recorded run instead of synthetic intervals")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sample-size", type=int, default=shuffle.DEFAULT_SAMPLE_SIZE)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    columns = local_intervals(comm, args)
    rows = comm.allreduce(len(columns["t_start"]))
    raw = comm.allreduce(sum(c.nbytes for c in columns.values()))

    results = {label: [] for label, _, _ in METHODS}
    time_once(comm, columns, "rounds", Codec(3), args.sample_size)       # warm up both paths
    for _ in range(args.repeat):
        for label, order, codec in METHODS:
            results[label].append(time_once(comm, columns, order, codec, args.sample_size))

    if comm.Get_rank() == 0:
        print("%d ranks (%s), %d intervals, %.1f MB, %d rows/rank; best and median of %d runs" % (
            comm.Get_size(), MPI.Get_library_version().splitlines()[0].strip(), rows, raw / 1e6,
            rows // comm.Get_size(), args.repeat))
        print("%-30s %9s %9s %11s %12s %7s %9s" % ("method", "best s", "median s", "exchange s",
                                                 "wire MB", "ratio", "max/mean"))
        for label, _, _ in METHODS:
            times = [r[0] for r in results[label]]
            summary = results[label][0][1]
            exchange = statistics.median(r[1].slowest("exchange_seconds") for r in results[label])
            print("%-30s %9.4f %9.4f %11.4f %12.2f %6.1fx %9.3f" % (
                label, min(times), statistics.median(times), exchange,
                summary.total("wire_bytes_sent") / 1e6, summary.compression_ratio, summary.imbalance))
        print(break_even(results, comm.Get_size()))
        print("\nlast run of the first method, as the report prints it:")
        print(results[METHODS[0][0]][-1][1].format())


if __name__ == "__main__":
    main()
