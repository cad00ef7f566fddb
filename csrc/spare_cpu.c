/* Whether this rank has a CPU to spare for the log's helper thread, the
 * choice of MPIGRAPH_LOG_HELPER=auto (the default).
 *
 * The helper moves the log's page work off the calling thread (logfile.c):
 * worth it only on a CPU that would otherwise idle.  A rank may run on the
 * CPUs of its affinity mask; the node's ranks with the same mask share them,
 * each with its threads.  A CPU is spare when those threads are fewer than the
 * mask's CPUs: a rank bound to one core has none, two unbound ranks on a 2-core
 * node have none, one rank on it has one. */
#define _GNU_SOURCE
#include <link.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static int is_openmp_runtime(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size, (void)unused;
    const char *name = strrchr(info->dlpi_name, '/');
    name = name ? name + 1 : info->dlpi_name;
    return !strncmp(name, "libgomp", 7) || !strncmp(name, "libomp", 6) || !strncmp(name, "libiomp", 7);
}

/* Threads a rank runs on its `cpus`: one, or with an OpenMP runtime loaded
 * (a hybrid program), OMP_NUM_THREADS (its first level), else all of them
 * (OpenMP's default).  OMP_NUM_THREADS means nothing to a program without it. */
static int threads_per_rank(int cpus)
{
    if (!dl_iterate_phdr(is_openmp_runtime, NULL))
        return 1;
    const char *omp = getenv("OMP_NUM_THREADS");
    int n = omp ? atoi(omp) : 0;
    return n > 0 ? n : cpus;
}

/* FNV-1a of the mask: ranks with equal masks get the same colour. */
static int mask_colour(const cpu_set_t *mask)
{
    const unsigned char *p = (const unsigned char *)mask;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof *mask; i++)
        h = (h ^ p[i]) * 16777619u;
    return (int)(h & 0x7fffffff);
}

/* Collective over MPI_COMM_WORLD. */
int mg_rank_has_spare_cpu(void)
{
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        CPU_ZERO(&mask); /* unknown: no CPU counted, none to spare */
    MPI_Comm node, same_mask;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_split(node, mask_colour(&mask), 0, &same_mask);
    int sharing;
    PMPI_Comm_size(same_mask, &sharing);
    PMPI_Comm_free(&same_mask);
    PMPI_Comm_free(&node);
    int cpus = CPU_COUNT(&mask);
    return sharing * threads_per_rank(cpus) < cpus;
}
