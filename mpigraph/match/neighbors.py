"""Neighbourhood collectives: each member waits for its in-neighbours, not the communicator.

MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v/w) and their MPI_Ineighbor_* twins are
numbered on their communicator like every collective, so collectives.py groups them into
instances by (comm, seq) (collectives.parquet: members, last arriver, waits).  But a member
only needs the data of its in-neighbours: it is released by the latest of them to arrive,

    release(i) = argmax_{j in in(i)} start_j,   wait_before(i) = clamp(start_release - start_i)

(clamp to the call that completed the member: the call itself, or the Wait/Test of an
MPI_Ineighbor_*), and the graph's edge (kind collective_neighbor) goes from that neighbour's
start to the end of that call.  in(i) is what MPI_Cart_shift, MPI_Graph_neighbors or
MPI_Dist_graph_neighbors said when the shim saw the topology communicator created: part
records of the creating call flagged COLLECTIVE, one per in-neighbour as a world rank
(csrc/topology.c; MPI_PROC_NULL left out).  A member of a communicator whose neighbours were
not recorded waits for nobody.

A persistent one (MPI_Neighbor_*_init) is a member at each MPI_Start of its request
(collectives.persistent_starts), released the same way.
"""

import dataclasses

import numpy as np

from mpigraph.match import releases
from mpigraph.match.collectives import pattern_of
from mpigraph.match.core import COLLECTIVE_NEIGHBOR, CallBatch, kind_is, packed_keys
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.trace.batches import of_ranks


def in_neighbours(batch):
    """(trace rank, comm id, world rank) of the recorded in-neighbours of a CallBatch's ranks,
    one int64 row per neighbour, rank after rank."""
    flags, func = batch.flags, batch.func
    # Functions are looked up for the collective part records only (none in most runs).
    collective_part = record.PART | record.COLLECTIVE
    parts = np.flatnonzero((flags & (collective_part | record.ERROR)) == collective_part)
    parts = parts[kind_is(func[parts], mf.COMM_CREATE)]
    return batch.rank_of(parts).astype(np.int64), batch.field_at("comm", parts).astype(np.int64), \
        batch.field_at("peer", parts).astype(np.int64)


def owned_in_neighbours(calls):
    """in_neighbours of every owned rank (a {rank: RankCalls}), one table in rank order."""
    tables = [in_neighbours(batch) for batch in of_ranks(calls, CallBatch)]
    return tuple(np.concatenate([t[i] for t in tables]) if tables else np.zeros(0, np.int64) for i in range(3))


@dataclasses.dataclass
class Wants:
    """The owned neighbourhood members' in-neighbours, made once (they use no times)."""

    rows: np.ndarray            # the neighbourhood members (rows of the member results)
    want: dict                  # releases' want table: (comm, seq, in-neighbour, 0) -> row
    have_keys: dict             # releases' key columns of the members themselves

    @classmethod
    def of(cls, neighbours, members, comm_of_member, seq_of_member):
        """From the owned ranks' in-neighbours (owned_in_neighbours' table) and the member results
        (collectives.match_collectives' order), their communicators and sequence numbers."""
        rows = np.flatnonzero(pattern_of(members["func"]) == COLLECTIVE_NEIGHBOR)
        rank = members["rank"][rows].astype(np.int64)
        comm, seq = comm_of_member[rows].astype(np.int64), seq_of_member[rows].astype(np.int64)
        t_rank, t_comm, t_peer = neighbours
        order, first, count = _ranges(t_rank, t_comm, rank, comm)
        t_peer = t_peer[order]
        member = np.repeat(np.arange(len(rows)), count)
        # the position of each (member, neighbour) pair in the sorted table
        within = np.arange(len(member)) - np.repeat(np.cumsum(count) - count, count)
        at = first[member] + within
        want = {"k0": comm[member], "k1": seq[member], "k2": t_peer[at] if len(at) else np.zeros(0, np.int64),
                "k3": np.zeros(len(member), np.int64), "row": member}
        have_keys = {"k0": comm, "k1": seq, "k2": rank, "k3": np.zeros(len(rows), np.int64)}
        return cls(rows, want, have_keys)

    def released(self, comm, members, codec=None):
        """The member results with the neighbourhood members' releases filled in (in place)."""
        rows = self.rows
        have = dict(self.have_keys, rank=members["rank"][rows], call=members["call"][rows],
                    start=members["start"][rows])
        rank, call, start = releases.latest(comm, have, self.want, len(rows), codec)
        itself = (rank == members["rank"][rows]) & (call == members["call"][rows])    # a periodic ring of one
        rank[itself], call[itself], start[itself] = -1, -1, -1
        for name, values in (("release_rank", rank), ("release_call", call), ("release_start", start)):
            members[name][rows] = values.astype(members[name].dtype)
        return members


def _ranges(t_rank, t_comm, rank, comm):
    """(the order of the table by (rank, comm), each member's first position in that order, and its
    number of neighbours there)."""
    if not len(rank) or not len(t_rank):
        return np.arange(len(t_rank)), np.zeros(len(rank), np.int64), np.zeros(len(rank), np.int64)
    kt, km = packed_keys([[t_rank, t_comm], [rank, comm]])
    order = np.argsort(kt, kind="stable")
    lo, hi = np.searchsorted(kt[order], km, "left"), np.searchsorted(kt[order], km, "right")
    return order, lo, hi - lo
