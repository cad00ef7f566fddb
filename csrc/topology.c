/* Topology communicators' in-neighbours and the groups of general active target
 * synchronisation, recorded as parts of the call that names them: the analysis
 * (mpigraph/match/neighbors.py, mpigraph/match/rma.py) matches neighbourhood
 * collectives and post/start/complete/wait epochs from them. */
#include <stdlib.h>

#include "groups.h"

/* Local ranks of c -> world ranks in place, MPI_PROC_NULL (and anything out of range) dropped. */
static int to_world(const mg_comm *c, int *ranks, int n)
{
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int32_t w = mg_world_peer(c, ranks[i]);
        if (w >= 0)
            ranks[kept++] = w;
    }
    return kept;
}

static int cart_in_neighbours(const mg_comm *c, int **out)
{
    int ndims = 0;
    PMPI_Cartdim_get(c->handle, &ndims);
    if (ndims <= 0)
        return 0;
    int *ranks = malloc(sizeof(int) * 2 * (size_t)ndims);
    /* MPI's order for a Cartesian communicator: per dimension, the rank at -1, then at +1. */
    for (int d = 0; d < ndims; d++)
        PMPI_Cart_shift(c->handle, d, 1, &ranks[2 * d], &ranks[2 * d + 1]);
    *out = ranks;
    return to_world(c, ranks, 2 * ndims);
}

static int graph_in_neighbours(const mg_comm *c, int **out)
{
    int n = 0;
    PMPI_Graph_neighbors_count(c->handle, c->rank, &n);
    if (n <= 0)
        return 0;
    int *ranks = malloc(sizeof(int) * (size_t)n);
    PMPI_Graph_neighbors(c->handle, c->rank, n, ranks);
    *out = ranks;
    return to_world(c, ranks, n);
}

static int dist_graph_in_neighbours(const mg_comm *c, int **out)
{
    int indegree = 0, outdegree = 0, weighted = 0;
    PMPI_Dist_graph_neighbors_count(c->handle, &indegree, &outdegree, &weighted);
    if (indegree <= 0)
        return 0;
    int *sources = malloc(sizeof(int) * (size_t)indegree);
    int *sourceweights = malloc(sizeof(int) * (size_t)indegree);
    int *destinations = malloc(sizeof(int) * (size_t)(outdegree > 0 ? outdegree : 1));
    int *destweights = malloc(sizeof(int) * (size_t)(outdegree > 0 ? outdegree : 1));
    PMPI_Dist_graph_neighbors(c->handle, indegree, sources, sourceweights, outdegree, destinations, destweights);
    free(sourceweights);
    free(destinations);
    free(destweights);
    *out = sources;
    return to_world(c, sources, indegree);
}

int mg_in_neighbours(const mg_comm *c, int **out)
{
    *out = NULL;
    if (c->is_inter)
        return 0;
    int kind = MPI_UNDEFINED;
    PMPI_Topo_test(c->handle, &kind);
    if (kind == MPI_CART)
        return cart_in_neighbours(c, out);
    if (kind == MPI_GRAPH)
        return graph_in_neighbours(c, out);
    if (kind == MPI_DIST_GRAPH)
        return dist_graph_in_neighbours(c, out);
    return 0;
}

void mg_group_call(int func, int64_t t0, int64_t t1, int rc, const mg_comm *c, MPI_Group group)
{
    static MPI_Group world_group = MPI_GROUP_NULL;
    int n = 0;
    int *world = NULL;
    if (rc == MPI_SUCCESS && group != MPI_GROUP_NULL && group != MPI_GROUP_EMPTY) {
        if (world_group == MPI_GROUP_NULL)
            PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
        PMPI_Group_size(group, &n);
        int *ranks = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
        world = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
        for (int i = 0; i < n; i++)
            ranks[i] = i;
        PMPI_Group_translate_ranks(group, n, ranks, world_group, world);
        free(ranks);
    }
    mg_record *r = mg_reserve(1 + n);
    if (r) {
        uint16_t err = rc == MPI_SUCCESS ? 0 : MG_ERROR;
        mg_fill(r, func, t0, t1, err);
        r->comm = c->id;
        for (int i = 0; i < n; i++) {
            mg_fill(r + 1 + i, func, t0, t1, MG_PART | err);
            r[1 + i].comm = c->id;
            r[1 + i].peer = world[i] == MPI_UNDEFINED ? MG_PEER_NONE : world[i];
            r[1 + i].tag = i;
        }
        mg_publish(1 + n);
    }
    free(world);
}
