"""The shuffle: splitters, exchange rounds, balanced shuffle by key.

Serial tests check the splitter arithmetic by simulating K ranks in one
process.  The checks that need several processes are in
tests/mpi_shuffle_checks.py (not collected by a plain ``pytest tests``);
``test_mpi_checks_under_mpiexec`` runs them under mpiexec with 1, 2, 3 and 4
ranks, so the plain ``python -m pytest tests`` covers them with no skips.
"""

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpigraph.comm import shuffle
from mpigraph.comm.codec import CodecError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_env  # noqa: E402


# -- serial: batches -----------------------------------------------------------

def test_split_by_dest_keeps_order_and_every_row():
    columns = {"a": np.arange(10), "b": np.arange(10) * 1.5}
    dest = np.array([2, 0, 2, 1, 0, 2, 2, 0, 1, 1])
    parts = shuffle.split_by_dest(columns, dest, 4)
    assert [list(p["a"]) for p in parts] == [[1, 4, 7], [3, 8, 9], [0, 2, 5, 6], []]
    assert np.array_equal(parts[2]["b"], np.array([0, 2, 5, 6]) * 1.5)


def test_split_by_dest_of_grouped_rows_slices_them():
    columns = {"a": np.arange(6)}
    parts = shuffle.split_by_dest(columns, np.array([0, 0, 2, 2, 2, 3]), 4)
    assert [list(p["a"]) for p in parts] == [[0, 1], [], [2, 3, 4], [5]]


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


# -- the MPI checks, launched ---------------------------------------------------------

N_MPI_CHECKS = 2 * 2 + 5 * 2 + 1 + 2 + 2 + 1 + 1 + 1 + 1 + 1 + 2   # the test functions x parameters of mpi_shuffle_checks.py


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_mpi_checks_under_mpiexec(ranks):
    """tests/mpi_shuffle_checks.py under mpiexec -n ranks: every rank passes every check."""
    returncode, stdout, stderr = mpi_env.run_mpi_checks("mpi_shuffle_checks.py", ranks)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("%d passed" % N_MPI_CHECKS) == ranks, stdout[-4000:]
