"""Columnar codec: compression ratio and encode/decode MB/s on MPI call records.

    python benchmarks/bench_codec.py                 # records a real run, then measures
    python benchmarks/bench_codec.py --synthetic     # synthetic records only, no MPI run
    python benchmarks/bench_codec.py --logs DIR      # the raw logs of an earlier run

By default it compiles a small halo-exchange program (ring neighbours with
Isend/Irecv/Waitall, an Allreduce every 10 iterations, compute of a jittered
length), runs it under the shim with recording on and analysis off, and reads
the raw logs.  Two data sets are measured, each in batches of --batch-rows rows
of one rank (what one shuffle message carries):

- records:   every field of the raw log records (mpigraph/trace/record.py)
- intervals: the compute intervals that topological sorting shuffles, one
             row per gap between two consecutive calls of a rank: rank, start
             (end of the call before), end (start of the call after), call
             index of the call after

and, for comparison, zstandard on the raw bytes of the same batches
(--levels sets the zstandard levels tried).
"""

import argparse
import glob
import os
import subprocess
import tempfile
import time

import numpy as np

from mpigraph.comm import codec
from mpigraph.trace import record
from mpigraph.comm.codec import Codec

WORKLOAD_C = r"""
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static void compute(double seconds) { double end = now() + seconds; while (now() < end) ; }

int main(int argc, char **argv)
{
    int rank, size, iterations = argc > 1 ? atoi(argv[1]) : 20000;
    double halo_out[2][64], halo_in[2][64], sum = 0, total;
    MPI_Request req[4];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    srand(rank + 1);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int it = 0; it < iterations; it++) {
        compute(20e-6 * (1.0 + 0.2 * rand() / RAND_MAX) * (rank == size - 1 ? 1.3 : 1.0));
        MPI_Irecv(halo_in[0], 64, MPI_DOUBLE, left, it, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(halo_in[1], 64, MPI_DOUBLE, right, it, MPI_COMM_WORLD, &req[1]);
        MPI_Isend(halo_out[0], 64, MPI_DOUBLE, left, it, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(halo_out[1], 64, MPI_DOUBLE, right, it, MPI_COMM_WORLD, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        sum += halo_in[0][0] + halo_in[1][0];
        if (it % 10 == 0)
            MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
"""


# -- data ----------------------------------------------------------------------

def record_real_run(workdir, ranks, iterations):
    """Compile and run the workload under the shim; returns the run directory."""
    from mpigraph.shim.lib import library_path
    from mpigraph.shim.launcher import find_mpi_tool
    src, exe = os.path.join(workdir, "workload.c"), os.path.join(workdir, "workload")
    with open(src, "w") as f:
        f.write(WORKLOAD_C)
    subprocess.run([find_mpi_tool("mpicc"), "-O2", "-o", exe, src], check=True)
    out = os.path.join(workdir, "run")
    subprocess.run([find_mpi_tool("mpiexec"), "-n", str(ranks), "-genv", "LD_PRELOAD", library_path(),
                    "-genv", "MPIGRAPH_OUT", out, "-genv", "MPIGRAPH_ANALYZE", "off",
                    exe, str(iterations)], check=True)
    return out


def read_logs(run_dir):
    """{rank: records} of the raw logs in run_dir/raw (or run_dir itself)."""
    paths = sorted(glob.glob(os.path.join(run_dir, "raw", "rank-*.log"))
                   or glob.glob(os.path.join(run_dir, "rank-*.log")))
    if not paths:
        raise SystemExit("no rank-*.log under %s" % run_dir)
    logs = {}
    for path in paths:
        header = np.fromfile(path, record.HEADER_DTYPE, count=1)[0]
        logs[int(header["world_rank"])] = np.fromfile(path, record.RECORD_DTYPE, count=int(header["n_records"]),
                                                      offset=record.HEADER_SIZE)
    return logs


def synthetic_logs(ranks, iterations, seed=0):
    """Records shaped like the workload's, in ns: per iteration ~20 us of compute, then
    Irecv, Irecv, Isend, Isend (~0.4 us each) and a Waitall (1-5 us) with 4 part records."""
    funcs = np.array([10, 10, 11, 11, 20], np.uint16)     # any ids: only their repetition matters
    logs = {}
    for rank in range(ranks):
        rng = np.random.default_rng([seed, rank])
        func = np.tile(funcs, iterations)
        first = np.tile(np.arange(5) == 0, iterations)
        gap = np.where(first, rng.integers(18000, 26000, len(func)), rng.integers(80, 400, len(func)))
        dur = np.where(func == 20, rng.integers(1000, 5000, len(func)), rng.integers(150, 600, len(func)))
        start = 10**12 + np.cumsum(gap + np.concatenate(([0], dur[:-1])))
        reps = np.where(func == 20, 5, 1)                 # a Waitall is followed by 4 parts
        call = np.repeat(np.arange(len(func)), reps)
        part = np.arange(len(call)) - np.repeat(np.cumsum(reps) - reps, reps) > 0
        r = np.zeros(len(call), record.RECORD_DTYPE)
        r["func"], r["t_start"], r["t_end"] = func[call], start[call], start[call] + dur[call]
        r["flags"] = np.where(part, record.PART, 0)
        neighbours = np.array([(rank - 1) % ranks, (rank + 1) % ranks] * 2 + [-1], np.int32)
        r["peer"] = np.where(part, neighbours[np.arange(len(call)) % 4], neighbours[call % 5])
        r["tag"] = call // 5
        r["bytes"] = np.where(func[call] == 20, 0, 512)
        r["request"] = np.where(func[call] == 20, 0, call)
        logs[rank] = r
    return logs


def record_columns(records):
    return {name: np.ascontiguousarray(records[name]) for name in records.dtype.names}


def compute_intervals(rank, records):
    """One row per gap between two consecutive calls (part records are not calls)."""
    calls = np.flatnonzero((records["flags"] & record.PART) == 0)
    starts, ends = records["t_start"][calls], records["t_end"][calls]
    return {
        "rank": np.full(len(calls) - 1, rank, np.int32),
        "t_start": ends[:-1].copy(),
        "t_end": starts[1:].copy(),
        "call": calls[1:].astype(np.int64),
    }


def toposort_intervals(run_dir):
    """{rank: the interval columns the toposort path stage shuffles}: ns times from the clock
    stage, plus rank, call index and the function ids around each interval (a recorded run)."""
    from mpigraph.clock import models as clock
    from mpigraph.paths import toposort
    from mpigraph.trace import logs as trace
    run = trace.open_run(run_dir)
    return {r: toposort.rank_intervals(log, clock.to_ns(log, log.records["t_start"]),
                                       clock.to_ns(log, log.records["t_end"])) for r, log in run.logs.items()}


def batches(columns, batch_rows):
    n = len(next(iter(columns.values())))
    return [{k: v[a:a + batch_rows] for k, v in columns.items()} for a in range(0, n, batch_rows)]


# -- measurements ------------------------------------------------------------------

def best_time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def measure(batch_list, c, repeat):
    """(raw bytes, encoded bytes, encode s, decode s) over all batches."""
    raw = sum(a.nbytes for b in batch_list for a in b.values())
    t_enc, encoded = best_time(lambda: [c.encode(b) for b in batch_list], repeat)
    t_dec, decoded = best_time(lambda: [codec.decode(e) for e in encoded], repeat)
    for b, d in zip(batch_list, decoded):          # a benchmark of a wrong answer is worthless
        assert all(np.array_equal(b[k].view(np.uint8), d[k].view(np.uint8)) for k in b)
    return raw, sum(map(len, encoded)), t_enc, t_dec


def column_sizes(batch_list, c):
    """{column: (encoding, bytes)}: each column alone (a ref column with the column it refers
    to, minus that column alone), summed over the batches."""
    names = list(batch_list[0])
    sizes = {n: 0 for n in names}
    encodings = {}
    for b in batch_list:
        full = codec.read_header(c.encode(b)).encodings()
        for name in names:
            enc = full[name]
            encodings.setdefault(name, set()).add(enc)
            if enc.startswith("ref:"):
                ref = enc[4:]
                pair = len(c.encode({ref: b[ref], name: b[name]}, hints={ref: full[ref], name: enc}))
                sizes[name] += pair - len(c.encode({ref: b[ref]}, hints={ref: full[ref]}))
            else:
                sizes[name] += len(c.encode({name: b[name]}, hints={name: enc}))
    return {n: ("/".join(sorted(encodings[n])), sizes[n]) for n in names}


def order0_bytes(values):
    """Bytes at the order-0 entropy of `values`: what an ideal coder of independent values needs."""
    if not len(values):
        return 0.0
    _, counts = np.unique(values, return_counts=True)
    p = counts / counts.sum()
    return float(-(counts * np.log2(p)).sum() / 8)


def entropy_floor(batch_list, name, encoding):
    """Order-0 entropy of the values the column's encoding leaves (deltas, differences, runs),
    summed over the batches: a reference for how close the codec gets, not a hard bound."""
    total = 0.0
    for b in batch_list:
        u = b[name].view("u%d" % b[name].dtype.itemsize)
        if encoding == "delta":
            total += order0_bytes(u[1:] - u[:-1])
        elif encoding.startswith("ref:"):
            total += order0_bytes(u - b[encoding[4:]].view(u.dtype))
        elif encoding == "rle":
            starts = np.flatnonzero(np.diff(u)) + 1 if len(u) else np.zeros(0, np.int64)
            lengths = np.diff(np.concatenate(([0], starts, [len(u)])))
            total += order0_bytes(u[np.concatenate(([0], starts))]) + order0_bytes(lengths)
        else:
            total += order0_bytes(u)
    return total


def report_dataset(title, batch_list, levels, repeat):
    rows = sum(len(next(iter(b.values()))) for b in batch_list)
    raw = sum(a.nbytes for b in batch_list for a in b.values())
    print("\n== %s: %d rows in %d batches, %.1f MB raw, %d bytes per row" % (
        title, rows, len(batch_list), raw / 1e6, raw // max(rows, 1)))
    c = Codec(levels[0])
    print("per column (codec level %d; each column encoded alone, header included):" % levels[0])
    print("  %-10s %-14s %12s %12s %8s %14s" % ("column", "encoding", "raw bytes", "encoded", "ratio",
                                                 "order-0 floor"))
    floor_total = 0.0
    for name, (enc, size) in column_sizes(batch_list, c).items():
        col_raw = sum(b[name].nbytes for b in batch_list)
        floor = entropy_floor(batch_list, name, enc.split("/")[0])
        floor_total += floor
        print("  %-10s %-14s %12d %12d %7.1fx %14d" % (name, enc, col_raw, size, col_raw / max(size, 1), floor))
    print("  order-0 entropy of the encoded values, all columns: %d bytes (%.1fx)" % (
        floor_total, raw / max(floor_total, 1)))
    print("whole batches:")
    print("  %-32s %12s %8s %12s %12s" % ("method", "bytes", "ratio", "encode MB/s", "decode MB/s"))
    methods = [("codec off (raw bytes + header)", Codec(None))]
    methods += [("encodings only, no zstd", Codec(None, transform=True))]
    for level in levels:
        methods += [("zstd %d on raw bytes" % level, Codec(level, transform=False)),
                    ("codec: encodings + zstd %d" % level, Codec(level))]
    for label, m in methods:
        raw, size, t_enc, t_dec = measure(batch_list, m, repeat)
        print("  %-32s %12d %7.1fx %12.0f %12.0f" % (label, size, raw / size, raw / 1e6 / t_enc, raw / 1e6 / t_dec))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--logs", help="run directory (or raw/ directory) of an earlier run")
    source.add_argument("--synthetic", action="store_true", help="synthetic records, no MPI run")
    parser.add_argument("--ranks", type=int, default=2, help="ranks of the recorded run")
    parser.add_argument("--iterations", type=int, default=20000, help="iterations of the recorded run")
    parser.add_argument("--batch-rows", type=int, default=65536)
    parser.add_argument("--levels", type=int, nargs="+", default=[3, 1, 9])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many timings")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as workdir:
        if args.synthetic:
            logs, what = synthetic_logs(args.ranks, args.iterations), "synthetic records"
            topo = None
        else:
            run_dir = args.logs or record_real_run(workdir, args.ranks, args.iterations)
            logs, what = read_logs(run_dir), "recorded run %s" % (args.logs or "(halo-exchange workload)")
            topo = toposort_intervals(run_dir)
    print("data: %s, %d ranks, %d records" % (what, len(logs), sum(map(len, logs.values()))))
    record_batches = [b for r in sorted(logs) for b in batches(record_columns(logs[r]), args.batch_rows)]
    interval_batches = [b for r in sorted(logs) for b in batches(compute_intervals(r, logs[r]), args.batch_rows)]
    report_dataset("records", record_batches, args.levels, args.repeat)
    report_dataset("compute intervals", interval_batches, args.levels, args.repeat)
    if topo is not None:
        report_dataset("toposort intervals (ns, the path stage's columns)",
                       [b for r in sorted(topo) for b in batches(topo[r], args.batch_rows)], args.levels, args.repeat)


if __name__ == "__main__":
    main()
