/*
 * calls.c: an MPI program with an exactly known number of calls of each MPI
 * function per rank, for mpigraph's integration tests.
 *
 *   mpiexec -n P ./calls          (P >= 2)
 *
 * Rank 0 prints a few lines that depend only on P (deterministic).  The calls
 * each rank makes are listed in tests/programs/expected.py (calls_c), which
 * mirrors the steps below one by one: change both together.
 *
 * MPI_Test is the one exception: its loop runs until the request completes,
 * so its count depends on timing.  Every rank reports how many MPI_Test calls
 * it made on stderr, as "calls.c: rank R MPI_Test N", for the test to add up.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG 11

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);                                   /* Init 1 */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);                     /* Comm_rank 1 */
    MPI_Comm_size(MPI_COMM_WORLD, &size);                     /* Comm_size 1 */
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "calls.c needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long check = 0; /* this rank's checksum over every step */

    /* 1. Bcast: 1 per rank. */
    int param = rank == 0 ? 42 : 0;
    MPI_Bcast(&param, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check += param;

    /* 2. Blocking ring: Send 1, Recv 1 per rank (even ranks send first). */
    int out = 100 + rank, in = -1;
    if (rank % 2 == 0) {
        MPI_Send(&out, 1, MPI_INT, right, TAG, MPI_COMM_WORLD);
        MPI_Recv(&in, 1, MPI_INT, left, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&in, 1, MPI_INT, left, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&out, 1, MPI_INT, right, TAG, MPI_COMM_WORLD);
    }
    check += in;

    /* 3. Wildcard receives: rank 0 receives P-1 messages with MPI_ANY_SOURCE,
          MPI_ANY_TAG and MPI_STATUS_IGNORE; every other rank sends 1 (tag = its
          rank).  Rank 0: Recv P-1; others: Send 1. */
    if (rank == 0) {
        for (int i = 1; i < size; i++) {
            int v;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check += v;
        }
    } else {
        int v = 1000 * rank;
        MPI_Send(&v, 1, MPI_INT, 0, rank, MPI_COMM_WORLD);
    }
    /* Barrier 1: nobody's later messages can reach rank 0's wildcard receives. */
    MPI_Barrier(MPI_COMM_WORLD);

    /* 4. Nonblocking exchange with both neighbours: Irecv 2, Isend 2, Waitall 1. */
    int nb_in[2] = {-1, -1}, nb_out[2] = {rank, -rank};
    MPI_Request reqs[4];
    MPI_Irecv(&nb_in[0], 1, MPI_INT, left, TAG + 1, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(&nb_in[1], 1, MPI_INT, right, TAG + 2, MPI_COMM_WORLD, &reqs[1]);
    MPI_Isend(&nb_out[0], 1, MPI_INT, right, TAG + 1, MPI_COMM_WORLD, &reqs[2]);
    MPI_Isend(&nb_out[1], 1, MPI_INT, left, TAG + 2, MPI_COMM_WORLD, &reqs[3]);
    MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
    check += nb_in[0] - nb_in[1];

    /* 5. Sendrecv: 1 per rank (shift right). */
    int sr_out = rank * rank, sr_in = -1;
    MPI_Sendrecv(&sr_out, 1, MPI_INT, right, TAG + 3, &sr_in, 1, MPI_INT, left, TAG + 3,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    check += sr_in;

    /* 6. Irecv + Isend completed one by one: Irecv 1, Isend 1, Wait 2. */
    int w_in = -1, w_out = 7 * rank;
    MPI_Request r_recv, r_send;
    MPI_Irecv(&w_in, 1, MPI_INT, left, TAG + 4, MPI_COMM_WORLD, &r_recv);
    MPI_Isend(&w_out, 1, MPI_INT, right, TAG + 4, MPI_COMM_WORLD, &r_send);
    MPI_Wait(&r_send, MPI_STATUS_IGNORE);
    MPI_Wait(&r_recv, MPI_STATUS_IGNORE);
    check += w_in;

    /* 7. Test loop (count reported on stderr): Irecv 1, Isend 1, Wait 1,
          Test n >= 1. */
    int t_in = -1, t_out = 3 * rank, flag = 0, ntest = 0;
    MPI_Request t_recv, t_send;
    MPI_Irecv(&t_in, 1, MPI_INT, right, TAG + 5, MPI_COMM_WORLD, &t_recv);
    MPI_Isend(&t_out, 1, MPI_INT, left, TAG + 5, MPI_COMM_WORLD, &t_send);
    while (!flag) {
        MPI_Test(&t_recv, &flag, MPI_STATUS_IGNORE);
        ntest++;
    }
    MPI_Wait(&t_send, MPI_STATUS_IGNORE);
    check += t_in;

    /* 8. Communicator split by parity: Comm_split 1, Comm_rank 1, Comm_size 1,
          Allreduce 1 (on the sub-communicator), Comm_free 1. */
    MPI_Comm half;
    int hrank, hsize, hsum = 0;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    MPI_Allreduce(&rank, &hsum, 1, MPI_INT, MPI_SUM, half);
    MPI_Comm_free(&half);
    check += hsum * 10 + hrank * 100 + hsize;

    /* 9. Collectives on MPI_COMM_WORLD, 1 each: Allreduce, Reduce, Scan,
          Alltoall, Scatter, Gather (the last one collects the checksums). */
    int asum = 0, rsum = 0, scan = 0, one = rank + 1;
    MPI_Allreduce(&one, &asum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce(&one, &rsum, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Scan(&one, &scan, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check += asum + scan;

    int *a2a_out = malloc(size * sizeof(int)), *a2a_in = malloc(size * sizeof(int));
    int *scat = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) {
        a2a_out[i] = rank * size + i;
        scat[i] = 5 * i;
    }
    MPI_Alltoall(a2a_out, 1, MPI_INT, a2a_in, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++)
        check += a2a_in[i];
    int mine = -1;
    MPI_Scatter(scat, 1, MPI_INT, &mine, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check += mine;

    /* 10. Nonblocking barrier: Ibarrier 1, Wait 1. */
    MPI_Request ib;
    MPI_Ibarrier(MPI_COMM_WORLD, &ib);
    MPI_Wait(&ib, MPI_STATUS_IGNORE);

    /* 11. Persistent requests, 3 rounds: Send_init 1, Recv_init 1, Start 6,
           Wait 6, Request_free 2. */
    int p_out = 0, p_in = -1;
    MPI_Request p_send, p_recv;
    MPI_Send_init(&p_out, 1, MPI_INT, right, TAG + 6, MPI_COMM_WORLD, &p_send);
    MPI_Recv_init(&p_in, 1, MPI_INT, left, TAG + 6, MPI_COMM_WORLD, &p_recv);
    for (int round = 0; round < 3; round++) {
        p_out = rank + 10 * round;
        MPI_Start(&p_recv);
        MPI_Start(&p_send);
        MPI_Wait(&p_send, MPI_STATUS_IGNORE);
        MPI_Wait(&p_recv, MPI_STATUS_IGNORE);
        check += p_in;
    }
    MPI_Request_free(&p_send);
    MPI_Request_free(&p_recv);

    /* 12. Probe for a message of unknown length: Send 1, Probe 1, Get_count 1,
           Recv 1 (even ranks send first). */
    int *buf = malloc((rank + 1) * sizeof(int));
    for (int i = 0; i <= rank; i++)
        buf[i] = i;
    MPI_Status st;
    int n = 0, *got = NULL;
    for (int phase = 0; phase < 2; phase++) {
        if ((phase == 0) == (rank % 2 == 0)) {
            MPI_Send(buf, rank + 1, MPI_INT, right, TAG + 7, MPI_COMM_WORLD);
        } else {
            MPI_Probe(left, TAG + 7, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_INT, &n);
            got = malloc(n * sizeof(int));
            MPI_Recv(got, n, MPI_INT, left, TAG + 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    check += n * 1000;
    for (int i = 0; i < n; i++)
        check += got[i];

    /* 13. Collect and print: Gather 1, Barrier 1 (the second one). */
    long *all = malloc(size * sizeof(long));
    MPI_Gather(&check, 1, MPI_LONG, all, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("calls: %d ranks, param %d, max %d\n", size, param, rsum);
        for (int i = 0; i < size; i++)
            printf("calls: rank %d checksum %ld\n", i, all[i]);
        /* No fflush: stdout stays buffered until MPI_Finalize/exit, as in most programs. */
    }
    fprintf(stderr, "calls.c: rank %d MPI_Test %d\n", rank, ntest);

    free(a2a_out); free(a2a_in); free(scat); free(buf); free(got); free(all);
    MPI_Finalize();                                           /* Finalize 1 */
    return 0;
}
