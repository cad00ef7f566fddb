/* A deadlock through a collective (tests/test_inflight.py), on 3 ranks: rank 0 waits in
 * MPI_Recv for a message rank 1 sends only after an MPI_Barrier, which rank 1 (and rank 2)
 * enter: rank 1 waits for rank 0 to join the barrier, rank 0 for rank 1's message. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, value = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        MPI_Recv(&value, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        MPI_Send(&value, 1, MPI_INT, 0, 4, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
