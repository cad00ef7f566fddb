"""Collective instances: the members of every collective, grouped by (comm, seq).

Each rank's collective call records become *member* rows, blocking and nonblocking alike
(MPI_Iallreduce, MPI_Ibarrier, ...: the shim numbers both on one sequence per communicator).
A member arrives when its call starts (``call``, ``start``) and is released in the call that
completed it (``done_call``): the call itself when blocking, the Wait/Test that completed the
request of a nonblocking one (-1: never completed); ``end`` is that call's end.  ``group_instances``
computes the instance's statistics (docs/design.md, "Matching": max start, min end, the last
arriver, the root) and every member's releasing member from all rows of an
instance; ``match_collectives`` gives the same answer across analysis ranks
without moving the members: each analysis rank reduces its members of an
instance to one partial row, the partials meet on an analysis rank chosen by a
hash of (comm, seq), and the combined answer travels back to the analysis ranks
that sent them.

Those rows are a few per instance and analysis rank, however many records the rank owns:
they travel unencoded (``PER_INSTANCE``), not through the codec's sampled choice of
encodings and zstandard, which is worth its CPU only for rows as many as the records.
"""

import dataclasses

import numpy as np

from mpigraph.comm.codec import Codec
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.match.core import (COLLECTIVE_N_TO_N, COLLECTIVE_N_TO_ONE, COLLECTIVE_NEIGHBOR, COLLECTIVE_ONE_TO_N,
                                 FUNC_KIND, KIND_CODE, NONBLOCKING, RMA_EARLY_WAIT, RMA_LATE_POST, SCAN, CallIndex,
                                 group_key, joint_keys, kind_is, pair_occurrences, route, sort_rows)

# Pattern of who releases whom, per function kind (-1: no dependency, e.g. Comm_free).
_PATTERN = {mf.N_TO_N: COLLECTIVE_N_TO_N, mf.COMM_CREATE: COLLECTIVE_N_TO_N, mf.ONE_TO_N: COLLECTIVE_ONE_TO_N,
            mf.N_TO_ONE: COLLECTIVE_N_TO_ONE, mf.SCAN: SCAN, mf.NEIGHBOR: COLLECTIVE_NEIGHBOR}
PATTERN_OF_KIND = np.full(len(KIND_CODE), -1, np.int8)
for _kind, _pattern in _PATTERN.items():
    PATTERN_OF_KIND[KIND_CODE[_kind]] = _pattern


PATTERN_OF_FUNC = PATTERN_OF_KIND[FUNC_KIND]       # by function id: one lookup per member, not two
# A persistent collective's starts are members of its init's function (members): its pattern.
for _f in mf.FUNCTIONS:
    if _f.kind == mf.COLL_INIT:
        PATTERN_OF_FUNC[_f.id] = PATTERN_OF_FUNC[mf.BY_NAME[_f.name[:-len("_init")]].id]
_START = kind_is(np.arange(len(PATTERN_OF_FUNC)), mf.START)
# General active target synchronisation (match.rma): its releases are member rows of these functions.
PATTERN_OF_FUNC[mf.BY_NAME["MPI_Win_start"].id] = RMA_LATE_POST
PATTERN_OF_FUNC[mf.BY_NAME["MPI_Win_wait"].id] = RMA_EARLY_WAIT


def pattern_of(func):
    return PATTERN_OF_FUNC[np.asarray(func)]


def comm_ranks(batch, world_size, part_rows, position, comm, rank=None):
    """(each member's rank in its communicator, the communicator's size), in MEMBER_DTYPES, of
    members of a CallBatch: on the rank at `position` (in batch.ranks), on communicator `comm`;
    -1 for a communicator its rank does not know.  Communicator ids are each rank's own to
    look up: MPI_COMM_WORLD (0), MPI_COMM_SELF ((1 << 32) | rank, csrc/comms.c) and those its
    comm-creation parts (`part_rows`: the batch's part records) created, the first creation of an
    id seen twice.  `rank`: the members' trace ranks where the caller has them (batch.ranks[position]),
    which the answer may share (read it, never write to it)."""
    rank = batch.ranks[position] if rank is None else rank
    # A topology communicator's in-neighbours follow its creation part, flagged COLLECTIVE (match.neighbors).
    neighbour = (batch.flags[part_rows] & record.COLLECTIVE) != 0
    created = part_rows[kind_is(batch.func[part_rows], mf.COMM_CREATE) & ~neighbour]
    rank_type, size_type = MEMBER_DTYPES["comm_rank"], MEMBER_DTYPES["comm_size"]
    if not len(created) and not comm.any():     # MPI_COMM_WORLD only (a bulk-synchronous run)
        return rank.astype(rank_type, copy=False), np.full(len(rank), world_size, size_type)
    if not len(created):           # world and self only (most runs): no table to search
        world, itself = comm == 0, comm == ((1 << 32) | rank.astype(np.int64))
        return (np.where(world, rank, np.where(itself, 0, -1)).astype(rank_type),
                np.where(world, world_size, np.where(itself, 1, -1)).astype(size_type))
    n = len(batch.ranks)
    # Per rank: world first, then the creations in record order, then self (the first of an id wins).
    table_position = np.concatenate([np.arange(n), batch.positions(created), np.arange(n)])
    ids = np.concatenate([np.zeros(n, np.int64), batch.field_at("comm", created), (1 << 32) | batch.ranks])
    ranks = np.concatenate([batch.ranks.astype(rank_type), batch.field_at("tag", created).astype(rank_type),
                            np.zeros(n, rank_type)])
    sizes = np.concatenate([np.full(n, world_size, size_type), batch.field_at("bytes", created).astype(size_type),
                            np.ones(n, size_type)])
    table_key, member_key = joint_keys([[table_position, ids], [position, comm]])
    order = np.argsort(table_key, kind="stable")
    sorted_key = table_key[order]
    first = np.r_[True, sorted_key[1:] != sorted_key[:-1]]
    order, sorted_key = order[first], sorted_key[first]
    at = np.minimum(np.searchsorted(sorted_key, member_key), len(sorted_key) - 1)
    known = sorted_key[at] == member_key
    at = order[at]
    return np.where(known, ranks[at], -1).astype(rank_type), np.where(known, sizes[at], -1).astype(size_type)


# As narrow as the log's fields (record.RECORD_DTYPE): a bulk-synchronous run has a member per
# call, and these columns are copied several times over while instances are grouped.
MEMBER_DTYPES = {"comm": np.int64, "seq": np.uint32, "rank": np.int32, "comm_rank": np.int32,
                 "comm_size": np.int32, "call": np.int64, "func": np.uint16, "root": np.int32, "start": np.int64,
                 "end": np.int64, "done_call": np.int64}


# The columns of a member the later steps use (waits, causality, the dependency edges): the
# input's MEMBER_COLUMNS and the instance's results; only these travel back to the members' owners.
MEMBER_COLUMNS = ("rank", "comm_rank", "call", "func", "root", "start", "end", "done_call")
MEMBER_RESULTS = MEMBER_COLUMNS + ("max_start", "min_end", "release_rank", "release_call", "release_start")


def members(batch, world_size):
    """Member rows of a CallBatch: its collective call records with a sequence number, rank
    after rank (each rank's collective calls in record order, then the starts of its persistent
    collectives).

    Columns may be views of the log's and the calls' columns (consecutive members): read them,
    never write to them (LocalGroups.of_parts copies them where it places them)."""
    flags, func = batch.flags, batch.func
    is_part = (flags & record.PART) != 0
    part_rows = np.flatnonzero(is_part)       # the later tests read only these (none in many runs)
    rows = np.flatnonzero(_COLLECTIVE[func] & ~is_part)
    # Most ranks' members are all their records but MPI_Init's and MPI_Finalize's: a slice reads
    # those columns as views (copied once, where the grouping places them), not by a gather each.
    pick = _slice_if_consecutive(rows)
    member_func, root = func[pick], batch.field_at("root", pick)
    starts = part_rows[((flags[part_rows] & record.COLLECTIVE) != 0) & _START[func[part_rows]]]
    if len(starts):       # persistent collectives: each start is a member (persistent_starts)
        init_func, init_root, found = persistent_starts(batch, is_part, starts)
        starts, init_func, init_root = starts[found], init_func[found], init_root[found]
        rows = np.concatenate([rows, starts])
        member_func, root = np.concatenate([member_func, init_func]), np.concatenate([root, init_root])
        if not batch.one_rank and len(starts):       # rank after rank, each rank's starts after its calls
            order = np.argsort(batch.position[rows], kind="stable")
            rows, member_func, root = rows[order], member_func[order], root[order]
        pick = rows
    # The instance's keys are read several times while grouping (bounds, keys): copied out once.
    seq = np.ascontiguousarray(batch.field_at("seq", pick))
    has = seq > 0
    if not has.all():     # collective calls without a sequence number are no members
        rows, seq, member_func, root = rows[has], seq[has], member_func[has], root[has]
        pick = rows
    comm = np.ascontiguousarray(batch.field_at("comm", pick))
    position = batch.positions(rows)
    rank = np.full(len(rows), batch.ranks[0], MEMBER_DTYPES["rank"]) if batch.one_rank else \
        batch.ranks.astype(MEMBER_DTYPES["rank"])[position]
    comm_rank, comm_size = comm_ranks(batch, world_size, part_rows, position, comm, rank)
    call = batch.record_call[pick]
    done_call = completing_calls(batch, rows, call, is_part, member_func)
    if batch.one_rank:
        # Consecutive records without part records between them are consecutive calls.
        start_at = _slice_if_consecutive(call) if isinstance(pick, slice) else call
        end_at = start_at if done_call is call else np.where(done_call >= 0, done_call, call)
    elif not len(part_rows):
        # Without part records the batch's calls are its records: a member's call in the batch
        # is its row (batch_call's sum, without it).
        start_at = rows
        end_at = start_at if done_call is call else batch.batch_call(position,
                                                                     np.where(done_call >= 0, done_call, call))
    else:
        start_at = batch.batch_call(position, call)
        end_at = start_at if done_call is call else batch.batch_call(position,
                                                                     np.where(done_call >= 0, done_call, call))
    columns = {
        "comm": comm, "seq": seq,
        "rank": rank,
        "comm_rank": comm_rank, "comm_size": comm_size,
        "call": call, "func": member_func, "root": root,
        "start": batch.times("start_ns")[start_at], "end": batch.times("end_ns")[end_at], "done_call": done_call,
    }
    return {name: column.astype(MEMBER_DTYPES[name], copy=False) for name, column in columns.items()}


def _slice_if_consecutive(rows):
    """Strictly increasing indices `rows` as the slice they span when they are all of its indices
    (a view where an index array would gather a copy), else `rows`."""
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def persistent_starts(batch, is_part, starts):
    """(function, root, found) of the persistent collective each MPI_Start(all) part `starts` (rows
    of a CallBatch) started: its MPI_<collective>_init call record's on the same rank, found by
    request id (a persistent request keeps its id from its init to its free); found is False
    where the init is not in the log.

    A start is a member arriving when the MPI_Start call starts, numbered by the shim on the
    communicator (csrc/requests.c), released in the Wait/Test that completed that activation:
    the instance is the init's collective (MPI_Allreduce_init: N-to-N, MPI_Bcast_init: 1-to-N
    with the init's root, MPI_Neighbor_*_init: by in-neighbours, ...)."""
    records, func = batch.records, batch.func
    inits = np.flatnonzero(~is_part & kind_is(func, mf.COLL_INIT))
    if not len(inits):
        return func[starts], records["root"][starts], np.zeros(len(starts), bool)
    init_key, wanted = joint_keys([[batch.positions(inits), records["request"][inits]],
                                   [batch.positions(starts), records["request"][starts]]])
    order = np.argsort(init_key, kind="stable")      # the first init of a request id, as it was logged
    at = np.minimum(np.searchsorted(init_key[order], wanted), len(inits) - 1)
    found = init_key[order][at] == wanted
    init = inits[order][at]
    return func[init], records["root"][init], found


def completing_calls(batch, rows, call, is_part, member_func):
    """The call that completed each collective member `rows` of a CallBatch (calls `call` on
    their ranks, functions `member_func`): the call itself when blocking; for a nonblocking one
    the Wait/Test whose part record carries its request id on its rank (the k-th post of a
    request id with the k-th completion of it, as p2p.request_pairs pairs them), -1 when none.
    `call` itself when every one is blocking."""
    nonblocking = NONBLOCKING[member_func]
    if not nonblocking.any():
        return call
    records = batch.records
    done_call = call.astype(np.int64)
    posts = rows[nonblocking]
    post_request = records["request"][posts]
    # The completions of collective requests: part records with neither SEND nor RECV (a
    # point-to-point request's parts have one of them).
    moves = (batch.flags & (record.SEND | record.RECV)) != 0
    done = np.flatnonzero(is_part & ~moves & kind_is(batch.func, mf.COMPLETION))
    done_request = records["request"][done]
    done, done_request = done[done_request != 0], done_request[done_request != 0]
    has = np.flatnonzero(post_request != 0)
    post_key, done_key = joint_keys([[batch.positions(posts[has]), post_request[has]],
                                     [batch.positions(done), done_request]])
    ip, ic = pair_occurrences(post_key, done_key)
    completion = np.full(len(posts), -1, np.int64)
    completion[has[ip]] = batch.record_call[done[ic]]
    done_call[nonblocking] = completion
    return done_call


# Per function id: a collective, blocking or not (or communicator creation/free), a member when
# it has a sequence number.
_COLLECTIVE = kind_is(np.arange(len(NONBLOCKING)), mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN, mf.COMM_CREATE,
                      mf.COMM_FREE, mf.NEIGHBOR)


def instance_owner(comm_ids, seq, n_owners):
    """Analysis rank that groups an instance: a hash of (comm, seq)."""
    h = comm_ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + seq.astype(np.uint64)
    return (h % np.uint64(n_owners)).astype(np.int64)


def _segment_argmax(values, group_max, group_of):
    """Index of the largest value of each group (rows sorted by group; the last among equals).

    `group_max` is each group's largest value: no sort, just the last row that reaches it."""
    reaches = np.flatnonzero(values == group_max[group_of])
    last_of_group = np.r_[group_of[reaches][1:] != group_of[reaches][:-1], True]
    return reaches[last_of_group]


def _exclusive_prefix_argmax(values, group_of):
    """Per row: index of the largest value among the earlier rows of its group (-1 for the first)."""
    n = len(values)
    if n == 0:
        return np.zeros(0, np.int64)
    dense = np.empty(n, np.int64)
    dense[np.argsort(values, kind="stable")] = np.arange(n)
    code = group_of * n + dense                      # groups increase along the rows: no mixing
    best = np.maximum.accumulate(code)
    prev = np.r_[-1, best[:-1]]
    valid = np.r_[False, group_of[1:] == group_of[:-1]]
    inverse = np.argsort(dense)                      # dense rank -> row
    return np.where(valid, inverse[np.maximum(prev, 0) % n], -1)


# ---- Scan and Exscan: rank i waits for the latest of the ranks before it in the communicator --
#
# The communicator's order need not be MPI_COMM_WORLD's (a Comm_split's key may reverse it), so
# unlike the other patterns a member's release is not combined from per-analysis-rank partials
# in world-rank order: the scan members themselves go to their instance's owner (Scans are few).
#
# A Scan's data goes up the ranks, but its usual algorithm (recursive doubling) has the lower
# ranks exchange with higher ones too, and keeps them in the call until those come: as a member
# of a rooted collective its MPI held (_with_holds), a member whose completing call (its own or
# its Wait) ended at or after the instance's last arrival waited for that last member.

_SCAN_DTYPES = {"comm": np.int64, "seq": np.int64, "comm_rank": np.int64, "rank": np.int64, "call": np.int64,
                "done_call": np.int64, "start": np.int64, "end": np.int64, "src": np.int64, "row": np.int64}


def scan_rows(comm_ids, seq, members, rows, src):
    """The scan members `rows` of `members` (MEMBER_COLUMNS) as rows for their instances' owners
    (columns _SCAN_DTYPES; `row`: their index in `members`, `src`: the analysis rank they come from)."""
    columns = {"comm": comm_ids, "seq": seq, "src": np.full(len(rows), src), "row": rows}
    columns.update({name: members[name][rows] for name in ("comm_rank", "rank", "call", "done_call", "start", "end")})
    return {name: np.asarray(columns[name], dtype) for name, dtype in _SCAN_DTYPES.items()}


def scan_releases(rows):
    """Per scan member row (_SCAN_DTYPES, whole instances): the latest member before it in
    communicator-rank order (the last among equal starts), or the instance's last arrival where
    that held it (see above), as src, row, release_rank, release_call, release_start (-1: the
    first member, not held: nobody to wait for)."""
    instance = group_key([rows["comm"], rows["seq"]])
    order = sort_rows([instance, rows["comm_rank"], rows["rank"]])
    sorted_instance = instance[order]
    n = len(order)
    new = np.r_[True, sorted_instance[1:] != sorted_instance[:-1]] if n else np.zeros(0, bool)
    group = np.cumsum(new) - 1
    start = rows["start"][order]
    prev = _exclusive_prefix_argmax(start, group)
    if n:
        group_max = np.maximum.reduceat(start, np.flatnonzero(new))
        last, max_start = _segment_argmax(start, group_max, group)[group], group_max[group]
        held = (rows["done_call"] >= 0)[order] & (rows["end"][order] >= max_start)
        held &= (last != np.arange(n)) & ((prev < 0) | (start[np.maximum(prev, 0)] < max_start))
        prev[held] = last[held]
    has = prev >= 0
    at = order[np.maximum(prev, 0)] if n else np.zeros(0, np.int64)
    out = {"src": rows["src"], "row": rows["row"]}
    for name in ("rank", "call", "start"):
        out["release_" + name] = np.full(n, -1, np.int64)
        out["release_" + name][order] = np.where(has, rows[name][at], -1)
    return out


def _with_scan_releases(results, releases):
    """Member results with the scan members' releases (scan_releases' rows for them) filled in."""
    row = releases["row"]
    for name in ("release_rank", "release_call", "release_start"):
        results[name][row] = releases[name].astype(results[name].dtype)
    return results


def group_instances(rows):
    """Per-instance statistics and per-member release from the member rows of some instances.

    Returns (instances, members): instances one row per (comm, seq); members
    the input rows' MEMBER_COLUMNS (sorted by instance, rank and comm rank) with
    max_start, min_end and the releasing member (release_rank, release_call,
    release_start; -1 when nobody released it): the columns MEMBER_RESULTS.
    """
    instance = group_key([rows["comm"], rows["seq"]])
    order = sort_rows([instance, rows["rank"], rows["comm_rank"]])
    instance = instance[order]
    m = {name: rows[name][order] for name in MEMBER_COLUMNS}
    n = len(order)
    new = np.r_[True, instance[1:] != instance[:-1]] if n else np.zeros(0, bool)
    start_idx = np.flatnonzero(new)
    first = order[start_idx]                     # an instance's columns: from its first member
    group = np.cumsum(new) - 1
    count = np.diff(np.r_[start_idx, n])
    max_start = np.maximum.reduceat(m["start"], start_idx) if n else np.zeros(0, np.int64)
    min_end = np.minimum.reduceat(m["end"], start_idx) if n else np.zeros(0, np.int64)
    last = _segment_argmax(m["start"], max_start, group) if n else np.zeros(0, np.int64)
    is_root = m["rank"] == m["root"]
    root_row = np.full(len(start_idx), -1, np.int64)
    np.maximum.at(root_row, group[is_root], np.flatnonzero(is_root))
    pattern = pattern_of(m["func"])

    release = np.full(n, -1, np.int64)
    g_last, g_root = last[group], root_row[group]
    nxn = pattern == COLLECTIVE_N_TO_N
    release[nxn] = g_last[nxn]
    one_to_n = (pattern == COLLECTIVE_ONE_TO_N) & ~is_root
    release[one_to_n] = g_root[one_to_n]
    n_to_one = (pattern == COLLECTIVE_N_TO_ONE) & is_root
    release[n_to_one] = g_last[n_to_one]
    n_to_one = (pattern == COLLECTIVE_N_TO_ONE) & ~is_root
    release[n_to_one] = g_root[n_to_one]
    release[release == np.arange(n)] = -1            # nobody waits for itself
    has = release >= 0
    at = np.maximum(release, 0)
    m.update(max_start=max_start[group], min_end=min_end[group],
             release_rank=np.where(has, m["rank"][at], -1), release_call=np.where(has, m["call"][at], -1),
             release_start=np.where(has, m["start"][at], -1))
    rooted = np.flatnonzero(_ROOTED.take(m["func"]))
    _with_holds(m, rooted, (m["rank"][g_last[rooted]], m["call"][g_last[rooted]], max_start[group[rooted]]))
    # Scan members: the latest member before them in communicator-rank order.
    scan = np.flatnonzero(pattern == SCAN)
    _with_scan_releases(m, scan_releases(scan_rows(rows["comm"][order][scan], rows["seq"][order][scan], m, scan, 0)))
    member_wait = (m["max_start"] - m["start"]) + (m["end"] - m["min_end"])
    wait_total = np.add.reduceat(member_wait, start_idx) if n else np.zeros(0, np.int64)
    instances = {"comm": rows["comm"][first], "seq": rows["seq"][first], "func": rows["func"][first],
                 "members": count, "comm_size": rows["comm_size"][first], "max_start": max_start,
                 "min_end": min_end, "last_rank": m["rank"][last] if n else np.zeros(0, np.int64),
                 "root": rows["root"][first], "wait_total": wait_total}
    return {name: col.astype(np.int64) for name, col in instances.items()}, m




# ---- distributed grouping by per-instance partials --------------------------------------------
#
# Instead of moving every member row to the instance's owner and back (two shuffles of all
# members: a bulk-synchronous run has as many members as calls), each analysis rank reduces its
# own members of an instance to one *partial* row, only the partials travel to the owner, and
# the owner's per-instance answer travels back to the ranks that sent a partial.  Because an
# analysis rank owns a contiguous block of trace ranks, the members of an instance sorted by
# (rank, comm rank), as group_instances sorts them, are the partials' members in the order of
# their analysis ranks: "the last among equals", the first member and the root all combine in
# that order.  Scan members go to the owner themselves (scan_rows above).  The result is
# group_instances', row for row.

_PARTIAL_DTYPES = {"comm": np.int64, "seq": np.int64, "group": np.int64, "src": np.int64, "func": np.int64,
                   "comm_size": np.int64, "root": np.int64, "count": np.int64, "max_start": np.int64,
                   "last_rank": np.int64, "last_call": np.int64, "min_end": np.int64, "sum_start": np.int64,
                   "sum_end": np.int64, "root_rank": np.int64, "root_call": np.int64, "root_start": np.int64}
_REPLY_COLUMNS = ("group", "max_start", "min_end", "last_rank", "last_call", "root_rank", "root_call",
                  "root_start")


# An instance's columns that its partial row carries, taken from its first member.
_INSTANCE_COLUMNS = ("comm", "seq", "func", "comm_size", "root")


@dataclasses.dataclass
class LocalGroups:
    """This analysis rank's members grouped by instance, sorted as group_instances sorts them.

    Grouping uses no times, so it is made once and only re-timed in each repair round: the
    member rows (all of MEMBER_DTYPES, a row per call of a bulk-synchronous run) are let go of
    once grouped, not held through the instances' results."""

    members: dict                # MEMBER_COLUMNS, sorted
    start_idx: np.ndarray        # each local instance's first member
    group: np.ndarray            # each member's local instance
    instance: dict               # _INSTANCE_COLUMNS per local instance

    @classmethod
    def of(cls, rows):
        order, start_idx, group = _local_groups(rows)
        first = order[start_idx]
        instance = {name: rows[name][first] for name in _INSTANCE_COLUMNS}
        members = {name: rows[name][order] for name in MEMBER_COLUMNS}
        return cls(members, start_idx, group, instance)

    @classmethod
    def of_parts(cls, parts):
        """``of`` the rows of `parts` (dicts of member rows of consecutive owned ranks, rank after
        rank, as ``members`` makes them for a CallBatch; in rank order) as one table, made
        without that table or a sort of all members where it can: by counting.

        Every (comm, seq) instance gets a dense key; the members of key k take the positions
        start[k], start[k] + 1, ... in the order the ranks come, so each part's rows go straight
        to their sorted places (a rank is a member of an instance at most once).  That is the
        order ``of`` sorts into (instance, rank, comm rank), without the copy of every row into
        one table, the argsort of all members and the gather of every column by it, each a pass
        over millions of rows in memory new to the process.  Sparse keys or a rank twice in an
        instance take ``of``.  `parts` is emptied (its entries None) once its rows are placed."""
        placed = _placed_by_instance(parts)      # empties `parts` when it places them
        if placed is None:
            return cls.of({name: np.concatenate([p[name] for p in parts]).astype(dtype, copy=False) if parts
                           else np.zeros(0, dtype) for name, dtype in MEMBER_DTYPES.items()})
        return cls(*placed)

    def scan_rows(self, src):
        """This analysis rank's scan members as rows for their instances' owners (scan_rows)."""
        scan = np.flatnonzero(_IS_SCAN[self.members["func"]])
        group = self.group[scan]
        return scan_rows(self.instance["comm"][group], self.instance["seq"][group], self.members, scan, src)

    def retimed(self, calls_by_rank):
        """The same groups with start and end taken again from the calls (after a repair moved them)."""
        index = CallIndex(calls_by_rank)
        m = self.members
        at = index.of(m["rank"], m["call"])
        end_at = index.of(m["rank"], np.where(m["done_call"] >= 0, m["done_call"], m["call"]))
        members = dict(m, start=index.column(calls_by_rank, "start_ns")[at],
                       end=index.column(calls_by_rank, "end_ns")[end_at])
        return dataclasses.replace(self, members=members)


def _local_groups(rows):
    """This rank's members sorted like group_instances sorts them, with their instances' bounds."""
    instance = group_key([rows["comm"], rows["seq"]])
    sorted_ = _by_instance_in_rank_order(instance, rows["rank"])
    if sorted_ is None:
        order = sort_rows([instance, rows["rank"], rows["comm_rank"]])
        sorted_ = order, instance[order]
    order, instance = sorted_
    n = len(order)
    new = np.r_[True, instance[1:] != instance[:-1]] if n else np.zeros(0, bool)
    start_idx = np.flatnonzero(new)
    group = np.cumsum(new)
    group -= 1
    return order, start_idx, group


def _placed_by_instance(parts):
    """LocalGroups' (members, start_idx, group, instance) of the rows of `parts` (each some
    consecutive ranks' rows, rank after rank; the parts in rank order) placed by counting
    (LocalGroups.of_parts); None when their instance keys span more than a few times the rows or
    a rank has two members of one instance.  Once placed, a part's rows are let go of (its entry
    of `parts` becomes None): the rows and their sorted copy are not all held at once."""
    n = sum(len(p["rank"]) for p in parts)
    keys = _dense_instance_keys(parts) if n else None
    if keys is None:
        return None
    layouts = [_layout(p["rank"], key) for p, key in zip(parts, keys)]
    if any(layout is None for layout in layouts):
        return None
    count = np.bincount(np.concatenate(keys))
    start = np.cumsum(count) - count          # where each key's members begin
    present = count > 0
    group_of_key = np.cumsum(present) - 1
    n_groups = int(group_of_key[-1]) + 1
    members = {name: np.empty(n, MEMBER_DTYPES[name]) for name in MEMBER_COLUMNS}
    instance = {name: np.empty(n_groups, MEMBER_DTYPES[name]) for name in _INSTANCE_COLUMNS}
    free = start.copy()
    places = (members, instance, free, start, group_of_key)
    for i, j in _blocks(layouts):
        block, parts[i:j] = parts[i:j], [None] * (j - i)
        if isinstance(layouts[i], tuple):
            _place_alike(places, block, [layout[0] for layout in layouts[i:j]], layouts[i][1])
        else:
            _place_sorted(places, block[0], keys[i], layouts[i])
    return members, start[present], np.repeat(np.arange(n_groups), count[present]), instance


def _layout(rank, key):
    """How a part's rows (rank after rank, dense instance keys `key`) find their places: (its
    number of ranks, one rank's keys) where every rank of the part has the same keys in the same
    order (a bulk-synchronous program's ranks); else the order of its rows by key (ties in rank
    order); None where a rank has some key twice."""
    n = len(key)
    if n == 0:
        return 0, key
    heads = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
    n_ranks, m = len(heads), n // len(heads)
    one = key[:m]
    if n_ranks * m == n and (np.diff(np.r_[heads, n]) == m).all() and (key.reshape(n_ranks, m) == one).all():
        twice = not (one[1:] > one[:-1]).all() and len(np.unique(one)) < m
        return None if twice else (n_ranks, one)
    order = np.argsort(key, kind="stable")
    sorted_key, sorted_rank = key[order], rank[order]
    if ((sorted_key[1:] == sorted_key[:-1]) & (sorted_rank[1:] == sorted_rank[:-1])).any():
        return None
    return order


# Ranks placed at once at most (_place_alike) from parts of a few ranks each: their rows of one
# column side by side are BLOCK_RANKS * 8 bytes at most a row, a few MB for ranks of 10^4 members each.
BLOCK_RANKS = 32


def _blocks(layouts):
    """(i, j) of consecutive parts layouts[i:j] placed together: parts whose ranks all have the
    same keys (at most BLOCK_RANKS ranks of them, or one part), or one part placed by its order."""
    i = 0
    while i < len(layouts):
        j, ranks = i + 1, layouts[i][0] if isinstance(layouts[i], tuple) else BLOCK_RANKS
        while (j < len(layouts) and isinstance(layouts[j], tuple) and ranks + layouts[j][0] <= BLOCK_RANKS
               and np.array_equal(layouts[j][1], layouts[i][1])):
            ranks += layouts[j][0]
            j += 1
        yield i, j
        i = j


def _place_alike(places, block, n_ranks, key):
    """Place the rows of `block` (parts whose ranks, n_ranks[p] of them in part p, all have the
    instance keys `key`, in rank order): the b-th of these ranks' row of key k goes to free[k] + b.

    One rank at a time, each column's rows land a whole instance's members apart (one row per
    memory page for instances of hundreds of members): every store misses the TLB.  The ranks'
    columns side by side, (rows, ranks), are written a row of adjacent places at a time: as
    whole rows of a window view of the column, the (ranks) places from each of `at`, one index
    a row instead of one a place (the rows' places never overlap: distinct instances)."""
    members, instance, free, start, group_of_key = places
    total, m = sum(n_ranks), len(key)
    if total == 0:
        return
    at = free[key]
    free[key] += total
    step = _even_step(at)
    for name, column in members.items():
        if total == 1:
            column[at] = block[0][name]
        elif step:
            # Evenly spaced places (instances of as many members each, in key order): the rows
            # are a strided view of the column, written part by part with no gather of `at`
            # and no copy of the parts side by side.
            places_of = np.lib.stride_tricks.as_strided(column[at[0]:], (m, total),
                                                        (step * column.itemsize, column.itemsize))
            b = 0
            for p, r in zip(block, n_ranks):
                places_of[:, b:b + r] = p[name].reshape(r, m).T
                b += r
        else:
            side_by_side = [p[name].reshape(r, m) for p, r in zip(block, n_ranks) if r]
            side_by_side = side_by_side[0] if len(side_by_side) == 1 else np.concatenate(side_by_side)
            window = np.lib.stride_tricks.sliding_window_view(column, total, writeable=True)
            window[at] = side_by_side.T
    first = at == start[key]     # the block's first rank is the first member of these instances
    owner = next(p for p, r in zip(block, n_ranks) if r)
    for name, column in instance.items():
        column[group_of_key[key[first]]] = owner[name][:m][first]


def _even_step(at):
    """The step between consecutive places `at` where they increase by one step (> 0), else 0."""
    if len(at) < 2:
        return 1
    step = int(at[1] - at[0])
    return step if step > 0 and (at[1:] - at[:-1] == step).all() else 0


def _place_sorted(places, part, key, order):
    """Place the rows of one part (rank after rank, instance keys `key`, `order` its rows by key
    with ties in rank order): the j-th of its rows of key k goes to free[k] + j."""
    members, instance, free, start, group_of_key = places
    n = len(key)
    sorted_key = key[order]
    heads = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    lengths = np.diff(np.r_[heads, n])
    at = free[sorted_key]
    at += np.arange(n) - np.repeat(heads, lengths)
    free[sorted_key[heads]] += lengths
    for name, column in members.items():
        column[at] = part[name][order]
    first = at == start[sorted_key]
    for name, column in instance.items():
        column[group_of_key[sorted_key[first]]] = part[name][order[first]]


def _dense_instance_keys(parts):
    """Per part, the key (comm index among the parts' distinct comms) * seqs + seq offset of each
    row: ordered and equal like (comm, seq), from 0; None when the keys would span more than a few
    times the rows (many communicators of few instances each: counting would not pay)."""
    n = sum(len(p["rank"]) for p in parts)
    # A part's comms: most ranks' members are all on one communicator, found by its min and max
    # (two passes) instead of numpy's unique (a hash of every row, several times dearer).
    bounds = [(p["comm"].min(), p["comm"].max()) if len(p["comm"]) else None for p in parts]
    comms = np.unique(np.concatenate([[b[0]] if b[0] == b[1] else np.unique(p["comm"])
                                      for p, b in zip(parts, bounds) if b is not None] or [np.zeros(0, np.int64)]))
    low = min(int(p["seq"].min()) for p in parts if len(p["seq"]))
    seqs = max(int(p["seq"].max()) for p in parts if len(p["seq"])) - low + 1
    if len(comms) * seqs >= 4 * n + 1024:
        return None
    return [_instance_keys(p, b, comms, seqs, low) for p, b in zip(parts, bounds)]


def _instance_keys(part, bounds, comms, seqs, low):
    """_dense_instance_keys of one part whose comms lie within `bounds` (min, max; None: no rows)."""
    if bounds is None:
        return np.zeros(0, np.int64)
    if bounds[0] == bounds[1]:       # one communicator: its index is one number
        key = part["seq"].astype(np.int64)
        key += int(np.searchsorted(comms, bounds[0])) * seqs - low
        return key
    key = np.searchsorted(comms, part["comm"]).astype(np.int64, copy=False) * seqs
    key += part["seq"]
    key -= low
    return key


def _by_instance_in_rank_order(instance, rank):
    """(order, instance[order]) with the order of sort_rows([instance, rank, comm rank]), found by
    sorting on the instance alone; None when that does not give it.

    The owned ranks' members come rank after rank, so a stable sort by instance keeps each
    instance's members in rank order; the comm rank only orders members of one instance with
    the same rank, and a rank is a member of an instance once (checked).  One int64 key sorts
    about twice as fast as the three packed together."""
    n = len(rank)
    if n == 0 or not (rank[1:] >= rank[:-1]).all():
        return None
    order = np.argsort(instance, kind="stable")
    sorted_instance, sorted_rank = instance[order], rank[order]
    if ((sorted_instance[1:] == sorted_instance[:-1]) & (sorted_rank[1:] == sorted_rank[:-1])).any():
        return None
    return order, sorted_instance


def _partials(groups, src):
    """One row per local instance of `groups` (a LocalGroups; columns _PARTIAL_DTYPES)."""
    m, start_idx, group = groups.members, groups.start_idx, groups.group
    n = len(group)
    if n:
        max_start = np.maximum.reduceat(m["start"], start_idx)
        last = _segment_argmax(m["start"], max_start, group)
        min_end = np.minimum.reduceat(m["end"], start_idx)
        sum_start = np.add.reduceat(m["start"], start_idx)
        sum_end = np.add.reduceat(m["end"], start_idx)
    else:
        max_start = min_end = sum_start = sum_end = last = np.zeros(0, np.int64)
    is_root = m["rank"] == m["root"]
    root_row = np.full(len(start_idx), -1, np.int64)
    np.maximum.at(root_row, group[is_root], np.flatnonzero(is_root))
    has_root = root_row >= 0
    at = np.maximum(root_row, 0)
    partials = {**groups.instance, "group": np.arange(len(start_idx)), "src": np.full(len(start_idx), src, np.int64),
                "count": np.diff(np.r_[start_idx, n]), "max_start": max_start, "last_rank": m["rank"][last],
                "last_call": m["call"][last], "min_end": min_end, "sum_start": sum_start, "sum_end": sum_end,
                "root_rank": np.where(has_root, m["rank"][at], -1), "root_call": np.where(has_root, m["call"][at], -1),
                "root_start": np.where(has_root, m["start"][at], -1)}
    # One row per instance: widened to int64, the instances' columns in the report.
    return {name: np.asarray(partials[name], dtype) for name, dtype in _PARTIAL_DTYPES.items()}


def combine_partials(parts):
    """(instances, reply per partial row) from the partials of whole instances (any row order)."""
    instance = group_key([parts["comm"], parts["seq"]])
    order = sort_rows([instance, parts["src"]])
    p = {name: col[order] for name, col in parts.items()}
    instance = instance[order]
    n = len(order)
    new = np.r_[True, instance[1:] != instance[:-1]] if n else np.zeros(0, bool)
    start_idx = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    if n:
        count = np.add.reduceat(p["count"], start_idx)
        max_start = np.maximum.reduceat(p["max_start"], start_idx)
        min_end = np.minimum.reduceat(p["min_end"], start_idx)
        last = _segment_argmax(p["max_start"], max_start, group)
        # sum of (max_start - start) + (end - min_end), exact in wrapping int64 arithmetic
        wait_total = (np.add.reduceat(p["sum_end"], start_idx) - np.add.reduceat(p["sum_start"], start_idx)
                      + count * (max_start - min_end))
    else:
        count = max_start = min_end = last = wait_total = np.zeros(0, np.int64)
    root_part = np.full(len(start_idx), -1, np.int64)
    has_root = p["root_rank"] >= 0
    np.maximum.at(root_part, group[has_root], np.flatnonzero(has_root))
    instances = {"comm": p["comm"][start_idx], "seq": p["seq"][start_idx], "func": p["func"][start_idx],
                 "members": count, "comm_size": p["comm_size"][start_idx], "max_start": max_start,
                 "min_end": min_end, "last_rank": p["last_rank"][last], "root": p["root"][start_idx],
                 "wait_total": wait_total}
    g_last, g_root = last[group], root_part[group]
    g_has_root = g_root >= 0
    g_root = np.maximum(g_root, 0)
    reply = {"src": p["src"], "group": p["group"], "max_start": max_start[group], "min_end": min_end[group],
             "last_rank": p["last_rank"][g_last], "last_call": p["last_call"][g_last],
             "root_rank": np.where(g_has_root, p["root_rank"][g_root], -1),
             "root_call": np.where(g_has_root, p["root_call"][g_root], -1),
             "root_start": np.where(g_has_root, p["root_start"][g_root], -1)}
    return instances, reply


def _released_by_table():
    """[function id, member is the root]: who releases the member (see _member_results)."""
    # [pattern + 1, is root]; neighbourhood collectives: released by match.neighbors instead
    by_pattern = np.zeros((max(PATTERN_OF_FUNC) + 2, 2), np.int8)
    by_pattern[COLLECTIVE_N_TO_N + 1, :] = 1            # the last arriver, root or not
    by_pattern[COLLECTIVE_N_TO_ONE + 1, 1] = 1          # the root waits for the last arriver
    by_pattern[COLLECTIVE_N_TO_ONE + 1, 0] = 2          # the others for the root, where it held them
    by_pattern[COLLECTIVE_ONE_TO_N + 1, 0] = 2          # the others wait for the root
    return by_pattern[PATTERN_OF_FUNC + 1]


_RELEASED_BY = _released_by_table()
_IS_N_TO_ONE = PATTERN_OF_FUNC == COLLECTIVE_N_TO_ONE
_ROOTED = _IS_N_TO_ONE | (PATTERN_OF_FUNC == COLLECTIVE_ONE_TO_N)


def _with_holds(m, rows, last):
    """Members `m` (MEMBER_RESULTS) whose rows `rows` (of 1-to-N and N-to-1 collectives) their MPI
    held, released by whom held them; `last`: (rank, call, start) of each row's last arriver.

    A pattern says whom a member needs; the MPI library may hold it longer.  A non-root of
    Reduce or Gather needs nobody, its data may leave eagerly, but MPICH's shared-memory
    Reduce keeps it until the root comes; a large Bcast (scatter, then allgather) keeps the root
    and the others until the last member comes.  As with a late receiver (a send waits only
    where it ended after the receive was posted), a completed member whose completing call (its
    own, or the Wait or Test that completed it) ended at or after a member's start waited for it:
    an N-to-1 non-root for its root (its pattern's release here, dropped where the root did not
    hold it), and any member for the last arriver where that came after its release.  A large
    MPI_Igather's non-roots stay in their Wait until the root comes, as the blocking ones do in
    their call; the wait is charged from the completing call's start (metrics.waits), so a Wait
    entered after the member came waits nothing."""
    if not len(rows):
        return m
    done = m["done_call"][rows] >= 0
    end = m["end"][rows]          # the completing call's
    free = _IS_N_TO_ONE.take(m["func"][rows]) & (m["rank"][rows] != m["root"][rows])
    free &= ~done | (end < m["release_start"][rows])
    last_rank, last_call, max_start = last
    held = done & (end >= max_start) & (m["release_start"][rows] < max_start)
    held &= (last_rank != m["rank"][rows]) | (last_call != m["call"][rows])       # nobody waits for itself
    for name, value in (("release_rank", last_rank), ("release_call", last_call), ("release_start", max_start)):
        column = m[name]
        column[rows[free]] = -1
        column[rows[held]] = value[held]
    return m


_IS_SCAN = PATTERN_OF_FUNC == SCAN


def _member_results(m, group, start_idx, reply):
    """MEMBER_RESULTS of this rank's sorted members from the owners' replies (one per local group)."""
    n, n_groups = len(group), len(start_idx)
    r = {name: np.zeros(n_groups, np.int64) for name in _REPLY_COLUMNS[1:]}
    for name in r:
        r[name][reply["group"]] = reply[name]
    # Who releases each member: nobody (0), the last arriver (1) or the root (2) of its instance,
    # looked up by (function, is root), 2 * function + is root in the flat table.
    is_root = (m["rank"] == m["root"]).view(np.uint8)       # an index (0, 1), not a mask
    by = _RELEASED_BY.reshape(-1)[(m["func"] << 1) | is_root]
    none = np.full(n_groups, -1, np.int64)
    candidates = ((none, none, none), (r["last_rank"], r["last_call"], r["max_start"]),
                  (r["root_rank"], r["root_call"], r["root_start"]))
    count = np.diff(np.r_[start_idx, n])        # each instance's members (sorted by instance)
    if n and by.min() == by.max():
        # One kind of release for every member (a run of N-to-N collectives: the last arriver):
        # each instance's answer repeated over its members, no gather in the members' order.
        rel_rank, rel_call, rel_start = (np.repeat(c, count) for c in candidates[int(by[0])])
        rel_rank = rel_rank.astype(m["rank"].dtype)
    else:
        # One gather per result column from a small (3, groups) table of the candidates.
        at = by.astype(np.int64)
        at *= n_groups
        at += group                                                # in place: members are millions
        rel_rank, rel_call, rel_start = (np.concatenate(c)[at] for c in zip(*candidates))
        rel_rank = rel_rank.astype(m["rank"].dtype)
    g = {name: np.repeat(r[name], count) for name in ("max_start", "min_end")}
    itself = np.flatnonzero((rel_rank == m["rank"]) & (rel_call == m["call"]))     # nobody waits for itself
    rel_rank[itself], rel_call[itself], rel_start[itself] = -1, -1, -1
    out = dict(m, max_start=g["max_start"], min_end=g["min_end"], release_rank=rel_rank, release_call=rel_call,
               release_start=rel_start)
    rooted = np.flatnonzero(_ROOTED.take(m["func"]))
    at = group[rooted]
    return _with_holds(out, rooted, (r["last_rank"][at], r["last_call"][at], r["max_start"][at]))


# The codec of the per-instance rows (partials, replies, waits' sums): every analysis rank
# with members of an instance sends a row for it, so each rank sends about as many rows at
# every K while its records shrink as 1/K.  Encoded with the sampled choice and zstandard
# they cost each rank about 1 us a row (bulk-synchronous, 1e6 records, 4 analysis ranks:
# 0.06 s of a rank's 0.13 s of match), for a few MB that any interconnect moves faster.
PER_INSTANCE = Codec(level=None)


def match_collectives(comm, groups, codec=None):
    """Group the owned ranks' members (a LocalGroups of their rows) by instance across analysis
    ranks.

    Returns (instances grouped on this analysis rank, member results (columns
    MEMBER_RESULTS) for the members whose rank this analysis rank owns, sorted by
    instance (comm, seq), rank and comm rank).  Only one partial row per instance and
    analysis rank travels (see above); the answer equals group_instances' on all rows.
    `codec` is for the scan members' rows (one per member); the partials and replies travel
    with PER_INSTANCE.
    """
    parts = _partials(groups, comm.Get_rank())
    here = route(comm, parts, instance_owner(parts["comm"], parts["seq"], comm.Get_size()), PER_INSTANCE)
    instances, reply = combine_partials(here)
    back = route(comm, reply, reply["src"], PER_INSTANCE)
    results = _member_results(groups.members, groups.group, groups.start_idx, back)
    rows = groups.scan_rows(comm.Get_rank())
    if comm.allreduce(len(rows["row"])):        # the scan members to their owners and back
        here = route(comm, rows, instance_owner(rows["comm"], rows["seq"], comm.Get_size()), codec)
        releases = scan_releases(here)
        _with_scan_releases(results, route(comm, releases, releases["src"], codec))
    return instances, results


def instance_waits(comm, groups, wait, time, instances, codec=None):
    """`instances` (grouped on this analysis rank) with their members' waits by pattern summed.

    `wait`, `time`: per member of `groups` (a LocalGroups; waits.waits_and_member_totals of the member
    results, in the same order).  Each analysis rank sums its members of an instance to one
    row and sends it to the instance's owner, like the partials (with PER_INSTANCE: `codec`, the
    callers' codec for rows per record, is not used).  Returns the instances with
    seed_wait_total (combine_partials' barrier-like wait_total), wait_total and time_total."""
    n = len(groups.group)
    sums = {"comm": groups.instance["comm"].astype(np.int64), "seq": groups.instance["seq"].astype(np.int64)}
    for name, values in (("wait", wait), ("time", time)):
        sums[name] = np.add.reduceat(np.asarray(values, np.int64), groups.start_idx) if n else np.zeros(0, np.int64)
    here = route(comm, sums, instance_owner(sums["comm"], sums["seq"], comm.Get_size()), PER_INSTANCE)
    n_inst = len(instances["comm"])
    key = group_key([np.concatenate([instances["comm"], here["comm"]]),
                     np.concatenate([instances["seq"], here["seq"]])])
    order = np.argsort(key[:n_inst], kind="stable")
    at = order[np.searchsorted(key[:n_inst][order], key[n_inst:])] if n_inst else np.zeros(0, np.int64)
    out = dict(instances, seed_wait_total=instances["wait_total"])
    for name, column in (("wait_total", "wait"), ("time_total", "time")):
        out[name] = np.zeros(n_inst, np.int64)
        np.add.at(out[name], at, here[column])
    return out
