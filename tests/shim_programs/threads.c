/* MPI from several threads at once (MPI_THREAD_MULTIPLE), on 2 ranks.
 *
 * Each of THREADS threads of a rank runs ITERATIONS rounds with the same
 * thread of the other rank, on its own tag t: an MPI_Sendrecv (a call record
 * and its receive part), then MPI_Isend + MPI_Irecv + MPI_Waitall (two
 * parts).  The main thread waits for them and calls MPI_Barrier.  Prints
 * "threads ok" on rank 0 when every message carried what it should. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define ITERATIONS 2000

static int rank, other;
static int errors;

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    for (int i = 0; i < ITERATIONS; i++) {
        int out = rank * 1000000 + t * 10000 + i, in = -1, in2 = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, other, t, &in, 1, MPI_INT, other, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Request reqs[2];
        MPI_Isend(&out, 1, MPI_INT, other, 100 + t, MPI_COMM_WORLD, &reqs[0]);
        MPI_Irecv(&in2, 1, MPI_INT, other, 100 + t, MPI_COMM_WORLD, &reqs[1]);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        int expected = other * 1000000 + t * 10000 + i;
        if (in != expected || in2 != expected)
            __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI_THREAD_MULTIPLE is not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    other = 1 - rank;
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, worker, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    int total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf(total ? "threads: %d bad messages\n" : "threads ok\n", total);
    MPI_Finalize();
    return 0;
}
