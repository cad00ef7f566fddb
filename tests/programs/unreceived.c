/* A program that leaves one message unreceived: rank 0 sends a small (eager)
 * message with tag 77 to rank 1, which never receives it.  Everything else
 * is matched.  The message goes on a duplicate of MPI_COMM_WORLD that is never
 * freed: MPICH 5 fails MPI_Finalize when a built-in communicator still holds
 * an unmatched message (intermittently: only if it has arrived by then). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, x = 42, y = 0;
    MPI_Comm side;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &side);
    if (rank == 0) {
        MPI_Send(&x, 1, MPI_INT, 1, 5, MPI_COMM_WORLD);
        MPI_Send(&x, 1, MPI_INT, 1, 77, side); /* never received */
    } else if (rank == 1) {
        MPI_Recv(&y, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("unreceived: done\n");
    MPI_Finalize();
    return 0;
}
