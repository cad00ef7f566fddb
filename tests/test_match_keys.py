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
