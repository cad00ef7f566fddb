"""The relay's slabs of time (paths.relay): known answers for the bounds that cut the joined graph.

The relay itself (every path and distance against the serial reference, on 2 and 3 ranks, and
the fallback where times are out of order) runs under mpiexec in test_paths_mpi.py.
"""

import numpy as np

from mpigraph.paths import relay


def slab_counts(per_rank_times, n_slabs):
    """How many of all ranks' times each slab holds, as the ranks would cut them."""
    bounds = relay.slab_bounds([relay.time_sample(np.asarray(t, np.int64), 1024) for t in per_rank_times], n_slabs)
    slab = np.searchsorted(bounds, np.concatenate(per_rank_times), "right")
    return np.bincount(slab, minlength=n_slabs), bounds


def test_distinct_times_make_slabs_of_equal_counts():
    times = np.arange(1000)
    counts, bounds = slab_counts([times[r::4] for r in range(4)], 4)     # each rank a quarter, interleaved
    assert bounds.tolist() == [250, 500, 750]
    assert counts.tolist() == [250, 250, 250, 250]


def test_a_rank_with_more_vertices_weighs_more():
    """Rank 0's 1,000 times are 100 times rank 1's 10: the bound halves all 1,010, not the samples."""
    counts, _ = slab_counts([np.arange(1000), np.arange(1000, 1010)], 2)
    assert abs(int(counts[0]) - 505) <= 2 and counts.sum() == 1010


def test_equal_times_stay_in_one_slab():
    """600 vertices at t = 0 and 400 at t = 1: no bound between equal times, so a tie never
    puts an edge's two ends in different slabs."""
    times = np.array([0] * 600 + [1] * 400)
    counts, bounds = slab_counts([times[:500], times[500:]], 2)
    assert bounds.tolist() == [1]
    assert counts.tolist() == [600, 400]


def test_more_slabs_than_distinct_times_leaves_some_empty():
    counts, _ = slab_counts([np.array([5, 5, 7]), np.array([7, 9])], 4)
    assert counts.sum() == 5 and sorted(counts.tolist())[-1] <= 2 + 1


def test_a_rank_without_vertices_adds_nothing():
    counts, bounds = slab_counts([np.arange(100), np.zeros(0, np.int64)], 2)
    assert bounds.tolist() == [50] and counts.tolist() == [50, 50]
