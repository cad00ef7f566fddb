/*
 * mpigraph demo: a small MPI program that is slow on purpose.
 *
 *   usage: mpiexec -n 4 ./demo [iterations [base_ms [late_ms]]]
 *          (defaults: 20 iterations, BASE_MS, LATE_MS; tests on busy machines
 *          make the work longer so it dominates scheduling noise)
 *
 * Setup: rank 0 broadcasts the parameters (MPI_Bcast).
 * Each iteration has two phases:
 *
 *   1. Compute, then MPI_Allreduce.  Every rank computes BASE_MS (2 ms); the
 *      LAST rank (size-1) computes HEAVY_FACTOR (3x) as long.  The imbalance
 *      is fixed to that rank on purpose, so it is easy to find in the report.
 *   2. A point-to-point ring: every rank sends to its right neighbour
 *      (MPI_Send) and receives from its left one (MPI_Recv).  Rank 0 is a
 *      LATE SENDER: it computes LATE_MS (1 ms) more before it sends, so
 *      rank 1 waits in MPI_Recv for it.
 *
 * At the end: MPI_Reduce of a checksum, MPI_Barrier, and rank 0 prints one
 * line that does not depend on timing.
 *
 * What the report should show (4 ranks, 20 iterations):
 *   - rank size-1 spends the least time waiting in MPI_Allreduce: it arrives
 *     last.  Ranks 0..size-2 each wait about 2 x BASE_MS = 4 ms per
 *     iteration there (about 80 ms in total): imbalance at the collective,
 *     wait at N-to-N, caused by rank size-1.
 *   - rank 1 waits in MPI_Recv for rank 0 (late sender, about LATE_MS per
 *     iteration); the wait travels around the ring.
 *   - the critical path runs through rank size-1's compute before each
 *     allreduce and through rank 0's extra compute before each ring send.
 *
 * Compute is a busy loop timed with MPI_Wtime (not sleep), so it looks like
 * real work to any profiler.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define BASE_MS 2.0
#define HEAVY_FACTOR 3.0
#define LATE_MS 1.0

/* Spin for `ms` milliseconds; returns a value so the loop is not optimised away. */
static double compute(double ms, double x)
{
    double end = MPI_Wtime() + ms * 1e-3;
    while (MPI_Wtime() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 0.999999 + 1e-6;
    return x;
}

int main(int argc, char **argv)
{
    int rank, size, params[3] = {20, (int)(BASE_MS * 1000), (int)(LATE_MS * 1000)}; /* iterations, us, us */
    double sink = 1.0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        for (int i = 1; i < argc && i <= 3; i++)
            params[i - 1] = i == 1 ? atoi(argv[i]) : (int)(atof(argv[i]) * 1000);
    MPI_Bcast(params, 3, MPI_INT, 0, MPI_COMM_WORLD);
    int iterations = params[0];
    double base_ms = params[1] / 1000.0, late_ms = params[2] / 1000.0;
    int heavy = size - 1, right = (rank + 1) % size, left = (rank + size - 1) % size;

    long checksum = 0;
    for (int it = 0; it < iterations; it++) {
        /* Phase 1: imbalanced compute, then a collective. */
        sink = compute(rank == heavy ? HEAVY_FACTOR * base_ms : base_ms, sink);
        long mine = (long)(rank + 1) * (it + 1), total = 0;
        MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

        /* Phase 2: ring with a late sender (rank 0). */
        if (rank == 0)
            sink = compute(late_ms, sink);
        long token = total + rank, got = 0;
        if (size > 1) {
            /* Even ranks send first, odd ranks receive first: no deadlock even
               if MPI_Send does not buffer. */
            if (rank % 2 == 0) {
                MPI_Send(&token, 1, MPI_LONG, right, it, MPI_COMM_WORLD);
                MPI_Recv(&got, 1, MPI_LONG, left, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&got, 1, MPI_LONG, left, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&token, 1, MPI_LONG, right, it, MPI_COMM_WORLD);
            }
        } else {
            got = token;
        }
        checksum += got;
    }

    long all = 0;
    MPI_Reduce(&checksum, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("demo: %d ranks, %d iterations, checksum %ld\n", size, iterations, all);
    if (sink < 0) /* never true; keeps the compute loops alive */
        printf("%f\n", sink);
    MPI_Finalize();
    return 0;
}
