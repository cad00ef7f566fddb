/* Exercises what the shim must record precisely (tests/test_shim.py):
 * wildcard receives with MPI_STATUS_IGNORE, request ids from the call to its
 * completion, persistent requests, communicator ids and collective sequence
 * numbers.  Run on 4 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, x, y = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    x = rank;

    /* Wildcard receive, status ignored: the record must still name left and tag 40+left. */
    MPI_Send(&x, 1, MPI_INT, right, 40 + rank, MPI_COMM_WORLD);
    MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* Nonblocking pair completed by one Waitall: two parts with the requests' ids. */
    MPI_Request reqs[2];
    MPI_Irecv(&y, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&x, 4 - 3, MPI_INT, right, 7, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);

    /* Two small sends that complete at once: MPICH gives both the same
     * built-in handle, yet each must complete as its own request. */
    MPI_Request both[4];
    int in2[2];
    MPI_Irecv(&in2[0], 1, MPI_INT, left, 11, MPI_COMM_WORLD, &both[0]);
    MPI_Irecv(&in2[1], 1, MPI_INT, right, 12, MPI_COMM_WORLD, &both[1]);
    MPI_Isend(&x, 1, MPI_INT, right, 11, MPI_COMM_WORLD, &both[2]);
    MPI_Isend(&x, 1, MPI_INT, left, 12, MPI_COMM_WORLD, &both[3]);
    MPI_Waitall(4, both, MPI_STATUSES_IGNORE);

    /* A persistent pair started twice. */
    MPI_Request p[2];
    MPI_Recv_init(&y, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &p[0]);
    MPI_Send_init(&x, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &p[1]);
    for (int i = 0; i < 2; i++) {
        MPI_Startall(2, p);
        MPI_Waitall(2, p, MPI_STATUSES_IGNORE);
    }
    MPI_Request_free(&p[0]);
    MPI_Request_free(&p[1]);

    /* Two communicators from one split; collectives on each. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Barrier(half);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, half);
    MPI_Bcast(&x, 1, MPI_INT, 1, half); /* root: rank 1 of each half = world 2 or 3 */
    MPI_Comm_free(&half);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("records done\n");
    MPI_Finalize();
    return 0;
}
