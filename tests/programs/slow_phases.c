/*
 * A bulk-synchronous program with one known slow rank per phase (tests/test_toposort.py).
 *
 *   usage: mpiexec -n N ./slow_phases [phases]      (default 6)
 *
 * Phase p: every rank computes BASE_MS, rank (2p + 1) % N computes 4 x BASE_MS,
 * then all meet in MPI_Allreduce.  The critical path must run through the slow
 * rank's compute in every phase.  Compute spins on clock_gettime (no MPI call
 * inside, so it is one compute interval), timed by the wall clock.
 *
 * On a loaded machine a rank can be descheduled between two MPI calls and so
 * really be the slowest of a phase; each rank therefore measures its own
 * compute interval (from the return of one MPI_Allreduce to the next call) and
 * prints them at the end, one line per phase: "slow_phases: phase P rank R ns N".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

#define BASE_MS 5.0
#define MAX_PHASES 1000

int main(int argc, char **argv)
{
    int rank, size, phases = argc > 1 ? atoi(argv[1]) : 6;
    double x = 1.0, sum = 0.0, measured[MAX_PHASES];
    if (phases > MAX_PHASES)
        phases = MAX_PHASES;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < phases; p++) {
        double began = now();
        x = spin_ms(rank == (2 * p + 1) % size ? 4 * BASE_MS : BASE_MS, x);
        measured[p] = now() - began;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int p = 0; p < phases; p++)
        printf("slow_phases: phase %d rank %d ns %.0f\n", p, rank, measured[p] * 1e9);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
