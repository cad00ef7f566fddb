/* Says, on every rank but 0, whether the in-job analysis had written its report (summary.txt, the
 * report's last file) when MPI_Finalize returned.  A small run is analysed by rank 0 alone: the
 * other ranks should leave MPI_Finalize at once, before the report exists.  The barriers give
 * the analysis a few thousand records to work on. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 2000; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    const char *out = getenv("MPIGRAPH_OUT");
    if (rank != 0 && out) {
        char summary[4096];
        snprintf(summary, sizeof summary, "%s/summary.txt", out);
        printf("rank %d left MPI_Finalize %s the report\n", rank, access(summary, F_OK) == 0 ? "after" : "before");
    }
    return 0;
}
