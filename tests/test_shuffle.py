"""The shuffle: splitters, exchange rounds, balanced shuffle by key.

Serial tests check the splitter arithmetic by simulating K ranks in one
process.  Tests marked ``mpi`` need several processes::

    mpiexec -n 3 python -m pytest --with-mpi -m mpi tests/test_shuffle.py

and ``test_mpi_suite_under_mpiexec`` runs exactly that for 1, 2, 3 and 4
ranks, so the plain ``python -m pytest tests`` covers them too.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpigraph import shuffle
from mpigraph.codec import Codec, CodecError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- serial: batches -----------------------------------------------------------

def test_split_by_dest_keeps_order_and_every_row():
    columns = {"a": np.arange(10), "b": np.arange(10) * 1.5}
    dest = np.array([2, 0, 2, 1, 0, 2, 2, 0, 1, 1])
    parts = shuffle.split_by_dest(columns, dest, 4)
    assert [list(p["a"]) for p in parts] == [[1, 4, 7], [3, 8, 9], [0, 2, 5, 6], []]
    assert np.array_equal(parts[2]["b"], np.array([0, 2, 5, 6]) * 1.5)


def test_concat_batches_checks_schema_and_keeps_dtypes_when_empty():
    like = {"t": np.zeros(0, np.int64), "f": np.zeros(0, np.uint16)}
    empty = shuffle.concat_batches([], like)
    assert [c.dtype for c in empty.values()] == [np.int64, np.uint16] and len(empty["t"]) == 0
    with pytest.raises(CodecError, match="expected t:int64, f:uint16"):
        shuffle.concat_batches([{"t": np.zeros(1, np.int32), "f": np.zeros(1, np.uint16)}], like)


# -- serial: splitters, simulating K ranks ---------------------------------------

def simulate_partition(keys_by_rank, sample_size):
    """What balanced_partition computes on each rank, without MPI: the parts, as
    lists of (key, rank, position) rows per destination."""
    n_parts = len(keys_by_rank)
    sorted_by_rank = [np.sort(k, kind="stable") for k in keys_by_rank]
    positions = [shuffle.regular_sample(k, sample_size) for k in sorted_by_rank]
    sample = (
        np.concatenate([k[p] for k, p in zip(sorted_by_rank, positions)]),
        np.concatenate([np.full(len(p), r) for r, p in enumerate(positions)]).astype(np.int64),
        np.concatenate(positions),
        np.concatenate([np.full(len(p), len(k) / max(len(p), 1)) for k, p in zip(sorted_by_rank, positions)]),
    )
    splitters = shuffle.choose_splitters(*sample, n_parts)
    parts = [[] for _ in range(n_parts)]
    for rank, keys in enumerate(sorted_by_rank):
        cuts = shuffle.cut_points(keys, rank, splitters)
        assert cuts[0] == 0 and cuts[-1] == len(keys) and np.all(np.diff(cuts) >= 0)
        for dest in range(n_parts):
            parts[dest] += [(keys[i], rank, i) for i in range(cuts[dest], cuts[dest + 1])]
    return parts


def check_parts(keys_by_rank, parts, bound):
    everything = sorted((k, r, i) for r, keys in enumerate(keys_by_rank)
                        for i, k in enumerate(np.sort(keys, kind="stable")))
    # every row exactly once, and the parts are consecutive runs of the global order
    assert [row for part in parts for row in sorted(part)] == everything
    mean = len(everything) / len(parts)
    assert max(abs(len(p) - mean) for p in parts) <= bound, ([len(p) for p in parts], bound)


key_arrays = st.lists(st.integers(0, 40), min_size=0, max_size=300).map(lambda v: np.array(v, np.int64))


@settings(max_examples=80, deadline=None)
@given(keys_by_rank=st.lists(key_arrays, min_size=1, max_size=5), sample_size=st.integers(1, 64))
def test_splitters_balance_within_bound(keys_by_rank, sample_size):
    """Few distinct keys, so many ties across ranks: the bound must hold anyway."""
    parts = simulate_partition(keys_by_rank, sample_size)
    total = sum(len(k) for k in keys_by_rank)
    check_parts(keys_by_rank, parts, shuffle.balance_bound(total, len(keys_by_rank), sample_size))


@settings(max_examples=40, deadline=None)
@given(keys_by_rank=st.lists(key_arrays, min_size=1, max_size=5))
def test_full_sample_balances_exactly(keys_by_rank):
    """With every row sampled the splitters are exact: counts differ from the mean by < 1."""
    parts = simulate_partition(keys_by_rank, 10_000)
    check_parts(keys_by_rank, parts, 1)


def test_bound_depends_on_sample_size():
    """Skewed keys on unequal ranks: small samples stay inside their (looser) bound, and
    the imbalance shrinks as the sample grows."""
    rng = np.random.default_rng(7)
    keys = [rng.exponential(1e6, n).astype(np.int64) for n in (40000, 1000, 0, 25000)]
    worst = {}
    for s in (8, 64, 1024):
        parts = simulate_partition(keys, s)
        total = sum(map(len, keys))
        check_parts(keys, parts, shuffle.balance_bound(total, 4, s))
        worst[s] = max(abs(len(p) - total / 4) for p in parts)
    assert worst[1024] < worst[64] < worst[8]
    # the proven bound is loose; in practice a part is off by under one sample's weight
    assert worst[1024] <= total / 1024


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


@pytest.mark.mpi
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


@pytest.mark.mpi
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


@pytest.mark.mpi
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


@pytest.mark.mpi
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


@pytest.mark.mpi
def test_mismatched_key_dtypes_fail_on_every_rank():
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    keys = np.arange(10, dtype=np.int64 if world.Get_rank() == 0 else np.float64)
    if world.Get_size() > 1:
        with pytest.raises(TypeError, match="key dtypes differ"):
            shuffle.balanced_partition(world, keys)


# -- serial: the MPI suite, launched ------------------------------------------------

@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_mpi_suite_under_mpiexec(ranks):
    """Runs the mpi-marked tests above under mpiexec -n ranks (so CI's serial pytest covers them)."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["mpiexec", "-n", str(ranks), sys.executable, "-m", "pytest", "--with-mpi", "-m", "mpi",
           "-q", "-p", "no:cacheprovider", "-x", os.path.abspath(__file__)]
    returncode, stdout, stderr = run_guarded(cmd, env)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    n_mpi_tests = 2 * 2 + 5 * 2 + 1 + 2 + 1
    assert stdout.count("%d passed" % n_mpi_tests) == ranks, stdout[-4000:]


def run_guarded(cmd, env, hang_seconds=600):
    """Run an mpiexec command; if it hangs (a rank left in a collective), stop it with
    SIGTERM, which mpiexec forwards to its ranks (SIGKILL would orphan them).  The
    limit guards against hangs only: it times nothing."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        stdout, stderr = proc.communicate(timeout=hang_seconds)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        pytest.fail("mpiexec hung for %d s; output:\n%s\n%s" % (hang_seconds, stdout[-4000:], stderr[-4000:]))
    return proc.returncode, stdout, stderr
