/* An MPI_Allreduce per iteration on 2 ranks after W us of computation on each.  The
 * injector sees no message inside MPI_Allreduce: each rank puts its entry time into its own
 * slot of the reduced buffer (MPI_SUM of int64), and holds its completion until the partner's
 * entry (the start of the partner's message in a 2-rank exchange) + base + dL.
 * Usage: allreduce N W_us */
#include <mpi.h>
#include <stdio.h>
#include "inject.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    wi_init();
    int rank, n = argc > 1 ? atoi(argv[1]) : 100;
    int64_t w = (int64_t)(1000 * (argc > 2 ? atof(argv[2]) : 50.0));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int64_t in[3], out[3];
    for (int i = 0; i < n; i++) {
        wi_compute(w);
        in[0] = i;
        in[1] = in[2] = 0;
        in[1 + (rank & 1)] = wi_now();
        MPI_Allreduce(in, out, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        wi_hold_until_sent_plus(out[1 + ((rank + 1) & 1)]);
    }
    wi_finish(rank);
    MPI_Finalize();
    wi_report();
    return 0;
}
