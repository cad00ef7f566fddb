/* Writes to stdout and stderr on every rank and exits with status 3 after MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d sum %d\n", rank, sum);
    fprintf(stderr, "rank %d says something on stderr\n", rank);
    MPI_Finalize();
    return 3;
}
