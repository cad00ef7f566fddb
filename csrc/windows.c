/* Windows and files: each gets a pseudo-communicator, the group of the
 * communicator it was created on under a new id agreed by its members, so its
 * collective operations (fences, collective reads and writes, its free or
 * close) are numbered on it and grouped into collective instances like those
 * of a communicator.  Its creation is recorded like a communicator's (a part
 * with the new id, this rank's rank in it and its size): the matcher learns
 * its members from it. */
#include <stdlib.h>

#include "groups.h"
#include "handle_map.h"

static handle_map win_map, file_map;

/* A window or file the shim did not see created (before MPI_Init's recording, or a
 * library's own): a rank-local group that matches no other rank, like comms.c's. */
static mg_comm *unknown_group(void)
{
    static mg_comm unknown;
    if (!unknown.id)
        unknown = (mg_comm){.handle = MPI_COMM_SELF, .id = ((int64_t)0x7ffffffe << 32) | (uint32_t)mg.world_rank,
                            .size = 1, .rank = 0, .world = mg.self.world};
    return &unknown;
}

static mg_comm *lookup(handle_map *m, uint64_t key)
{
    if (mg.threaded)
        mg_lock();
    mg_comm *c = map_get(m, key);
    if (mg.threaded)
        mg_unlock();
    return c ? c : unknown_group();
}

mg_comm *mg_comm_of_win(MPI_Win win) { return lookup(&win_map, HANDLE_KEY(win)); }
mg_comm *mg_comm_of_file(MPI_File fh) { return lookup(&file_map, HANDLE_KEY(fh)); }

static void group_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, handle_map *m,
                          uint64_t key, int created)
{
    mg_comm *p = mg_comm_of(parent);
    uint32_t seq = ++p->seq;
    mg_comm *c = created ? mg_comm_derived(p) : NULL;
    if (c) {
        if (mg.threaded)
            mg_lock();
        map_put(m, key, c);
        if (mg.threaded)
            mg_unlock();
    }
    mg_creation_records(func, t0, t1, rc, p, seq, c, NULL, 0);
}

void mg_win_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, MPI_Win win)
{
    group_created(func, t0, t1, rc, parent, &win_map, HANDLE_KEY(win), rc == MPI_SUCCESS && win != MPI_WIN_NULL);
}

void mg_file_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, MPI_File fh)
{
    group_created(func, t0, t1, rc, parent, &file_map, HANDLE_KEY(fh), rc == MPI_SUCCESS && fh != MPI_FILE_NULL);
}

/* The group stays allocated (requests may still name it); only the handle, which MPI may reuse, goes. */
static void forget(handle_map *m, uint64_t key)
{
    if (mg.threaded)
        mg_lock();
    map_remove(m, key);
    if (mg.threaded)
        mg_unlock();
}

void mg_win_freed(MPI_Win win) { forget(&win_map, HANDLE_KEY(win)); }
void mg_file_freed(MPI_File fh) { forget(&file_map, HANDLE_KEY(fh)); }
