/* Call sites (tests/test_callsites.py): MPI calls at two call sites in two files.
 * This file's MPI_Allreduce runs REDUCES times per rank; callsites_halo.c's MPI_Sendrecv runs
 * EXCHANGES times per rank.  The test finds each call's line by its "site:" comment. */
#include <mpi.h>
#include <stdio.h>

#include "spin.h" /* busy compute between the calls */
#include <stdlib.h>

#define REDUCES 7
#define EXCHANGES 5

void exchange(double *out, double *in, int n); /* callsites_halo.c */

__attribute__((noinline)) static double reduce_step(double v)
{
    double sum = 0;
    MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site: allreduce */
    return sum;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double out[4] = {1, 2, 3, 4}, in[4];
    double total = 0;
    for (int i = 0; i < EXCHANGES; i++) {
        exchange(out, in, 4); /* site: exchange caller */
        total += spin_us(100, 0);
    }
    for (int i = 0; i < REDUCES; i++)
        total += reduce_step(spin_us(50, 0)); /* site: reduce caller */
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm pair; /* communicators.csv names the call site that created it */
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &pair); /* site: split */
    MPI_Comm_free(&pair);
    if (rank == 0)
        printf("total %g\n", total > 0 ? 1.0 : 0.0);
    MPI_Finalize();
    return 0;
}
