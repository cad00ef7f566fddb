"""A synthetic bulk-synchronous run, written as shim-exact raw logs (mpigraph.trace.record.write_log).

Each iteration, every rank computes (a per-rank load times log-normal noise,
nanosecond times), calls MPI_Allreduce (everybody leaves after the last one
arrived), then exchanges halos with MPI_Sendrecv to the right and to the left
(each ends after its partner arrived plus a transfer time).  Times are not
round numbers, so the view's compression is measured on realistic entropy.

    write_run(run_dir, ranks=64, calls_per_rank=100_000, seed=1)

Generated iteration by iteration with numpy over the ranks (the dependencies
run along time); the records of a rank are then filled column by column.
"""

import os

import numpy as np

from mpigraph.trace import functions as mpi_functions
from mpigraph.trace import record

FID = {f.name: f.id for f in mpi_functions.FUNCTIONS}
CALLS_PER_ITERATION = 3      # Allreduce, Sendrecv right, Sendrecv left
RECORDS_PER_ITERATION = 5    # the two Sendrecvs each have a receive part


def timings(ranks, iterations, seed=1):
    """(start, end) arrays [iteration, call in iteration, rank] of int64 ns."""
    rng = np.random.default_rng(seed)
    load = 150_000 * (1 + 0.5 * rng.random(ranks))          # ns of compute per iteration, per rank
    start = np.zeros((iterations, CALLS_PER_ITERATION, ranks), np.int64)
    end = np.zeros_like(start)
    t = np.full(ranks, 1_000_000, np.int64) + rng.integers(0, 5000, ranks)
    right, left = np.roll(np.arange(ranks), -1), np.roll(np.arange(ranks), 1)
    noise = rng.lognormal(0.0, 0.15, (iterations, ranks))
    small = rng.integers(300, 3000, (iterations, 4, ranks))
    for it in range(iterations):
        arrive = t + (load * noise[it]).astype(np.int64)
        start[it, 0] = arrive
        end[it, 0] = arrive.max() + 15_000 + small[it, 0]
        a = end[it, 0] + small[it, 1]
        start[it, 1] = a
        end[it, 1] = np.maximum(a, a[right]) + 2_000 + small[it, 2] // 4      # partner: the right neighbour
        b = end[it, 1] + small[it, 3] // 2
        start[it, 2] = b
        end[it, 2] = np.maximum(b, b[left]) + 2_000 + small[it, 2] // 3
        t = end[it, 2]
    return start, end


def write_run(run_dir, ranks=64, calls_per_rank=100_000, seed=1, job_id="synthetic"):
    """Write run_dir/raw/rank-<r>.log for every rank; returns the number of calls per rank."""
    iterations = max(1, (calls_per_rank - 2) // CALLS_PER_ITERATION)
    start, end = timings(ranks, iterations, seed)
    raw = os.path.join(str(run_dir), "raw")
    os.makedirs(raw, exist_ok=True)
    n = 2 + iterations * RECORDS_PER_ITERATION
    right, left = np.roll(np.arange(ranks), -1), np.roll(np.arange(ranks), 1)
    for r in range(ranks):
        recs = np.zeros(n, record.RECORD_DTYPE)
        recs["peer"], recs["tag"], recs["root"] = record.PEER_NONE, record.TAG_NONE, record.ROOT_NONE
        recs[0]["func"], recs[0]["t_start"], recs[0]["t_end"] = FID["MPI_Init"], 0, 900_000
        body = recs[1:-1].reshape(iterations, RECORDS_PER_ITERATION)
        it = np.arange(iterations)
        # 0: Allreduce
        body["func"][:, 0] = FID["MPI_Allreduce"]
        body["t_start"][:, 0], body["t_end"][:, 0] = start[:, 0, r], end[:, 0, r]
        body["bytes"][:, 0] = 8
        body["seq"][:, 0] = it + 1
        # 1, 2: Sendrecv to the right (send to right, receive from left), its receive part
        # 3, 4: Sendrecv to the left (send to left, receive from right), its receive part
        for k, (call, dest, source, tag) in enumerate(((1, right[r], left[r], 1), (2, left[r], right[r], 2))):
            c, p = 1 + 2 * k, 2 + 2 * k
            for j in (c, p):
                body["func"][:, j] = FID["MPI_Sendrecv"]
                body["t_start"][:, j], body["t_end"][:, j] = start[:, call, r], end[:, call, r]
                body["tag"][:, j] = tag
                body["bytes"][:, j] = 4096
            body["peer"][:, c], body["flags"][:, c] = dest, record.SEND
            body["peer"][:, p], body["flags"][:, p] = source, record.RECV | record.PART
        recs[-1]["func"] = FID["MPI_Finalize"]
        recs[-1]["t_start"] = recs[-1]["t_end"] = end[-1, 2, r] + 10_000
        header = record.empty_header(r, ranks)
        header["job_id"] = job_id.encode()
        header["hostname"] = b"synth%d" % (r // 16)
        header["pid"] = 1000 + r
        header["clock_source"] = record.CLOCK_MONOTONIC
        header["n_functions"] = len(mpi_functions.FUNCTIONS)
        header["flags"] = record.HEADER_FINALIZED
        record.write_log(os.path.join(raw, "rank-%d.log" % r), header, recs)
    return 2 + iterations * CALLS_PER_ITERATION
