/* A hybrid MPI + OpenMP program: MPI_Barrier N times (argv[1]) from the master
 * thread between OpenMP parallel loops, then "done N" on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, provided, n = argc > 1 ? atoi(argv[1]) : 100000;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double sum = 0;
    for (int i = 0; i < n; i++) {
#pragma omp parallel for reduction(+ : sum)
        for (int j = 0; j < 64; j++)
            sum += (double)i * j;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf(sum >= 0 ? "done %d\n" : "negative %d\n", n);
    MPI_Finalize();
    return 0;
}
