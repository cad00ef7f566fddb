/* Programs that do not end well, for the post-mortem tests (tests/test_postmortem.py).
 *
 *   crash hang-rank2   ranks 0-3 run SHARED_ITERATIONS Allreduces together; then
 *                      rank 2 calls MPI_Iprobe (and prints "rank 2 probing" once)
 *                      until it is killed from outside, while ranks 0, 1, 3 run
 *                      PRIVATE_ITERATIONS Allreduces on a communicator without
 *                      it and call MPI_Finalize.
 *   crash segv-rank1   the shared Allreduces; the others send rank 1 a token
 *                      and wait in a Barrier that rank 1 never joins: once it
 *                      has the 3 tokens it dereferences a null pointer.
 *   crash late-rank3   the shared Allreduces, then rank 3 sleeps LATE_SECONDS
 *                      before MPI_Finalize; everyone finishes normally.
 *
 * The shared phase also leaves one nonblocking receive that never completes
 * on every rank (tag 999, nobody sends it): an operation left incomplete. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHARED_ITERATIONS 50
#define PRIVATE_ITERATIONS 20
#define LATE_SECONDS 4

static void shared_phase(int rank)
{
    static int never;
    MPI_Request pending;
    MPI_Irecv(&never, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &pending);
    for (int i = 0; i < SHARED_ITERATIONS; i++) {
        int in = rank + i, out = 0;
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
}

static void hang_rank2(int rank)
{
    MPI_Comm others;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 2 ? MPI_UNDEFINED : 0, rank, &others);
    if (rank == 2) {
        printf("rank 2 probing\n");
        fflush(stdout);
        for (;;) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            usleep(200);
        }
    }
    for (int i = 0; i < PRIVATE_ITERATIONS; i++) {
        int in = i, out = 0;
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, others);
    }
    MPI_Comm_free(&others);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    shared_phase(rank);
    if (!strcmp(mode, "hang-rank2"))
        hang_rank2(rank);
    else if (!strcmp(mode, "segv-rank1")) {
        /* Rank 1 crashes only once every rank has recorded its last Allreduce. */
        int token = 0;
        if (rank == 1) {
            for (int i = 0; i < 3; i++)
                MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            volatile int *nowhere = NULL;
            *nowhere = 1;
        } else
            MPI_Send(&token, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "late-rank3")) {
        if (rank == 3)
            sleep(LATE_SECONDS);
    } else {
        fprintf(stderr, "usage: crash hang-rank2|segv-rank1|late-rank3\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    printf("rank %d finalized\n", rank);
    return 0;
}
