"""The one-sweep search of an acyclic graph (paths.dag, C) against csgraph's Dijkstra, and the
distributed walk's exits (walk.local_exits) against following next[] vertex by vertex."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mpigraph.paths import dag, dijkstra, walk
from mpigraph.util import arrays
from mpigraph.paths.labels import NO_NEXT
from mpigraph.paths.model import INF


def random_dag(rng, n, m, index):
    """(indptr, indices, weight) of a CSR with up to m edges v -> u, all along one random order
    of the vertices (acyclic), parallel edges and zero weights included."""
    rank = rng.permutation(n)
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = rank[a] < rank[b]
    a, b = a[keep], b[keep]
    weight = rng.integers(0, 40, len(a)) * rng.integers(0, 2, len(a))
    order = np.argsort(a, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(a, minlength=n), out=indptr[1:])
    return indptr, b[order].astype(index), weight[order].astype(np.int64)


def test_the_kernel_compiles():
    assert dag.available(), "the path kernel did not compile (is there a C compiler, cc or $CC?)"


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), m=st.integers(0, 300),
       index=st.sampled_from([np.int32, np.int64]), pointer=st.sampled_from([np.int32, np.int64]),
       slack=st.sampled_from([np.uint32, np.int64, np.int32]), with_offsets=st.booleans(), whole=st.booleans())
def test_the_sweep_finds_dijkstras_distances(seed, n, m, index, pointer, slack, with_offsets, whole):
    """Every dtype of the CSR's columns (int32 slacks are read as an int64 copy), the sweep of
    the reached part and of the whole graph."""
    rng = np.random.default_rng(seed)
    indptr, indices, weight = random_dag(rng, n, m, index)
    indptr, weight = indptr.astype(pointer), weight.astype(slack)
    k = int(rng.integers(1, 5))
    sources = rng.integers(0, n, k)
    offsets = rng.integers(0, 30, k) if with_offsets else np.zeros(k, np.int64)
    swept = dag.search(n, indptr, indices, weight, sources, offsets, INF, whole=whole)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPIGRAPH_PATH_KERNEL", "off")
        assert dag.search(n, indptr, indices, weight, sources, offsets, INF, whole=whole) is None
        reference = dijkstra.Reversed(n, indptr, indices, weight).search(sources, offsets)
    assert swept.tolist() == reference.tolist()
    assert dijkstra.Reversed(n, indptr, indices, weight).search(sources, offsets).tolist() == reference.tolist()


def test_a_cycle_is_left_to_dijkstra():
    # 0 -> 1 -> 2 -> 0, then 2 -> 3: the sweep cannot order the reached part and says so; the
    # search (Reversed) then gives csgraph's distances.
    indptr, indices, weight = np.array([0, 1, 2, 4, 4]), np.array([1, 2, 0, 3]), np.array([1, 2, 3, 4])
    assert dag.search(4, indptr, indices, weight, [0], [0], INF) is None
    assert dijkstra.Reversed(4, indptr, indices, weight).search([0]).tolist() == [0, 1, 3, 7]
    # A cycle the sources do not reach does not matter, whether the sweep looks for the reached
    # part first or takes the whole graph (which has the cycle: it then sweeps the reached part).
    for whole in (False, True):
        assert dag.search(4, indptr, indices, weight, [0], [0], INF, whole=whole) is None
        assert dag.search(4, indptr, indices, weight, [3], [5], INF, whole=whole).tolist() == [INF, INF, INF, 5]


def test_the_whole_sweeps_stack_grows_past_its_first_room():
    # Thousands of vertices ready at once: at the start (no edges into them) and after a star's
    # centre (vertex 0: an edge from each of 1 .. n - 1, each of those one from n + i).
    n = 3000
    rows = np.concatenate(([n - 1], np.ones(n - 1, np.int64), np.zeros(n, np.int64)))
    indptr = np.concatenate(([0], np.cumsum(rows)))
    indices = np.concatenate((np.arange(1, n), np.arange(n + 1, 2 * n)))
    weight = np.arange(len(indices), dtype=np.int64) % 7
    sources = np.array([0, 2 * n - 1] + list(range(n // 2)))
    offsets = np.arange(len(sources)) % 5
    whole = dag.search(2 * n, indptr, indices, weight, sources, offsets, INF, whole=True)
    assert whole.tolist() == dag.search(2 * n, indptr, indices, weight, sources, offsets, INF).tolist()
    assert (whole < INF).sum() > n


def test_distances_stay_float64_exact_like_csgraphs():
    # The sweep sums in int64, but every search keeps to the integers float64 holds exactly, so
    # that a run gives the same answer (or the same refusal) with or without a C compiler.
    indptr, indices = np.array([0, 1, 2, 2]), np.array([1, 2])
    with pytest.raises(ValueError, match="float64"):
        dijkstra.Reversed(3, indptr, indices, np.array([2**52, 2**52])).search([0])


def exits_one_at_a_time(nxt, lo, hi, sink):
    out = []
    for v in range(lo, hi):
        firsts, lasts = [], []
        out.append(walk.follow(nxt, lo, v, hi, sink, firsts, lasts))
    return out


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120), lo=st.integers(0, 40),
       straight=st.sampled_from([0.0, 0.5, 0.9, 1.0]), outside=st.sampled_from([0.0, 0.1, 0.5]),
       kernel=st.sampled_from(["c", "off"]))
def test_local_exits_are_where_follow_leaves_the_range(seed, n, lo, straight, outside, kernel):
    """next[] of vertices lo .. lo + n - 1: mostly the id after (straight runs), else anywhere in
    the range (cycles included), or out of it: another rank's vertex, a hub, NO_NEXT.  In C and
    by numpy's pointer jumping (kernel off)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
        assert (dag.run_exits(np.zeros(1, np.int64), 0, 1, 0, NO_NEXT) is None) == (kernel == "off")
        check_local_exits(seed, n, lo, straight, outside)


def check_local_exits(seed, n, lo, straight, outside):
    rng = np.random.default_rng(seed)
    hi = lo + n
    ids = np.arange(lo, hi)
    nxt = np.where(rng.random(n) < straight, ids + 1, rng.integers(lo, hi, n))
    away = rng.random(n) < outside
    nxt[away] = rng.choice([0, hi + 7, 10**6, NO_NEXT], int(away.sum())) if lo == 0 else \
        rng.choice([lo - 1, hi + 7, 10**6, NO_NEXT], int(away.sum()))
    nxt = nxt.astype(np.int64)
    sink = int(rng.integers(lo, hi + 2))       # in the range, or not (another rank's)
    assert walk.local_exits(nxt, lo, hi, sink).tolist() == exits_one_at_a_time(nxt, lo, hi, sink)


@pytest.mark.parametrize("kernel", ["c", "off"])
def test_chained_entries_cross_hubs_and_stop_at_the_end(kernel, monkeypatch):
    monkeypatch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
    assert (dag.chain_entries(np.zeros(1, np.int64), np.zeros(1, np.int64), 0, np.zeros(0, np.int64), 1, NO_NEXT)
            is None) == (kernel == "off")
    # Runs: 0 exits to 10 (another rank's), 10 to hub 100 (after it: 20), 20 to the end.
    entry, exit_ = np.array([0, 10, 20, 30]), np.array([10, 100, NO_NEXT, 0])
    after_hub = np.array([20])
    assert walk._chain_entries(entry, exit_, 0, after_hub, 100).tolist() == [0, 10, 20]
    assert walk._chain_entries(entry, exit_, 30, after_hub, 100).tolist() == [30, 0, 10, 20]
    # An exit that is no entry anywhere ends the chain there (the path then fails to reach the
    # sink, which the caller reports).
    assert walk._chain_entries(entry, np.array([11, 100, NO_NEXT, 0]), 0, after_hub, 100).tolist() == [0]
    # A start that is no entry: an empty chain; a cycle of entries: each entry at most once a turn.
    assert walk._chain_entries(entry, exit_, 5, after_hub, 100).tolist() == []
    assert walk._chain_entries(entry, np.array([10, 0, NO_NEXT, 0]), 0, after_hub, 100).tolist() == [0, 10, 0, 10]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 200), hubs=st.integers(0, 5))
def test_chained_entries_in_c_are_the_loops(seed, n, hubs):
    """Random sorted entries whose exits are other entries, ids that are none, hubs (whose next
    vertex is an entry, NO_NEXT or none) or NO_NEXT: the C chain and the Python loop agree."""
    rng = np.random.default_rng(seed)
    n_rank = 10 * n
    entry = np.unique(rng.integers(0, n_rank, n))
    choices = np.concatenate([entry, rng.integers(0, n_rank, 3), n_rank + np.arange(hubs), [NO_NEXT]])
    exit_ = rng.choice(choices, len(entry)).astype(np.int64)
    after_hub = rng.choice(np.concatenate([entry, [NO_NEXT, n_rank - 1]]), hubs).astype(np.int64)
    start = int(rng.choice(entry))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPIGRAPH_PATH_KERNEL", "off")
        loop = walk._chain_entries(entry, exit_, start, after_hub, n_rank).tolist()
    assert dag.chain_entries(entry, exit_, start, after_hub, n_rank, NO_NEXT).tolist() == loop


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120), lo=st.integers(0, 40),
       straight=st.sampled_from([0.0, 0.5, 0.9, 1.0]), outside=st.sampled_from([0.0, 0.1, 0.5]),
       n_entries=st.integers(0, 4))
def test_walked_runs_in_c_are_follows(seed, n, lo, straight, outside, n_entries):
    """The distributed walk's runs in C (dag.walk_runs) against ``follow`` run by run, on next[]
    as in test_local_exits: the same exit and length, and the same vertices where the run is no
    cycle (a cycle's run ends NO_NEXT in both, where the path then fails to reach the sink).
    Runs that overlap beyond the room of the range and the entries give None (the Python walk)."""
    rng = np.random.default_rng(seed)
    hi = lo + n
    ids = np.arange(lo, hi)
    nxt = np.where(rng.random(n) < straight, ids + 1, rng.integers(lo, hi, n))
    away = rng.random(n) < outside
    nxt[away] = rng.choice([hi + 7, 10**6, NO_NEXT], int(away.sum()))
    nxt = nxt.astype(np.int64)
    sink = int(rng.integers(lo, hi + 2))
    entries = rng.choice(ids, min(n_entries, n), replace=False).astype(np.int64)
    walked = dag.walk_runs(nxt, lo, n, sink, NO_NEXT, entries)
    runs = []
    for v in entries.tolist():
        firsts, lasts = [], []
        exit_ = walk.follow(nxt, lo, v, hi, sink, firsts, lasts)
        runs.append((exit_, arrays.ranges(np.array(firsts, np.int64), np.array(lasts, np.int64)).tolist()))
    if walked is None:
        assert sum(len(vertices) for _, vertices in runs) > n + len(entries)
        return
    exits, lengths, vertices = walked
    assert exits.tolist() == [exit_ for exit_, _ in runs]
    starts = np.concatenate(([0], np.cumsum(lengths)))
    for i, (exit_, expected) in enumerate(runs):
        mine = vertices[starts[i]:starts[i + 1]].tolist()
        if len(set(expected)) == len(expected):          # no cycle
            assert mine == expected
        else:
            assert exit_ == NO_NEXT and len(mine) > n
