/* Device buffers (tests/test_device_buffers.py), on 2 ranks.
 *
 *     device_buffers [FAKE_CUDA_LIBRARY]
 *
 * With the argument, the program loads that stand-in for the CUDA driver (tests/programs/
 * fake_cuda.c) before MPI_Init, as a CUDA program has libcuda.so loaded, and registers its
 * `device` array as device memory.  Rank 0 sends to rank 1 from `device` (tag 1) and from
 * `host` (tag 2); rank 1 receives tag 1 into its `device` with Irecv + Wait and tag 2 into
 * `host` with Recv; then an Allreduce from `device` into `host`, and one from `host` into `host`.
 * Each rank prints its driver queries (-1 without the library). */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

static double device[64], host[64], out[64];

int main(int argc, char **argv)
{
    long (*queries)(void) = 0;
    if (argc > 1) {
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
        if (!lib) {
            fprintf(stderr, "device_buffers: %s\n", dlerror());
            return 1;
        }
        void (*reg)(void *, size_t) = (void (*)(void *, size_t))dlsym(lib, "fake_cuda_register");
        queries = (long (*)(void))dlsym(lib, "fake_cuda_queries");
        reg(device, sizeof device);
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        MPI_Send(device, 64, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
        MPI_Send(host, 64, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Request req;
        MPI_Irecv(device, 64, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Recv(host, 64, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Allreduce(device, out, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(host, out, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d queries %ld\n", rank, queries ? queries() : -1L);
    MPI_Finalize();
    return 0;
}
