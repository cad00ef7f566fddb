"""The searches' labels (dist, next, hubs) and the path's slacks from them against a plain binary-heap Dijkstra,
and the pieces the fast searches rest on: csgraph's treatment of zero and parallel edges,
the virtual source with offsets, the chunked next[] pass, the CSR placement, the distinct rows."""

import heapq

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st
from mpi4py import MPI

from mpigraph.paths import graph
from mpigraph.testing import synth
from mpigraph.paths.graph import INF
from mpigraph.paths import dag, delta_stepping, dijkstra, labels as labels_module, parallel_dijkstra
from mpigraph.paths.labels import NO_NEXT, combine_hubs
from pathbuild import random_input

SELF = MPI.COMM_SELF


def heap_dijkstra(g, split):
    """The labels by the book: one heap step per edge, the tie-break applied at each relaxation
    (the lexicographic minimum of (distance, next vertex id)).  The reference for every search."""
    n_rank_vertices = g.n_rank_vertices
    indptr, src, weight = g.indptr.tolist(), g.src.tolist(), g.weight.tolist()
    n = len(g.time)
    dist, nxt, nxt_w = [INF] * n, [NO_NEXT] * n, [0] * n
    sinks = [g.sink] + (list(range(n_rank_vertices, n)) if split else [])
    for s in sinks:
        dist[s] = 0
    heap = [(0, s) for s in sinks]
    heapq.heapify(heap)
    offers = ([], [], [])
    while heap:
        d, v = heapq.heappop(heap)
        if d > dist[v]:
            continue
        for e in range(indptr[v], indptr[v + 1]):
            u, w = src[e], weight[e]
            if split and u >= n_rank_vertices:
                offers[0].append(u - n_rank_vertices), offers[1].append(d + w), offers[2].append(v)
                continue
            candidate = d + w
            if candidate < dist[u]:
                dist[u], nxt[u], nxt_w[u] = candidate, v, w
                heapq.heappush(heap, (candidate, u))
            elif candidate == dist[u] and v < nxt[u]:
                nxt[u], nxt_w[u] = v, w
    hub_dist = hub_next = np.zeros(0, np.int64)
    if split:
        hub_dist, hub_next = combine_hubs(g.n_hubs, *(np.array(c, np.int64) for c in offers))
    return [np.array(a, np.int64) for a in (dist, nxt, nxt_w)] + [hub_dist, hub_next]


def searches(g, split):
    """{name: labels} of every search on the whole graph g (one analysis rank)."""
    return {
        "dijkstra": dijkstra.solve(g, split),
        "delta-stepping": delta_stepping.solve(SELF, g, delta_stepping.auto_delta(SELF, g), split),
        "delta-1": delta_stepping.solve(SELF, g, 1, split),
        "bellman-ford": delta_stepping.solve(SELF, g, 10**15, split),
        "parallel-dijkstra": parallel_dijkstra.solve(SELF, g, split),
    }


def assert_labels_match_the_heap(g):
    from mpigraph.paths import walk

    for split in (False, True):
        dist, nxt, nxt_w, hub_dist, hub_next = heap_dijkstra(g, split)
        has_next = np.flatnonzero(nxt[:g.n_rank_vertices] != NO_NEXT)
        # next[]'s pass in C (dag.next_from_dist), and by numpy in one chunk and in many.
        for kernel, chunk_edges in (("c", labels_module.CHUNK_EDGES), ("off", labels_module.CHUNK_EDGES),
                                    ("off", 3)):
            for name, got in searches_in_chunks(g, split, chunk_edges, kernel).items():
                # The slack of each rank vertex's edge to its next, as the walk takes it from dist.
                weight = walk.path_weights(g, got.dist, got.next, np.append(has_next, 0))[:-1]
                for what, a, b in zip(("dist", "next", "next's slack", "hub_dist", "hub_next"),
                                      (dist, nxt, nxt_w[has_next], hub_dist, hub_next),
                                      (got.dist, got.next, weight, got.hub_dist, got.hub_next)):
                    np.testing.assert_array_equal(b, a, err_msg="%s, splits %s, kernel %s, chunks of %d edges: %s"
                                                  % (name, split, kernel, chunk_edges, what))


def searches_in_chunks(g, split, chunk_edges, kernel="c"):
    """searches() with next_from_dist's pass in chunks of chunk_edges edges, the path kernel on
    ("c") or off (hypothesis tests cannot take pytest's monkeypatch fixture)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(labels_module, "CHUNK_EDGES", chunk_edges)
        patch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
        return searches(g, split)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ranks=st.integers(1, 4), n_calls=st.integers(1, 8),
       n_deps=st.integers(0, 30), collectives=st.integers(0, 3))
def test_every_search_leaves_the_heap_dijkstras_labels_on_random_dags(seed, n_ranks, n_calls, n_deps,
                                                                       collectives):
    assert_labels_match_the_heap(graph.build(SELF, random_input(seed, n_ranks, n_calls, n_deps, collectives)))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ranks=st.integers(2, 4), iterations=st.integers(1, 6),
       jitter=st.sampled_from([0, 50, 5_000]))
def test_every_search_leaves_the_heap_dijkstras_labels_on_bsp_runs(seed, n_ranks, iterations, jitter):
    sim = synth.ring_run(n_ranks, iterations, sync_every=2, seed=seed, clock_noise_ns=jitter)
    assert_labels_match_the_heap(graph.build(SELF, synth.path_input(sim)))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ranks=st.integers(1, 4), n_calls=st.integers(1, 8),
       n_deps=st.integers(0, 30))
def test_slacks_of_seconds_keep_int64_weights_and_the_heap_dijkstras_labels(seed, n_ranks, n_calls, n_deps):
    # Steps of 2**31 ns: edges' slacks of up to several seconds, past uint32's 4.29 s.
    inp = random_input(seed, n_ranks, n_calls, n_deps, collectives=1, step_ns=2**31)
    g = graph.build(SELF, inp)
    assert g.weight.dtype == (np.int64 if g.weight.max(initial=0) > 2**32 - 1 else np.uint32)
    np.testing.assert_array_equal(g.weight, slacks_as_int64(inp))
    assert_labels_match_the_heap(g)


def slacks_as_int64(inp):
    """The graph's slacks built as int64 whatever they are: the reference for a smaller dtype."""
    chosen = graph.slack_dtype
    graph.slack_dtype = lambda smallest, largest: np.int64
    try:
        return graph.build(SELF, inp).weight
    finally:
        graph.slack_dtype = chosen


def test_slacks_are_four_bytes_an_edge_up_to_uint32s_largest():
    assert graph.slack_dtype(0, 2**32 - 1) == np.uint32
    assert graph.slack_dtype(0, 2**32) == np.int64
    assert graph.slack_dtype(-1, 0) == np.int64       # never a slack: kept as it is, not wrapped
    inp = random_input(3, 3, 8, 20, collectives=1)
    g = graph.build(SELF, inp)
    assert g.weight.dtype == np.uint32
    np.testing.assert_array_equal(g.weight, slacks_as_int64(inp))


def test_csgraph_takes_explicit_zeros_and_parallel_edges_as_edges():
    # Incoming-edge CSR of 0 -> 1 (twice: 5 and 0 ns) and 1 -> 2 (0 ns), searched from 2.
    indptr, src = np.array([0, 0, 2, 3]), np.array([0, 0, 1])
    for weight in ([5, 0, 0], [0, 5, 0]):
        dist = dijkstra.distances(3, indptr, src, np.array(weight, np.int64), np.array([2]))
        assert dist.tolist() == [0, 0, 0]
    # Without the zero edge 1 -> 2 nothing reaches 2: a missing entry is no edge.
    dist = dijkstra.distances(3, np.array([0, 0, 2, 2]), src[:2], np.array([5, 7], np.int64), np.array([2]))
    assert dist.tolist() == [INF, INF, 0]


def test_a_search_with_offsets_starts_each_source_at_its_offset():
    # Chain 0 -> 1 -> 2 -> 3 of weight 1 each (incoming CSR), sources 3 (offset 10) and 1 (offset 0).
    indptr, src, weight = np.array([0, 0, 1, 2, 3]), np.array([0, 1, 2]), np.ones(3, np.int64)
    part = dijkstra.Reversed(4, indptr, src, weight)
    assert part.search(np.array([3, 1]), np.array([10, 0])).tolist() == [1, 0, 11, 10]
    assert part.search(np.array([3, 1]), np.array([0, 10])).tolist() == [3, 2, 1, 0]
    assert part.search(np.array([], np.int64)).tolist() == [INF] * 4


def test_a_source_with_no_edges_to_follow_keeps_the_least_of_its_offset_and_the_search():
    # Chain 0 -> 1 -> 2 of weight 1 (incoming CSR): 0 has no incoming edge, so as a source it
    # only gets its offset, unless the search from 2 reaches it with less.
    indptr, src, weight = np.array([0, 0, 1, 2]), np.array([0, 1]), np.ones(2, np.int64)
    part = dijkstra.Reversed(3, indptr, src, weight)
    assert part.search(np.array([2, 0]), np.array([5, 1])).tolist() == [1, 6, 5]
    assert part.search(np.array([2, 0]), np.array([5, 9])).tolist() == [7, 6, 5]
    assert part.search(np.array([0, 0]), np.array([4, 3])).tolist() == [3, INF, INF]


def test_a_kept_vertex_is_searched_although_it_looks_one_way():
    # 0 -> 1 -> 2 (sink) with 1 -> 2 of weight 4; 0 -> 1 weight 1.  Kept, 1 stays in the search:
    # a distributed part keeps a vertex whose other edges are on another rank.
    indptr, src, weight = np.array([0, 0, 1, 2]), np.array([0, 1]), np.array([1, 4], np.int64)
    bypass = dijkstra.Bypass(3, indptr, src, weight, np.array([2]), keep=np.array([1]))
    assert bypass.vertices.tolist() == [1, 2]
    part = dijkstra.Reversed(len(bypass.vertices), bypass.indptr, bypass.src, bypass.weight)
    # An offer of 2 to vertex 1 (from its edge on another rank) beats its local edge's 4.
    found = bypass.expand(part.search(bypass.index_of(np.array([2, 1])), np.array([0, 2])))
    assert found.tolist() == [3, 2, 0]
    assert dijkstra.Bypass(3, indptr, src, weight, np.array([2])).vertices.tolist() == [2]


def test_lowering_in_chunks_is_the_minimum_with_the_expanded_distances(monkeypatch):
    # A chain 0 -> 1 -> ... -> 9 (sink 9) of one-way vertices, weight 1 each: the search keeps
    # only the sink.  Chunks of 3 vertices: lower must treat every chunk, the last one short.
    monkeypatch.setattr(dijkstra, "SCAN_CHUNK", 3)
    n = 10
    indptr = np.concatenate(([0], np.arange(n))).astype(np.int64)    # vertex v's edge: v - 1 -> v
    src, weight = np.arange(n - 1), np.ones(n - 1, np.int64)
    bypass = dijkstra.Bypass(n, indptr, src, weight, np.array([n - 1]))
    found = np.zeros(len(bypass.vertices), np.int64)                 # the sink at 0
    expanded = bypass.expand(found)
    assert expanded.tolist() == list(range(9, -1, -1))
    dist = np.array([0, 20, 7, 30, 2, 40, 3, 50, INF, INF], np.int64)   # vertex 2: equal, not improved
    improved = bypass.lower(dist, found)
    assert dist.tolist() == np.minimum([0, 20, 7, 30, 2, 40, 3, 50, INF, INF], expanded).tolist()
    assert improved.tolist() == [False, True, False, True, False, True, False, True, True, True]


@pytest.mark.parametrize("n", [6, 200])
def test_bypassed_runs_longer_than_uint32_keep_their_slacks_exact(n):
    # A chain 0 -> 1 -> ... -> n - 1 (the sink), each edge `step` ns as uint32 (the graph's
    # slacks fit): the one-way run from 0 sums to (n - 1) * step, past uint32 for the larger
    # steps.  Runs that fit stay uint32.  n = 6 is summed by the pointer jumping, n = 200 as a
    # straight run (dijkstra.LONG_RUN).
    indptr = np.concatenate(([0], np.arange(n))).astype(np.int64)
    src = np.arange(n - 1)
    for step in (2**31, 2**25, 1000):
        held = np.int64 if step * (n - 1) > 2**32 - 1 else np.uint32
        weight = np.full(n - 1, step, np.uint32)
        bypass = dijkstra.Bypass(n, indptr, src, weight, np.array([n - 1]))
        assert bypass.slack.dtype == held
        dist = dijkstra.distances(n, indptr, src, weight, np.array([n - 1]))
        assert dist.tolist() == [step * (n - 1 - v) for v in range(n)]


def test_distances_beyond_float64_exact_integers_are_refused():
    with pytest.raises(ValueError, match="float64"):
        dijkstra.distances(2, np.array([0, 0, 1]), np.array([0]), np.array([2**53], np.int64), np.array([1]))


def test_next_from_dist_is_the_same_in_small_chunks(monkeypatch):
    g = graph.build(SELF, synth.path_input(synth.ring_run(4, 6, sync_every=2, seed=3, clock_noise_ns=500)))
    for split in (False, True):
        whole = dijkstra.solve(g, split)
        monkeypatch.setattr(labels_module, "CHUNK_EDGES", 7)
        nxt, offers = labels_module.next_from_dist(SELF, g, whole.dist, split)
        monkeypatch.undo()
        np.testing.assert_array_equal(nxt, whole.next)
        if split:       # the hubs' offers, picked up chunk by chunk, give the same hub labels
            hub_dist, hub_next = labels_module.combine_hubs(g.n_hubs, *labels_module.hub_offers(SELF, g, offers))
            np.testing.assert_array_equal(hub_dist, whole.hub_dist)
            np.testing.assert_array_equal(hub_next, whole.hub_next)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), chunk_edges=st.sampled_from([1, 3, 7, 1 << 16]))
def test_the_hub_offers_next_from_dist_keeps_give_each_hub_its_best_offer(seed, chunk_edges):
    """Whatever the distances (few distinct values: ties across chunks), the offers kept chunk
    by chunk give each hub the least (offer, key) over all its edges H -> v."""
    g = graph.build(SELF, synth.path_input(synth.ring_run(4, 6, sync_every=1, seed=seed % 1000)))
    rng = np.random.default_rng(seed)
    dist = rng.integers(0, 6, len(g.time)).astype(np.int64)
    dist[rng.random(len(g.time)) < 0.2] = INF
    dst = np.repeat(np.arange(len(g.time)), np.diff(g.indptr))
    out_of_hub = (g.src >= g.n_rank_vertices) & (dist[dst] < INF)
    expected = {}
    for hub, offer, key in zip(g.src[out_of_hub] - g.n_rank_vertices, (dist[dst] + g.weight)[out_of_hub],
                               dst[out_of_hub]):
        expected[int(hub)] = min(expected.get(int(hub), (INF, NO_NEXT)), (int(offer), int(key)))
    default = labels_module.CHUNK_EDGES
    labels_module.CHUNK_EDGES = chunk_edges
    try:
        offers = labels_module.next_from_dist(SELF, g, dist, True)[1]
    finally:
        labels_module.CHUNK_EDGES = default
    hub, best, key = labels_module.hub_offers(SELF, g, offers)
    assume(len({offer for offer, _ in expected.values()}) > 1)      # hubs whose best offers differ
    assert {int(h): (int(b), int(k)) for h, b, k in zip(hub, best, key)} == expected


@pytest.mark.parametrize("kernel, chunk", [("off", graph.CSR_CHUNK), ("off", 3), ("c", graph.CSR_CHUNK)])
@pytest.mark.parametrize("ids, slacks", [(np.int64, np.int64), (np.int32, np.uint32), (np.int32, np.int64)])
def test_csr_places_edges_as_a_stable_sort_by_destination_would(monkeypatch, kernel, chunk, ids, slacks):
    """By numpy in one chunk and in chunks of 3 edges (a run of repeated rows across chunks),
    and by the C counting sort (dag.csr); zero weights given as _zeros (not written) and a
    broadcast non-zero weight (written); ids and slacks in each dtype the graph keeps."""
    monkeypatch.setattr(graph, "CSR_CHUNK", chunk)
    monkeypatch.setenv("MPIGRAPH_PATH_KERNEL", kernel)
    assert (dag.csr(1, [], np.int64, ids, slacks, graph._is_zeros) is None) == (kernel == "off")
    rng = np.random.default_rng(5)
    n = 50
    groups = [(np.arange(0, n, 2), rng.integers(0, 99, 25), rng.integers(0, 9, 25)),       # increasing
              (rng.integers(0, n, 40), rng.integers(0, 99, 40), rng.integers(0, 9, 40)),   # repeats
              (np.array([3]), np.array([7]), np.array([1])),
              (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)),
              (np.array([4, 4, 1]), np.array([1, 2, 3]), np.array([0, 0, 0])),
              (np.arange(1, n, 2), rng.integers(0, 99, 25), graph._zeros(25)),           # zero weights
              (np.sort(rng.integers(0, n, 30)), rng.integers(0, 99, 30),                  # one run, repeats,
               np.broadcast_to(np.int64(5), (30,)))]                                       # one weight
    groups[0] = tuple(c.astype(ids) for c in groups[0][:2]) + groups[0][2:]
    indptr, src, weight = graph._csr(n, list(groups), ids, slacks)
    assert (src.dtype, weight.dtype) == (np.dtype(ids), np.dtype(slacks))
    dst = np.concatenate([d for d, _, _ in groups])
    order = np.argsort(dst, kind="stable")
    assert indptr.tolist() == np.searchsorted(dst[order], np.arange(n + 1)).tolist()
    assert src.tolist() == np.concatenate([s for _, s, _ in groups])[order].tolist()
    assert weight.tolist() == np.concatenate([w for _, _, w in groups])[order].tolist()
    given = list(groups)
    graph._csr(n, given)
    assert given == []          # let go of as placed: not held through the build's peak
    with pytest.raises(IndexError):     # a dst that is no row: the kernel leaves it to numpy
        graph._csr(n, [(np.array([n]), np.array([0]), np.array([0]))])


def test_the_queue_drops_repeats_with_its_stamps_and_past_them():
    queue = delta_stepping._Queue(np.zeros(50, np.int64), 10)
    index = np.random.default_rng(1).integers(0, 50, 300)
    assert sorted(queue.distinct(index).tolist()) == sorted(set(index.tolist()))
    queue.stamp = np.zeros(50, np.int8)         # positions past the stamps' dtype: sorted instead
    assert sorted(queue.distinct(index).tolist()) == sorted(set(index.tolist()))
    assert queue.distinct(np.full(257, 5)).tolist() == [5]     # position 256 would wrap to 0's


def test_distinct_rows():
    a = np.array([1, 1, 1, 2, 2, 1, 3, 1], np.int64)
    b = np.array([0, 0, 0, 5, 5, 0, 1, 1], np.int64)
    everywhere = np.ones(len(a), bool)
    rows, inverse = graph._distinct_rows((a, b), everywhere)
    assert [(a[r], b[r]) for r in rows[inverse]] == list(zip(a.tolist(), b.tolist()))
    assert len(rows) == len(set(zip(a.tolist(), b.tolist())))
    assert [len(x) for x in graph._distinct_rows((a[:0], b[:0]), everywhere[:0])] == [0, 0]
    # Ranges too wide for one int64 key: the same answer by rows.
    wide = b * (2 ** 59) - 7
    rows, inverse = graph._distinct_rows((a, wide, a), everywhere)
    assert [(a[r], wide[r]) for r in rows[inverse]] == list(zip(a.tolist(), wide.tolist()))
    assert len(rows) == len(set(zip(a.tolist(), b.tolist())))


def test_distinct_rows_sorts_only_the_rows_asked_of_other_ranks():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 200), rng.integers(0, 3, 200)
    away = a >= 2                      # rows of trace ranks 2 and 3: another analysis rank's
    rows, inverse = graph._distinct_rows((a, b), away)
    assert [(a[r], b[r]) for r in rows[inverse]] == list(zip(a.tolist(), b.tolist()))
    asked = [(a[r], b[r]) for r in rows if away[r]]
    assert len(asked) == len(set(asked)) == len(set(zip(a[away].tolist(), b[away].tolist())))
    # The own rows are not sorted: only repeats next to each other are one row.
    own = ~away
    runs = 1 + np.count_nonzero((a[1:] != a[:-1]) | (b[1:] != b[:-1]))
    assert len(rows) - len(asked) == np.count_nonzero(own[np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])])])
    assert runs >= len(rows)
    assert [len(x) for x in graph._distinct_rows((a, b), np.zeros(200, bool))] == [runs, 200]


def test_a_search_with_nothing_to_search_does_not_import_scipy(tmp_path):
    # Bulk-synchronous with splits: every rank vertex is one-way, the hubs and the sink are
    # sources, so the bypassed graph has no edge; importing scipy (0.3 s) would buy nothing.
    import os
    import subprocess
    import sys

    code = ("import sys; from mpi4py import MPI; from mpigraph import analysis, config\n"
            "from mpigraph.testing import synth\n"
            "synth.generate(sys.argv[1], 4, 50)\n"
            "for algorithm in ('dijkstra', 'parallel-dijkstra'):\n"
            "    analysis.analyze(sys.argv[1], MPI.COMM_SELF,\n"
            "                     config.from_env({'MPIGRAPH_ALGORITHM': algorithm, 'MPIGRAPH_QUIET': '1'}))\n"
            "print('scipy.sparse.csgraph' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True,
                            env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"
    assert (tmp_path / "run" / "critical_path.csv").exists()


@pytest.mark.parametrize("seed", range(6))
def test_path_weights_from_dist_are_the_chosen_edges_slacks(seed):
    """walk.path_weights (the path's slacks, with no slack kept per vertex): dist[u] -
    dist[next[u]] is the slack of the edge u -> next[u] that the heap's Dijkstra chose, for every
    rank vertex with a next, splits on and off; hubs' own weights 0."""
    from mpigraph.paths import walk
    bsp = synth.path_input(synth.ring_run(4, 8, sync_every=2, seed=seed, clock_noise_ns=500))
    for g, split in [(graph.build(SELF, inp), split) for inp in (random_input(seed, 4, 10, 25, 3), bsp)
                     for split in (False, True)]:
        full = dijkstra.solve(g, split)
        heap_next_weight = heap_dijkstra(g, split)[2]
        u = np.flatnonzero(full.next[:g.n_rank_vertices] != NO_NEXT)
        path = np.append(u, g.n_rank_vertices - 1)          # any last vertex: its weight is 0
        weight = walk.path_weights(g, full.dist, full.next, path)
        assert weight[:-1].tolist() == heap_next_weight[u].tolist() and weight[-1] == 0
        nxt = full.next.copy()
        if split:                    # as paths.critical_path sets them before the walk
            nxt[g.n_rank_vertices:] = full.hub_next
        hubs = np.arange(g.n_rank_vertices, g.n_vertices)
        hubs = hubs[nxt[hubs] != NO_NEXT]
        assert not walk.path_weights(g, full.dist, nxt, np.append(hubs, 0)).any()
