"""Checks of the shuffle that need several processes: run under mpiexec.

Not collected by a plain ``pytest tests`` (the name does not start with
test_): tests/test_shuffle.py runs it with 1, 2, 3 and 4 ranks::

    mpiexec -n 3 python -m pytest -q -p no:cacheprovider tests/mpi_shuffle_checks.py

Every rank checks everything it can, so a failure fails on all ranks and no
rank is left waiting in a collective.
"""

import numpy as np
import pytest

from mpigraph.comm import shuffle
from mpigraph.comm.codec import Codec


# -- MPI: run under mpiexec ---------------------------------------------------------

def rows_for(source, dest, seed=0):
    """The batch `source` sends to `dest`: deterministic, so the receiver knows what to expect.
    Some pairs are empty, including the pair of a rank with itself in some cases."""
    rng = np.random.default_rng([seed, source, dest])
    n = 0 if (source * 7 + dest * 3 + seed) % 4 == 0 else int(rng.integers(1, 3000))
    t = np.sort(rng.integers(0, 10**12, n))
    return {"t_start": t, "t_end": t + rng.integers(0, 5000, n), "src": np.full(n, source, np.int32),
            "f": rng.normal(size=n)}


class CountingComm:
    """A communicator that counts the point-to-point requests it is asked to post."""

    def __init__(self, comm):
        self.comm, self.isends, self.irecvs = comm, 0, 0

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def Isend(self, *args):
        self.isends += 1
        return self.comm.Isend(*args)

    def Irecv(self, *args):
        self.irecvs += 1
        return self.comm.Irecv(*args)


@pytest.mark.parametrize("order", shuffle.ORDERS)
@pytest.mark.parametrize("level", [None, 3])
def test_exchange_delivers_every_batch(order, level):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    comm = CountingComm(world)
    rank, size = world.Get_rank(), world.Get_size()
    for seed in range(3):
        outgoing = [rows_for(rank, d, seed) for d in range(size)]
        received, stats = shuffle.exchange(comm, outgoing, Codec(level), order=order)
        expected = {s: rows_for(s, rank, seed) for s in range(size)}
        expected = {s: b for s, b in expected.items() if len(b["t_start"])}
        assert list(received) == sorted(expected)
        for source, batch in expected.items():
            for name in batch:
                assert np.array_equal(received[source][name], batch[name]), (source, name)
        nonempty_out = sum(1 for d in range(size) if d != rank and len(outgoing[d]["t_start"]))
        assert stats.messages_sent == nonempty_out
        assert comm.isends == nonempty_out            # no request for an empty pair
        assert comm.irecvs == len([s for s in expected if s != rank])
        comm.isends = comm.irecvs = 0
        summary = shuffle.summarize(world, stats)
        assert summary.total("rows_sent") == summary.total("rows_received")
        assert summary.total("wire_bytes_sent") == summary.total("wire_bytes_received")


def global_order(world, columns, key):
    """Everyone's rows in (key, rank, position) order: what the ranks must hold in sequence."""
    everything = world.allgather(columns)
    merged = {n: np.concatenate([c[n] for c in everything]) for n in columns}
    ranks = np.concatenate([np.full(len(c[key]), r) for r, c in enumerate(everything)])
    positions = np.concatenate([np.argsort(np.argsort(c[key], kind="stable"), kind="stable")
                                for c in everything])
    order = np.lexsort((positions, ranks, merged[key]))
    return {n: c[order] for n, c in merged.items()}


def local_rows(rank, size, case):
    rng = np.random.default_rng([rank, size, len(case)])
    n = {"uneven": [5000, 200, 0, 3000][rank % 4], "all-empty": 0, "one-rank": 4000 if rank == 0 else 0,
         "ties": 1500, "large": 20000}[case]
    t = rng.integers(0, 10**6, n) if case != "ties" else np.full(n, 42)
    return {"t": t.astype(np.int64), "dur": rng.integers(0, 100, n), "rank": np.full(n, rank, np.int32),
            "i": np.arange(n, dtype=np.int64)}


@pytest.mark.parametrize("case", ["uneven", "all-empty", "one-rank", "ties", "large"])
@pytest.mark.parametrize("order", shuffle.ORDERS)
def test_shuffle_by_key_contiguous_balanced_exact(case, order):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    columns = local_rows(rank, size, case)
    sample_size = 256
    out, stats = shuffle.shuffle_by_key(world, columns, "t", Codec(3), sample_size=sample_size, order=order)
    # every rank checks everything, so a failure fails on all ranks (no rank left in a collective)
    held = world.allgather(out)
    expected = global_order(world, columns, "t")
    total = len(expected["t"])
    for name in columns:
        assert np.array_equal(np.concatenate([h[name] for h in held]), expected[name]), name
    bound = shuffle.balance_bound(total, size, sample_size)
    assert max(abs(len(h["t"]) - total / size) for h in held) <= bound
    summary = shuffle.summarize(world, stats)
    assert summary.rows_per_rank == [len(h["t"]) for h in held]
    assert summary.total("rows_kept") + summary.total("rows_received") == total


def test_balanced_partition_destinations():
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    keys = np.random.default_rng(rank).normal(size=[700, 0, 1300][rank % 3])
    dest = shuffle.balanced_partition(world, keys, sample_size=10_000)
    assert dest.shape == keys.shape and (len(dest) == 0 or 0 <= dest.min() <= dest.max() < size)
    counts = np.zeros(size, np.int64)
    world.Allreduce(np.bincount(dest, minlength=size), counts)
    assert counts.max() - counts.min() <= 1           # full sample: exact split
    highest = np.array([keys[dest == d].max() if np.any(dest == d) else -np.inf for d in range(size)])
    lowest = np.array([keys[dest == d].min() if np.any(dest == d) else np.inf for d in range(size)])
    highest_all, lowest_all = np.empty(size), np.empty(size)
    world.Allreduce(highest, highest_all, op=MPI.MAX)
    world.Allreduce(lowest, lowest_all, op=MPI.MIN)
    nonempty = counts > 0
    assert np.all(highest_all[nonempty][:-1] <= lowest_all[nonempty][1:])


@pytest.mark.parametrize("root", [0, -1])
def test_gather_to_root(root):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    root = root % size
    columns = rows_for(rank, 0, seed=5)
    out, stats = shuffle.gather(world, columns, root=root)
    if rank == root:
        expected = [rows_for(r, 0, seed=5) for r in range(size)]
        for name in columns:
            assert np.array_equal(out[name], np.concatenate([e[name] for e in expected]))
    else:
        assert len(out["t_start"]) == 0 and out["t_start"].dtype == np.int64


def _pull_rows(rank):
    n = 10 * (rank % 3)      # different row counts, some ranks none
    return {"rank": np.full(n, rank, np.int64), "i": np.arange(n, dtype=np.int32), "on": np.arange(n) % 2 == 0}


@pytest.mark.parametrize("chunk_rows", [1 << 20, 7])
def test_root_pull_in_rank_order(chunk_rows):
    """RootPull / serve_root: the chunks root reads, concatenated, are every rank's rows in rank
    order, dtypes kept, also when they travel in chunks of 7 rows."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    columns = _pull_rows(rank)
    if rank == 0:
        pull = shuffle.RootPull(world, shuffle.row_chunks(columns, chunk_rows))
        try:
            chunks = list(pull.chunks())
        finally:
            pull.close()
        assert all(len(c["rank"]) <= chunk_rows for c in chunks)
        want = [_pull_rows(r) for r in range(size)]
        for name in columns:
            got = np.concatenate([c[name] for c in chunks]) if chunks else columns[name][:0]
            assert np.array_equal(got, np.concatenate([w[name] for w in want]))
            assert all(c[name].dtype == columns[name].dtype for c in chunks)
    else:
        shuffle.serve_root(world, shuffle.row_chunks(columns, chunk_rows))
    world.Barrier()


def test_root_pull_stopped_early_releases_every_rank():
    """Root reads two chunks and stops (as on a full disk): close() lets every other rank return."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    columns = _pull_rows(world.Get_rank())
    if world.Get_rank() == 0:
        pull = shuffle.RootPull(world, shuffle.row_chunks(columns, 3))
        try:
            for k, _ in enumerate(pull.chunks()):
                if k == 1:
                    break
        finally:
            pull.close()
    else:
        shuffle.serve_root(world, shuffle.row_chunks(columns, 3))
    world.Barrier()     # reached by all: nobody is still waiting for root


def test_mismatched_key_dtypes_fail_on_every_rank():
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    keys = np.arange(10, dtype=np.int64 if world.Get_rank() == 0 else np.float64)
    if world.Get_size() > 1:
        with pytest.raises(TypeError, match="key dtypes differ"):
            shuffle.balanced_partition(world, keys)


def test_send_rows_keeps_each_columns_dtype():
    """owner_exchange.send_rows: every row reaches rank dest[i], grouped by source rank in rank
    order, each source's rows in their order, and each column in its own dtype (int32 vertex
    ids travel as int32)."""
    from mpi4py import MPI
    from mpigraph.comm import owner_exchange
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()

    def rows_of(source):
        n = 5 + 3 * source
        return (np.arange(n) * 7 + source) % size, np.arange(n, dtype=np.int32) + 1000 * source, \
            np.arange(n, dtype=np.int64) * 2**40, np.full(n, source, np.int8)

    dest, *columns = rows_of(rank)
    received, source = owner_exchange.send_rows(world, dest, columns, with_source=True)
    want = [np.concatenate([c[rows_of(s)[0] == rank] for s in range(size) for c in [rows_of(s)[1 + k]]])
            for k in range(len(columns))]
    for got, expect, sent in zip(received, want, columns):
        assert got.dtype == sent.dtype
        assert got.tolist() == expect.tolist()
    assert source.tolist() == received[2].tolist()        # the int8 column is each row's source


def test_send_rows_refuses_a_rank_outside_the_communicator():
    """A destination past the last rank (or below 0) is an error on the rank that has it, not a
    row lost or a count array of the wrong length in the Alltoall."""
    from mpi4py import MPI
    from mpigraph.comm import owner_exchange
    world = MPI.COMM_WORLD
    if world.Get_size() == 1:
        return
    for bad in (world.Get_size(), -1):
        with pytest.raises(ValueError, match="not a rank of the communicator"):
            owner_exchange.send_rows(world, np.array([0, bad], np.int32), [np.arange(2)])


def test_ask_owners_answers_each_row_on_its_owner_in_the_order_asked():
    """owner_exchange.ask_owners: every row, its owner's (this rank's own rows too, which do
    not travel), answered there and put back in the order of the queries, in one call of
    `answer` per rank."""
    from mpi4py import MPI
    from mpigraph.comm import owner_exchange
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    n = 11 + 4 * rank
    value = np.arange(n, dtype=np.int32) * 3 + 100 * rank
    owner = (np.arange(n) * 5 + rank) % size          # rows of every rank, own ones among them
    calls = []

    def answer(query):
        calls.append(len(query[0]))
        return [query[0].astype(np.int64) * 2, np.full(len(query[0]), rank, np.int64)]

    from mpigraph.comm import meter
    before = meter.totals()[0]
    doubled, answered_by = owner_exchange.ask_owners(world, owner, [value], answer)
    assert doubled.tolist() == (value.astype(np.int64) * 2).tolist()
    assert answered_by.tolist() == owner.tolist()
    assert len(calls) == 1
    # Only the queries go (int32) and the answers come back (two int64): no row's position.
    asked_of_me = sum(int(np.count_nonzero((np.arange(11 + 4 * r) * 5 + r) % size == rank))
                      for r in range(size) if r != rank)
    assert meter.totals()[0] - before == 4 * int(np.count_nonzero(owner != rank)) + 16 * asked_of_me


@pytest.mark.parametrize("exchange", ["send_rows", "shuffle"])
def test_a_rank_done_early_waits_for_a_late_one_without_spinning(exchange):
    """The ranks that reach an exchange first wait for the last without polling MPI all along
    (``parallel.wait_idly``): on a node with more ranks than cores a polling wait takes the CPU
    the late rank needs.  Rank 0 comes LATE_S late; each other rank's CPU time through its wait
    stays well under that wait's length (a polling wait takes about all of it, or its share of
    the node's cores)."""
    import time
    from mpi4py import MPI
    from mpigraph.comm import owner_exchange
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if size == 1:
        return
    late_s = 0.6
    world.Barrier()
    if rank == 0:
        time.sleep(late_s)
    wall, cpu = time.perf_counter(), time.process_time()
    dest = np.arange(size, dtype=np.int32)
    if exchange == "send_rows":
        received, = owner_exchange.send_rows(world, dest, [dest.astype(np.int64)])
        assert received.tolist() == [rank] * size
    else:
        received, _ = shuffle.exchange(world, [{"x": np.array([rank])} for _ in range(size)])
        assert sorted(int(b["x"][0]) for b in received.values()) == list(range(size))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if rank:
        assert wall > late_s / 2          # it did wait for rank 0
        assert cpu < 0.25 * wall, "rank %d took %.3f s of CPU in a %.3f s wait" % (rank, cpu, wall)
