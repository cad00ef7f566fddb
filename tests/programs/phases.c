/* MPI_Pcontrol phases (tests/test_phases.py): phase 0 is MPI_Init and a Barrier; then
 *   MPI_Pcontrol(1): ITER rounds of a ring Send/Recv of 100 bytes,
 *   MPI_Pcontrol(2): ITER Allreduces of 4 doubles,
 *   MPI_Pcontrol(0): a Barrier and MPI_Finalize.  */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, iter = argc > 1 ? atoi(argv[1]) : 3;
    char buf[100] = {0};
    double a[4] = {0}, b[4];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(1);
    for (int i = 0; i < iter; i++) {
        if (rank % 2 == 0) {
            MPI_Send(buf, 100, MPI_CHAR, (rank + 1) % size, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, 100, MPI_CHAR, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 100, MPI_CHAR, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 100, MPI_CHAR, (rank + 1) % size, 0, MPI_COMM_WORLD);
        }
    }
    MPI_Pcontrol(2);
    for (int i = 0; i < iter; i++)
        MPI_Allreduce(a, b, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Pcontrol(0);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
