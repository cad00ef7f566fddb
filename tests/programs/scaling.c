/*
 * A strong-scaling test program for `mpigraph model` (tests/test_model_runs.py).
 *
 *   usage: mpiexec -n P ./scaling [iterations] [total_work]   (defaults 40, 6000000)
 *
 * Each iteration: a fixed total amount of busy compute, total_work steps of a
 * floating-point recurrence split evenly over the P ranks (so the compute per
 * rank falls as 1/P); then a halo exchange with both neighbours on a periodic
 * ring (two MPI_Sendrecv of HALO doubles each; with P = 1 a rank is its own
 * neighbour); then an MPI_Allreduce of one double.  Per rank and iteration: 2
 * point-to-point messages of 8 * HALO bytes and one collective.
 *
 * Compute is counted work, not a timed spin: the work is the same whatever
 * the machine's load, which is what strong scaling divides.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define HALO 512

static double work(long steps, double x)
{
    for (long i = 0; i < steps; i++)
        x = x * 0.9999999 + 1e-7;
    return x;
}

int main(int argc, char **argv)
{
    int rank, size;
    int iterations = argc > 1 ? atoi(argv[1]) : 40;
    long total = argc > 2 ? atol(argv[2]) : 6000000L;
    double send_left[HALO], send_right[HALO], from_left[HALO], from_right[HALO];
    double x = 1.0, sum = 0.0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    /* An even split: the first total % size ranks take one step more. */
    long mine = total / size + (rank < total % size ? 1 : 0);
    for (int it = 0; it < iterations; it++) {
        x = work(mine, x);
        for (int i = 0; i < HALO; i++)
            send_left[i] = send_right[i] = x + i;
        MPI_Sendrecv(send_left, HALO, MPI_DOUBLE, left, 0, from_right, HALO, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(send_right, HALO, MPI_DOUBLE, right, 1, from_left, HALO, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        x += 1e-9 * (from_left[0] + from_right[HALO - 1]);
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        x = sum / size;
    }
    if (rank == 0)
        printf("scaling: P %d iterations %d work %ld result %.6f\n", size, iterations, total, x);
    MPI_Finalize();
    return 0;
}
