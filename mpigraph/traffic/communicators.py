"""The communicators of a run: members, creating call and a name a person reads.

Source: the part record each communicator-creating call (MPI_Comm_split, _dup, _create, ...)
writes per new communicator (csrc/comms.c, mg_comm_created): ``comm`` is the new id, ``tag``
the rank's rank in it, ``bytes`` its size, ``peer`` the remote group's size of an
intercommunicator (PEER_NONE otherwise).  Every member writes one, so the rows of all ranks
give each communicator's world ranks in its own rank order.
"""

import numpy as np

from mpigraph.match.core import kind_is
from mpigraph.trace import functions as mf
from mpigraph.trace import record

WORLD_ID = 0
SELF_BIT = 1 << 32               # MPI_COMM_SELF of world rank r: SELF_BIT | r (csrc/comms.c)
MAX_LISTED = 16                  # members listed one by one up to this size, a rule past it

CREATION_DTYPES = {"comm": np.int64, "rank": np.int64, "comm_rank": np.int64, "size": np.int64,
                   "inter": np.bool_, "func": np.int64, "call": np.int64, "parent": np.int64, "site": np.int64}


def creation_rows(batch):
    """One row per communicator each rank of a batch of owned ranks (match.core.CallBatch) joined
    (CREATION_DTYPES), from its creation parts, rank after rank."""
    flags, func = batch.flags, batch.func
    parts = np.flatnonzero(((flags & record.PART) != 0) & kind_is(func, mf.COMM_CREATE)
                           & ((flags & (record.ERROR | record.COLLECTIVE)) == 0))   # COLLECTIVE: in-neighbours
    if not len(parts):
        return concat([])
    # The call of a part: the last record before it that is no part, in its rank (a log's first
    # record is a call: trace.validate_records); numbered among its rank's calls from 0
    # (match.RankCalls.record_call).
    calls_so_far = np.cumsum((flags & record.PART) == 0)
    call_row = np.searchsorted(calls_so_far, calls_so_far[parts])
    call = calls_so_far[call_row] - calls_so_far[batch.first_record[batch.positions(parts)]]
    records, call_records = batch.records_at(parts), batch.records_at(call_row)
    return {"comm": records["comm"], "rank": batch.rank_of(parts),
            "comm_rank": records["tag"], "size": records["bytes"],
            "inter": records["peer"] >= 0, "func": func[parts], "call": call,
            "parent": call_records["comm"], "site": call_records["site"]}


def concat(tables):
    return {name: np.concatenate([np.asarray(t[name], dtype) for t in tables]) if tables else np.zeros(0, dtype)
            for name, dtype in CREATION_DTYPES.items()}


class Communicators:
    """Every communicator of the run: world, the ones created (by creation rows of all ranks).

    ``members(id)`` gives the world ranks in the communicator's rank order (None when unknown:
    an intercommunicator, or a communicator created where the shim did not see it)."""

    def __init__(self, rows, world_size):
        self.world_size = int(world_size)
        order = np.lexsort((rows["comm_rank"], rows["comm"]))
        rows = {name: col[order] for name, col in rows.items()}
        ids, first, counts = np.unique(rows["comm"], return_index=True, return_counts=True)
        self.ids = ids
        self._rows, self._first, self._counts = rows, first, counts
        # Creation number (the id's high half, agreed by the members), then lowest member: creation order.
        self.names = self._name_all()

    def members(self, comm_id):
        if comm_id == WORLD_ID:
            return np.arange(self.world_size)
        if comm_id >> 32 == 1:                   # MPI_COMM_SELF of one rank
            return np.array([comm_id & 0xffffffff])
        at = np.searchsorted(self.ids, comm_id)
        if at == len(self.ids) or self.ids[at] != comm_id:
            return None
        lo, n = self._first[at], self._counts[at]
        if self._rows["inter"][lo] or n != self._rows["size"][lo]:
            return None                          # an intercommunicator, or members missing from the logs
        return self._rows["rank"][lo:lo + n]

    def _name_all(self):
        """{id: name}: "world", then "<call>#<k> (<n> ranks)" numbered per creating function."""
        names, seen = {WORLD_ID: "world"}, {}
        for at, comm_id in enumerate(self.ids):
            lo = self._first[at]
            short = mf.BY_ID[int(self._rows["func"][lo])].name[len("MPI_Comm_"):].lower() \
                if int(self._rows["func"][lo]) in mf.BY_ID else "comm"
            seen[short] = seen.get(short, 0) + 1
            names[int(comm_id)] = "%s#%d (%d ranks)" % (short or "comm", seen[short], self._rows["size"][lo])
        return names

    def name(self, comm_id):
        """The communicator's name; MPI_COMM_SELF "self", an unknown one its id."""
        comm_id = int(comm_id)
        if comm_id in self.names:
            return self.names[comm_id]
        if comm_id >> 32 == 1:
            return "self"
        return str(comm_id)

    def name_all(self, ids):
        """Names of an array of ids (a few distinct ones)."""
        ids = np.asarray(ids, np.int64)
        unique, inverse = np.unique(ids, return_inverse=True)
        return np.array([self.name(i) for i in unique.tolist()] + [""], object)[inverse] if len(ids) \
            else np.zeros(0, object)

    def table(self):
        """The communicators table (schema.COMMUNICATOR_COLUMNS): world, then each created one."""
        rows = {"id": [WORLD_ID], "name": ["world"], "size": [self.world_size],
                "members": [member_text(np.arange(self.world_size))], "function": ["MPI_Init"],
                "call": [0], "parent": [""], "creator": [-1], "creator_site": [0]}
        for at, comm_id in enumerate(self.ids):
            lo, n = self._first[at], self._counts[at]
            r = self._rows
            members = self.members(comm_id)
            func = int(r["func"][lo])
            rows["id"].append(int(comm_id))
            rows["name"].append(self.name(comm_id))
            rows["size"].append(int(r["size"][lo]))
            rows["members"].append(member_text(members) if members is not None
                                   else "intercommunicator" if r["inter"][lo] else "%d of them in the logs" % n)
            rows["function"].append(mf.BY_ID[func].name if func in mf.BY_ID else str(func))
            # The creating call of the member with rank 0 in the new communicator (rows are in comm-rank order).
            rows["call"].append(int(r["call"][lo]) if r["comm_rank"][lo] == 0 else -1)
            # Its world rank and the shim's call-site id there: the report names the call site
            # (callsites.stats.Sites.name_of), which needs every rank's sites.
            rows["creator"].append(int(r["rank"][lo]) if r["comm_rank"][lo] == 0 else -1)
            rows["creator_site"].append(int(r["site"][lo]) if r["comm_rank"][lo] == 0 else 0)
            rows["parent"].append(self.name(r["parent"][lo]))
        return {name: np.array(col, object if isinstance(col[0], str) else np.int64) for name, col in rows.items()}


def member_text(ranks):
    """World ranks as text: listed when few, else a rule: "a-b" (contiguous), "a-b:step" (strided),
    or the first ones and the count."""
    ranks = np.asarray(ranks, np.int64)
    n = len(ranks)
    if n <= MAX_LISTED:
        return " ".join(map(str, ranks.tolist()))
    steps = np.diff(ranks)
    if (steps == steps[0]).all() and steps[0] > 0:
        return "%d-%d" % (ranks[0], ranks[-1]) + ("" if steps[0] == 1 else ":%d" % steps[0])
    return " ".join(map(str, ranks[:8].tolist())) + " ... (%d ranks)" % n
