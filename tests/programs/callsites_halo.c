/* The second file of callsites_main.c: one MPI_Sendrecv with the ring's neighbours. */
#include <mpi.h>

__attribute__((noinline)) void exchange(double *out, double *in, int n)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Sendrecv(out, n, MPI_DOUBLE, (rank + 1) % size, 0, in, n, MPI_DOUBLE, (rank + size - 1) % size, 0, /* site: sendrecv */
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
