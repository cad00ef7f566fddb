/* One-sided synchronisation the plain MPI_Win_wait does not cover, with one late rank
 * (tests/test_rma_sync.py).  Usage: rma_sync MODE ITERATIONS on P >= 3 ranks.  Every iteration
 * starts with an MPI_Barrier; a window on MPI_COMM_WORLD, target 0, origins 1..P-1:
 *
 *   test_early  each origin MPI_Win_start, MPI_Put, MPI_Win_complete, the last origin computing
 *               DELAY_MS between its start and its put; the target MPI_Win_post, then polls
 *               MPI_Win_test until it returns flag 1: the successful test ends the epoch, the
 *               loop waits for the last origin's complete.
 *   test_late   the target computes DELAY_MS before MPI_Win_post, then polls MPI_Win_test:
 *               every origin waits for the post (late post), the epoch ends at the test.
 *   lock        passive target: each origin r takes MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0), puts and
 *               unlocks; origin 1 puts, flushes (it holds the lock from there at the latest) and
 *               computes DELAY_MS before unlocking; the others compute DELAY_MS / 5 after the
 *               barrier, then wait for origin 1's lock (in whichever call their MPI blocks).
 *
 * Computing is a busy loop (spin.h), not a sleep.  Prints "rma_sync: rank R got G". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spin.h"

#define DELAY_MS 50

static double x;           /* the spins' result, kept live (spin.h) */

static void compute_ms(double ms)
{
    x = spin_ms(ms, x);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: rma_sync MODE ITERATIONS on 3 or more ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1];
    int iterations = atoi(argv[2]);
    int cells[64] = {0};
    MPI_Win win;
    MPI_Win_create(cells, sizeof cells, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Group world, origins, target;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero = 0;
    MPI_Group_excl(world, 1, &zero, &origins);
    MPI_Group_incl(world, 1, &zero, &target);
    long got = 0;
    for (int it = 0; it < iterations; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        int value = rank + it;
        if (!strcmp(mode, "lock")) {
            if (rank > 1)
                compute_ms(DELAY_MS / 5.0);
            if (rank > 0) {
                MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
                MPI_Put(&value, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
                if (rank == 1) {
                    MPI_Win_flush(0, win);      /* the lock is held from here at the latest */
                    compute_ms(DELAY_MS);
                }
                MPI_Win_unlock(0, win);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0)
                for (int r = 1; r < size && r < 64; r++)
                    got += cells[r];
        } else if (rank == 0) {
            if (!strcmp(mode, "test_late"))
                compute_ms(DELAY_MS);
            MPI_Win_post(origins, 0, win);
            int flag = 0;
            while (!flag)
                MPI_Win_test(win, &flag);
            for (int r = 1; r < size && r < 64; r++)
                got += cells[r];
        } else {
            MPI_Win_start(target, 0, win);
            if (!strcmp(mode, "test_early") && rank == size - 1)
                compute_ms(DELAY_MS);
            MPI_Put(&value, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
            MPI_Win_complete(win);
        }
    }
    MPI_Group_free(&origins);
    MPI_Group_free(&target);
    MPI_Group_free(&world);
    /* MPI_Win_free synchronises the window's ranks in MPICH, but the analysis does not pair it
     * (its wait is MPI time): a barrier first, so the run ends at a synchronisation it models. */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    printf("rma_sync: rank %d got %ld%s\n", rank, got, x < 0 ? " (spin)" : "");
    MPI_Finalize();
    return 0;
}
