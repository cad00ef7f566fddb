/*
 * A Waitall that completes receives from a late sender and a send that ties
 * (issue 27: wait-state kinds per message).
 *
 *   usage: mpiexec -n 2 ./waitall_tie [rounds] [delay_ms]     (default 4 rounds of 50 ms)
 *
 * Each round, after an MPI_Barrier, rank 1 computes `delay_ms` (a spin on the
 * wall clock) and then posts Isend tag 1, Isend tag 2 (to rank 0) and Irecv
 * tag 3 (from rank 0), and waits for them.  Rank 0 posts Irecv tag 1, Irecv
 * tag 2 and Isend tag 3 at once and waits in MPI_Waitall for the late rank:
 * its two receives waited for their late sender and its send for its late
 * receiver, which posted a few microseconds after its sends: the send "ties"
 * with the receives, a little longer.  The wait is late sender (two messages
 * of three), not late receiver.  Rank 1 prints the delays it measured:
 * "waitall_tie: delay_ns N" (their sum).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    double delay_ms = argc > 2 ? atof(argv[2]) : 50.0, x = 1.0, measured = 0.0;
    int rank, out[3] = {1, 2, 3}, in[3];
    MPI_Request req[3];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < rounds; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            double began = now();
            x = spin_until(began + delay_ms * 1e-3, x);
            measured += now() - began;
            MPI_Isend(&out[0], 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(&out[1], 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &req[1]);
            MPI_Irecv(&in[2], 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &req[2]);
            MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
        } else if (rank == 0) {
            MPI_Irecv(&in[0], 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(&in[1], 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &req[1]);
            MPI_Isend(&out[2], 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &req[2]);
            MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
        }
    }
    if (rank == 1)
        printf("waitall_tie: delay_ns %.0f (x %.3f)\n", measured * 1e9, x > 0 ? 1.0 : 0.0);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
