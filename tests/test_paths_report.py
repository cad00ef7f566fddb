"""The path stage inside the pipeline: files, columns and words of the report."""

import csv

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st
from mpi4py import MPI

from mpigraph import analysis, config
from mpigraph.metrics import run_tables as linked_tables
from mpigraph.trace import record as R
from mpigraph.testing import synth
from tracebuild import rec, write_rank

QUIET = config.Config(quiet=True)


def write_late_sender_run(run_dir):
    """Rank 1 waits in MPI_Recv from 20 ns until rank 0's send at 100 ns arrives."""
    write_rank(run_dir, 0, 2, [rec("MPI_Init", 0, 10), rec("MPI_Send", 100, 110, R.SEND, peer=1, tag=5, bytes=8),
                               rec("MPI_Finalize", 500, 510)])
    write_rank(run_dir, 1, 2, [rec("MPI_Init", 0, 10), rec("MPI_Recv", 20, 105, R.RECV, peer=0, tag=5, bytes=8),
                               rec("MPI_Finalize", 900, 910)], host="node1")


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_report_has_the_path_of_the_matched_run(tmp_path):
    """The match stage finds the late sender; the graph algorithms put its message on the path."""
    write_late_sender_run(tmp_path)
    for algorithm in ("dijkstra", "parallel-delta-stepping"):
        text = analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET.with_overrides(algorithm=algorithm))
        path = read(tmp_path / "critical_path.csv")
        assert [(r["rank"], r["kind"], r["function"], r["duration_s"]) for r in path] == [
            ("0", "compute", "", "0.000000090"), ("1", "message", "MPI_Recv", "0.000000005"),
            ("1", "compute", "", "0.000000795")]
        assert [r["time_on_path_s"] for r in read(tmp_path / "ranks.csv")] == ["0.000000090", "0.000000800"]
        functions = {r["function"]: r["time_on_path_s"] for r in read(tmp_path / "functions.csv")}
        assert functions["MPI_Recv"] == "0.000000005" and functions["MPI_Send"] == "0.000000000"
        assert "Critical path: 0.000001 s in 3 segments; compute 99.4%" in text
        assert (tmp_path / "critical_path.parquet").exists()


def on_path_by_rule(calls, path):
    """(rank, call) of the calls linked_tables.mark_on_path marks, one segment and one call at a
    time: an mpi segment overlaps the call; a message segment ends in the call on its rank (the
    first holding its end) or starts in the call on its peer (the last holding its start)."""
    by_rank = {}
    for rank, call, start, end in zip(calls["rank"], calls["call"], calls["start_ns"], calls["end_ns"]):
        by_rank.setdefault(rank, []).append((call, start, end))
    marked = set()
    for kind, rank, peer, a, b in zip(path["kind"], path["rank"], path["peer"], path["start_ns"], path["end_ns"]):
        if kind == "mpi":
            marked |= {(rank, c) for c, s, e in by_rank[rank] if (s <= a <= e if a == b else s < b and e > a)}
        elif kind == "message":
            holding_end = [c for c, s, e in by_rank[rank] if s <= b <= e]
            holding_start = [c for c, s, e in by_rank[peer] if s <= a <= e]
            marked |= {(rank, c) for c in holding_end[:1]} | {(peer, c) for c in holding_start[-1:]}
    return marked


@pytest.mark.parametrize("structure", ["bsp", "halo"])
@pytest.mark.parametrize("algorithm", ["dijkstra", "parallel-delta-stepping", "toposort"])
def test_calls_on_the_path(tmp_path, structure, algorithm):
    """calls.parquet's on_path: the calls the path spends time in or passes through."""
    expected = synth.generate(str(tmp_path), 6, 40, structure)
    analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET.with_overrides(algorithm=algorithm))
    calls = pq.read_table(tmp_path / "calls.parquet").to_pydict()
    path = pq.read_table(tmp_path / "critical_path.parquet").to_pydict()
    marked = {(r, c) for r, c, on in zip(calls["rank"], calls["call"], calls["on_path"]) if on}
    assert marked == on_path_by_rule(calls, path)
    assert 0 < len(marked) < len(calls["rank"])
    if structure == "bsp" and algorithm != "toposort":
        # The synthetic run's own path (the graph's, for collectives): each message joins the
        # last arrival's collective call to the call it released.
        call_ending = {(r, e): c for r, c, e in zip(calls["rank"], calls["call"], calls["end_ns"])}
        call_starting = {(r, s): c for r, c, s in zip(calls["rank"], calls["call"], calls["start_ns"])}
        known = expected.path
        for kind, rank, peer, a, b in zip(known["kind"], known["rank"], known["peer"], known["start"], known["end"]):
            if kind == "message":
                assert (rank, call_ending[rank, b]) in marked and (peer, call_starting[peer, a]) in marked


@pytest.mark.parametrize("structure", ["halo", "bsp"])        # with part records, and without
def test_the_calls_table_is_made_in_chunks_of_whole_ranks(tmp_path, monkeypatch, structure):
    """The report makes the calls table a chunk at a time (a Parquet row group each): whole
    ranks, at most CHUNK_ROWS rows, a rank with more calls in pieces of its own, and the same
    table as in one chunk (on_path included: a rank's is found over all its calls)."""
    synth.generate(str(tmp_path), 6, 40, structure)
    analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET)
    whole = pq.read_table(tmp_path / "calls.parquet")
    assert pq.ParquetFile(tmp_path / "calls.parquet" / "part-0000.parquet").metadata.num_row_groups == 1
    monkeypatch.setattr(linked_tables, "CHUNK_ROWS", 100)        # 40 calls a rank: 2 ranks a chunk
    analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET)
    chunked = pq.ParquetFile(tmp_path / "calls.parquet" / "part-0000.parquet")
    groups = [chunked.read_row_group(i).column("rank").to_pylist() for i in range(chunked.metadata.num_row_groups)]
    assert [sorted(set(g)) for g in groups] == [[0, 1], [2, 3], [4, 5]]
    assert all(len(g) <= 100 for g in groups)
    assert chunked.read().equals(whole)
    assert any(whole.column("on_path").to_pylist())
    monkeypatch.setattr(linked_tables, "CHUNK_ROWS", 30)         # 30 calls, then the rest of a rank
    analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET)
    pieces = pq.ParquetFile(tmp_path / "calls.parquet" / "part-0000.parquet")
    groups = [pieces.read_row_group(i).column("rank").to_pylist() for i in range(pieces.metadata.num_row_groups)]
    n_calls = [whole.column("rank").to_pylist().count(r) for r in range(6)]
    assert min(n_calls) > 30
    assert groups == [[r] * n for r in range(6) for n in (30, n_calls[r] - 30)]
    assert pieces.read().equals(whole)


def _on_path_one_query_at_a_time(ranks, firsts, starts, ends, queries):
    """mark_on_path's rule (its doc), query by query over the block's calls of the query's rank."""
    marked = set()
    stops = list(firsts[1:]) + [len(starts)]
    run_of = {int(r): (a, b) for r, a, b in zip(ranks, firsts, stops)}
    for q_rank, lo, hi, how in queries:
        for r, a, b in zip(q_rank.tolist(), lo.tolist(), hi.tolist()):
            if r not in run_of:
                continue
            rows = range(*run_of[r])
            holding = [i for i in rows if starts[i] <= a <= ends[i]]
            if how == "overlap":
                marked |= {i for i in rows if (starts[i] <= a <= ends[i] if a == b else starts[i] < b and ends[i] > a)}
            else:
                marked |= set(holding[:1] if how == "ends in" else holding[-1:])
    return marked


CALLS = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 8)), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(CALLS, st.booleans(), st.sampled_from([0, 2**61])), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0, 5), st.integers(-5, 50), st.integers(0, 10), st.sampled_from([0, 2**61])),
                max_size=30), st.randoms(), st.sampled_from(["c", "off"]))
def test_on_path_of_a_block_of_ranks_is_the_rule_query_by_query(runs, query_rows, random, kernel):
    """calls_on_path marks several ranks' calls at once, rank after rank in any order: as the rule
    query by query.  A rank's calls in order (starts and ends increasing) or overlapping (threads);
    times near 2^61 make ranks' bands too wide for one group; queries of ranks without calls
    mark nothing.  A binary search per query in C (metrics.call_kernel), and numpy's (kernel off)."""
    ranks = random.sample(range(6), len(runs))
    starts, ends, firsts = [], [], []
    for (calls, ordered, base), rank in zip(runs, ranks):
        firsts.append(len(starts))
        t = base
        for gap, length in calls:
            if ordered:
                t += gap
                starts.append(t)
                ends.append(t + length)
                t += length
            else:
                starts.append(base + gap)
                ends.append(base + gap + length)
    starts, ends = np.array(starts, np.int64), np.array(ends, np.int64)
    queries = []
    for how in linked_tables.QUERY_KINDS:
        rows = sorted((r, base + lo, base + lo + (length if how == "overlap" else 0))
                      for r, lo, length, base in query_rows)
        q_rank, lo, hi = (np.array([row[i] for row in rows], np.int64) for i in range(3))
        queries.append((q_rank, lo, hi, how))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPIGRAPH_CALLS_KERNEL", kernel)
        got = linked_tables.calls_on_path(queries, np.array(ranks, np.int64), np.array(firsts, np.int64), starts,
                                          ends)
    assert set(np.flatnonzero(got).tolist()) == _on_path_one_query_at_a_time(ranks, firsts, starts, ends, queries)
