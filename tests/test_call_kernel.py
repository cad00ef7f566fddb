"""metrics.call_kernel: the calls table's record fields, its sums per key and its on_path
searches in C give numpy's numbers (MPIGRAPH_CALLS_KERNEL=off)."""

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st
from mpi4py import MPI

from mpigraph import analysis, config
from mpigraph.callsites import stats
from mpigraph.metrics import call_kernel, run_tables
from mpigraph.schema import WAIT_STATES
from mpigraph.testing import synth
from mpigraph.trace import functions as mf, record
from mpigraph.util.names import Labels

OFF = ("MPIGRAPH_CALLS_KERNEL", "off")


def both(work):
    """work() with the kernel and without: (in C, numpy)."""
    assert call_kernel.available()
    in_c = work()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(*OFF)
        assert not call_kernel.available()
        return in_c, work()


def random_records(rng, n):
    out = np.zeros(n, record.RECORD_DTYPE)
    for name in ("bytes", "comm"):
        out[name] = rng.integers(-2**40, 2**40, n)
    for name in ("peer", "tag", "root"):
        out[name] = rng.integers(-2**31, 2**31, n)
    out["seq"] = rng.integers(0, 2**32, n, dtype=np.uint64)
    out["site"] = rng.integers(0, 2**16, n)
    out["flags"] = rng.choice([0, record.PART, record.REPEAT, record.DEVICE, record.REPEAT | record.DEVICE,
                               record.PART | record.DEVICE, record.SEND], n)
    return out


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(0, 50), min_size=1, max_size=5),
       among=st.sampled_from(["all", "calls"]))
def test_record_fields_in_c_are_numpys(seed, sizes, among):
    """Records of several ranks end to end (part records, merged polls, device buffers, fields at
    their types' limits): every record, or the calls among them (ascending indices)."""
    rng = np.random.default_rng(seed)
    parts = [random_records(rng, n) for n in sizes]
    if among == "all":
        rows = slice(None)
    else:
        rows = np.flatnonzero((np.concatenate(parts)["flags"] & record.PART) == 0)
    in_c, in_numpy = both(lambda: run_tables._record_fields(parts, rows))
    assert in_c.keys() == in_numpy.keys() == set(call_kernel.FIELDS)
    for name in call_kernel.FIELDS:
        assert in_c[name].dtype == np.asarray(in_numpy[name], in_c[name].dtype).dtype
        assert in_c[name].tolist() == in_numpy[name].tolist(), name


def calls_block(rng, n, n_ranks, n_sites):
    """A calls-table block (run_tables.call_block's columns) of random calls, rank after rank."""
    states = np.array([""] + list(WAIT_STATES), object)
    return {"rank": np.sort(rng.integers(0, n_ranks, n)), "callsite": rng.integers(0, n_sites, n),
            "function": Labels(rng.integers(0, 5, n), mf.names_array()),
            "start": rng.integers(0, 10**12, n), "end": rng.integers(10**12, 2 * 10**12, n),
            "calls": rng.integers(1, 4, n), "wait_before": rng.integers(0, 10**6, n),
            "wait_after": rng.integers(0, 10**6, n), "bytes": rng.integers(0, 2**40, n),
            "on_path": rng.random(n) < 0.3, "wait_state": Labels(rng.integers(0, len(states), n), states),
            "wait_state_time": rng.integers(0, 10**6, n),
            "other_state_time": np.where(rng.random(n) < 0.2, rng.integers(1, 10**6, n), 0)}


class _Sites:
    """Sites whose shim ids are the run's, up to n_sites."""

    def __init__(self, n_sites):
        self.places = [stats.UNKNOWN] * n_sites

    def run_ids(self, rank, ids):
        return np.asarray(ids, np.int64)


def accumulated(blocks, n_ranks, n_sites):
    acc = stats.Accumulator(_Sites(n_sites), n_ranks)
    for block in blocks:
        acc.add(dict(block))
    keys, sums = acc.sums.totals()
    wait_keys, wait_sums = acc.waitstate_sums()
    return [keys.tolist()] + [sums[n].tolist() for n in stats.SUMS] \
        + [wait_keys.tolist()] + [wait_sums[n].tolist() for n in stats.WAIT_SUMS]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(0, 300), min_size=1, max_size=3),
       n_ranks=st.integers(1, 20), n_sites=st.integers(1, 40), few=st.sampled_from([1, 8, call_kernel.FEW_KEYS]))
def test_call_site_sums_in_c_are_numpys(seed, sizes, n_ranks, n_sites, few):
    """Accumulator.add's sums per (call site, function, rank) and its wait-state charges per
    (call site, function, kind), over blocks; the kernel's table made for fewer keys than a block
    has (made again for one per row)."""
    rng = np.random.default_rng(seed)
    blocks = [calls_block(rng, n, n_ranks, n_sites) for n in sizes]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(call_kernel, "FEW_KEYS", few)
        in_c, in_numpy = both(lambda: accumulated(blocks, n_ranks, n_sites))
    assert in_c == in_numpy


def test_wait_state_as_plain_codes():
    """A block whose wait_state is the state itself (-1: none), not call_block's Labels."""
    rng = np.random.default_rng(5)
    block = calls_block(rng, 200, 3, 4)
    plain = dict(block, wait_state=block["wait_state"].codes - 1)
    in_c, in_numpy = both(lambda: accumulated([plain], 3, 4))
    assert in_c == in_numpy == accumulated([block], 3, 4)


def test_sums_past_two_to_the_53():
    """int64 sums in C are exact where float64 is not (numpy's bincount adds in float64)."""
    n = 3
    block = calls_block(np.random.default_rng(1), n, 1, 1)
    block.update(rank=np.zeros(n, np.int64), callsite=np.zeros(n, np.int64),
                 function=Labels(np.zeros(n, np.int64), mf.names_array()),
                 bytes=np.array([2**53, 1, 1], np.int64))
    acc = stats.Accumulator(_Sites(1), 1)
    acc.add(block)
    assert acc.sums.totals()[1]["bytes"].tolist() == [2**53 + 2]


@pytest.mark.parametrize("structure", ["halo", "bsp"])        # with part records, and without
def test_the_reports_tables_are_the_same_without_the_kernel(tmp_path, structure):
    """calls.parquet (whole ranks, and ranks in pieces), callsites and callsite_waitstates: the
    same with the kernel and without."""
    synth.generate(str(tmp_path / "run"), 6, 40, structure)
    quiet = config.Config(quiet=True)

    def tables(out, chunk_rows):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(run_tables, "CHUNK_ROWS", chunk_rows)
            analysis.analyze(str(tmp_path / "run"), MPI.COMM_WORLD, quiet, out_dir=str(tmp_path / out))
        return [pq.read_table(tmp_path / out / name)
                for name in ("calls.parquet", "callsites.parquet", "callsite_waitstates.parquet")]

    for chunk_rows in (100, 30):     # two ranks a chunk; a rank in pieces
        in_c = tables("c", chunk_rows)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(*OFF)
            in_numpy = tables("numpy", chunk_rows)
        assert all(a.equals(b) for a, b in zip(in_c, in_numpy))
        assert any(in_c[0].column("on_path").to_pylist())


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(1, 200), min_size=1, max_size=4),
       n_queries=st.integers(0, 300), ordered=st.sampled_from(["time", "reversed", "any"]))
def test_on_path_searches_from_the_query_before_in_any_order(seed, sizes, n_queries, ordered):
    """The kernel searches each query's rows from those of the query before it: queries of a rank
    in time order (a path's), in reverse, or in any order, of every kind, points and spans,
    before, among and after the rank's calls; as numpy's searches."""
    rng = np.random.default_rng(seed)
    firsts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
    gaps = rng.integers(0, 4, (2, sum(sizes)))
    starts = np.cumsum(gaps[0] + gaps[1]).astype(np.int64)      # calls in order, some touching
    ends = starts + gaps[1]
    ranks = np.arange(len(sizes), dtype=np.int64)
    span = int(ends.max(initial=0)) + 5
    queries = []
    for how in run_tables.QUERY_KINDS:
        q_rank = np.sort(rng.integers(0, len(sizes) + 1, n_queries))    # a rank with no calls too
        lo = rng.integers(-5, span, n_queries)
        hi = lo + (rng.integers(0, 20, n_queries) * (rng.random(n_queries) < 0.7) if how == "overlap" else 0)
        order = np.lexsort((lo, q_rank)) if ordered != "any" else np.arange(n_queries)
        if ordered == "reversed":
            order = np.lexsort((-lo, q_rank))
        queries.append((q_rank[order], lo[order], hi[order], how))
    in_c, in_numpy = both(lambda: run_tables.calls_on_path(queries, ranks, firsts, starts, ends))
    assert in_c.tolist() == in_numpy.tolist()


@pytest.mark.parametrize("names, codes", [
    (["MPI_Send", "", "é≠", "MPI_Allreduce"], [0, 3, 3, 1, 2, 0]),
    (["a"], []),
    (["", ""], [1, 0, 1]),
])
def test_label_text_in_c_is_takes(names, codes):
    """A Labels column's text made from its codes: the array pyarrow's take gives."""
    import pyarrow as pa

    codes = np.array(codes, np.int64)
    text = call_kernel.label_strings(codes, names)
    assert text.equals(pa.array(names, pa.string()).take(pa.array(codes)))
    assert text.null_count == 0


def test_label_text_leaves_nulls_and_bad_codes_to_take():
    assert call_kernel.label_strings(np.array([0]), ["a", None]) is None
    assert call_kernel.label_strings(np.array([2]), ["a", "b"]) is None
    assert call_kernel.label_strings(np.array([-1]), ["a", "b"]) is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(*OFF)
        assert call_kernel.label_strings(np.array([0]), ["a"]) is None
