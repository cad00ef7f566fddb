/* Known communication patterns for the communication matrix and the size histograms
 * (tests/test_traffic.py computes what each mode must give).
 *
 *   traffic ring ITER      each rank sends ITER messages of 1000 bytes to rank+1 (Isend/Irecv)
 *   traffic halo ITER      a 2-D grid of PX x PY ranks (PX = 2), not periodic: x halos of
 *                          800 bytes, y halos of 1600 bytes (Sendrecv; edges to MPI_PROC_NULL)
 *   traffic alltoall ITER  MPI_Alltoall of 3 ints to each rank, and a point-to-point all-to-all:
 *                          src -> dst (src != dst) of 8 * (1 + 4 * src + dst) bytes (Isend/Recv)
 *   traffic colls ITER     Bcast (root 1, 100 bytes), Gather (root 2, 10 ints), Scatter (root 0,
 *                          6 doubles each), Allgather (3 ints), Allreduce (5 doubles), then a
 *                          split into even and odd world ranks, a Bcast of 7 bytes on each half
 *                          and a Send of 5 bytes from its rank 0 to its rank 1
 *   traffic sizes ITER     rank 0 sends rank 1 messages of 0, 1, 3, 1000, 1024, 70000 bytes
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static void ring(int rank, int size, int iter)
{
    char out[1000], in[1000];
    memset(out, rank, sizeof out);
    for (int i = 0; i < iter; i++) {
        MPI_Request req[2];
        MPI_Irecv(in, sizeof in, MPI_CHAR, (rank + size - 1) % size, 5, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(out, sizeof out, MPI_CHAR, (rank + 1) % size, 5, MPI_COMM_WORLD, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
}

static int at(int x, int y, int px, int py)
{
    return x < 0 || x >= px || y < 0 || y >= py ? MPI_PROC_NULL : y * px + x;
}

static void halo(int rank, int size, int iter)
{
    int px = 2, py = size / 2, x = rank % px, y = rank / px;
    char xo[800], xi[800], yo[1600], yi[1600];
    memset(xo, 1, sizeof xo);
    memset(yo, 2, sizeof yo);
    for (int i = 0; i < iter; i++) {
        /* x: send right, receive from the left; then send left, receive from the right */
        MPI_Sendrecv(xo, 800, MPI_CHAR, at(x + 1, y, px, py), 1, xi, 800, MPI_CHAR, at(x - 1, y, px, py), 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(xo, 800, MPI_CHAR, at(x - 1, y, px, py), 2, xi, 800, MPI_CHAR, at(x + 1, y, px, py), 2,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(yo, 1600, MPI_CHAR, at(x, y + 1, px, py), 3, yi, 1600, MPI_CHAR, at(x, y - 1, px, py), 3,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(yo, 1600, MPI_CHAR, at(x, y - 1, px, py), 4, yi, 1600, MPI_CHAR, at(x, y + 1, px, py), 4,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

static void alltoall(int rank, int size, int iter)
{
    int *out = calloc(3 * size, sizeof(int)), *in = calloc(3 * size, sizeof(int));
    char *buf = calloc(8 * (1 + 4 * size + size), 1);
    MPI_Request *req = malloc(sizeof(MPI_Request) * size);
    for (int i = 0; i < iter; i++) {
        MPI_Alltoall(out, 3, MPI_INT, in, 3, MPI_INT, MPI_COMM_WORLD);
        int n = 0;
        for (int dst = 0; dst < size; dst++)
            if (dst != rank)
                MPI_Isend(buf, 8 * (1 + 4 * rank + dst), MPI_CHAR, dst, 9, MPI_COMM_WORLD, &req[n++]);
        for (int src = 0; src < size; src++)
            if (src != rank) {
                char *in_buf = malloc(8 * (1 + 4 * src + rank));
                MPI_Recv(in_buf, 8 * (1 + 4 * src + rank), MPI_CHAR, src, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                free(in_buf);
            }
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    }
    free(out), free(in), free(buf), free(req);
}

static void colls(int rank, int size, int iter)
{
    char b[100] = {0};
    int g[10] = {0}, *gall = calloc(10 * size, sizeof(int)), ag[3] = {0}, *agall = calloc(3 * size, sizeof(int));
    double *sc = calloc(6 * size, sizeof(double)), sci[6], ar[5] = {0}, aro[5];
    MPI_Comm half;
    for (int i = 0; i < iter; i++) {
        MPI_Bcast(b, 100, MPI_CHAR, 1, MPI_COMM_WORLD);
        MPI_Gather(g, 10, MPI_INT, gall, 10, MPI_INT, 2, MPI_COMM_WORLD);
        MPI_Scatter(sc, 6, MPI_DOUBLE, sci, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Allgather(ag, 3, MPI_INT, agall, 3, MPI_INT, MPI_COMM_WORLD);
        MPI_Allreduce(ar, aro, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int half_rank;
    MPI_Comm_rank(half, &half_rank);
    for (int i = 0; i < iter; i++) {
        MPI_Bcast(b, 7, MPI_CHAR, 0, half);
        if (half_rank == 0)       /* peers are ranks of the half: world 0 -> 2 and 1 -> 3 */
            MPI_Send(b, 5, MPI_CHAR, 1, 0, half);
        else if (half_rank == 1)
            MPI_Recv(b, 5, MPI_CHAR, 0, 0, half, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&half);
    free(gall), free(agall), free(sc);
}

static void sizes(int rank, int iter)
{
    static const int n[] = {0, 1, 3, 1000, 1024, 70000};
    char *buf = calloc(70000, 1);
    for (int i = 0; i < iter; i++)
        for (int k = 0; k < 6; k++) {
            if (rank == 0)
                MPI_Send(buf, n[k], MPI_CHAR, 1, k, MPI_COMM_WORLD);
            else if (rank == 1)
                MPI_Recv(buf, n[k], MPI_CHAR, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    free(buf);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iter = argc > 2 ? atoi(argv[2]) : 3;
    const char *mode = argc > 1 ? argv[1] : "ring";
    if (!strcmp(mode, "ring"))
        ring(rank, size, iter);
    else if (!strcmp(mode, "halo"))
        halo(rank, size, iter);
    else if (!strcmp(mode, "alltoall"))
        alltoall(rank, size, iter);
    else if (!strcmp(mode, "colls"))
        colls(rank, size, iter);
    else if (!strcmp(mode, "sizes"))
        sizes(rank, iter);
    MPI_Finalize();
    return 0;
}
