/* A polling loop with nothing to find (tests/test_polling.py): each rank makes N calls of
 * MPI_Iprobe on a tag no one sends, then M failed MPI_Test calls on a receive its partner
 * satisfies only afterwards, then both exchange one message.  Usage: polling N M.
 * Prints "polling: rank R MPI_Iprobe N MPI_Test T" (the program's own count of its calls). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, flag, value = 0, got = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = atol(argv[1]), m = atol(argv[2]), probes = 0, tests = 0;
    for (long i = 0; i < n; i++) {
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        probes++;
    }
    /* The partner's message is sent after the barrier: the tests before it fail. */
    MPI_Request req;
    MPI_Irecv(&got, 1, MPI_INT, 1 - rank, 1, MPI_COMM_WORLD, &req);
    flag = 0;
    for (long i = 0; i < m; i++) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        tests++;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Send(&rank, 1, MPI_INT, 1 - rank, 1, MPI_COMM_WORLD);
    while (!flag) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        tests++;
    }
    printf("polling: rank %d MPI_Iprobe %ld MPI_Test %ld got %d\n", rank, probes, tests, got);
    MPI_Finalize();
    return 0;
}
