/*
 * Master-worker with one slow worker (issue 27: probes on the critical path).
 *
 *   usage: mpiexec -n N ./master_worker [probe|iprobe|mprobe] [tasks]   (default probe 6, N >= 2)
 *
 * Rank 0 hands out tasks: one to each worker at first, then, for every result,
 * the next task of the worker that sent it, until every worker has done `tasks`.
 * It finds each result by probing MPI_ANY_SOURCE, then receives it from the
 * source the probe found:
 *   probe   MPI_Probe, then MPI_Recv;
 *   iprobe  an MPI_Iprobe loop until a message is found, then MPI_Recv;
 *   mprobe  MPI_Mprobe, then MPI_Mrecv of the message handle.
 * A task takes TASK_MS of compute on every worker but the last, which takes
 * 3 x TASK_MS: the slow worker.  The critical path must run through its
 * compute, and rank 0's waits in the probes are late-sender time.  The fast
 * workers start half a task late, so their results never arrive together with
 * the slow worker's (at multiples of 3 x TASK_MS): its results find rank 0
 * waiting, and its next task leaves at once.
 * Compute spins on clock_gettime (no MPI inside), timed by the wall clock;
 * each worker prints its measured compute: "master_worker: rank R compute_ns N".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spin.h"

#define TASK_MS 20.0
#define TAG_TASK 1
#define TAG_RESULT 2

/* The next result's source (mode: probe, iprobe or mprobe), received into *value. */
static int next_result(const char *mode, double *value)
{
    MPI_Status st;
    if (strcmp(mode, "mprobe") == 0) {
        MPI_Message message;
        MPI_Mprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &message, &st);
        MPI_Mrecv(value, 1, MPI_DOUBLE, &message, MPI_STATUS_IGNORE);
        return st.MPI_SOURCE;
    }
    if (strcmp(mode, "iprobe") == 0) {
        int flag = 0;
        while (!flag)
            MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
    } else {
        MPI_Probe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &st);
    }
    MPI_Recv(value, 1, MPI_DOUBLE, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return st.MPI_SOURCE;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "probe";
    int tasks = argc > 2 ? atoi(argv[2]) : 6;
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        int *sent = calloc(size, sizeof *sent);
        double task = 1.0, result, total = 0.0;
        for (int w = 1; w < size; w++, sent[w - 1]++)
            MPI_Send(&task, 1, MPI_DOUBLE, w, TAG_TASK, MPI_COMM_WORLD);
        for (int done = 0; done < tasks * (size - 1); done++) {
            int w = next_result(mode, &result);
            total += result;
            if (sent[w] < tasks) {
                MPI_Send(&task, 1, MPI_DOUBLE, w, TAG_TASK, MPI_COMM_WORLD);
                sent[w]++;
            }
        }
        printf("master_worker: %s, %d workers, %d tasks each, results %.0f\n", mode, size - 1, tasks,
               total > 0 ? (double)tasks * (size - 1) : 0.0);
        free(sent);
    } else {
        double task, x = 1.0, busy = 0.0;
        double ms = rank == size - 1 ? 3 * TASK_MS : TASK_MS;
        if (rank != size - 1) {
            double began = now();
            x = spin_ms(TASK_MS / 2, x);
            busy += now() - began;
        }
        for (int t = 0; t < tasks; t++) {
            MPI_Recv(&task, 1, MPI_DOUBLE, 0, TAG_TASK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double began = now();
            x = spin_ms(ms, x);
            busy += now() - began;
            double result = x > 0 ? 1.0 : 0.0;
            MPI_Send(&result, 1, MPI_DOUBLE, 0, TAG_RESULT, MPI_COMM_WORLD);
        }
        printf("master_worker: rank %d compute_ns %.0f\n", rank, busy * 1e9);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
