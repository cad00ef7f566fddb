/* Which world ranks analyse the run at MPI_Finalize (shim.c: choose_analysis_ranks).
 *
 * How many: one per MPIGRAPH_ANALYSIS_RECORDS records of the whole run (default a million: an
 * analysis rank costs a fixed start of a few tenths of a second), at most one per rank.  Two
 * limits place them:
 * - A node runs at most as many as the CPUs its ranks may run on (the union of their affinity
 *   masks).  Analysis ranks sharing a core wait for each other in every exchange: PRK p2p's
 *   8.4 M records took 17.9 s on 8 analysis ranks of a 2-core machine, 13.9 s on 2.
 * - They are spread over the nodes: every node's first rank, then every node's second, and so
 *   on, not world ranks 0 .. K-1 (a node's first ranks with block placement).  A node's
 *   analysis ranks share its memory bandwidth and its memory holds their records: 16 analyses
 *   at once on 16 cores ran 1.4-1.9 times slower each than one alone.
 * The chosen ranks, in world rank order, are the analysis ranks 0 .. K-1: analysis rank a owns
 * the a-th block of trace ranks, mostly ranks of its own node. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define DEFAULT_RECORDS_PER_RANK 1000000LL
#define CHOSEN (-2) /* below every slot (-1: none) */

static long long records_per_rank(void)
{
    const char *want = getenv("MPIGRAPH_ANALYSIS_RECORDS");
    long long n = want && *want ? atoll(want) : 0;
    return n > 0 ? n : DEFAULT_RECORDS_PER_RANK;
}

/* This rank's place among its node's ranks that may analyse (its local rank), or -1 past the
 * node's CPUs.  Collective over MPI_COMM_WORLD. */
static int node_slot(void)
{
    MPI_Comm node;
    int local_rank, local_size;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &local_rank);
    PMPI_Comm_size(node, &local_size);
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        CPU_ZERO(&mask);
    unsigned long bits[sizeof mask / sizeof(unsigned long)];
    memcpy(bits, &mask, sizeof mask);
    PMPI_Allreduce(MPI_IN_PLACE, bits, (int)(sizeof bits / sizeof bits[0]), MPI_UNSIGNED_LONG, MPI_BOR, node);
    PMPI_Comm_free(&node);
    memcpy(&mask, bits, sizeof mask);
    int cpus = CPU_COUNT(&mask);
    if (cpus < 1)
        cpus = local_size;      /* no mask known: no limit */
    return local_rank < cpus ? local_rank : -1;
}

/* The analysis ranks of a run of `total` records: their world ranks in order (malloc'ed), *k of
 * them (at least 1: world rank 0 always analyses).  Collective over MPI_COMM_WORLD. */
int *mg_choose_analysis_ranks(long long total, int *k)
{
    long long per = records_per_rank();
    long long want = (total + per - 1) / per;
    want = want < 1 ? 1 : want > mg.world_size ? mg.world_size : want;
    int slot = node_slot();
    /* Every rank's slot, CHOSEN once picked; then the chosen ranks, written over it in order. */
    int *slots = malloc((size_t)mg.world_size * sizeof *slots);
    if (!slots) {
        mg_say("rank %d: out of memory choosing the analysis ranks", mg.world_rank);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    PMPI_Allgather(&slot, 1, MPI_INT, slots, 1, MPI_INT, MPI_COMM_WORLD);
    int picked = 0;
    for (int level = 0; picked < want; level++) {      /* every node's rank of this slot, then the next */
        int any = 0;
        for (int r = 0; r < mg.world_size && picked < want; r++)
            if (slots[r] == level) {
                slots[r] = CHOSEN;
                picked++;
                any = 1;
            }
        if (!any)
            break;
    }
    *k = 0;
    for (int r = 0; r < mg.world_size; r++)
        if (slots[r] == CHOSEN)
            slots[(*k)++] = r;      /* over slots already read */
    return slots;
}
