/* MPI-IO and one-sided communication (tests/test_io_rma.py): every rank writes its block of a
 * shared file with MPI_File_write_at_all and MPI_File_write_all, then ITERATIONS times puts its
 * rank into its right neighbour's window between two fences, with a busy loop before each
 * epoch's closing fence on the last rank (so the others wait in that fence).
 * Usage: io_rma <file>.  Prints "io_rma: rank R sum S spin T" (the values it received, and the
 * seconds it spent in its busy loops by MPI_Wtime). */
#include <mpi.h>
#include <stdio.h>

#define ITERATIONS 5
#define BLOCK 1024

static double spin(long n)
{
    volatile double x = 0;
    for (long i = 0; i < n; i++)
        x += 1e-9 * (double)i;
    return x;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* 1: a shared file, two collective writes of BLOCK ints each, closed */
    int data[BLOCK];
    for (int i = 0; i < BLOCK; i++)
        data[i] = rank;
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at_all(fh, (MPI_Offset)rank * BLOCK * sizeof(int), data, BLOCK, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_set_view(fh, (MPI_Offset)(size + rank) * BLOCK * sizeof(int), MPI_INT, MPI_INT, "native",
                      MPI_INFO_NULL);
    MPI_File_write_all(fh, data, BLOCK, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);

    /* 2: a window of one int; each epoch: fence, put into the right neighbour, fence */
    int cell = -1, sum = 0;
    double spun = 0;
    MPI_Win win;
    MPI_Win_create(&cell, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    for (int it = 0; it < ITERATIONS; it++) {
        MPI_Put(&rank, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, win);
        if (rank == size - 1) {
            double t = MPI_Wtime();
            spin(20000000);
            spun += MPI_Wtime() - t;
        }
        MPI_Win_fence(0, win);
        sum += cell;
    }
    MPI_Win_free(&win);
    printf("io_rma: rank %d sum %d spin %.6f\n", rank, sum, spun);
    MPI_Finalize();
    return 0;
}
