/* MPI-4 persistent collectives, partitioned communication and neighbourhood collectives
 * (tests/test_mpi4.py), on any number of ranks >= 2:
 *   1. ITERATIONS times: MPI_Start of a persistent MPI_Allreduce_init request, MPI_Wait;
 *   2. a ring as a 1-D periodic Cartesian communicator: MPI_Neighbor_alltoall, then
 *      MPI_Ineighbor_allgather + MPI_Wait;
 *   3. ITERATIONS times: partitioned send to the right neighbour, receive from the left
 *      (MPI_Psend_init / MPI_Precv_init once; per iteration MPI_Startall of both, MPI_Pready
 *      of each partition, MPI_Waitall), then both requests freed.
 * Prints "mpi4: rank R sum S nbr N part P" (checks of the data moved). */
#include <mpi.h>
#include <stdio.h>

#define ITERATIONS 4
#define PARTITIONS 4

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* 1 */
    int in = rank + 1, sum = 0, acc = 0;
    MPI_Request coll;
    MPI_Allreduce_init(&in, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &coll);
    for (int it = 0; it < ITERATIONS; it++) {
        MPI_Start(&coll);
        MPI_Wait(&coll, MPI_STATUS_IGNORE);
        acc += sum;
    }
    MPI_Request_free(&coll);

    /* 2 */
    MPI_Comm ring;
    int dims[1] = {size}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    int send2[2] = {rank, rank}, recv2[2] = {-1, -1}, gathered[2] = {-1, -1};
    MPI_Neighbor_alltoall(send2, 1, MPI_INT, recv2, 1, MPI_INT, ring);
    MPI_Request nreq;
    MPI_Ineighbor_allgather(&rank, 1, MPI_INT, gathered, 1, MPI_INT, ring, &nreq);
    MPI_Wait(&nreq, MPI_STATUS_IGNORE);
    int nbr = recv2[0] + recv2[1] + gathered[0] + gathered[1];
    MPI_Comm_free(&ring);

    /* 3 */
    int out[PARTITIONS], got[PARTITIONS], part = 0;
    MPI_Request p[2];
    MPI_Psend_init(out, PARTITIONS, 1, MPI_INT, (rank + 1) % size, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &p[0]);
    MPI_Precv_init(got, PARTITIONS, 1, MPI_INT, (rank + size - 1) % size, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &p[1]);
    for (int it = 0; it < ITERATIONS; it++) {
        MPI_Startall(2, p);
        for (int i = 0; i < PARTITIONS; i++) {
            out[i] = rank * 100 + it;
            MPI_Pready(i, p[0]);
        }
        MPI_Waitall(2, p, MPI_STATUSES_IGNORE);
        for (int i = 0; i < PARTITIONS; i++)
            part += got[i];
    }
    MPI_Request_free(&p[0]);
    MPI_Request_free(&p[1]);
    printf("mpi4: rank %d sum %d nbr %d part %d\n", rank, acc, nbr, part);
    MPI_Finalize();
    return 0;
}
