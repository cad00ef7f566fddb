"""The collective members' lookups on known numbers: a member's rank and size in its
communicator, and the dense (comm, seq) keys by which members are placed by instance.

Both have a path for parts whose members are all on one communicator (most ranks' are) and one
for several: each is checked on both, with answers worked out by hand."""

import numpy as np

import tracebuild
from mpigraph.match import collectives, core
from mpigraph.trace import record


def batch_of(rows_by_rank):
    """A CallBatch of ranks made from records alone (every record a call)."""
    calls = []
    for rank, rows in rows_by_rank.items():
        records = tracebuild.records(rows)
        n = len(records)
        calls.append(core.RankCalls(records["func"], np.zeros(n, np.int64), np.zeros(n, np.int64), rank,
                                    np.arange(n), records))
    return core.CallBatch(calls)


def test_a_members_rank_and_size_in_its_communicator():
    # Rank 3 created communicator 5 (its rank 1 of 2); rank 4 created 5 as well (rank 0 of 3), then 6.
    split = tracebuild.rec("MPI_Comm_split", 0, 1, seq=1)
    batch = batch_of({3: [split, tracebuild.part(split, comm=5, tag=1, bytes=2)],
                      4: [split, tracebuild.part(split, comm=5, tag=0, bytes=3),
                          tracebuild.part(split, comm=6, tag=2, bytes=4)],
                      5: [split]})
    parts = np.flatnonzero(batch.flags & record.PART)
    asked = np.array([5, 5, 7, 0, (1 << 32) | 3, 6, 5, (1 << 32) | 4, 0, 6, (1 << 32) | 5], np.int64)
    position = np.array([0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    rank, size = collectives.comm_ranks(batch, 8, parts, position, asked)
    assert rank.tolist() == [1, 1, -1, 3, 0, 2, 0, 0, 5, -1, 0] and rank.dtype == collectives.MEMBER_DTYPES["comm_rank"]
    assert size.tolist() == [2, 2, -1, 8, 1, 4, 3, 1, 8, -1, 1] and size.dtype == collectives.MEMBER_DTYPES["comm_size"]
    # Without communicators created: world and self only
    plain = batch_of({3: [split], 4: [split]})
    rank, size = collectives.comm_ranks(plain, 8, np.zeros(0, np.int64), np.array([0, 0, 1, 1]),
                                        np.array([0, (1 << 32) | 4, (1 << 32) | 4, 5], np.int64))
    assert rank.tolist() == [3, -1, 0, -1] and size.tolist() == [8, -1, 1, -1]
    # MPI_COMM_WORLD alone: the trace ranks (the caller's, when it passes them) and the world's size
    for given in (None, np.array([3, 3, 4], collectives.MEMBER_DTYPES["rank"])):
        rank, size = collectives.comm_ranks(plain, 8, np.zeros(0, np.int64), np.array([0, 0, 1]),
                                            np.zeros(3, np.int64), given)
        assert rank.tolist() == [3, 3, 4] and size.tolist() == [8, 8, 8]
        assert rank.dtype == collectives.MEMBER_DTYPES["comm_rank"] and size.dtype == collectives.MEMBER_DTYPES["comm_size"]


def part(comm, seq):
    return {"comm": np.asarray(comm, np.int64), "seq": np.asarray(seq, np.uint32), "rank": np.zeros(len(comm))}


def test_dense_keys_order_members_by_communicator_then_sequence():
    # comms 0 and 5, seqs 2..4 (3 of them): key = index of the comm * 3 + seq - 2
    parts = [part([0, 0, 0], [2, 3, 4]), part([5, 0, 5], [2, 3, 4]), part([], []), part([5], [3])]
    keys = collectives._dense_instance_keys(parts)
    assert [k.tolist() for k in keys] == [[0, 1, 2], [3, 1, 5], [], [4]]
    assert all(k.dtype == np.int64 for k in keys)


def test_dense_keys_give_way_to_sorting_when_they_would_span_far_more_than_the_rows():
    parts = [part([0, 1 << 33], [1, 10**6])]        # 2 comms x 10^6 seqs for 2 rows
    assert collectives._dense_instance_keys(parts) is None


def members_of(rank, seqs):
    """Member rows of one rank: an MPI_Barrier on MPI_COMM_WORLD per seq, call k at 100 * seq + rank."""
    n = len(seqs)
    rows = {"comm": np.zeros(n), "seq": seqs, "rank": np.full(n, rank), "comm_rank": np.full(n, rank),
            "comm_size": np.full(n, 4), "call": np.arange(n) + 1, "func": np.full(n, 7), "root": np.full(n, -1),
            "start": 100 * np.asarray(seqs) + rank, "end": 100 * np.asarray(seqs) + 50, "done_call": np.arange(n) + 1}
    return {name: np.asarray(rows[name], dtype) for name, dtype in collectives.MEMBER_DTYPES.items()}


def test_members_are_placed_by_instance_then_rank_whether_ranks_come_alike_or_not():
    # Ranks 0, 1 and 3 join instances 1, 2, 3 (ranks 0 and 1 placed as one block); rank 2 misses 1.
    parts = [members_of(0, [1, 2, 3]), members_of(1, [1, 2, 3]), members_of(2, [2, 3]), members_of(3, [1, 2, 3])]
    by_sorting = collectives.LocalGroups.of({name: np.concatenate([p[name] for p in parts])
                                              for name in collectives.MEMBER_DTYPES})
    placed = collectives.LocalGroups.of_parts(parts)
    assert parts == [None] * 4                                       # the rows were let go of
    assert placed.members["rank"].tolist() == [0, 1, 3, 0, 1, 2, 3, 0, 1, 2, 3]
    assert placed.members["start"].tolist() == [100, 101, 103, 200, 201, 202, 203, 300, 301, 302, 303]
    assert placed.start_idx.tolist() == [0, 3, 7] and placed.group.tolist() == [0] * 3 + [1] * 4 + [2] * 4
    assert placed.instance["seq"].tolist() == [1, 2, 3]
    for name in collectives.MEMBER_COLUMNS:
        assert np.array_equal(placed.members[name], by_sorting.members[name]), name


def test_consecutive_member_rows_are_read_as_a_slice():
    assert collectives._slice_if_consecutive(np.array([3, 4, 5])) == slice(3, 6)
    gaps = np.array([3, 5, 6])
    assert collectives._slice_if_consecutive(gaps) is gaps
    empty = np.zeros(0, np.int64)
    assert collectives._slice_if_consecutive(empty) is empty


def test_a_block_of_ranks_lands_rank_b_at_its_places_plus_b():
    # Parts of 2 and 1 ranks of equal keys, 2 members each; the instances' places start at 0 and 5
    members = {"call": np.full(10, -1, np.int64), "func": np.zeros(10, np.uint16)}
    instance = {"func": np.full(2, -1, np.int64)}
    block = [{"call": np.array([0, 1, 10, 11]), "func": np.array([0, 0, 1, 1], np.uint16)},
             {"call": np.array([20, 21]), "func": np.array([2, 2], np.uint16)}]
    start, free = np.array([0, 5]), np.array([0, 5])
    collectives._place_alike((members, instance, free, start, np.array([0, 1])), block, [2, 1], np.array([0, 1]))
    assert members["call"].tolist() == [0, 10, 20, -1, -1, 1, 11, 21, -1, -1]
    assert free.tolist() == [3, 8] and instance["func"].tolist() == [0, 0]


def test_a_part_of_ranks_with_different_instances_is_placed_by_its_order():
    # Ranks 0 and 1 in one part: rank 0 in instances 0 and 1, rank 1 in 1 and 2; 2 places each
    rank, key = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 2])
    order = collectives._layout(rank, key)
    assert order.tolist() == [0, 1, 2, 3]
    members = {"call": np.full(6, -1, np.int64)}
    start = np.array([0, 2, 4])
    free = start.copy()
    collectives._place_sorted((members, {}, free, start, np.arange(3)), {"call": np.array([1, 2, 3, 4])}, key, order)
    assert members["call"].tolist() == [1, -1, 2, 3, 4, -1] and free.tolist() == [1, 4, 5]
    assert collectives._layout(np.array([0, 0, 1]), np.array([1, 1, 2])) is None      # rank 0 twice in 1
    assert collectives._layout(np.array([0, 0, 1, 1]), np.array([2, 2, 2, 2])) is None
    assert collectives._layout(np.array([0, 0, 1, 1]), np.array([2, 3, 2, 3]))[0] == 2   # alike
