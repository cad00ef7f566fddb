"""The match stage takes the owned ranks a core.CallBatch at a time (trace.batches): whatever
the batches, every table it reads from the records, and the linked run made from them, is the
same as one rank at a time, and a rank's own ids (requests, communicators) are looked up on
that rank only.

The hand-built run below gives every rank the same request ids and communicator ids that name
different groups on different ranks, so a batch that mixed up its ranks' keys would pair or
look up across ranks; a few of its answers are worked out by hand."""

import numpy as np
import pytest
from mpi4py import MPI

from mpigraph.comm import parallel
from mpigraph.match import collectives, core, link
from mpigraph.trace import batches as trace_batches
from mpigraph.trace import logs as trace
from mpigraph.trace import record
from tracebuild import part, rec, write_rank

N = 5
EVENS, ODDS = 77, 78                  # MPI_Comm_split(color = rank % 2): each rank's new communicator


def rank_rows(r):
    """Rank r's records: calls numbered in the comments (part records belong to the call before)."""
    t = 100 * r
    left, right = (r - 1) % N, (r + 1) % N
    split = rec("MPI_Comm_split", t + 1000, t + 1100, seq=1)
    waitall = rec("MPI_Waitall", t + 3000, t + 3500)
    wait_coll = rec("MPI_Wait", t + 6000, t + 6100)
    start = rec("MPI_Start", t + 7100, t + 7150)
    wait_start = rec("MPI_Wait", t + 7200, t + 7300)
    mine = EVENS if r % 2 == 0 else ODDS
    rows = [
        rec("MPI_Init", t, t + 100),                                                                   # 0
        split, part(split, comm=mine, tag=r // 2, bytes=3 if r % 2 == 0 else 2),                      # 1
        rec("MPI_Isend", t + 2000, t + 2100, record.SEND, peer=right, tag=3, bytes=8, request=1),     # 2
        rec("MPI_Irecv", t + 2200, t + 2300, record.RECV, peer=record.PEER_ANY, tag=3, bytes=8,
            request=2),                                                                                # 3
        waitall, part(waitall, record.SEND, peer=right, tag=3, bytes=8, request=1),                   # 4
        part(waitall, record.RECV, peer=left, tag=3, bytes=8, request=2),
        rec("MPI_Iallreduce", t + 4000, t + 4100, comm=mine, seq=1, bytes=8, request=3),             # 5
        rec("MPI_Send", t + 4200, t + 4300, record.SEND, peer=right, tag=4, bytes=16),                # 6
        rec("MPI_Probe", t + 4400, t + 5000, record.MATCHED, peer=left, tag=4, bytes=16),             # 7
        rec("MPI_Recv", t + 5100, t + 5200, record.RECV, peer=left, tag=4, bytes=16),                 # 8
        wait_coll, part(wait_coll, request=3),                                                        # 9
        rec("MPI_Allreduce_init", t + 7000, t + 7050, bytes=8, request=4),                            # 10
        start, part(start, record.COLLECTIVE, seq=2, request=4),                                      # 11
        wait_start, part(wait_start, request=4),                                                      # 12
    ]
    if r == 2:     # a send never completed, and a completion of a request never posted
        never = rec("MPI_Wait", t + 7600, t + 7700)
        rows += [rec("MPI_Isend", t + 7500, t + 7550, record.SEND, peer=3, tag=9, bytes=4, request=9),   # 13
                 never, part(never, record.SEND, peer=3, tag=9, bytes=4, request=11)]                  # 14
    # records: the calls' and their parts', 21 (rank 2: 24); the probe is record 10
    return rows + [rec("MPI_Barrier", 9000, 9100 + t, seq=3), rec("MPI_Finalize", 10000, 10000)]


@pytest.fixture
def run_dir(tmp_path):
    for r in range(N):
        write_rank(tmp_path, r, N, rank_rows(r))
    return str(tmp_path)


def aligned(run_dir):
    """({rank: RankCalls}, ClockInfo) of the run, new: the repair moves the calls' times in place."""
    return link.aligned_calls(MPI.COMM_SELF, trace.open_run(run_dir).logs, "none")


@pytest.fixture
def calls(run_dir):
    return aligned(run_dir)


# 1: one rank a batch; 45: ranks 0 and 1, 2 and 3, 4 (21 records each, rank 2 24); all in one batch
BOUNDS = (1, 45, 1 << 20)


def owned_with(calls, bound, monkeypatch):
    monkeypatch.setattr(trace_batches, "BATCH_RECORDS", bound)
    sizes = [len(c.records) for c in calls.values()]
    assert len(list(trace_batches.of_ranks(calls, core.CallBatch))) == len(core.arrays.batches(sizes, bound))
    return link.Owned.of(calls, N)


def test_the_batches_are_the_ranks_in_order(calls, monkeypatch):
    monkeypatch.setattr(trace_batches, "BATCH_RECORDS", 44)
    batches = list(trace_batches.of_ranks(calls[0], core.CallBatch))
    assert [b.ranks.tolist() for b in batches] == [[0, 1], [2], [3, 4]]      # rank 2 has 24 records
    b = batches[2]
    assert b.first_record.tolist() == [0, 21, 42] and b.rank_of(np.array([0, 20, 21, 41])).tolist() == [3, 3, 4, 4]
    assert b.local_record(np.array([20, 21, 30])).tolist() == [20, 0, 9]
    assert b.first_call.tolist() == [0, 15, 30] and b.batch_call(np.array([0, 1]), np.array([3, 3])).tolist() == [3, 18]


def test_the_tables_of_any_batches_are_those_of_one_rank_at_a_time(calls, monkeypatch):
    calls = calls[0]
    one, *others = [owned_with(calls, bound, monkeypatch) for bound in BOUNDS]
    for owned in others:
        for name, column in one.ops.items():
            assert np.array_equal(owned.ops[name], column) and owned.ops[name].dtype == column.dtype, name
        assert sorted(owned.orphans) == sorted(one.orphans) == [2]
        for rank, rows in one.orphans.items():
            assert np.array_equal(owned.orphans[rank], rows)
        for name in collectives.MEMBER_DTYPES:
            want = np.concatenate([p[name] for p in one.member_parts])
            got = np.concatenate([p[name] for p in owned.member_parts])
            assert np.array_equal(got, want) and got.dtype == want.dtype, name
        for name, column in one.probes.items():
            assert np.array_equal(owned.probes[name], column), name
        for got, want in zip(owned.neighbours, one.neighbours):
            assert np.array_equal(got, want)


def test_each_ranks_ids_are_its_own_whatever_the_batch(calls, monkeypatch):
    for bound in BOUNDS:
        owned = owned_with(calls[0], bound, monkeypatch)
        ops = owned.ops
        # Every rank posts request 1 (Isend) and 2 (Irecv), completed in its Waitall (call 4).
        posted = (ops["func"] == core.mf.BY_NAME["MPI_Isend"].id) | (ops["func"] == core.mf.BY_NAME["MPI_Irecv"].id)
        first = posted & (ops["post_call"] < 4)
        assert (ops["done_call"][first] == 4).all() and first.sum() == 2 * N
        assert ops["peer"][first & (ops["side"] == 1)].tolist() == [(r - 1) % N for r in range(N)]
        # Rank 2's request 9 never completed; its completion of request 11 has no post (record 21).
        never = ops["done_call"] < 0
        assert ops["rank"][never].tolist() == [2] and ops["post_call"][never].tolist() == [13]
        assert {r: rows.tolist() for r, rows in owned.orphans.items()} == {2: [21]}
        members = {name: np.concatenate([p[name] for p in owned.member_parts]) for name in collectives.MEMBER_DTYPES}
        # The Iallreduce: on the rank's own split communicator, completed by the Wait (call 9).
        iall = members["func"] == core.mf.BY_NAME["MPI_Iallreduce"].id
        assert members["comm"][iall].tolist() == [EVENS, ODDS, EVENS, ODDS, EVENS]
        assert members["comm_rank"][iall].tolist() == [0, 0, 1, 1, 2]
        assert members["comm_size"][iall].tolist() == [3, 2, 3, 2, 3]
        assert members["done_call"][iall].tolist() == [9] * N
        # The persistent Allreduce's start (call 11), found by request 4 on its own rank, done in call 12.
        started = members["func"] == core.mf.BY_NAME["MPI_Allreduce_init"].id
        assert members["call"][started].tolist() == [11] * N and members["done_call"][started].tolist() == [12] * N
        assert members["comm_rank"][started].tolist() == list(range(N))
        # The members of each rank in order: split, Iallreduce, barrier (its calls), then the start.
        assert members["rank"].tolist() == [r for r in range(N) for _ in range(4)]
        assert members["seq"].tolist() == [1, 1, 3, 2] * N
        assert owned.probes["found"].all() and owned.probes["peer"].tolist() == [(r - 1) % N for r in range(N)]
        assert owned.probes["record"].tolist() == [10] * N


def test_the_linked_run_is_the_same_for_any_batches(run_dir, monkeypatch):
    linked = []
    for bound in BOUNDS:
        monkeypatch.setattr(trace_batches, "BATCH_RECORDS", bound)
        calls, clock_info = aligned(run_dir)
        linked.append(link.link(MPI.COMM_SELF, parallel.Ownership(N, 1), calls, N, clock_info))
    one = linked[0]
    assert len(one.dependencies) > 0 and one.repair.found > 0
    for other in linked[1:]:
        for name in core.EDGE_DTYPES:
            assert np.array_equal(getattr(other.dependencies, name), getattr(one.dependencies, name)), name
        for name, column in one.instances.items():
            assert np.array_equal(other.instances[name], column), name
        assert other.repair.found == one.repair.found
        assert list(other.incomplete_requests) == list(one.incomplete_requests) == [2]
        assert other.incomplete_requests[2]["post_call"].tolist() == [13]
