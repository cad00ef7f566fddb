/* Ping-pong: N round trips of a `bytes`-byte message between ranks 0 and 1, nothing else:
 * every message is on the critical path, lambda_L = 2N.  Usage: pingpong N [bytes] */
#include <mpi.h>
#include <stdio.h>
#include "inject.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    wi_init();
    int rank, n = argc > 1 ? atoi(argv[1]) : 100, bytes = argc > 2 ? atoi(argv[2]) : 8;
    if (bytes < 8)
        bytes = 8;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc(bytes, 1);
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            wi_stamp(buf);
            MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            wi_hold(buf);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            wi_hold(buf);
            wi_stamp(buf);
            MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    free(buf);
    wi_finish(rank);
    MPI_Finalize();
    wi_report();
    return 0;
}
