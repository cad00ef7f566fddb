/* Named regions of the phase API (tests/test_regions.py), built against mpigraph.h:
 *   "short": SHORT_MS of CPU work, an Allreduce;
 *   "long":  LONG_MS of CPU work, the region "exchange" nested in it (a ring Sendrecv of 100
 *            bytes), an Allreduce;
 * then an end of "long" again (no region of that name is open: ignored) and the region "tail"
 * (a Barrier) that is never ended: it runs to MPI_Finalize.  Rank 0 prints "regions ok".
 * The work is a busy loop until the wall clock has moved on by that much: each region lasts at least
 * its length however loaded the machine is. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

#include <mpigraph.h>

#define SHORT_MS 20
#define LONG_MS 300

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double busy(double ms)
{
    double end = now_ms() + ms, x = 0;
    while (now_ms() < end)
        for (int i = 0; i < 1000; i++)
            x += 1e-9 * i;
    return x;
}

int main(int argc, char **argv)
{
    int rank, size;
    double x, y;
    char out[100] = {0}, in[100];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    mpigraph_phase_begin("short");
    x = busy(SHORT_MS);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    mpigraph_phase_end("short");

    mpigraph_phase_begin("long");
    x = busy(LONG_MS);
    mpigraph_phase_begin("exchange");
    MPI_Sendrecv(out, 100, MPI_CHAR, (rank + 1) % size, 0, in, 100, MPI_CHAR, (rank + size - 1) % size, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    mpigraph_phase_end("exchange");
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    mpigraph_phase_end("long");

    mpigraph_phase_end("long");     /* not open any more: ignored */
    mpigraph_phase_begin("tail");   /* never ended: open until MPI_Finalize */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0)
        printf("regions ok\n");
    return 0;
}
