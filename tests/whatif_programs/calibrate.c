/* The injector's base: the median one-way delivery time of a `bytes`-byte message between
 * ranks 0 and 1 (send start to the receive's return), over N ping-pongs after a warm-up;
 * rank 0 prints it in ns.  Usage: calibrate N [bytes] */
#include <mpi.h>
#include <stdio.h>
#include "inject.h"

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n = argc > 1 ? atoi(argv[1]) : 2000, bytes = argc > 2 ? atoi(argv[2]) : 8;
    if (bytes < 8)
        bytes = 8;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc(bytes, 1);
    int64_t *took = calloc(n, sizeof(int64_t));
    for (int i = -n / 10; i < n; i++) {
        int64_t t_send, now;
        if (rank == 0) {
            wi_stamp(buf);
            MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            now = wi_now();
            memcpy(&t_send, buf, 8);
            if (i >= 0)
                took[i] = now - t_send;
            wi_stamp(buf);
            MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 1) {
        qsort(took, n, sizeof(int64_t), cmp);
        MPI_Send(&took[n / 2], 1, MPI_INT64_T, 0, 1, MPI_COMM_WORLD);
    } else {
        int64_t median;
        MPI_Recv(&median, 1, MPI_INT64_T, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("%lld\n", (long long)median);
    }
    MPI_Finalize();
    return 0;
}
