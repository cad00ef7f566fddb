"""The critical path: graph, algorithms, splits, threshold (serial; MPI runs in test_paths_mpi.py)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from mpi4py import MPI

from mpigraph import paths
from mpigraph.paths import graph
from mpigraph.paths import splits
from mpigraph.testing import synth
from mpigraph.paths import threshold
from pathbuild import (FID, SETTINGS, deps, least_slack, path_input, random_input, rank_calls, rows,
                       solve_all)

SELF = MPI.COMM_SELF
LS = graph.LATE_SENDER


def assert_all_same(results):
    reference = rows(results[("dijkstra", False)])
    for setting, path in results.items():
        assert rows(path) == reference, setting
    return results[("dijkstra", False)]


# ---- hand-built graphs with known paths -----------------------------------------

def late_sender():
    return path_input(
        [rank_calls(("MPI_Init", 0, 10), ("MPI_Send", 100, 110), ("MPI_Finalize", 500, 510)),
         rank_calls(("MPI_Init", 0, 10), ("MPI_Recv", 20, 105), ("MPI_Finalize", 900, 910))],
        deps((0, 1, 0, 1, 1, LS)))


def test_late_sender_path_goes_through_the_sender():
    path = assert_all_same(solve_all(late_sender()))
    assert rows(path) == [(0, "compute", "", -1, 0, 90), (1, "message", "MPI_Recv", 0, 90, 95),
                          (1, "compute", "", -1, 95, 890)]
    assert path["duration"].sum() == 890          # = last Finalize start - first Init end


def test_build_lets_go_of_a_handed_over_input_and_of_no_other():
    """The analysis's own input (a HandedOverInput) is emptied by the build, which reads it
    once; an input a caller reuses (every other) keeps its calls and edges, and builds the
    same graph."""
    kept = late_sender()
    once = graph.HandedOverInput(kept.n_trace_ranks, *late_sender().hand_over())
    a, b = graph.build(SELF, kept), graph.build(SELF, once)
    assert once.calls is None and once.deps is None
    assert kept.calls is not None and len(kept.deps) == 1
    assert np.array_equal(a.src, b.src) and np.array_equal(a.weight, b.weight) and np.array_equal(a.time, b.time)


def test_an_early_sender_leaves_the_receiver_on_the_path():
    # The message was sent at 5, before the receive began at 20: the receiver did not wait.
    inp = late_sender()
    inp.calls[0] = rank_calls(("MPI_Init", 0, 2), ("MPI_Send", 5, 6), ("MPI_Finalize", 500, 510))
    path = assert_all_same(solve_all(inp))
    # Rank 1's MPI_Init returned 8 ns after the run's start: it was inside MPI until then.
    assert rows(path) == [(1, "mpi", "MPI_Init", -1, 0, 8), (1, "compute", "", -1, 8, 18),
                          (1, "mpi", "MPI_Recv", -1, 18, 103), (1, "compute", "", -1, 103, 898)]


def test_ties_and_zero_length_edges_break_to_the_lowest_rank():
    # Ranks 0 and 1 are identical and both release rank 2's zero-length Waitall at once.
    twin = rank_calls(("MPI_Init", 0, 10), ("MPI_Isend", 100, 100), ("MPI_Finalize", 100, 100))
    inp = path_input([twin, twin, rank_calls(("MPI_Init", 0, 10), ("MPI_Waitall", 100, 100),
                                             ("MPI_Finalize", 400, 410))],
                     deps((1, 1, 0, 2, 1, LS), (0, 1, 0, 2, 1, LS)))
    path = assert_all_same(solve_all(inp))
    assert rows(path) == [(0, "compute", "", -1, 0, 90), (2, "message", "MPI_Waitall", 0, 90, 90),
                          (2, "compute", "", -1, 90, 390)]


def test_isolated_ranks():
    quiet = rank_calls(("MPI_Init", 0, 10), ("MPI_Finalize", 300, 310))
    inp = late_sender()
    inp = path_input([inp.calls[0], inp.calls[1], quiet], inp.deps)
    assert [r[0] for r in rows(assert_all_same(solve_all(inp)))] == [0, 1, 1]
    # An isolated rank that finalises last holds the whole path.
    inp = path_input([inp.calls[0], inp.calls[1], rank_calls(("MPI_Init", 0, 10), ("MPI_Finalize", 2000, 2010))],
                     inp.deps)
    assert rows(assert_all_same(solve_all(inp))) == [(2, "compute", "", -1, 0, 1990)]


def test_single_rank_and_bad_input():
    path = assert_all_same(solve_all(path_input([late_sender().calls[1]], deps())))
    assert path["duration"].sum() == 890 and set(path["rank"].tolist()) == {0}
    with pytest.raises(ValueError, match="no call 7"):
        paths.critical_path(SELF, path_input(late_sender().calls.values(), deps((0, 7, 0, 1, 1, LS))))
    with pytest.raises(ValueError, match="trace rank -1 has 0 calls"):
        paths.critical_path(SELF, path_input(late_sender().calls.values(), deps((0, 0, 0, -1, 1, LS))))
    with pytest.raises(ValueError, match="trace rank 1 has 3 calls, no call -2"):
        paths.critical_path(SELF, path_input(late_sender().calls.values(), deps((0, 0, 0, 1, -2, LS))))
    with pytest.raises(ValueError, match="not a graph algorithm"):
        paths.critical_path(SELF, late_sender(), "toposort")


# ---- synthetic bulk-synchronous runs: known bottlenecks, splits -------------------

def test_path_visits_the_slow_rank_of_every_phase_and_spans_the_run():
    sim = synth.ring_run(4, 12, sync_every=1, seed=3)
    path = assert_all_same(solve_all(synth.path_input(sim)))
    run_time = sim.start[:, -1].max() - sim.end[:, 0].min()
    assert abs(path["duration"].sum() - run_time) <= 0.01 * run_time
    compute = path["kind"] == "compute"
    # Phase i lies between Allreduce i-1 and i: the path's longest compute in it is the slow rank's.
    allreduce_ends = np.sort(sim.end[0][sim.func[0] == FID["MPI_Allreduce"]]) - sim.end[:, 0].min()
    phase = np.searchsorted(allreduce_ends, path["start"], "right")
    for i, slow in enumerate(sim.slow_ranks.tolist()):
        in_phase = np.flatnonzero(compute & (phase == i))
        longest = in_phase[np.argmax(path["duration"][in_phase])]
        assert path["rank"][longest] == slow, (i, rows(path))


def test_sync_points_become_hubs_unless_crossed():
    sim = synth.ring_run(3, 6, sync_every=2, seed=1)
    inp = synth.path_input(sim)
    stats = {}
    reference = paths.critical_path(SELF, inp, stats=stats)
    assert stats["hubs"] == 6 // 2 + 1                      # the Allreduces and the final Barrier
    # An Isend before the first Allreduce completed by a Wait after it: that point is no split.
    allreduce = int(np.flatnonzero(sim.func[0] == FID["MPI_Allreduce"])[0])
    crossing = deps((0, allreduce - 1, 0, 1, allreduce + 1, LS))
    extra = graph.Dependencies(*(np.concatenate((a, b)) for a, b in zip(
        (inp.deps.src_rank, inp.deps.src_call, inp.deps.src_vertex, inp.deps.dst_rank, inp.deps.dst_call,
         inp.deps.kind), (crossing.src_rank, crossing.src_call, crossing.src_vertex, crossing.dst_rank,
                          crossing.dst_call, crossing.kind))))
    crossed = graph.PathInput(inp.n_trace_ranks, inp.calls, extra)
    paths.critical_path(SELF, crossed, stats=stats)
    assert stats["hubs"] == 6 // 2
    assert_all_same(solve_all(crossed))
    assert rows(reference) == rows(paths.critical_path(SELF, inp, "parallel-delta-stepping", splits=True))


@pytest.mark.parametrize("seed", range(4))
def test_sync_points_are_the_same_found_a_few_edges_at_a_time(monkeypatch, seed):
    """_instances reduces the N-to-N edges a chunk of runs at a time: chunks of a single edge
    (each run alone) give the same points as one chunk, on a bulk-synchronous run (its edges one
    block) and on random runs (N-to-N edges among the others)."""
    inputs = [synth.path_input(synth.ring_run(5, 12, sync_every=2, seed=seed)),
              random_input(seed, 4, 10, 25, 3)]
    for inp in inputs:
        whole = sync_points(monkeypatch, inp)
        monkeypatch.setattr(splits, "CHUNK_EDGES", 1)
        chunked = sync_points(monkeypatch, inp)
        monkeypatch.undo()
        assert whole.calls.tolist() == chunked.calls.tolist()
        assert whole.time.tolist() == chunked.time.tolist()
        if inp is inputs[0]:
            assert len(whole.time) >= 3


def sync_points(monkeypatch, inp):
    """The SyncPoints that graph.build finds for inp (it keeps only their times)."""
    found = []
    find = splits.find_sync_points
    monkeypatch.setattr(splits, "find_sync_points", lambda *args: found.append(find(*args)) or found[-1])
    graph.build(SELF, inp)
    monkeypatch.setattr(splits, "find_sync_points", find)
    return found[0]


def test_the_piece_of_a_few_vertices_is_the_piece_of_them_among_all(monkeypatch):
    inp = synth.path_input(synth.ring_run(4, 8, sync_every=2, seed=2))
    points, g = sync_points(monkeypatch, inp), graph.build(SELF, inp)
    assert g.n_hubs > 2
    every = np.arange(g.n_rank_vertices, dtype=np.int64)
    pieces = splits.piece_of(g.base, points.calls, every)          # one searchsorted for all
    assert pieces.min() == 0 and pieces.max() == g.n_hubs
    one_by_one = [int(splits.piece_of(g.base, points.calls, every[i:i + 1])[0]) for i in range(len(every))]
    assert one_by_one == pieces.tolist()
    assert g.source_piece.tolist() == pieces[g.sources].tolist()     # what the graph keeps of them


def test_the_piece_looked_up_per_call_is_the_piece_found_by_binary_search(monkeypatch):
    inp = synth.path_input(synth.ring_run(5, 9, sync_every=3, seed=4))
    points, g = sync_points(monkeypatch, inp), graph.build(SELF, inp)
    assert g.n_hubs > 2
    every = np.random.default_rng(0).permutation(g.n_rank_vertices).astype(np.int64)
    looked_up = splits.piece_of(g.base, points.calls, every)
    monkeypatch.setattr(splits, "LOOKUP_CALLS_PER_VERTEX", 0)
    searched = splits.piece_of(g.base, points.calls, every)
    assert looked_up.tolist() == searched.tolist() and looked_up.max() == g.n_hubs
    # The columns of trace ranks 2..4 only, as an analysis rank owning them holds them.
    theirs = every[every >= g.base[2]]
    monkeypatch.setattr(splits, "LOOKUP_CALLS_PER_VERTEX", 4)
    assert (splits.piece_of(g.base, points.calls[:, 2:], theirs, first=2).tolist()
            == searched[every >= g.base[2]].tolist())


@pytest.mark.parametrize("missing_rank", [2, 0])
def test_a_collective_without_all_ranks_is_no_sync_point(missing_rank):
    # Rank 0 missing: the candidates come from rank 0's edges (splits._candidate_keys).
    sim = synth.ring_run(3, 2, sync_every=1, seed=2)
    d = sim.deps
    partial = ~((d.kind == graph.N_TO_N) & (d.dst_rank == missing_rank))   # its member edges missing
    inp = synth.path_input(sim._replace(deps=graph.Dependencies(
        d.src_rank[partial], d.src_call[partial], d.src_vertex[partial], d.dst_rank[partial],
        d.dst_call[partial], d.kind[partial])))
    stats = {}
    paths.critical_path(SELF, inp, stats=stats)
    assert stats["hubs"] == 0
    assert_all_same(solve_all(inp))


# ---- threshold -----------------------------------------------------------------------

def test_threshold_merges_calls_across_short_gaps_only():
    start = np.array([0, 100, 105, 300, 310])
    end = np.array([50, 104, 200, 305, 320])
    func = np.array([FID["MPI_Init"], FID["MPI_Send"], FID["MPI_Recv"], FID["MPI_Send"], FID["MPI_Finalize"]])
    s, e, f, block_of = threshold.merge_calls(start, end, func, 10)
    assert block_of.tolist() == [0, 1, 1, 2, 3]                 # Init and Finalize never merge
    assert s.tolist() == [0, 100, 300, 310] and e.tolist() == [50, 200, 305, 320]
    assert f.tolist() == [FID["MPI_Init"], FID["MPI_Recv"], FID["MPI_Send"], FID["MPI_Finalize"]]
    assert threshold.merge_calls(start, end, func, 0)[3].tolist() == [0, 1, 2, 3, 4]


def test_threshold_shrinks_the_graph_and_keeps_the_algorithms_equal():
    sim = synth.ring_run(3, 8, sync_every=2, seed=5)
    inp = synth.path_input(sim)
    full, merged = {}, {}
    paths.critical_path(SELF, inp, stats=full)
    path = assert_all_same(solve_all(inp, threshold_s=1e-6))     # merges each Send with its Recv
    paths.critical_path(SELF, inp, threshold_s=1e-6, stats=merged)
    assert merged["vertices"] < full["vertices"]
    run_time = sim.start[:, -1].max() - sim.end[:, 0].min()
    assert abs(path["duration"].sum() - run_time) <= 0.01 * run_time


# ---- every algorithm against a plain DP on random DAGs ---------------------------------

def path_slack(path, inp):
    """Least slack implied by a path: run time from the earliest start minus the path's time."""
    g = graph.build(SELF, inp)
    return int(g.time[g.sink] - g.t0 - path["duration"].sum())


@pytest.mark.parametrize("seed", range(5))
def test_paths_are_the_same_with_int64_edge_sources(monkeypatch, seed):
    """Edge sources and indptr are int32 where every vertex id and edge position fits, int64 past
    that: the same paths."""
    inp = random_input(seed, 3, 8, 20, 2)
    narrow = solve_all(inp)
    g = graph.build(SELF, inp)
    assert g.src.dtype == g.indptr.dtype == np.int32
    monkeypatch.setattr(graph, "index_dtype", lambda largest: np.int64)
    g = graph.build(SELF, inp)
    assert g.src.dtype == g.indptr.dtype == np.int64
    wide = solve_all(inp)
    assert {k: rows(v) for k, v in wide.items()} == {k: rows(v) for k, v in narrow.items()}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ranks=st.integers(1, 4), n_calls=st.integers(1, 8),
       n_deps=st.integers(0, 30), collectives=st.integers(0, 3))
def test_every_algorithm_matches_the_dp_on_random_dags(seed, n_ranks, n_calls, n_deps, collectives):
    inp = random_input(seed, n_ranks, n_calls, n_deps, collectives)
    expected, _ = least_slack(inp)
    slacks = {}
    path = assert_all_same(solve_all(inp, slacks=slacks))
    assert set(slacks.values()) == {expected}
    # Times never go backwards along an edge here, so no segment is clipped and the
    # durations add up to the path's time.
    assert path_slack(path, inp) == expected


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ranks=st.integers(2, 4), iterations=st.integers(1, 6),
       jitter=st.sampled_from([0, 50, 5_000, 100_000]), delta=st.sampled_from([None, 1, 777, 10**12]))
def test_noisy_bulk_synchronous_runs_agree_with_the_dp(seed, n_ranks, iterations, jitter, delta):
    sim = synth.ring_run(n_ranks, iterations, sync_every=2, seed=seed, clock_noise_ns=jitter)
    inp = synth.path_input(sim)
    expected, _ = least_slack(inp)
    slacks = {}
    path = assert_all_same(solve_all(inp, delta=delta, slacks=slacks))
    assert set(slacks.values()) == {expected}
    if not jitter:
        assert path_slack(path, inp) == expected


@pytest.mark.parametrize("n_analysis", [1, 2, 3])
def test_a_rank_owns_the_vertices_owner_of_gives_it(n_analysis):
    empty = np.zeros(0, np.int64)
    base = np.array([0, 6, 10, 18, 20], np.int64)             # 4 trace ranks' vertices, then 7 hubs
    bounds = base[np.linspace(0, 4, n_analysis + 1).astype(int)]
    every = np.arange(20 + 7, dtype=np.int64)
    for me in range(n_analysis):
        g = graph.Graph(n_analysis, me, base, bounds, np.zeros((7, 4), np.int64), np.zeros(7, np.int64), empty,
                        empty, np.zeros(1, np.int64), empty, empty, 0, empty, 0)
        owner = g.owner_of(every)
        by_range = [a for a in range(n_analysis) for _ in range(bounds[a], bounds[a + 1])]
        assert owner.tolist() == by_range + [h % n_analysis for h in range(7)]
        assert g.owns(every).tolist() == (owner == me).tolist()
        # Local indices are the owned ids in order, rank vertices then hubs; global_id inverts them.
        owned = every[owner == me]
        n_local = len(owned)
        assert g.local_index(owned).tolist() == list(range(n_local))
        assert g.global_id(np.arange(n_local)).tolist() == owned.tolist()
