"""Straight runs (ids in a row, as along a rank's calls): the path walk and the Bypass skip
them with numpy, and must give what following next[] one vertex at a time gives."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mpigraph.util import arrays
from mpigraph.paths import dijkstra, walk
from mpigraph.paths.labels import NO_NEXT


def follow_one_at_a_time(start, sink, nxt):
    path, v = [start], start
    while v != sink:
        v = int(nxt[v])
        if v == NO_NEXT or len(path) > len(nxt):
            raise ValueError("does not reach the sink")
        path.append(v)
    return path


def random_next(rng, n, straight):
    """(next array, start, sink): a path through distinct vertices, most steps to the next id
    (probability `straight`), the rest of next[] random (with runs of its own)."""
    nxt = np.where(rng.random(n) < straight, np.arange(1, n + 1), rng.integers(0, n, n)).astype(np.int64)
    nxt[nxt >= n] = NO_NEXT
    start = v = int(rng.integers(n))
    used = {v}
    for _ in range(int(rng.integers(0, n))):
        after = v + 1 if rng.random() < straight and v + 1 < n and v + 1 not in used else int(rng.integers(n))
        if after in used:
            break
        nxt[v], v = after, after
        used.add(v)
    return nxt, start, v


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), straight=st.sampled_from([0.0, 0.5, 0.95, 1.0]),
       first_scan=st.sampled_from([1, 2, 8]), last_scan=st.sampled_from([2, 64, 1 << 20]),
       kernel=st.sampled_from(["on", "off"]))
def test_chase_follows_next_as_one_vertex_at_a_time(seed, n, straight, first_scan, last_scan, kernel):
    """In C (dag.walk_runs) or by numpy's scans of straight runs (kernel off)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
        patch.setattr(walk, "FIRST_SCAN", first_scan)
        patch.setattr(walk, "LAST_SCAN", max(first_scan, last_scan))
        check_chase(seed, n, straight)


def check_chase(seed, n, straight):
    rng = np.random.default_rng(seed)
    nxt, start, sink = random_next(rng, n, straight)
    assert walk.chase(start, sink, nxt).tolist() == follow_one_at_a_time(start, sink, nxt)
    # The sink ends the path even where next[] goes on from it; a dead end or a cycle is refused.
    other = int(rng.integers(n))
    try:
        expected = follow_one_at_a_time(start, other, nxt)
    except ValueError:
        with pytest.raises(ValueError, match="does not reach the sink"):
            walk.chase(start, other, nxt)
    else:
        assert walk.chase(start, other, nxt).tolist() == expected


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 200), lo=st.integers(0, 50), straight=st.floats(0, 1))
def test_straight_end_is_where_next_stops_being_the_id_after(seed, n, lo, straight):
    rng = np.random.default_rng(seed)
    ids = np.arange(lo, lo + n)
    nxt = np.where(rng.random(n) < straight, ids + 1, rng.integers(lo, lo + n + 2, n))
    v = lo + int(rng.integers(n))
    stop = int(rng.integers(v + 1, lo + n + 1))
    sink = lo + int(rng.integers(n))
    w = v
    while w + 1 < stop and w != sink and nxt[w - lo] == w + 1:
        w += 1
    assert walk.straight_end(nxt, lo, v, stop, sink) == w


def one_way_distances(n, indptr, src, weight, sources):
    """Least slack to a source by Bellman-Ford rounds (the reference for the Bypass)."""
    dst = np.repeat(np.arange(n), np.diff(indptr))
    dist = np.full(n, np.inf)
    dist[sources] = 0
    for _ in range(n + 1):
        offer = dist[dst] + weight
        new = dist.copy()
        np.minimum.at(new, src, offer)
        if (new == dist).all():
            break
        dist = new
    return dist


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ranks=st.integers(1, 4), n_calls=st.integers(1, 60),
       n_deps=st.integers(0, 30), long_run=st.sampled_from([0, 16, 10**9]),
       scan_chunk=st.sampled_from([1, 3, 1 << 16]), kernel=st.sampled_from(["on", "off"]))
def test_bypass_distances_with_long_straight_runs(seed, n_ranks, n_calls, n_deps, long_run, scan_chunk, kernel):
    """Ranks of S -> E -> S ... chains (straight runs of one-way vertices) and a few edges between
    ranks: distances through the Bypass equal plain relaxation's, with its runs found in C or by
    numpy, whether numpy skips the straight runs first (LONG_RUN 0: always; 10**9: never) or not."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
        patch.setattr(dijkstra, "LONG_RUN", long_run)
        patch.setattr(dijkstra, "SCAN_CHUNK", scan_chunk)
        check_bypass(seed, n_ranks, n_calls, n_deps)


def random_dag_csr(rng, n, m, weight_dtype, largest_weight):
    """(indptr, src, weight) of m random edges forward in id among n vertices (a DAG with runs
    of one-way vertices), rows by dst."""
    src = rng.integers(0, max(n - 1, 1), m)
    dst = np.minimum(src + rng.integers(1, 4, m), n - 1)
    keep = dst > src
    src, dst = src[keep], dst[keep]
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate(([0], np.cumsum(np.bincount(dst[order], minlength=n))))
    weight = rng.integers(0, largest_weight + 1, len(src)).astype(weight_dtype)
    return indptr, src[order], weight


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 120), per_vertex=st.floats(0.3, 2.0),
       ids=st.sampled_from([np.int32, np.int64]), weight_dtype=st.sampled_from([np.uint32, np.int64]),
       largest_weight=st.sampled_from([5, 2**31]), n_keep=st.integers(0, 5))
def test_bypass_in_c_equals_bypass_by_numpy(seed, n, per_vertex, ids, weight_dtype, largest_weight, n_keep):
    """The Bypass whose runs the C kernel found has every array equal to numpy's, dtypes
    included: uint32 slacks widen to int64 in both where a run's sum passes 2**32 - 1."""
    rng = np.random.default_rng(seed)
    indptr, src, weight = random_dag_csr(rng, n, int(n * per_vertex), weight_dtype, largest_weight)
    sources = np.unique(rng.integers(0, n, min(n, 2))) if n else np.zeros(0, np.int64)
    keep = rng.integers(0, n, n_keep) if n else None
    made = {}
    for kernel in ("on", "off"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
            made[kernel] = dijkstra.Bypass(n, indptr, src.astype(ids), weight, sources, keep)
    for name in ("vertices", "target", "slack", "sources", "indptr", "src", "weight"):
        c, by_numpy = getattr(made["on"], name), getattr(made["off"], name)
        assert c.dtype == by_numpy.dtype, name
        assert c.tolist() == by_numpy.tolist(), name


@pytest.mark.parametrize("kernel", ["on", "off"])
def test_bypass_of_a_cycle_of_one_way_vertices_says_so(monkeypatch, kernel):
    """0 -> 1 -> 2 -> 0, each vertex one-way: no run has an end."""
    monkeypatch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
    indptr, src = np.array([0, 1, 2, 3]), np.array([2, 0, 1])       # row d: the edge into d
    with pytest.raises(ValueError, match="cycle of one-way vertices"):
        dijkstra.Bypass(4, np.append(indptr, 3), src, np.ones(3, np.int64), np.array([3]))


def check_bypass(seed, n_ranks, n_calls, n_deps):
    rng = np.random.default_rng(seed)
    n = 2 * n_calls * n_ranks
    chain_src = np.concatenate([np.arange(r * 2 * n_calls, (r + 1) * 2 * n_calls - 1) for r in range(n_ranks)])
    chain_dst = chain_src + 1
    dep_src = rng.integers(0, n, n_deps)
    dep_dst = np.minimum(dep_src + rng.integers(1, 40, n_deps), n - 1)    # forward in id: a DAG
    keep = dep_dst > dep_src
    src = np.concatenate((chain_src, dep_src[keep]))
    dst = np.concatenate((chain_dst, dep_dst[keep]))
    weight = rng.integers(0, 5, len(src)).astype(np.int64)
    order = np.argsort(dst, kind="stable")
    src, dst, weight = src[order], dst[order], weight[order]
    indptr = np.concatenate(([0], np.cumsum(np.bincount(dst, minlength=n))))
    sinks = np.unique(np.append(rng.integers(0, n, int(rng.integers(0, 3))), n - 1))
    found = dijkstra.distances(n, indptr, src, weight, sinks)
    expected = one_way_distances(n, indptr, src, weight, sinks)
    reached = np.isfinite(expected)
    assert found[reached].tolist() == expected[reached].astype(np.int64).tolist()
    assert (found[~reached] >= dijkstra.INF).all()


def test_ranges():
    assert arrays.ranges([3, 0, 7], [5, 0, 8]).tolist() == [3, 4, 5, 0, 7, 8]
    assert arrays.ranges([], []).tolist() == []


@pytest.mark.parametrize("long_run", [0, 64])
def test_bypass_of_an_empty_part(monkeypatch, long_run):
    """An analysis rank's part can be empty (more analysis ranks than work): no distances, no error."""
    monkeypatch.setattr(dijkstra, "LONG_RUN", long_run)
    empty = np.zeros(0, np.int64)
    assert dijkstra.distances(0, np.zeros(1, np.int64), empty, empty, empty).tolist() == []


@pytest.mark.parametrize("algorithm", ["parallel-dijkstra", "delta-stepping", "parallel-delta-stepping"])
def test_a_round_based_search_says_how_it_is_going(monkeypatch, algorithm):
    """With a line due at every round, the search says its algorithm, the rounds so far and, once,
    why they may be many; the path is the one found without it."""
    from mpi4py import MPI

    from mpigraph import paths
    from mpigraph.paths import heartbeat
    from pathbuild import random_input, rows

    inp = random_input(7, 3, 8, 12)
    quiet = paths.critical_path(MPI.COMM_SELF, inp, algorithm, splits=False)
    monkeypatch.setattr(heartbeat, "EVERY_S", 0.0)
    lines = []
    table = paths.critical_path(MPI.COMM_SELF, inp, algorithm, splits=False, say=lines.append)
    assert rows(table) == rows(quiet)
    assert lines and all(line.startswith("path: %s, " % algorithm) for line in lines)
    assert sum("dijkstra and toposort do not" in line for line in lines) == 1
    assert [int(line.split(", ")[1].split()[0]) for line in lines] == list(range(1, len(lines) + 1))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 200), p=st.floats(0, 1), long_run=st.integers(1, 40),
       scan_chunk=st.sampled_from([1, 2, 7, 1 << 16]))
def test_has_long_run_finds_the_longest_run_across_chunks(seed, n, p, long_run, scan_chunk):
    straight = np.random.default_rng(seed).random(n) < p
    longest = max((len(r) for r in "".join("1" if x else "0" for x in straight).split("0")), default=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dijkstra, "LONG_RUN", long_run)
        patch.setattr(dijkstra, "SCAN_CHUNK", scan_chunk)
        assert dijkstra._has_long_run(straight) == (longest >= long_run)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), p=st.floats(0, 1),
       scan_chunk=st.sampled_from([1, 2, 7, 1 << 16]))
def test_run_ends_point_each_straight_vertex_past_its_run(seed, n, p, scan_chunk):
    """Chunk by chunk from the last, each straight vertex gets the first vertex after it that is
    not straight and the slacks up to it, as one vertex at a time would."""
    rng = np.random.default_rng(seed)
    straight = rng.random(n) < p
    straight[-1] = False                  # the last vertex has no id after it
    slack = rng.integers(0, 2 ** 40, n)
    target = rng.integers(0, n, n)
    expected_target, expected_slack = target.copy(), slack.copy()
    for v in np.flatnonzero(straight):
        end = v
        while straight[end]:
            end += 1
        expected_target[v], expected_slack[v] = end, slack[v:end].sum()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dijkstra, "SCAN_CHUNK", scan_chunk)
        dijkstra._point_at_run_ends(straight, target, slack)
    assert target.tolist() == expected_target.tolist()
    assert slack.tolist() == expected_slack.tolist()


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 5), n_rank=st.integers(1, 60), n_hubs=st.integers(0, 9),
       per_vertex=st.floats(0, 3), ids=st.sampled_from([np.int32, np.int64]),
       weights=st.sampled_from([np.uint32, np.int64]), split=st.booleans(), data=st.data())
def test_split_part_in_c_equals_numpys(seed, k, n_rank, n_hubs, per_vertex, ids, weights, split, data):
    """parallel-dijkstra's split of an analysis rank's part into the edges out of the vertices it
    owns (rank vertices lo..hi-1, hubs h with h % k == me) and the crossing ones before a cut: the
    C kernel's columns equal numpy's masks', dtypes included."""
    from mpigraph.paths import graph, parallel_dijkstra

    rng = np.random.default_rng(seed)
    me = data.draw(st.integers(0, k - 1))
    bounds = np.sort(np.concatenate(([0, n_rank], rng.integers(0, n_rank + 1, k - 1))))
    lo, hi = int(bounds[me]), int(bounds[me + 1])
    rows = (hi - lo) + len(range(me, n_hubs, k))
    n_edges = int(rows * per_vertex)
    src = rng.integers(0, n_rank + n_hubs, n_edges).astype(ids)
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rng.integers(0, max(rows, 1), n_edges), minlength=rows))))
    indptr = indptr.astype(ids)
    weight = rng.integers(0, 1000, n_edges).astype(weights)
    part = graph.Graph(k, me, np.array([0, n_rank]), bounds, None, np.zeros(n_hubs, np.int64),
                       np.zeros(rows, np.int64), np.zeros(rows, np.int16), indptr, src, weight, 0, None, 0)
    cut = data.draw(st.integers(0, n_edges))
    found = {}
    for kernel in ("on", "off"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
            found[kernel] = parallel_dijkstra._split(part, split, cut)
    for c, by_numpy in zip(found["on"], found["off"]):
        for a, b in zip(c, by_numpy):
            assert a.dtype == b.dtype and a.tolist() == b.tolist()
