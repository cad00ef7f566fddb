"""The match's counting kernel (match.kernel) and its numpy path give the same numbers, and the
message pairing by counting gives pair_by_key's pairs in its order."""

import numpy as np
import pytest

from mpigraph.match import core, kernel


def _python_ordinals(groups, order):
    seen, expected = {}, np.empty(len(order), np.int64)
    for i in np.argsort(order, kind="stable"):
        expected[i] = seen.get(groups[i], 0)
        seen[groups[i]] = expected[i] + 1
    return expected


@pytest.mark.parametrize("runs", [1, 4, 2000])
@pytest.mark.parametrize("groups", [1, 5, 70_000])
def test_ordinals_of_the_kernel_and_of_numpy_are_the_same(monkeypatch, runs, groups):
    """Rows in a few increasing runs of `order` or in many, few groups or more than 16 bits'
    worth: the kernel's count per group, row by row (after a sort by order where a group's
    rows are out of order), numpy's sorts, and a Python count all agree."""
    rng = np.random.default_rng(runs * 7 + groups)
    n = 4000
    keys = [rng.integers(0, groups, n), rng.integers(0, 3, n)]
    cuts = np.sort(rng.choice(np.arange(1, n), runs - 1, replace=False))
    order = np.concatenate([np.sort(part) for part in np.split(rng.permutation(n), cuts)])
    expected = _python_ordinals(list(zip(*[k.tolist() for k in keys])), order)
    monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", "off")
    assert not kernel.available()
    assert np.array_equal(core.ordinal_within(keys, order), expected)
    monkeypatch.delenv("MPIGRAPH_MATCH_KERNEL")
    if not kernel.available():
        pytest.skip("no C compiler")
    assert np.array_equal(core.ordinal_within(keys, order), expected)


def test_ordinals_of_given_codes_are_counted_without_numbering_them_again(monkeypatch):
    rng = np.random.default_rng(1)
    code = rng.integers(0, 50, 3000) * 2          # codes 0..99, half of them never used
    order = np.arange(3000)
    expected = _python_ordinals(code.tolist(), order)
    for setting in ("off", ""):
        monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", setting)
        assert np.array_equal(core.ordinal_in_groups(code, order, 100), expected)


def test_the_kernel_declines_an_order_repeated_within_a_group():
    if not kernel.available():
        pytest.skip("no C compiler")
    assert kernel.ordinals(np.array([0, 0, 1]), 2, np.array([4, 4, 1])) is None
    assert kernel.ordinals(np.array([0, 1, 0]), 2, np.array([4, 1, 2])).tolist() == [1, 0, 0]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("setting", ["off", "on"])
def test_pairing_by_ordinal_is_pair_by_key(monkeypatch, seed, setting):
    """Sends numbered 0..k-1 in each stream, receives with some sends missing, some extra
    ordinals and unresolved ones (-1): the same pairs as the sort, in the same (key) order, by
    numpy's counting and by the kernel's (kernel.pair_by_slot)."""
    monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", setting)
    if setting == "on" and not kernel.available():
        pytest.skip("no C compiler")
    rng = np.random.default_rng(seed)
    n_streams = 40
    stream_a = rng.integers(0, n_streams, 3000)
    ordinal_a = core.ordinal_within([stream_a], np.arange(len(stream_a)))
    pick = rng.permutation(len(stream_a))[:2500]
    stream_b = np.concatenate([stream_a[pick], rng.integers(0, n_streams, 300)])
    ordinal_b = np.concatenate([ordinal_a[pick], rng.integers(-1, 200, 300)])
    b = np.unique(np.stack([stream_b, ordinal_b], axis=1), axis=0)     # unique keys on b's side
    b = b[rng.permutation(len(b))]
    stream_b, ordinal_b = b[:, 0], b[:, 1]
    want = core.pair_by_key([stream_a, ordinal_a], [stream_b, ordinal_b])
    got = core.pair_by_ordinal(stream_a, ordinal_a, stream_b, ordinal_b, n_streams)
    assert len(got[0]) >= 2500 and all(np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("setting", ["off", "on"])
@pytest.mark.parametrize("a, b, pairs", [
    # a stream skips an ordinal (0, 2): counting does not apply, the sort pairs them
    (([0, 0, 1], [0, 2, 0]), ([1, 0, 0], [0, 2, 1]), ([1, 2], [1, 0])),
    # an ordinal twice in a's stream 0
    (([0, 0, 1], [1, 1, 0]), ([0, 1], [1, 0]), ([0, 1, 2], [0, 0, 1])),
    # b asks for a slot twice: the sort's one pair
    (([0, 0], [0, 1]), ([0, 0, 0], [1, 1, 5]), ([1], [0])),
    # b's ordinal one past its stream's last: no pair (not the next stream's first send)
    (([0, 0, 1], [0, 1, 0]), ([0], [2]), ([], [])),
])
def test_pairing_by_odd_ordinals_is_pair_by_key(monkeypatch, setting, a, b, pairs):
    """Where counting does not apply, pair_by_ordinal gives way to the sort; an ordinal past
    its stream's sends pairs with none."""
    monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", setting)
    if setting == "on" and not kernel.available():
        pytest.skip("no C compiler")
    (stream_a, ordinal_a), (stream_b, ordinal_b) = [[np.array(x) for x in side] for side in (a, b)]
    want = core.pair_by_key([stream_a, ordinal_a], [stream_b, ordinal_b])
    got = core.pair_by_ordinal(stream_a, ordinal_a, stream_b, ordinal_b, 2)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert (got[0].tolist(), got[1].tolist()) == pairs


def _members_and_calls(rng, own=True):
    """Owned ranks' calls with random times and collective members of some of them (blocking:
    each its own call's, or some completed in a later call), as the match gives them."""
    from mpigraph.match.collectives import PATTERN_OF_FUNC
    from mpigraph.match.core import RankCalls

    calls = {}
    for rank in (3, 4, 6):
        n = int(rng.integers(50, 200))
        start = np.cumsum(rng.integers(0, 100, n))
        calls[rank] = RankCalls(np.zeros(n, np.uint16), start, start + rng.integers(-5, 80, n), rank)
    rows = [(rank, call) for rank, c in calls.items() for call in rng.choice(c.n_calls, c.n_calls // 2, replace=False)]
    rank = np.array([r for r, _ in rows], np.int32)
    call = np.array([c for _, c in rows], np.int64)
    done_call = call.copy()
    if not own:
        later = rng.random(len(call)) < 0.3
        done_call[later] = np.minimum(call[later] + 1, [calls[int(r)].n_calls - 1 for r in rank[later]])
    funcs = np.flatnonzero(PATTERN_OF_FUNC >= 0)
    start = np.array([calls[int(r)].start_ns[c] for r, c in zip(rank, call)])
    end = np.array([calls[int(r)].end_ns[c] for r, c in zip(rank, done_call)])
    release_rank = np.where(rng.random(len(rank)) < 0.8, rng.integers(3, 7, len(rank)), -1).astype(np.int32)
    members = {"rank": rank, "call": call, "done_call": done_call, "func": rng.choice(funcs, len(rank)).astype(np.uint16),
               "root": rng.integers(3, 7, len(rank)).astype(np.int32), "start": start, "end": end,
               "min_end": end - rng.integers(-20, 60, len(rank)), "release_rank": release_rank,
               "release_start": start + rng.integers(-50, 100, len(rank))}
    return calls, members


@pytest.mark.parametrize("own", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_collective_waits_of_the_kernel_and_of_numpy_are_the_same(monkeypatch, own, seed):
    """Every member its own call's (the kernel's one pass) or some completed later (numpy's
    path either way): the calls' waits, states and the members' totals agree."""
    from mpigraph.match.core import CallIndex
    from mpigraph.metrics import waits

    calls, members = _members_and_calls(np.random.default_rng(seed), own)
    index = CallIndex(calls)
    start_ns, end_ns = index.column(calls, "start_ns"), index.column(calls, "end_ns")
    results = {}
    for setting in ("off", ""):
        monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", setting)
        results[setting] = waits._collective_waits(index, start_ns, end_ns, members)
    if own and kernel.available():
        assert kernel.member_waits(members, 3, index.first_call_table, len(index), waits._COLLECTIVE_STATE,
                                   waits._NO_WAIT_AFTER, waits.NO_STATE) is not None
    for got, want in zip(results[""], results["off"]):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    assert (results["off"][0] > 0).any() and (results["off"][2] > 0).any()     # some waits before and after


@pytest.mark.parametrize("seed", range(3))
def test_charged_kinds_of_the_kernel_and_of_numpy_are_the_same(monkeypatch, seed):
    """Calls completing one message or several of either kind (some of both: the airport rule):
    the largest wait per call and its split into the kinds agree with the kernel and without."""
    from mpigraph.metrics import message_kinds

    rng = np.random.default_rng(seed)
    n_calls = 500
    position = rng.integers(0, n_calls, 3000)
    wait = np.where(rng.random(3000) < 0.3, 0, rng.integers(0, 10_000, 3000))
    is_receiver = rng.random(3000) < 0.4
    results = {}
    for setting in ("off", ""):
        monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", setting)
        results[setting] = message_kinds.charged(position, wait, is_receiver, n_calls)
    for got, want in zip(results[""], results["off"]):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    total, ls, lr = results["off"]
    assert ((ls > 0) & (lr > 0)).any() and np.array_equal(ls + lr, total)


@pytest.mark.parametrize("seed", range(3))
def test_operation_times_of_the_kernel_and_of_numpy_are_the_same(monkeypatch, seed):
    """Operations posted and completed in owned ranks' calls, some never completed (-1): the
    calls' times with the kernel and without."""
    from mpigraph.match import p2p
    from mpigraph.match.core import CallIndex

    rng = np.random.default_rng(seed)
    calls, _ = _members_and_calls(rng)
    index = CallIndex(calls)
    start_ns, end_ns = index.column(calls, "start_ns"), index.column(calls, "end_ns")
    rank = rng.choice(sorted(calls), 400).astype(np.int32)
    post_call = np.array([rng.integers(0, calls[int(r)].n_calls) for r in rank], np.int64)
    done_call = np.where(rng.random(400) < 0.2, -1, np.minimum(post_call + rng.integers(0, 3, 400),
                                                                [calls[int(r)].n_calls - 1 for r in rank]))
    results = {}
    for setting in ("off", ""):
        monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", setting)
        results[setting] = p2p.op_times(index, start_ns, end_ns, rank, post_call, done_call)
    for name in p2p.MESSAGE_TIME_COLUMNS:
        assert np.array_equal(results[""][name], results["off"][name])
    assert (results["off"]["done_end"] == -1).any() and (results["off"]["done_end"] > 0).any()


def test_op_fields_are_numpy_s_gathers(monkeypatch):
    """The operation table's fields read in C (kernel.op_fields) are numpy's gathers of the same
    records, dtypes included; the whole operation table is the same with the kernel on and off."""
    from mpigraph.match import p2p
    from mpigraph.trace import record

    if not kernel.available():
        pytest.skip("no C compiler")
    rng = np.random.default_rng(5)
    records = np.zeros(500, record.RECORD_DTYPE)
    for name in ("comm", "bytes"):
        records[name] = rng.integers(-2**40, 2**40, len(records))
    for name in ("peer", "tag"):
        records[name] = rng.integers(-2**31, 2**31, len(records))
    for name in ("func", "site"):
        records[name] = rng.integers(0, 2**16, len(records))
    post, described = rng.integers(0, len(records), 300), rng.integers(0, len(records), 300)
    got = kernel.op_fields(records, post, described)
    for name in ("comm", "func", "site"):
        assert got[name].dtype == records.dtype[name] and np.array_equal(got[name], records[name][post])
    for name in ("peer", "tag", "bytes"):
        assert got[name].dtype == records.dtype[name] and np.array_equal(got[name], records[name][described])
    with pytest.raises(IndexError):
        kernel.op_fields(records, np.array([len(records)]), np.array([0]))

    from test_traffic_batches import _p2p_records, _Log

    calls = {r: core.rank_calls(_Log(r, _p2p_records(r)), np.zeros(9, np.int64), np.zeros(9, np.int64))
             for r in (0, 1)}
    tables = {}
    for setting in ("on", "off"):
        monkeypatch.setenv("MPIGRAPH_MATCH_KERNEL", setting)
        tables[setting], _ = p2p.operations(core.CallBatch([calls[0], calls[1]]))
    assert tables["on"].keys() == tables["off"].keys() == p2p.OP_DTYPES.keys()
    for name in p2p.OP_DTYPES:
        assert tables["on"][name].dtype == tables["off"][name].dtype
        assert tables["on"][name].tolist() == tables["off"][name].tolist(), name
