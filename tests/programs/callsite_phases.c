/* Per-phase call sites and per-call-site message sizes (tests/test_callsite_twins.py): MPI calls at
 * two call sites in two files (this file's MPI_Allreduce, callsites_halo.c's MPI_Sendrecv with the
 * ring's neighbours), in two MPI_Pcontrol phases with designed message sizes:
 *   phase 1, MPI_Pcontrol(1): ROUNDS1 times an exchange of SMALL doubles and an Allreduce of 1 double;
 *   phase 2, MPI_Pcontrol(2): ROUNDS2 times an exchange of BIG doubles and an Allreduce of WIDE doubles.
 * Built with callsites_halo.c and -g.  The test finds the Allreduce's line by its "site:" comment. */
#include <mpi.h>
#include <stdio.h>

#include "spin.h" /* busy compute between the calls */

#define ROUNDS1 3
#define ROUNDS2 2
#define SMALL 4
#define BIG 100
#define WIDE 16

void exchange(double *out, double *in, int n); /* callsites_halo.c */

__attribute__((noinline)) static void reduce_step(double *v, double *sum, int n)
{
    MPI_Allreduce(v, sum, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site: allreduce */
}

int main(int argc, char **argv)
{
    double out[BIG] = {1}, in[BIG], v[WIDE] = {1}, sum[WIDE];
    double total = 0;
    MPI_Init(&argc, &argv);
    MPI_Pcontrol(1);
    for (int i = 0; i < ROUNDS1; i++) {
        exchange(out, in, SMALL);
        v[0] = spin_us(50, 0);
        reduce_step(v, sum, 1);
        total += sum[0];
    }
    MPI_Pcontrol(2);
    for (int i = 0; i < ROUNDS2; i++) {
        exchange(out, in, BIG);
        v[0] = spin_us(50, 0);
        reduce_step(v, sum, WIDE);
        total += sum[0];
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("total %g\n", total > 0 ? 1.0 : 0.0);
    MPI_Finalize();
    return 0;
}
