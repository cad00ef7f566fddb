/* Halo exchange with overlap between ranks 0 and 1: each iteration Irecv, Isend, compute
 * W us, Waitall.  The message is hidden behind the computation until the latency exceeds
 * about W: lambda_L = 0, then N.  Usage: halo N W_us [bytes] */
#include <mpi.h>
#include <stdio.h>
#include "inject.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    wi_init();
    int rank, n = argc > 1 ? atoi(argv[1]) : 100, bytes = argc > 3 ? atoi(argv[3]) : 8;
    int64_t w = (int64_t)(1000 * (argc > 2 ? atof(argv[2]) : 50.0));
    if (bytes < 8)
        bytes = 8;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int peer = 1 - rank;
    char *sbuf = calloc(bytes, 1), *rbuf = calloc(bytes, 1);
    MPI_Request req[2];
    for (int i = 0; i < n; i++) {
        MPI_Irecv(rbuf, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &req[0]);
        wi_stamp(sbuf);
        MPI_Isend(sbuf, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &req[1]);
        wi_compute(w);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        wi_hold(rbuf);
    }
    free(sbuf);
    free(rbuf);
    wi_finish(rank);
    MPI_Finalize();
    wi_report();
    return 0;
}
