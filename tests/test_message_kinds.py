"""metrics.message_kinds: the sort order of the airport rule and the wait state of a call."""

import numpy as np

from mpigraph.metrics import message_kinds, waits


def test_group_then_cost_order_is_lexsorts_with_ties_in_row_order():
    # Few groups and costs: many (group, cost) ties, whose rows must stay in their order
    # (the last row of a group takes the rounding, so which tied row is last matters).
    rng = np.random.default_rng(7)
    group = rng.integers(-5, 40, 5000)
    cost = rng.integers(0, 6, 5000)
    order = message_kinds._by_group_then_cost(group, cost)
    assert np.array_equal(order, np.lexsort((cost, group)))


def test_group_then_cost_order_when_the_pair_does_not_fit_one_int64():
    # Costs spanning 2^62 with 3 groups: the combined key would overflow; lexsort's order still.
    group = np.array([2, 0, 2, 1, 0, 2, 1])
    cost = np.array([2**62, 7, 0, 2**62, 7, 3, 1])
    order = message_kinds._by_group_then_cost(group, cost)
    assert order.tolist() == [1, 4, 6, 3, 2, 5, 0]
    assert np.array_equal(order, np.lexsort((cost, group)))
    assert len(message_kinds._by_group_then_cost(np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0


def test_group_then_cost_order_breaks_cost_ties_by_the_tie_key_then_row_order():
    rng = np.random.default_rng(11)
    group, cost, tie = rng.integers(0, 30, 4000), rng.integers(0, 4, 4000), rng.random(4000) < 0.5
    assert np.array_equal(message_kinds._by_group_then_cost(group, cost, tie), np.lexsort((tie, cost, group)))
    # Not fitting one int64: lexsort's order with the tie key too.
    group, cost, tie = np.array([0, 0, 1, 0]), np.array([2**62, 2**62, 5, 0]), np.array([True, False, False, False])
    assert message_kinds._by_group_then_cost(group, cost, tie).tolist() == [3, 1, 0, 2]


def test_charged_kinds_do_not_depend_on_the_messages_order():
    # A Waitall of two receives and a send that each waited 1 ns: a third of a ns each, rounded
    # to 0, and the call's last row takes the 1 ns left.  Which kind gets it must not depend on
    # the order the messages came in (it comes from the exchanges: it varies with the analysis
    # ranks): the late sender, ordered last among rows of equal wait.
    position, wait = np.zeros(3, np.int64), np.ones(3, np.int64)
    is_receiver = np.array([False, False, True])
    for order in ([0, 1, 2], [2, 0, 1], [0, 2, 1]):
        total, ls, lr = message_kinds.charged(position[order], wait[order], is_receiver[order], 1)
        assert (total.tolist(), ls.tolist(), lr.tolist()) == ([1], [1], [0]), order
    # Random calls of mixed kinds and tied waits: the same charges in every order of the rows.
    rng = np.random.default_rng(3)
    position, wait, is_receiver = rng.integers(0, 50, 600), rng.integers(0, 4, 600), rng.random(600) < 0.5
    first = message_kinds.charged(position, wait, is_receiver, 50)
    for _ in range(5):
        order = rng.permutation(600)
        again = message_kinds.charged(position[order], wait[order], is_receiver[order], 50)
        assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_airport_shares_the_same_through_either_order():
    # The same two groups once with small costs, once shifted by 2^61 (overflowing the key):
    # a group's shares depend on its cost differences only, so they are the same.
    group = [1, 0, 1, 0, 1]
    cost = np.array([600, 0, 0, 900, 300])
    small = message_kinds.airport_shares(group, cost)
    # Group 1: 0, 300, 600 -> [0, 300] by 2 (150 each), [300, 600] by the last: 0, 150, 450.
    assert small.tolist() == [450, 0, 0, 900, 150]
    shifted = message_kinds.airport_shares(group, cost + 2**61)
    # Shifted, the first piece [0, 2^61] is shared too: each row gets 2^61 / size more.
    assert shifted[[1, 3]].sum() == 2**61 + 900 and shifted[[0, 2, 4]].sum() == 2**61 + 600


def test_a_calls_shares_do_not_depend_on_the_calls_before_it():
    """A Waitall of two receives and two sends (a real run's): its late-receiver share is
    1363297 / 2 + 29487 = 711135.5 ns exactly, a tie that rounds to even, 711136, whether the
    call comes alone (as on one analysis rank of several) or after two others whose shares are
    thirds (as on one analysis rank for all): the report is the same for every K."""
    cost = [0, 0, 1363297, 1392784]
    late_sender = [False, True, False, True]      # charged's tie argument: these rows last among equals
    alone = message_kinds.airport_shares([2] * 4, cost, late_sender)
    assert alone.tolist() == [0, 0, 681648, 711136]
    after = message_kinds.airport_shares([0] * 4 + [1] * 4 + [2] * 4,
                                         [14546, 42493, 2617293, 2622012, 0, 0, 1149297, 1182075] + cost,
                                         late_sender * 3)
    assert after[8:].tolist() == alone.tolist()


def test_state_of_decides_the_tie_on_calls_with_late_receiver_time():
    # Call 0: 95 late sender, 105 late receiver: 10 apart = 5% of 200, a tie: late sender.
    # Call 1: 94 and 106: 12 apart > 10: late receiver.  Call 2: late sender only.
    # Call 3: late receiver only.  Call 4: did not wait.
    total = np.array([200, 200, 50, 70, 0])
    ls = np.array([95, 94, 50, 0, 0])
    lr = np.array([105, 106, 0, 70, 0])
    state, state_time, other = message_kinds.state_of(total, ls, lr, 0, 1, -1)
    assert state.dtype == np.int8 and state.tolist() == [0, 1, 0, 1, -1]
    assert state_time.tolist() == [95, 106, 50, 70, 0] and other.tolist() == [105, 94, 0, 0, 0]
    assert state_time is ls and other is lr                        # in place: swapped where late receiver


def test_charged_states_a_call_charged_to_both_kinds_counts_under_each():
    # Calls: late sender with 5 ns charged to late receiver too; late receiver with 7 ns of late
    # sender; no state; wait_nxn (3).  Second half: the other kinds, -1 where nothing is charged.
    kind, time = waits.charged_states({"wait_state": np.array([0, 1, -1, 3], np.int8),
                                       "wait_state_time": np.array([40, 60, 0, 90]),
                                       "other_state_time": np.array([5, 7, 0, 0])})
    assert kind.tolist() == [0, 1, -1, 3, 1, 0, -1, -1]
    assert time.tolist() == [40, 60, 0, 90, 5, 7, 0, 0]


def _receives(done_call):
    # Receives completing in calls [100, 500], [1000, 1100], [700, 900], sends posted at 300, 2000, 50.
    return {"r_rank": np.array([0, 1, 2]), "r_done_call": np.array(done_call),
            "r_done_start": np.array([100, 1000, 700]), "r_done_end": np.array([500, 1100, 900]),
            "s_post_start": np.array([300, 2000, 50])}


def test_late_sender_of_the_completed_receives_only():
    # 200 late; 1000 late clamped to the call's 100; the send before the call: 0.
    rank, call, ns = waits.late_sender(_receives([3, 5, 8]))
    assert rank.tolist() == [0, 1, 2] and call.tolist() == [3, 5, 8] and ns.tolist() == [200, 100, 0]
    rank, call, ns = waits.late_sender(_receives([3, -1, 8]))       # the second never completed
    assert rank.tolist() == [0, 2] and call.tolist() == [3, 8] and ns.tolist() == [200, 0]


def test_late_receiver_only_where_the_send_waited_past_the_post():
    # Sends completing in [100, 500] (receive posted at 300: 200), [1000, 1100] (posted at 2000,
    # after the send returned: an eager send, 0), and one never completed.
    messages = {"s_rank": np.array([4, 5, 6]), "s_done_call": np.array([2, 9, -1]),
                "s_done_start": np.array([100, 1000, 0]), "s_done_end": np.array([500, 1100, 0]),
                "r_post_start": np.array([300, 2000, 0])}
    rank, call, ns = waits.late_receiver(messages)
    assert rank.tolist() == [4, 5] and call.tolist() == [2, 9] and ns.tolist() == [200, 0]
    messages["s_done_call"][2] = 3
    assert waits.late_receiver(messages)[2].tolist() == [200, 0, 0]
