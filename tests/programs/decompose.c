/*
 * Known-answer programs for `mpigraph decompose` (tests/test_decompose.py), 2 ranks.
 *
 *   usage: mpiexec -n 2 ./decompose cases [reps]         (default 9 reps per case)
 *          mpiexec -n 2 ./decompose imbalance K X0_US X1_US
 *
 * cases: each case runs `reps` times; its messages carry the case's tag.  Every case starts
 * with a "go" message (tag 100 + case) from rank 1 to rank 0, sent with MPI_Ssend: it returns
 * once rank 0 has it, so both ranks start their part at about the same time.  (On a busy host
 * ranks leave an MPI_Barrier milliseconds apart, and an eager MPI_Send may stay queued until
 * the sender's next MPI call, which a delay after it would postpone.)  Compute spins on
 * clock_gettime (busy, not sleep).
 *   tag 1  late sender: rank 0 computes 1 ms, then MPI_Send 8 B; rank 1 MPI_Recv at once.
 *   tag 2  eager late receiver: rank 0 MPI_Send 8 B at once; rank 1 computes 1 ms, MPI_Recv.
 *   tag 3  rendezvous late receiver: the same with 1 MiB.
 *   tag 4  deferred receive: rank 1 MPI_Irecv (before the go), computes 0.5 ms, MPI_Wait;
 *          rank 0 computes 1 ms, then MPI_Send 8 B.
 *   tag 5  the same with rank 0 computing 0.2 ms.
 *   tag 6  deferred rendezvous send: rank 0 MPI_Isend 1 MiB, computes 0.2 ms, MPI_Wait;
 *          rank 1 computes 1 ms, then MPI_Recv.
 * imbalance: K times: rank r computes X_r us, then MPI_Barrier (nothing else).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spin.h"

#define BIG (1 << 20)

static volatile double sink;   /* keeps the spins' result live */

static void compute_us(double us)
{
    sink = spin_us(us, 1.0);
}

static void go_send(int to, int tag)
{
    char c = 0;
    MPI_Ssend(&c, 1, MPI_BYTE, to, 100 + tag, MPI_COMM_WORLD);
}

static void go_recv(int from, int tag)
{
    char c;
    int flag;
    MPI_Recv(&c, 1, MPI_BYTE, from, 100 + tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* A go that arrived before this receive was posted is matched here, and MPICH may queue
     * the Ssend's acknowledgement until later MPI calls: polls that find nothing send it. */
    for (int i = 0; i < 64; i++)
        MPI_Iprobe(from, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

static void cases(int rank, int reps)
{
    char *buf = calloc(BIG, 1);
    MPI_Request req;
    for (int tag = 1; tag <= 6; tag++) {
        int n = (tag == 3 || tag == 6) ? BIG : 8;
        for (int i = 0; i < reps; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                go_recv(1, tag);
                if (tag == 1 || tag == 4 || tag == 5) {
                    compute_us(tag == 5 ? 200 : 1000);
                    MPI_Send(buf, n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
                } else if (tag == 6) {
                    MPI_Isend(buf, n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req);
                    compute_us(200);
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                } else {
                    MPI_Send(buf, n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
                }
            } else if (rank == 1) {
                if (tag == 4 || tag == 5) {
                    MPI_Irecv(buf, n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &req);
                    go_send(0, tag);
                    compute_us(500);
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                } else {
                    go_send(0, tag);
                    if (tag != 1)
                        compute_us(1000);
                    MPI_Recv(buf, n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
            }
        }
    }
    free(buf);
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc >= 2 && strcmp(argv[1], "cases") == 0) {
        cases(rank, argc >= 3 ? atoi(argv[2]) : 9);
    } else if (argc >= 5 && strcmp(argv[1], "imbalance") == 0) {
        int k = atoi(argv[2]);
        double x = atof(argv[rank == 0 ? 3 : 4]);
        for (int i = 0; i < k; i++) {
            compute_us(x);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (rank == 0) {
        fprintf(stderr, "usage: decompose cases [reps] | imbalance K X0_US X1_US\n");
    }
    MPI_Finalize();
    return 0;
}
