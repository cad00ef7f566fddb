"""The collective members' lookups on known numbers: a member's rank and size in its
communicator, and the dense (comm, seq) keys by which members are placed by instance.

Both have a path for parts whose members are all on one communicator (most ranks' are) and one
for several: each is checked on both, with answers worked out by hand."""

import numpy as np

from mpigraph.match import collectives

IDS = np.array([0, 5, (1 << 32) | 3], np.int64)       # MPI_COMM_WORLD, a created comm, MPI_COMM_SELF
RANKS = np.array([3, 1, 0], np.int64)
SIZES = np.array([8, 2, 1], np.int64)


def test_a_members_rank_and_size_in_its_communicator():
    one = collectives.in_comms(np.array([5, 5, 5], np.int64), IDS, RANKS, SIZES)
    assert [c.tolist() for c in one] == [[1, 1, 1], [2, 2, 2]]
    unknown = collectives.in_comms(np.array([7, 7], np.int64), IDS, RANKS, SIZES)
    assert [c.tolist() for c in unknown] == [[-1, -1], [-1, -1]]
    mixed = collectives.in_comms(np.array([0, 7, (1 << 32) | 3, 5, 9 << 40], np.int64), IDS, RANKS, SIZES)
    assert [c.tolist() for c in mixed] == [[3, -1, 0, 1, -1], [8, -1, 1, 2, -1]]
    assert [len(c) for c in collectives.in_comms(np.zeros(0, np.int64), IDS, RANKS, SIZES)] == [0, 0]


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
    # 3 ranks of equal keys, 2 members each; the instances' places start at 0 and 5
    members = {"call": np.full(10, -1, np.int64), "func": np.zeros(10, np.uint16)}
    block = [{"call": np.array([10 * b, 10 * b + 1]), "func": np.array([b, b], np.uint16)} for b in range(3)]
    collectives._place(members, np.array([0, 5]), block)
    assert members["call"].tolist() == [0, 10, 20, -1, -1, 1, 11, 21, -1, -1]
    assert members["func"].tolist() == [0, 1, 2, 0, 0, 0, 1, 2, 0, 0]
