/* Groups of ranks the analysis needs beyond a communicator's members: the records of a
 * communicator's, window's or file's creation (comms.c, windows.c), a topology
 * communicator's in-neighbours and the groups named by MPI_Win_post and MPI_Win_start
 * (topology.c). */
#ifndef MPIGRAPH_GROUPS_H
#define MPIGRAPH_GROUPS_H

#include "shim.h"

/* The creation call record (on `parent`, numbered `seq`) and, when `c` is not NULL, its part
 * with the new id, this rank's rank in it and its size; `neighbours` (may be NULL) in-neighbour
 * world ranks follow as parts flagged COLLECTIVE (trace/record.py). */
void mg_creation_records(int func, int64_t t0, int64_t t1, int rc, const mg_comm *parent, uint32_t seq,
                         const mg_comm *c, const int *neighbours, int n_neighbours);

/* The in-neighbours of a topology communicator (Cartesian, graph, distributed graph) as world
 * ranks, MPI_PROC_NULL left out, in MPI's neighbour order; *out is malloc'ed (NULL when none).
 * Returns their number, 0 for a communicator without a topology. */
int mg_in_neighbours(const mg_comm *c, int **out);

/* MPI_Win_post / MPI_Win_start: the call record and a part per member of `group` (a group of
 * the window's communicator), its world rank in `peer`. */
void mg_group_call(int func, int64_t t0, int64_t t1, int rc, const mg_comm *c, MPI_Group group);

#endif
