/* Two ranks each MPI_Recv from the other (tag 99) and never send: a deadlock.
 * tests/test_inflight.py kills the job once both ranks show the receive in flight. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, value = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Recv(&value, 1, MPI_INT, 1 - rank, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&value, 1, MPI_INT, 1 - rank, 99, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
