/*
 * A ring halo exchange with persistent requests, optionally with an MPI_Allreduce per iteration
 * (tests/test_clock_hosts.py, tests/test_toposort_fallback.py,
 * tests/test_summary_diagnosis.py).
 *
 *   usage: mpiexec -n N ./halo [iterations [base_us [allreduce [spread]]]]  (defaults 40, 300, 1, 1)
 *
 * Iteration i: every rank computes base_us x (1 + (rank + i) mod 3) (so a different
 * rank is slowest each iteration; with spread = 0 every rank computes base_us),
 * then exchanges one double with both ring neighbours through persistent
 * requests (MPI_Recv_init / MPI_Send_init once, MPI_Startall + MPI_Waitall
 * every iteration), then, with allreduce = 1, all meet in MPI_Allreduce.
 * With allreduce = 0 the ranks are coupled only through their neighbours: not
 * bulk-synchronous (a rank runs ahead of ranks two hops away).  Compute spins
 * on clock_gettime (no MPI call inside).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 40;
    double base_us = argc > 2 ? atof(argv[2]) : 300.0;
    int allreduce = argc > 3 ? atoi(argv[3]) : 1;
    int spread = argc > 4 ? atoi(argv[4]) : 1;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;

    double out[2], in[2], x = rank;
    MPI_Request req[4];
    MPI_Recv_init(&in[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[0]);
    MPI_Recv_init(&in[1], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &req[1]);
    MPI_Send_init(&out[0], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[2]);
    MPI_Send_init(&out[1], 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &req[3]);
    for (int i = 0; i < iterations; i++) {
        x = spin_us(base_us * (spread ? 1 + (rank + i) % 3 : 1), x);
        out[0] = out[1] = x;
        MPI_Startall(4, req);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        x = 0.5 * (x + 0.5 * (in[0] + in[1]));
        if (allreduce) {
            double sum;
            MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            x = sum / size;
        }
    }
    for (int k = 0; k < 4; k++)
        MPI_Request_free(&req[k]);
    if (rank == 0)
        printf("halo: %d iterations done\n", iterations);
    MPI_Finalize();
    return 0;
}
