"""The traffic stage takes its trace ranks a batch at a time (trace.batches): the tables must not
depend on how the ranks fall into batches.  Hand-made logs of five ranks, each rank's calls a
little different (bytes, call numbering, call sites), so that a row given to the wrong rank
changes a number; the expected tables are derived here, call by call, from the rules of
traffic.matrix's and traffic.sizes' module docs."""

import numpy as np
import pytest

from mpigraph.match import core
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.trace import batches
from mpigraph.traffic import matrix, sizes, stage

WORLD = 5
HALVES = {(2 << 32) | 1: [0, 2], (2 << 32) | 2: [1, 3]}      # MPI_Comm_split's two communicators
UNKNOWN = 12345                                              # a communicator no creation record names


class _Log:
    """What match.core.rank_calls reads of a trace.RankLog."""

    def __init__(self, rank, records):
        self.rank, self.records = rank, records
        self.n_records = len(records)

    def column(self, name):
        return np.ascontiguousarray(self.records[name])


class _OneRank:
    """An mpi4py communicator of one analysis rank."""

    rank = 0

    def allgather(self, value):
        return [value]

    def gather(self, value, root=0):
        return [value]


def _half_of(rank):
    return next(((c, m) for c, m in HALVES.items() if rank in m), (None, None))


def _calls(rank):
    """(function, comm, root, bytes, seq, flags) of each call record of a rank, in order; the
    Comm_split's part record comes from _records."""
    half, members = _half_of(rank)
    calls = [("MPI_Init", 0, -1, 0, 0, 0)] + [("MPI_Barrier", 0, -1, 0, 1 + i, 0) for i in range(rank)]
    calls.append(("MPI_Comm_split", 0, -1, 0, 9, 0))
    calls += [("MPI_Bcast", 0, 1, 100 + rank, 20, 0), ("MPI_Gather", 0, 2, 40 + rank, 21, 0),
              ("MPI_Scatter", 0, 0, 48, 22, 0), ("MPI_Allgather", 0, -1, 12 + rank, 23, 0),
              ("MPI_Alltoall", 0, -1, 20 * (rank + 1), 24, 0), ("MPI_Allreduce", 0, -1, 40, 25, 0),
              ("MPI_Allgather", UNKNOWN, -1, 8 + rank, 1, 0), ("MPI_Bcast", 0, 1, 999, 26, record.ERROR),
              ("MPI_Reduce", 0, 3, 5 + rank, 0, 0), ("MPI_Iallreduce", 0, -1, 3, 27, 0)]
    if half is not None:
        calls += [("MPI_Bcast", half, members[0], 7, 1, 0), ("MPI_Alltoall", half, -1, 2 * (rank + 1), 2, 0)]
    return calls + [("MPI_Finalize", 0, -1, 0, 0, 0)]


def _records(rank):
    """A rank's log records: its calls, a part after its Comm_split (none on the rank left out)."""
    rows = []
    for i, (name, comm, root, nbytes, seq, flags) in enumerate(_calls(rank)):
        rows.append((mf.BY_NAME[name].id, comm, root, nbytes, seq, flags, 30 + 2 * i + rank))
        half, members = _half_of(rank)
        if name == "MPI_Comm_split" and half is not None:
            rows.append((mf.BY_NAME[name].id, half, members.index(rank), len(members), seq, record.PART, 0))
    records = np.zeros(len(rows), record.RECORD_DTYPE)
    for i, (func, comm, root, nbytes, seq, flags, site) in enumerate(rows):
        records[i]["func"], records[i]["comm"], records[i]["bytes"], records[i]["seq"] = func, comm, nbytes, seq
        records[i]["flags"], records[i]["site"] = flags, site
        records[i]["root"] = root if not flags & record.PART else 0
        records[i]["tag"] = root if flags & record.PART else 0         # a creation part: the rank in it
        records[i]["peer"] = -1
    return records


def _rank_calls():
    calls = {}
    for rank in range(WORLD):
        records = _records(rank)
        zeros = np.zeros(len(records), np.int64)
        calls[rank] = core.rank_calls(_Log(rank, records), zeros, zeros)
    return calls


def _members(comm):
    return list(range(WORLD)) if comm == 0 else HALVES.get(comm)


def expected_matrix():
    """{(src, dst): (messages, bytes)} call by call, by the rules of traffic.matrix's doc."""
    out = {}

    def add(src, dst, messages, nbytes):
        n, b = out.get((src, dst), (0, 0))
        out[(src, dst)] = (n + messages, b + nbytes)

    for rank in range(WORLD):
        for name, comm, root, nbytes, _, flags in _calls(rank):
            rule = matrix.RULE_NAMES.get(name)
            if rule is None or flags & record.ERROR:
                continue
            members = _members(comm)
            if rule == "unpaired" or (rule in ("to_all", "exchange", "scatter") and members is None):
                if rule != "scatter" or root == rank:
                    add(rank, matrix.NO_PEER, 1, nbytes)
            elif rule in ("to_root", "from_root"):
                if root != rank:
                    add(*((rank, root) if rule == "to_root" else (root, rank)), 1, nbytes)
            elif rule != "scatter" or root == rank:
                share = nbytes if rule == "to_all" else nbytes // len(members)
                for other in members:
                    if other != rank:
                        add(rank, other, 1, share)
    return out


def expected_site_sizes():
    """{(site key, function, comm, bin_lo): (count, bytes)} of the numbered collectives that move data."""
    out = {}
    for rank, records in ((r, _records(r)) for r in range(WORLD)):
        for rec in records:
            if rec["flags"] & (record.PART | record.ERROR) or matrix.RULE_CODE[rec["func"]] < 0 or rec["seq"] == 0:
                continue
            b = int(rec["bytes"])
            key = (int(sizes.site_key(rank, rec["site"])), int(rec["func"]), int(rec["comm"]),
                   0 if b == 0 else 1 << (b.bit_length() - 1))
            n, total = out.get(key, (0, 0))
            out[key] = (n + 1, total + b)
    return out


def _traffic(max_records):
    linked = type("Linked", (), {"calls": _rank_calls(), "traffic": None})()
    return stage.traffic(_OneRank(), linked, WORLD, max_records=max_records)


# One rank per batch, ranks two and three together, one batch of all.
BOUNDS = (1, len(_records(2)) + len(_records(3)), batches.BATCH_RECORDS)


@pytest.mark.parametrize("max_records", BOUNDS)
def test_tables_by_the_rules_whatever_the_batches(max_records):
    ranks = [b.ranks.tolist() for b in batches.of_ranks(_rank_calls(), core.CallBatch, max_records)]
    assert ranks == {1: [[0], [1], [2], [3], [4]], BOUNDS[1]: [[0, 1], [2, 3], [4]]}.get(max_records,
                                                                                          [[0, 1, 2, 3, 4]])
    tables = _traffic(max_records)
    m = tables["matrix"]
    assert set(m["kind"]) == {"collective"}
    got = {(int(s), int(d)): (int(n), int(b)) for s, d, n, b in zip(m["src"], m["dst"], m["messages"], m["bytes"])}
    assert got == expected_matrix()
    s = tables["site_sizes"]
    got = {(int(k), int(f), int(c), int(lo)): (int(n), int(b))
           for k, f, c, lo, n, b in zip(s["site"], s["func"], s["comm"], s["bin_lo"], s["count"], s["bytes"])}
    assert got == expected_site_sizes()
    assert tables["communicators"]["members"].tolist() == ["0 1 2 3 4", "0 2", "1 3"]
    # The split is call 1 + rank of each rank (after Init and its rank's Barriers); the creator is
    # each half's rank 0, and its call site that of its split's call record.
    assert tables["communicators"]["call"].tolist() == [0, 1, 2]
    assert tables["communicators"]["creator"].tolist() == [-1, 0, 1]
    assert tables["communicators"]["creator_site"].tolist() == [0, 30 + 2 * 1 + 0, 30 + 2 * 2 + 1]


def test_batches_give_equal_tables():
    first = _traffic(BOUNDS[0])
    for max_records in BOUNDS[1:]:
        other = _traffic(max_records)
        for name in ("matrix", "sizes", "communicators", "site_sizes"):
            assert first[name].keys() == other[name].keys()
            for column in first[name]:
                assert first[name][column].tolist() == other[name][column].tolist(), (max_records, name, column)


def test_creation_rows_number_each_ranks_calls():
    from mpigraph.traffic import communicators as comms

    rows = comms.concat([comms.creation_rows(b) for b in batches.of_ranks(_rank_calls(), core.CallBatch, 1)])
    assert rows["rank"].tolist() == [0, 1, 2, 3]
    assert rows["call"].tolist() == [1, 2, 3, 4]                      # Init, then `rank` Barriers
    assert rows["comm_rank"].tolist() == [0, 0, 1, 1] and rows["size"].tolist() == [2, 2, 2, 2]
    assert rows["site"].tolist() == [30 + 2 * (1 + r) + r for r in range(4)]
    assert rows["parent"].tolist() == [0, 0, 0, 0]


def _p2p_records(rank):
    """A rank's point-to-point records, each with a site of its own (100 * rank + record): a
    Send, an Isend and an Irecv completed in a Waitall (its parts: other sites), a Recv."""
    fid = {name: mf.BY_NAME[name].id for name in ("MPI_Init", "MPI_Send", "MPI_Isend", "MPI_Irecv",
                                                  "MPI_Waitall", "MPI_Recv", "MPI_Finalize")}
    peer = 1 - rank
    rows = [("MPI_Init", 0, -1, 0, 0), ("MPI_Send", record.SEND, peer, 5, 0),
            ("MPI_Isend", record.SEND, peer, 6, 1), ("MPI_Irecv", record.RECV, peer, 6, 2),
            ("MPI_Waitall", 0, -1, 0, 0), ("MPI_Waitall", record.SEND | record.PART, peer, 6, 1),
            ("MPI_Waitall", record.RECV | record.PART, peer, 6, 2), ("MPI_Recv", record.RECV, peer, 5, 0),
            ("MPI_Finalize", 0, -1, 0, 0)]
    records = np.zeros(len(rows), record.RECORD_DTYPE)
    for i, (name, flags, p, tag, request) in enumerate(rows):
        records[i]["func"], records[i]["flags"], records[i]["peer"] = fid[name], flags, p
        records[i]["tag"], records[i]["request"], records[i]["bytes"] = tag, request, 8
        records[i]["site"] = 100 * rank + i
    return records


def test_operations_carry_the_site_of_the_record_that_posted_them():
    """An operation's site (callsite_sizes) is its posting call's, not its completion's: the
    Isend's and Irecv's, not the Waitall parts'; a blocking one its own.  In a batch of two ranks,
    so a site read from the wrong rank's log changes it."""
    from mpigraph.match import p2p

    calls = {}
    for rank in (0, 1):
        records = _p2p_records(rank)
        zeros = np.zeros(len(records), np.int64)
        calls[rank] = core.rank_calls(_Log(rank, records), zeros, zeros)
    ops, orphans = p2p.operations(core.CallBatch([calls[0], calls[1]]))
    assert not orphans
    posted = [(r, 100 * r + i) for r in (0, 1) for i in (1, 7, 2, 3)]     # blocking first, then the posts
    assert list(zip(ops["rank"].tolist(), ops["site"].tolist())) == posted
    assert sizes.p2p_sites(ops).tolist() == [(r << sizes.SITE_BITS) + site for r, site in posted]


def test_rows_of_a_batch_know_their_rank_past_an_empty_one():
    calls = _rank_calls()
    empty = core.rank_calls(_Log(7, _records(0)[:0]), np.zeros(0, np.int64), np.zeros(0, np.int64))
    b = core.CallBatch([calls[1], empty, calls[3]])
    n1, n3 = len(_records(1)), len(_records(3))
    rows = np.array([0, n1 - 1, n1, n1 + n3 - 1])
    assert b.rank_of(rows).tolist() == [1, 1, 3, 3]
    assert b.records_at(rows)["site"].tolist() == [calls[1].records["site"][0], calls[1].records["site"][n1 - 1],
                                                   calls[3].records["site"][0], calls[3].records["site"][n3 - 1]]


def test_a_batchs_records_read_either_way_agree_past_an_empty_rank():
    """trace.batches.RecordBatch: the records joined end to end, gathered at rows (records_at),
    a field at rows, and rows split per rank all say the same of each row."""
    calls = _rank_calls()
    empty = core.rank_calls(_Log(7, _records(0)[:0]), np.zeros(0, np.int64), np.zeros(0, np.int64))
    b = core.CallBatch([calls[0], empty, calls[2], calls[4]])
    every = np.arange(int(b.first_record[-1]))
    joined = np.concatenate([calls[r].records for r in (0, 2, 4)])
    assert b.records.tobytes() == joined.tobytes() == b.records_at(every).tobytes()
    rows = every[::3]
    assert b.field("site", rows).tolist() == joined["site"][rows].tolist() == b.field("site")[rows].tolist()
    assert b.positions(rows).tolist() == [0 if r < len(calls[0].records) else
                                          2 if r < len(calls[0].records) + len(calls[2].records) else 3 for r in rows]
    split = b.per_rank(rows)
    assert sorted(split) == [0, 2, 4]
    for r, local in split.items():
        assert calls[r].records[local].tobytes() == b.records_at(rows[b.rank_of(rows) == r]).tobytes()
    assert (b.local_record(rows) == np.concatenate(list(split.values()))).all()
