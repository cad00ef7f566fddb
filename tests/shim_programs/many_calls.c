/* MPI_Barrier N times (argv[1]), then "done N" on rank 0: a log bigger than one growth chunk. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, n = argc > 1 ? atoi(argv[1]) : 100000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < n; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("done %d\n", n);
    MPI_Finalize();
    return 0;
}
