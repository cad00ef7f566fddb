"""The wait of a point-to-point call that completed several messages, charged to their kinds.

A call that completed several messages (Waitall, Waitsome, Testall, or a
probe's polling run with its receive) waited for all of them at once: its wait
is W = max_m w_m, w_m the wait of message m (late sender for a receive, late
receiver for a send; metrics.waits).  Which kind made it wait is decided per
message, not per call, and W is charged to the kinds by what each message
made it wait, the *airport rule* (the Shapley value of the cost max_m w_m):

    sort the call's messages by wait, w_(1) <= ... <= w_(n), w_(0) = 0;
    the piece [w_(i-1), w_(i)] of the wait is shared equally by the messages
    still outstanding then, the n - i + 1 messages with w >= w_(i);
    a kind's time = the summed shares of its messages.

The shares add up to W.  Example: receives from a sender 10 ms late and a send
whose receiver posted 0.01 ms after that (both waited for the same late rank):
late sender 2 x 10 / 3 = 6.67 ms, late receiver 10 / 3 + 0.01 = 3.34 ms; the
old rule (the kind of the largest wait) called all 10.01 ms late receiver.

The call's wait state is the kind with the larger time, ``state_time`` that
kind's time and ``other_time`` the other kind's.  Times within TIE (5%) of the
call's wait of each other are a tie, and a tie is late sender, the data the
call needed: a halo exchange with one late neighbour, whose Irecv is posted a
few microseconds after its Isend, has a receive that waited d and a send that
waited d + e: late sender d / 2, late receiver d / 2 + e, a tie (the old rule
called all of it late receiver, 25 s of it on one real run).
"""

import numpy as np

from mpigraph.match import kernel
from mpigraph.util import arrays


def charged(position, wait, is_receiver, n):
    """(W, late-sender time, late-receiver time) per call position 0..n-1 (int64 ns).

    `position`: the call of each message, `wait`: its wait (ns, >= 0), `is_receiver`: the
    message made its call wait as a late receiver (a send), else as a late sender.
    Only calls with messages of both kinds need the rule; the others get their whole wait
    charged to their one kind, without a sort."""
    position = np.asarray(position, np.int64)
    wait = np.asarray(wait, np.int64)
    is_receiver = np.asarray(is_receiver, bool)
    total, kinds = _largest_and_kinds(position, wait, is_receiver, n)
    lr = np.where(kinds == LATE_RECEIVER_ONLY, total, 0)
    mixed = kinds == BOTH
    rows = np.flatnonzero(mixed[position]) if mixed.any() else np.zeros(0, np.int64)
    if len(rows):
        sends = rows[is_receiver[rows]]
        calls = np.flatnonzero(mixed)        # only their late-receiver time is summed from shares
        lr[calls] = 0
        # Late-sender rows after late-receiver rows of the same wait: the rounding a call's last row
        # takes goes to one kind whatever order the messages came in (it varies with the analysis ranks).
        shares = airport_shares(position[rows], wait[rows], ~is_receiver[rows])
        np.add.at(lr, position[sends], shares[is_receiver[rows]])
        lr[calls] = np.minimum(lr[calls], total[calls])
    return total, total - lr, lr


# Which kinds of message made a call wait (``_largest_and_kinds``): bit 0 late sender, bit 1
# late receiver.
LATE_SENDER_ONLY, LATE_RECEIVER_ONLY, BOTH = 1, 2, 3


def _largest_and_kinds(position, wait, is_receiver, n):
    """(per call 0..n-1 the largest wait of its messages (0: none), the kinds of its messages that
    waited (bits above)): in one pass of the match's kernel, or with numpy (np.maximum.at)."""
    found = kernel.largest_waits(position, wait, is_receiver, n)
    if found is not None:
        return found
    total = np.zeros(n, np.int64)
    np.maximum.at(total, position, wait)
    kinds = np.zeros(n, np.uint8)
    waited = wait > 0
    kinds[position[~is_receiver & waited]] = LATE_SENDER_ONLY
    kinds[position[is_receiver & waited]] |= LATE_RECEIVER_ONLY
    return total, kinds


def airport_shares(group, cost, tie=None):
    """Each row's share of its group's max cost by the airport rule (see the module doc), in
    int64 ns: rounded so that a group's shares add up to its max exactly (the largest row of
    the group takes the rounding; of rows of the same cost, the last by `tie`, a bool per row,
    then by the rows' order)."""
    group = np.asarray(group, np.int64)
    cost = np.asarray(cost, np.int64)
    order = _by_group_then_cost(group, cost, tie)
    g, c = group[order], cost[order]
    n = len(g)
    first = np.r_[True, g[1:] != g[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    end = np.r_[start[1:][first[1:]], n] if n else np.zeros(0, np.int64)
    size = np.repeat(end - start[first], end - start[first])
    rank_in_group = np.arange(n) - start
    step = np.diff(np.r_[0, c])
    step[first] = c[first]
    piece = step / (size - rank_in_group)                 # the piece shared by the rows still waiting
    # Summed within each group from 0: a group's shares, and their rounding, do not depend on the
    # groups before it (which vary with the analysis ranks).
    share = arrays.run_cumsums(piece, np.flatnonzero(first), end - start[first])
    out_sorted = np.rint(share).astype(np.int64)
    # The last row of each group (the largest cost) takes what rounding left: shares sum to max.
    last = np.r_[first[1:], True]
    group_sum = np.add.reduceat(out_sorted, np.flatnonzero(first)) if n else np.zeros(0, np.int64)
    out_sorted[last] += c[last] - group_sum
    out = np.empty(n, np.int64)
    out[order] = out_sorted
    return out


def _by_group_then_cost(group, cost, tie=None):
    """The order of np.lexsort((tie, cost, group)) (no tie: (cost, group)), ties in the rows'
    order.  Where the keys fit one int64, ((group - min) * span + (cost - min)) * 2 + tie, a
    stable sort of that key is that order: one sort instead of lexsort's one per key, twice as
    fast on rows in random order and about ten times where the groups (calls) come in a few
    sorted runs, as charged's rows do."""
    if not len(group):
        return np.zeros(0, np.intp)
    g0, c0 = int(group.min()), int(cost.min())
    span = int(cost.max()) - c0 + 1
    ties = 1 if tie is None else 2
    if (int(group.max()) - g0 + 1) * span * ties > np.iinfo(np.int64).max:
        return np.lexsort((cost, group) if tie is None else (tie, cost, group))
    key = (group - g0) * span + (cost - c0)
    if tie is not None:
        key = key * 2 + np.asarray(tie, bool)
    return np.argsort(key, kind="stable")


# Late-sender and late-receiver times closer than this share of the call's wait are a tie.
TIE = 0.05


def state_of(total, late_sender, late_receiver, ls_code, lr_code, none_code):
    """(state, state_time, other_time) per call: the kind with the larger time, a tie (within
    TIE of the call's wait) late sender; none where the call did not wait.

    `total`, `late_sender`, `late_receiver`: ``charged``'s (0 <= each kind's time <= total).
    state_time and other_time are the arrays late_sender and late_receiver themselves, their
    values swapped where the call is late receiver: no new int64 arrays of every call.
    A call without late-receiver time is late sender (or none): late_receiver - late_sender <= 0
    <= TIE * total.  So the rule is decided on the calls with late-receiver time only, the
    sends, not by a pass with a float temporary over every call."""
    state = np.where(total == 0, np.int8(none_code), np.int8(ls_code))
    rows = np.flatnonzero(late_receiver > 0)
    rows = rows[late_receiver[rows] - late_sender[rows] > TIE * total[rows]]
    state[rows] = lr_code
    late_sender[rows], late_receiver[rows] = late_receiver[rows], late_sender[rows]   # copies on the right
    return state, late_sender, late_receiver
