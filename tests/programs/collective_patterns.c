/*
 * Known answers for the wait of every collective pattern (tests/test_collective_patterns.py).
 *
 *   usage: mpiexec -n 3 ./collective_patterns MODE [iterations]      (default 10)
 *
 * Each iteration: every rank leaves an MPI_Barrier together, computes BASE_MS,
 * one rank (the late one) computes DELAY_MS more, then all call the collective
 * of MODE:
 *
 *   bcast    MPI_Bcast, root 1, the root late:    ranks 0 and 2 wait DELAY_MS, the root 0
 *   scatter  MPI_Scatter, root 1, the root late:  the same
 *   reduce   MPI_Reduce, root 0, rank 2 late:     the root waits DELAY_MS, rank 2 0, rank 1
 *            (with the root) about 0
 *   gather   MPI_Gather, root 0, rank 2 late:     the same
 *   scan     MPI_Scan, rank 1 late:               rank 2 waits DELAY_MS, rank 1 0, rank 0 DELAY_MS
 *            where its MPI holds it until rank 1 comes (MPICH's recursive doubling does), else 0
 *   scan_reversed  MPI_Scan on a communicator that reverses the ranks (Comm_split, key
 *            size - 1 - rank), rank 1 late: rank 0, the last there, waits DELAY_MS, rank 1 0,
 *            rank 2 (the first there) as rank 0 of scan
 *   bcast_late_member   MPI_Bcast, root 1, rank 2 late: nobody waits (a barrier's rule
 *                       would have the root and rank 0 wait DELAY_MS)
 *   reduce_late_root    MPI_Reduce, root 0, the root late: the root waits 0; the non-roots
 *                       DELAY_MS where their MPI holds them until the root comes (MPICH's
 *                       shared-memory Reduce does), else 0
 *   bcast_big   MPI_Bcast of BIG doubles (8 MiB), root 0, rank 2 late: MPICH sends it in
 *               pieces (scatter, then allgather), which keeps the root and rank 1 in the call
 *               until rank 2 comes: both wait DELAY_MS for it (held), rank 2 0
 *   reduce_big  MPI_Reduce of BIG doubles, root 0, rank 2 late: the root waits DELAY_MS (early
 *               reduce); rank 1, which MPICH keeps until rank 2 comes, DELAY_MS (held)
 *   ibcast   MPI_Ibcast then MPI_Wait at once, root 1, the root late: the non-roots'
 *            MPI_Wait waits DELAY_MS, the root's 0
 *   ireduce_big   MPI_Ireduce of BIG doubles then MPI_Wait at once, root 0, the root late:
 *                 MPICH keeps the non-roots in their MPI_Wait until the root comes: their
 *                 Waits wait DELAY_MS for it (held), the root's 0
 *   ibcast_big    MPI_Ibcast of BIG doubles then MPI_Wait at once, root 0, rank 2 late:
 *                 MPICH keeps the root in its MPI_Wait until rank 2 comes: it waits DELAY_MS
 *                 (held); rank 1 DELAY_MS where its MPI held it too, else about 0; rank 2 0
 *
 *   iallreduce  no Barrier: MPI_Iallreduce, COMPUTE_MS of compute, MPI_Wait; the last
 *               rank computes IDELAY_MS before its MPI_Iallreduce, the others nothing:
 *               the others' MPI_Wait waits IDELAY_MS - COMPUTE_MS per iteration, the
 *               late rank's 0, and the critical path runs through the late rank.
 *
 * Compute spins on clock_gettime (no MPI call inside, no sleep).  On a loaded machine a
 * rank may be descheduled anywhere, so each rank also says when it really called the
 * collective (CLOCK_MONOTONIC, one clock for all ranks of a host), one line per iteration:
 * "collective_patterns: iteration I rank R late_ns N call_ns C wait_ns W": N how long its
 * late compute took (0 on the others), C the time just before the collective (the
 * nonblocking one), W just before the MPI_Wait (the modes with one; else 0).  The expected
 * wait of a rank is C of the rank it waits for less its own C (or W, in a Wait).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spin.h"

#define BASE_MS 2.0
#define DELAY_MS 20.0
#define IDELAY_MS 8.0
#define COMPUTE_MS 1.0
#define MAX_ITERATIONS 1000
#define BIG (1 << 20)

static int late_rank(const char *mode, int size)
{
    if (!strcmp(mode, "bcast") || !strcmp(mode, "scatter") || !strncmp(mode, "scan", 4) || !strcmp(mode, "ibcast"))
        return 1;
    if (!strcmp(mode, "reduce_late_root") || !strcmp(mode, "ireduce_big"))
        return 0;
    return size - 1;
}

int main(int argc, char **argv)
{
    int rank, size, iterations = argc > 2 ? atoi(argv[2]) : 10;
    const char *mode = argc > 1 ? argv[1] : "bcast";
    double x = 1.0, out[64], late_ns[MAX_ITERATIONS], call_ns[MAX_ITERATIONS], wait_ns[MAX_ITERATIONS];
    double in[64];
    if (iterations > MAX_ITERATIONS)
        iterations = MAX_ITERATIONS;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 64) {
        fprintf(stderr, "collective_patterns: at most 64 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int late = late_rank(mode, size);
    MPI_Comm reversed;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &reversed);
    for (int i = 0; i < 64; i++)
        in[i] = rank + i;
    double *big_in = calloc(BIG, sizeof(double)), *big_out = calloc(BIG, sizeof(double));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iterations; it++) {
        double began;
        if (!strcmp(mode, "iallreduce")) {
            MPI_Request request;
            began = now();
            if (rank == late)
                x = spin_ms(IDELAY_MS, x);
            late_ns[it] = rank == late ? (now() - began) * 1e9 : 0;
            call_ns[it] = now() * 1e9;
            MPI_Iallreduce(in, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
            x = spin_ms(COMPUTE_MS, x);
            wait_ns[it] = now() * 1e9;
            MPI_Wait(&request, MPI_STATUS_IGNORE);
            continue;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        x = spin_ms(BASE_MS, x);
        began = now();
        if (rank == late)
            x = spin_ms(DELAY_MS, x);
        late_ns[it] = rank == late ? (now() - began) * 1e9 : 0;
        wait_ns[it] = 0;
        call_ns[it] = now() * 1e9;
        if (!strcmp(mode, "bcast_big"))
            MPI_Bcast(big_in, BIG, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        else if (!strcmp(mode, "reduce_big"))
            MPI_Reduce(big_in, big_out, BIG, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        else if (!strncmp(mode, "bcast", 5))
            MPI_Bcast(in, 8, MPI_DOUBLE, 1, MPI_COMM_WORLD);
        else if (!strcmp(mode, "scatter"))
            MPI_Scatter(in, 1, MPI_DOUBLE, out, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
        else if (!strncmp(mode, "reduce", 6))
            MPI_Reduce(in, out, 8, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        else if (!strcmp(mode, "gather"))
            MPI_Gather(in, 1, MPI_DOUBLE, out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        else if (!strcmp(mode, "scan"))
            MPI_Scan(in, out, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        else if (!strcmp(mode, "scan_reversed"))
            MPI_Scan(in, out, 8, MPI_DOUBLE, MPI_SUM, reversed);
        else if (!strcmp(mode, "ireduce_big") || !strcmp(mode, "ibcast_big")) {
            MPI_Request request;
            if (!strcmp(mode, "ireduce_big"))
                MPI_Ireduce(big_in, big_out, BIG, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, &request);
            else
                MPI_Ibcast(big_in, BIG, MPI_DOUBLE, 0, MPI_COMM_WORLD, &request);
            wait_ns[it] = now() * 1e9;
            MPI_Wait(&request, MPI_STATUS_IGNORE);
        }
        else if (!strcmp(mode, "ibcast")) {
            MPI_Request request;
            MPI_Ibcast(in, 8, MPI_DOUBLE, 1, MPI_COMM_WORLD, &request);
            wait_ns[it] = now() * 1e9;
            MPI_Wait(&request, MPI_STATUS_IGNORE);
        }
        else {
            if (rank == 0)
                fprintf(stderr, "collective_patterns: unknown mode %s\n", mode);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int it = 0; it < iterations; it++)
        printf("collective_patterns: iteration %d rank %d late_ns %.0f call_ns %.0f wait_ns %.0f\n", it, rank,
               late_ns[it], call_ns[it], wait_ns[it]);
    if (x < 0)
        printf("%f\n", x);      /* keep the compute */
    fflush(stdout);
    MPI_Comm_free(&reversed);
    free(big_in);
    free(big_out);
    MPI_Finalize();
    return 0;
}
