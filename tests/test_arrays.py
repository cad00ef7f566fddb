"""mpigraph.util.arrays: numpy's unique, done by a sort, gives numpy's answers."""

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from mpigraph.util import arrays

INT64S = hnp.arrays(np.int64, st.integers(0, 200),
                    elements=st.one_of(st.integers(-3, 3), st.integers(-2**63, 2**63 - 1)))


@given(INT64S)
def test_unique_is_numpys(values):
    np.testing.assert_array_equal(arrays.unique(values), np.unique(values))


@given(INT64S)
def test_unique_inverse_is_numpys_with_index_and_inverse(values):
    distinct, first, inverse = arrays.unique_inverse(values)
    want = np.unique(values, return_index=True, return_inverse=True)
    for got, expected in zip((distinct, first, inverse), want):
        np.testing.assert_array_equal(got, expected.reshape(-1))
    assert inverse.dtype == np.int64


@given(st.one_of(INT64S, hnp.arrays(np.int64, st.integers(0, 50), elements=st.just(2**62 + 5))))
def test_unique_codes_is_numpys_with_inverse(values):
    """Narrow spans by a table, wide ones by a sort, one value (a wide id alone) by neither."""
    distinct, codes = arrays.unique_codes(values)
    want = np.unique(values, return_inverse=True)
    np.testing.assert_array_equal(distinct, want[0])
    np.testing.assert_array_equal(codes, want[1].reshape(-1))
    assert codes.dtype == np.int64 and distinct.dtype == values.dtype


@given(hnp.arrays(np.int64, st.integers(1, 200), elements=st.integers(-2, 2)))
def test_runs_are_the_runs_of_equal_neighbours(values):
    starts, lengths = arrays.runs(values)
    assert lengths.sum() == len(values) and (lengths > 0).all()
    for start, length in zip(starts, lengths):      # each run equal inside, different from the next
        assert (values[start:start + length] == values[start]).all()
        assert start + length == len(values) or values[start + length] != values[start]


def test_chunk_bounds_cover_every_row_in_chunks_of_about_so_many_edges():
    indptr = np.array([0, 2, 2, 9, 10, 10, 14])
    bounds = arrays.chunk_bounds(indptr, 4).tolist()
    assert bounds[0] == 0 and bounds[-1] == 6 and bounds == sorted(set(bounds))
    # a chunk starts at the first row whose first edge is at or past a multiple of 4 (rows 0-2:
    # edges 0-8, row 2 alone holding 7 of them; rows 3-5: edges 9-13)
    assert bounds == [0, 3, 6]
    assert arrays.chunk_bounds(np.zeros(1, np.int64), 4).tolist() == [0]


@given(hnp.arrays(np.bool_, st.integers(0, 60)), st.data())
def test_block_or_positions_are_the_true_positions(mask, data):
    positions = arrays.block_or_positions(mask)
    values = np.arange(len(mask)) * 3
    assert values[positions].tolist() == values[mask].tolist()
    assert arrays.count(positions) == mask.sum()
    want_slice = mask.sum() == 0 or np.ptp(np.flatnonzero(mask)) + 1 == mask.sum()
    assert isinstance(positions, slice) == bool(want_slice)
    a = data.draw(st.integers(0, int(mask.sum())))
    b = data.draw(st.integers(a, int(mask.sum())))
    assert values[arrays.part_of(positions, a, b)].tolist() == values[mask][a:b].tolist()


@given(hnp.arrays(np.int64, st.integers(0, 40), elements=st.integers(0, 5)), st.integers(1, 9))
def test_chunk_bounds_are_the_same_for_int32_and_int64_indptr(degree, per_chunk):
    indptr = np.concatenate(([0], np.cumsum(degree)))       # empty rows at the end included
    wide = arrays.chunk_bounds(indptr, per_chunk)
    assert arrays.chunk_bounds(indptr.astype(np.int32), per_chunk).tolist() == wide.tolist()
    marks = np.arange(0, int(indptr[-1]) + 1)
    for side in ("left", "right"):
        assert (arrays.sorted_positions(indptr.astype(np.int32), marks, side).tolist()
                == np.searchsorted(indptr, marks, side).tolist())


@given(hnp.arrays(np.int32, st.tuples(st.integers(0, 40), st.integers(1, 5)), elements=st.integers(0, 3)),
       st.data())
def test_column_counts_are_searchsorted_right_in_each_column(steps, data):
    table = np.cumsum(steps, axis=0, dtype=np.int32)     # each column non-decreasing down the rows
    n = data.draw(st.integers(0, 12))
    columns = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, table.shape[1] - 1)))
    limits = data.draw(hnp.arrays(np.int64, n, elements=st.integers(-2, 130)))
    want = [np.searchsorted(table[:, c], x, "right") for c, x in zip(columns, limits)]
    assert arrays.column_counts(table, columns, limits).tolist() == want


@given(hnp.arrays(np.int64, st.integers(0, 50), elements=st.integers(0, 9)), st.sampled_from([np.int32, np.int64]))
def test_row_pointers_count_each_rows_entries(rows, dtype):
    indptr = arrays.row_pointers(rows, 10, dtype)
    assert indptr.dtype == dtype
    assert indptr.tolist() == [0] + np.cumsum(np.bincount(rows, minlength=10)).tolist()


def test_isin_few_by_hand():
    # runs of one source vertex (an instance's edges), the few keys unsorted
    values = np.array([5, 5, 5, 2, 9, 9, 7, 5], np.int64)
    assert arrays.isin_few(values, np.array([9, 5])).tolist() == [True] * 3 + [False, True, True, False, True]
    assert arrays.isin_few(values, np.zeros(0, np.int64)).tolist() == [False] * 8
    assert arrays.isin_few(np.zeros(0, np.int64), np.array([1])).tolist() == []


@given(hnp.arrays(np.int64, st.integers(0, 200), elements=st.integers(-5, 5)), INT64S)
def test_isin_few_is_numpys_isin(values, few):
    got = arrays.isin_few(values, few)
    assert got.dtype == bool
    np.testing.assert_array_equal(got, np.isin(values, few))


def test_batches_by_hand():
    assert arrays.batches([], 10) == []
    assert arrays.batches([3, 3, 3, 3], 6) == [(0, 2), (2, 4)]
    assert arrays.batches([3, 20, 3, 3, 5], 10) == [(0, 1), (1, 2), (2, 4), (4, 5)]    # 20 alone
    assert arrays.batches([0, 0, 0], 1) == [(0, 3)]


@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 60))
def test_batches_cover_every_size_once_within_the_bound(sizes, max_rows):
    bounds = arrays.batches(sizes, max_rows)
    assert [i for a, b in bounds for i in range(a, b)] == list(range(len(sizes)))
    for a, b in bounds:
        assert b - a == 1 or sum(sizes[a:b]) <= max_rows


def test_stacked_says_whose_each_row_is():
    whole, owner, starts = arrays.stacked([np.array([5, 6]), np.zeros(0, np.int64), np.array([7])])
    assert whole.tolist() == [5, 6, 7] and owner.tolist() == [0, 0, 2] and starts.tolist() == [0, 2, 2]


@given(st.one_of(INT64S, hnp.arrays(np.int64, st.integers(0, 200), elements=st.integers(-3, 3))))
def test_keyed_sums_count_and_sum_the_rows_of_each_key(keys):
    """Narrow spans by a table, wide ones by a sort; sums exact beyond float64's 53 bits."""
    values = np.arange(len(keys), dtype=np.int64) * 2**40 + 1
    distinct, count, sums = arrays.keyed_sums(keys, values)
    want = sorted(set(keys.tolist()))
    assert distinct.tolist() == want and distinct.dtype == keys.dtype
    assert count.tolist() == [keys.tolist().count(k) for k in want]
    assert sums.tolist() == [sum(v for key, v in zip(keys.tolist(), values.tolist()) if key == k) for k in want]


@given(st.lists(st.integers(0, 5), max_size=30))
def test_run_sums_sum_each_run_exactly(lengths):
    bounds = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    values = 2**53 + np.arange(bounds[-1], dtype=np.int64)      # beyond float64's 53 bits
    sums = arrays.run_sums(values, bounds)
    assert sums.tolist() == [sum(values[a:b].tolist()) for a, b in zip(bounds[:-1], bounds[1:])]


@given(st.lists(st.sampled_from([1, 2, 3, 7, 256, 600]), max_size=12),
       st.integers(0, 2**32 - 1))
def test_run_cumsums_are_each_runs_own_cumsum(lengths, seed):
    """Each run's running sums are np.cumsum of the run alone, bit for bit: thirds and tenths
    summed after other runs' large values (one running sum over all rows rounds them otherwise)."""
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    values = np.random.default_rng(seed).integers(1, 10**7, int(sum(lengths))) / np.array([3.0, 10.0, 7.0])[
        np.arange(int(sum(lengths))) % 3]
    found = arrays.run_cumsums(values, starts, lengths)
    for a, n in zip(starts.tolist(), lengths):
        assert found[a:a + n].tolist() == np.cumsum(values[a:a + n]).tolist()


@given(st.sampled_from([1, 3, 256, 257, 70_000]), st.integers(0, 300), st.booleans(), st.data())
def test_grouped_orders_the_rows_stably_by_group_and_counts_them(n_groups, n_rows, in_order, data):
    """Each group's rows in their order, the groups in order, whatever width the radix sort
    takes (8 bits up to 256 groups, 16 up to 65,536, the groups' own dtype beyond); rows already
    in order need no order at all."""
    group = np.array(data.draw(st.lists(st.integers(0, n_groups - 1), min_size=n_rows, max_size=n_rows)), np.int32)
    if in_order:
        group = np.sort(group)
    order, counts = arrays.grouped(group, n_groups)
    expected = np.argsort(group, kind="stable")
    assert (order is None) == bool((np.diff(group) >= 0).all())
    np.testing.assert_array_equal(expected if order is None else order, expected)
    np.testing.assert_array_equal(counts, np.bincount(group, minlength=n_groups))
    assert counts.dtype == np.int64
