"""Collective instances: the members of every blocking collective, grouped by (comm, seq).

Each rank's collective call records become *member* rows; the rows of one
instance meet on an analysis rank chosen by a hash of (comm, seq), where the
instance's statistics (DESIGN.md: max start, min end, the last arriver, the
root) are computed; the per-member results then travel back to the members'
owners.  Nonblocking collectives (MPI_Iallreduce, ...) are not members here:
their waits happen in Wait/Test calls, not in the call itself.
"""

import numpy as np

from mpigraph import mpi_functions as mf
from mpigraph import record
from mpigraph.match import (COLLECTIVE_N_TO_N, COLLECTIVE_N_TO_ONE, COLLECTIVE_ONE_TO_N, FUNC_KIND, KIND_CODE,
                            NONBLOCKING, SCAN, CallIndex, group_key, kind_is, route, sort_rows)

# Pattern of who releases whom, per function kind (-1: no dependency, e.g. Comm_free).
_PATTERN = {mf.N_TO_N: COLLECTIVE_N_TO_N, mf.COMM_CREATE: COLLECTIVE_N_TO_N, mf.ONE_TO_N: COLLECTIVE_ONE_TO_N,
            mf.N_TO_ONE: COLLECTIVE_N_TO_ONE, mf.SCAN: SCAN}
PATTERN_OF_KIND = np.full(len(KIND_CODE), -1, np.int8)
for _kind, _pattern in _PATTERN.items():
    PATTERN_OF_KIND[KIND_CODE[_kind]] = _pattern


def pattern_of(func):
    return PATTERN_OF_KIND[FUNC_KIND[np.asarray(func, np.intp)]]


def comm_table(rank_calls, world_size, is_part, func):
    """(comm ids sorted, this rank's rank in each, its size) from the rank's comm-creation parts
    (`is_part`, `func`: the records' columns)."""
    records = rank_calls.records
    created = np.flatnonzero(is_part & kind_is(func, mf.COMM_CREATE))
    ids = np.concatenate([[0], records["comm"][created]]).astype(np.int64)
    ranks = np.concatenate([[rank_calls.rank], records["tag"][created]]).astype(np.int64)
    sizes = np.concatenate([[world_size], records["bytes"][created]]).astype(np.int64)
    self_id = (1 << 32) | rank_calls.rank            # MPI_COMM_SELF (csrc/comms.c)
    ids, ranks, sizes = np.append(ids, self_id), np.append(ranks, 0), np.append(sizes, 1)
    ids, first = np.unique(ids, return_index=True)  # a comm id seen twice: its first creation
    return ids, ranks[first], sizes[first]


MEMBER_DTYPES = {"comm": np.int64, "seq": np.int64, "rank": np.int64, "comm_rank": np.int64,
                 "comm_size": np.int64, "call": np.int64, "func": np.int64, "root": np.int64, "start": np.int64,
                 "end": np.int64}


# The columns of a member the later steps use (waits, causality, the dependency edges): the
# input's MEMBER_COLUMNS and the instance's results; only these travel back to the members' owners.
MEMBER_COLUMNS = ("rank", "call", "func", "root", "start", "end")
MEMBER_RESULTS = MEMBER_COLUMNS + ("max_start", "min_end", "release_rank", "release_call", "release_start")


def members(rank_calls, world_size):
    """Member rows of one rank: its blocking collective call records with a sequence number."""
    records = rank_calls.records
    # Each field of the log is read once: a field of the 64-byte records is a strided pass over all of them.
    is_part = (np.ascontiguousarray(records["flags"]) & record.PART) != 0
    func = np.ascontiguousarray(records["func"])
    collective = kind_is(func, mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN, mf.COMM_CREATE, mf.COMM_FREE)
    rows = np.flatnonzero(~is_part & collective & ~NONBLOCKING[func])
    rows = rows[records["seq"][rows] > 0]
    comm = records["comm"][rows].astype(np.int64)
    ids, ranks, sizes = comm_table(rank_calls, world_size, is_part, func)
    at = np.minimum(np.searchsorted(ids, comm), len(ids) - 1)
    known = ids[at] == comm
    call = rank_calls.record_call[rows]
    return {
        "comm": comm, "seq": records["seq"][rows].astype(np.int64),
        "rank": np.full(len(rows), rank_calls.rank, np.int64),
        "comm_rank": np.where(known, ranks[at], -1), "comm_size": np.where(known, sizes[at], -1),
        "call": call, "func": func[rows].astype(np.int64), "root": records["root"][rows].astype(np.int64),
        "start": rank_calls.start_ns[call], "end": rank_calls.end_ns[call],
    }


def with_times(rows, calls_by_rank):
    """Member rows with start and end taken again from the calls (after a repair moved them)."""
    index = CallIndex(calls_by_rank)
    at = index.of(rows["rank"], rows["call"])
    return dict(rows, start=index.column(calls_by_rank, "start_ns")[at], end=index.column(calls_by_rank, "end_ns")[at])


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


def _scan_release(start, group, scan):
    """_exclusive_prefix_argmax of the `scan` rows, computed on the instances with a scan member only."""
    best = np.full(len(start), -1, np.int64)
    if scan.any():
        with_scan = np.zeros(group[-1] + 1, bool)
        with_scan[group[scan]] = True
        rows = np.flatnonzero(with_scan[group])
        prefix = _exclusive_prefix_argmax(start[rows], group[rows])
        best[rows] = np.where(prefix >= 0, rows[np.maximum(prefix, 0)], -1)
    return best[scan]


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
    scan = pattern == SCAN
    release[scan] = _scan_release(m["start"], group, scan)
    release[release == np.arange(n)] = -1            # nobody waits for itself
    has = release >= 0
    at = np.maximum(release, 0)
    m.update(max_start=max_start[group], min_end=min_end[group],
             release_rank=np.where(has, m["rank"][at], -1), release_call=np.where(has, m["call"][at], -1),
             release_start=np.where(has, m["start"][at], -1))
    member_wait = (m["max_start"] - m["start"]) + (m["end"] - m["min_end"])
    wait_total = np.add.reduceat(member_wait, start_idx) if n else np.zeros(0, np.int64)
    instances = {"comm": rows["comm"][first], "seq": rows["seq"][first], "func": rows["func"][first],
                 "members": count, "comm_size": rows["comm_size"][first], "max_start": max_start,
                 "min_end": min_end, "last_rank": m["rank"][last] if n else np.zeros(0, np.int64),
                 "root": rows["root"][first], "wait_total": wait_total}
    return instances, m




def match_collectives(comm, ownership, rows, codec=None):
    """Group the owned ranks' member rows by instance across analysis ranks.

    Returns (instances grouped on this analysis rank, member results (columns
    MEMBER_RESULTS) for the members whose rank this analysis rank owns).
    """
    here = route(comm, rows, instance_owner(rows["comm"], rows["seq"], comm.Get_size()), codec)
    instances, grouped = group_instances(here)
    back = route(comm, grouped, ownership.owner_of(grouped["rank"]), codec)
    return instances, back
