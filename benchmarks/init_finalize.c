/* MPI_Init and MPI_Finalize, nothing between: run by bench_overhead.py, bare and under the
 * shim, its time difference is the fixed cost the shim adds to every run (loading it, the run
 * directory and the log file, the clock samples at both ends). */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    return 0;
}
