/* Neighbourhood collectives, post/start/complete/wait and split collective file operations
 * with one late rank (tests/test_neighbor_rma.py).  Usage: neighbor_rma MODE ITERATIONS [FILE]
 * on P >= 3 ranks.  Every iteration starts with an MPI_Barrier; then the late rank computes
 * DELAY_MS (a busy loop on MPI_Wtime, not a sleep) before its part of:
 *
 *   cart        MPI_Neighbor_allgather on a 1-D non-periodic Cartesian communicator (in-neighbours
 *               of r: r-1 and r+1); late rank P-1: only rank P-2 waits for it.
 *   icart       MPI_Ineighbor_alltoall + MPI_Wait on the same; late rank P-1: rank P-2's Wait waits.
 *   pcart       MPI_Neighbor_allgather_init once, then MPI_Start + MPI_Wait per iteration on the same
 *               (MPI-4 persistent); late rank P-1: rank P-2's Wait waits.
 *   ring        MPI_Neighbor_alltoall on a directed ring (MPI_Dist_graph_create_adjacent: in r-1,
 *               out r+1); late rank P-1: only rank 0 waits for it.
 *   graph       MPI_Neighbor_allgather on a dist graph made by MPI_Dist_graph_create (rank r names
 *               the edge r -> r+1 mod P: the same ring); late rank P-1: only rank 0 waits.
 *   oldgraph    MPI_Neighbor_allgather on an MPI_Graph_create ring (each rank's neighbours r-1 and
 *               r+1, both ways); late rank P-1: ranks P-2 and 0 wait, the others do not.
 *   late_post   a window on MPI_COMM_WORLD, target 0, origins 1..P-1: the target computes before
 *               MPI_Win_post + MPI_Win_wait; each origin MPI_Win_start, MPI_Put, MPI_Win_complete:
 *               every origin waits for the post.
 *   early_wait  the same epochs, the last origin computing between its MPI_Win_start and its
 *               MPI_Put: the target's MPI_Win_wait waits for it, the other origins do not wait.
 *   split       MPI_File_write_all_begin/_end and MPI_File_read_at_all_begin/_end on FILE: the
 *               last rank computes before the begins, the others wait in them.
 *
 * Prints "neighbor_rma: rank R got G" (what it received: checked against the plain run). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELAY_MS 50
#define BLOCK 256

static void compute_ms(double ms)
{
    double until = MPI_Wtime() + ms * 1e-3;
    volatile double x = 0;
    while (MPI_Wtime() < until)
        for (int i = 0; i < 1000; i++)
            x += 1e-9 * i;
}

static long neighbours(const char *mode, int iterations, int rank, int size)
{
    MPI_Comm topo;
    int late = size - 1;
    if (!strcmp(mode, "cart") || !strcmp(mode, "icart") || !strcmp(mode, "pcart")) {
        int dims[1] = {size}, periods[1] = {0};
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &topo);
    } else if (!strcmp(mode, "ring")) {
        int in = (rank + size - 1) % size, out = (rank + 1) % size;
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &in, MPI_UNWEIGHTED, 1, &out, MPI_UNWEIGHTED,
                                       MPI_INFO_NULL, 0, &topo);
    } else if (!strcmp(mode, "oldgraph")) {
        int *index = malloc(sizeof(int) * size), *edges = malloc(sizeof(int) * 2 * size);
        for (int i = 0; i < size; i++) {
            index[i] = 2 * (i + 1);
            edges[2 * i] = (i + size - 1) % size;
            edges[2 * i + 1] = (i + 1) % size;
        }
        MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &topo);
        free(index);
        free(edges);
    } else {
        int source = rank, degree = 1, destination = (rank + 1) % size;
        MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &source, &degree, &destination, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                              &topo);
    }
    int send[2] = {rank, rank}, recv[2] = {-1, -1};
    long got = 0;
    MPI_Request persistent = MPI_REQUEST_NULL;
    if (!strcmp(mode, "pcart")) {
#if MPI_VERSION >= 4        /* persistent collectives are MPI 4 (Open MPI 4.1 is MPI 3.1) */
        MPI_Neighbor_allgather_init(send, 1, MPI_INT, recv, 1, MPI_INT, topo, MPI_INFO_NULL, &persistent);
#else
        if (rank == 0)
            fprintf(stderr, "neighbor_rma: pcart needs MPI 4 (this MPI is %d.%d)\n", MPI_VERSION, MPI_SUBVERSION);
        MPI_Abort(MPI_COMM_WORLD, 2);
#endif
    }
    for (int it = 0; it < iterations; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == late)
            compute_ms(DELAY_MS);
        if (!strcmp(mode, "pcart")) {
            MPI_Start(&persistent);
            MPI_Wait(&persistent, MPI_STATUS_IGNORE);
        } else if (!strcmp(mode, "icart")) {
            MPI_Request request;
            MPI_Ineighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, topo, &request);
            MPI_Wait(&request, MPI_STATUS_IGNORE);
        } else if (!strcmp(mode, "ring")) {
            MPI_Neighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, topo);
        } else {
            MPI_Neighbor_allgather(send, 1, MPI_INT, recv, 1, MPI_INT, topo);
        }
        got += recv[0] + 10 * recv[1];
        recv[0] = recv[1] = -1;
    }
    if (persistent != MPI_REQUEST_NULL)
        MPI_Request_free(&persistent);
    MPI_Comm_free(&topo);
    return got;
}

static long pscw(const char *mode, int iterations, int rank, int size)
{
    int cells[64] = {0};
    MPI_Win win;
    MPI_Win_create(cells, sizeof cells, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Group world, origins, target;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero = 0;
    MPI_Group_excl(world, 1, &zero, &origins);
    MPI_Group_incl(world, 1, &zero, &target);
    long got = 0;
    for (int it = 0; it < iterations; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            if (!strcmp(mode, "late_post"))
                compute_ms(DELAY_MS);
            MPI_Win_post(origins, 0, win);
            MPI_Win_wait(win);
            for (int r = 1; r < size && r < 64; r++)
                got += cells[r];
        } else {
            MPI_Win_start(target, 0, win);
            if (!strcmp(mode, "early_wait") && rank == size - 1)
                compute_ms(DELAY_MS);
            int value = rank + it;
            MPI_Put(&value, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
            MPI_Win_complete(win);
        }
    }
    MPI_Group_free(&origins);
    MPI_Group_free(&target);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    return got;
}

static long split(const char *path, int iterations, int rank, int size)
{
    int data[BLOCK], back[BLOCK];
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_File_set_view(fh, (MPI_Offset)rank * BLOCK * sizeof(int), MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    long got = 0;
    for (int it = 0; it < iterations; it++) {
        for (int i = 0; i < BLOCK; i++)
            data[i] = rank * 1000 + it;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == size - 1)
            compute_ms(DELAY_MS);
        MPI_File_write_all_begin(fh, data, BLOCK, MPI_INT);
        MPI_File_write_all_end(fh, data, MPI_STATUS_IGNORE);
        MPI_File_seek(fh, 0, MPI_SEEK_SET);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == size - 1)
            compute_ms(DELAY_MS);
        MPI_File_read_at_all_begin(fh, 0, back, BLOCK, MPI_INT);
        MPI_File_read_at_all_end(fh, back, MPI_STATUS_IGNORE);
        got += back[BLOCK - 1];
    }
    MPI_File_close(&fh);
    return got;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: neighbor_rma MODE ITERATIONS [FILE] on 3 or more ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1];
    int iterations = atoi(argv[2]);
    long got;
    if (!strcmp(mode, "late_post") || !strcmp(mode, "early_wait"))
        got = pscw(mode, iterations, rank, size);
    else if (!strcmp(mode, "split"))
        got = split(argc > 3 ? argv[3] : "neighbor_rma.dat", iterations, rank, size);
    else
        got = neighbours(mode, iterations, rank, size);
    printf("neighbor_rma: rank %d got %ld\n", rank, got);
    MPI_Finalize();
    return 0;
}
