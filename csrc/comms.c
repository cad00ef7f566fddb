/* Communicators: ids agreed by their members, rank translation tables, and
 * the wrappers that create and free communicators. */
#include <limits.h>
#include <stdlib.h>

#include "groups.h"
#include "handle_map.h"

static handle_map comm_map;
static int64_t comm_counter = 1; /* creation counter agreed with other members */
static MPI_Group world_group = MPI_GROUP_NULL;

static int *translate_group(MPI_Group group, int size)
{
    int *ranks = malloc(sizeof(int) * (size_t)size);
    int *world = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    PMPI_Group_translate_ranks(group, size, ranks, world_group, world);
    free(ranks);
    return world;
}

static int min_of(const int *a, int n, int start)
{
    for (int i = 0; i < n; i++)
        if (a[i] < start)
            start = a[i];
    return start;
}

/* Fill in the group tables of c; returns the lowest world rank of all members. */
static int describe_comm(mg_comm *c)
{
    MPI_Group group;
    PMPI_Comm_test_inter(c->handle, &c->is_inter);
    PMPI_Comm_size(c->handle, &c->size);
    PMPI_Comm_rank(c->handle, &c->rank);
    PMPI_Comm_group(c->handle, &group);
    c->world = translate_group(group, c->size);
    PMPI_Group_free(&group);
    int lowest = min_of(c->world, c->size, INT_MAX);
    if (c->is_inter) {
        PMPI_Comm_remote_size(c->handle, &c->remote_size);
        PMPI_Comm_remote_group(c->handle, &group);
        c->remote_world = translate_group(group, c->remote_size);
        PMPI_Group_free(&group);
        lowest = min_of(c->remote_world, c->remote_size, lowest);
    }
    return lowest;
}

/* All members agree on a creation number: each member's counter only grows,
 * so (number, lowest world rank) names one communicator of the whole run. */
static int64_t agree_on_number(const mg_comm *c)
{
    int64_t mine = comm_counter + 1, agreed = mine;
    if (!c->is_inter) {
        PMPI_Allreduce(&mine, &agreed, 1, MPI_INT64_T, MPI_MAX, c->handle);
    } else {
        /* On an intercommunicator an allreduce returns the other group's
         * result: a second round tells each side its own group's maximum. */
        int64_t remote_max, own_max;
        PMPI_Allreduce(&mine, &remote_max, 1, MPI_INT64_T, MPI_MAX, c->handle);
        PMPI_Allreduce(&remote_max, &own_max, 1, MPI_INT64_T, MPI_MAX, c->handle);
        agreed = remote_max > own_max ? remote_max : own_max;
    }
    comm_counter = agreed;
    return agreed;
}

static mg_comm *register_comm(MPI_Comm handle, int agree)
{
    static int64_t unagreed = 0;
    mg_comm *c = calloc(1, sizeof *c);
    c->handle = handle;
    int lowest = describe_comm(c);
    if (agree)
        c->id = (agree_on_number(c) << 32) | (uint32_t)lowest;
    else /* created behind our back: a rank-local id that matches no other rank */
        c->id = ((int64_t)0x7fffffff << 32) | (uint32_t)(mg.world_rank * 4096 + (++unagreed % 4096));
    if (mg.threaded)
        mg_lock();
    map_put(&comm_map, HANDLE_KEY(handle), c);
    if (mg.threaded)
        mg_unlock();
    return c;
}

/* A window's or file's group (windows.c): `parent`'s members under a new agreed id; collective
 * over parent, like the window's creation that calls it. */
mg_comm *mg_comm_derived(mg_comm *parent)
{
    mg_comm *c = calloc(1, sizeof *c);
    *c = *parent;   /* the rank tables are shared: the parent's are never freed */
    c->seq = 0;
    int lowest = c->world ? min_of(c->world, c->size, INT_MAX) : 0;
    c->id = (agree_on_number(c) << 32) | (uint32_t)lowest;
    return c;
}

mg_comm *mg_comm_lookup_slow(MPI_Comm comm)
{
    if (comm == MPI_COMM_SELF)
        return &mg.self;
    if (mg.threaded)
        mg_lock();
    mg_comm *c = map_get(&comm_map, HANDLE_KEY(comm));
    if (mg.threaded)
        mg_unlock();
    return c ? c : register_comm(comm, 0);
}

/* Shared by communicators and by windows' and files' groups (windows.c): one layout of the
 * creation records for the analysis (match/collectives.py comm_table). */
void mg_creation_records(int func, int64_t t0, int64_t t1, int rc, const mg_comm *parent, uint32_t seq,
                         const mg_comm *c, const int *neighbours, int n_neighbours)
{
    int n = 1 + (c ? 1 + n_neighbours : 0);
    mg_record *r = mg_reserve(n);
    if (!r)
        return;
    uint16_t err = rc == MPI_SUCCESS ? 0 : MG_ERROR;
    mg_fill(r, func, t0, t1, err);
    r->comm = parent->id;
    r->seq = seq;
    if (c) {
        mg_fill(r + 1, func, t0, t1, MG_PART | err);
        r[1].comm = c->id;
        r[1].tag = c->rank;
        r[1].bytes = c->size;
        r[1].peer = c->is_inter ? c->remote_size : MG_PEER_NONE;
        for (int i = 0; i < n_neighbours; i++) {
            /* An in-neighbour of the new topology communicator (neighbourhood collectives wait for them). */
            mg_fill(r + 2 + i, func, t0, t1, MG_PART | MG_COLLECTIVE | err);
            r[2 + i].comm = c->id;
            r[2 + i].peer = neighbours[i];
            r[2 + i].tag = i;
        }
    }
    mg_publish(n);
}

void mg_comm_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, MPI_Comm newcomm)
{
    mg_comm *p = mg_comm_of(parent);
    uint32_t seq = ++p->seq;
    mg_comm *c = newcomm != MPI_COMM_NULL ? register_comm(newcomm, 1) : NULL;
    int *neighbours = NULL;
    int n_neighbours = c ? mg_in_neighbours(c, &neighbours) : 0;
    mg_creation_records(func, t0, t1, rc, p, seq, c, neighbours, n_neighbours);
    free(neighbours);
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (!mg_should_record())
        return PMPI_Comm_free(comm);
    mg_depth++;
    mg_comm *c = mg_comm_of(*comm);
    uint32_t seq = ++c->seq;
    MPI_Comm handle = *comm;
    int64_t t0 = mg_now();
    int rc = PMPI_Comm_free(comm);
    int64_t t1 = mg_now();
    if (rc == MPI_SUCCESS && c != &mg.world && c != &mg.self) {
        if (mg.threaded)
            mg_lock();
        map_remove(&comm_map, HANDLE_KEY(handle)); /* MPI may reuse the handle */
        if (mg.threaded)
            mg_unlock();
    }
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, MG_ID_MPI_Comm_free, t0, t1, rc == MPI_SUCCESS ? 0 : MG_ERROR);
        r->comm = c->id;
        r->seq = seq;
        mg_publish(1);
    }
    mg_depth--;
    return rc;
}

/* MPI_COMM_WORLD (id 0) and MPI_COMM_SELF need no agreement. */
void mg_comms_setup(void)
{
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    mg.world = (mg_comm){.handle = MPI_COMM_WORLD, .id = 0, .size = mg.world_size, .rank = mg.world_rank};
    static int self_world[1];
    self_world[0] = mg.world_rank;
    mg.self = (mg_comm){.handle = MPI_COMM_SELF, .id = ((int64_t)1 << 32) | (uint32_t)mg.world_rank,
                        .size = 1, .rank = 0, .world = self_world};
}
