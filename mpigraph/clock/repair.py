"""No effect before its cause: the receive-before-send repair (a controlled logical clock).

After clock alignment a few dependencies may still point backwards in time
(a receive that ends before its send started, a collective member that leaves
before the member it waited for arrived): residual clock error.  Each such
violation is repaired by moving the released call's end forward to the
releasing event, and everything after it on that rank by the same amount
(the rank's later calls keep their durations and gaps).  A repair may push
later sends past their receives, so the caller takes the new times into the
match (the pairs stay: matching uses no times) and repairs again until no
violation is left (docs/design.md, "Clock alignment": count them and report them).
"""

import dataclasses

import numpy as np

MAX_ROUNDS = 64


@dataclasses.dataclass
class Repair:
    """What the repair did, summed over all ranks (identical on every analysis rank)."""

    found: int = 0          # violations in the first round (before any repair)
    repaired: int = 0       # violations repaired over all rounds
    remaining: int = 0      # violations left when MAX_ROUNDS ran out (0 normally)
    rounds: int = 0
    shift_ns: dict = dataclasses.field(default_factory=dict)   # owned rank -> total forward shift at its end


def violations(messages, members):
    """(rank, call, needed end ns) of every dependency whose destination ends before its source started.

    `messages` are the matched messages on the receivers' owner (late-sender
    dependencies), `members` the collective member results on the members' owner.
    """
    has_done = messages["r_done_call"] >= 0
    late_msg = has_done & (messages["r_done_end"] < messages["s_post_start"])
    # A member is released in the call that completed it (a nonblocking collective's Wait/Test),
    # whose end is the member's end.
    released = (members["release_rank"] >= 0) & (members["done_call"] >= 0)
    late_member = released & (members["end"] < members["release_start"])
    rank = np.concatenate([messages["r_rank"][late_msg], members["rank"][late_member]])
    call = np.concatenate([messages["r_done_call"][late_msg], members["done_call"][late_member]])
    need = np.concatenate([messages["s_post_start"][late_msg], members["release_start"][late_member]])
    return rank, call, need


def shift_forward(calls, call, need):
    """Move E(call) of one rank to at least `need`, and every later vertex by as much; returns the shift at the end."""
    n = calls.n_calls
    amount = np.zeros(2 * n, np.int64)
    np.maximum.at(amount, 2 * call + 1, need - calls.end_ns[call])
    amount = np.maximum.accumulate(amount)
    calls.start_ns += amount[0::2]
    calls.end_ns += amount[1::2]
    return int(amount[-1]) if n else 0


def apply(calls_by_rank, rank, call, need, repair):
    """Repair the violations on the owned ranks (a loop over ranks)."""
    order = np.argsort(rank, kind="stable")
    rank, call, need = rank[order], call[order], need[order]
    ranks, first = np.unique(rank, return_index=True)
    for r, a, b in zip(ranks, first, np.r_[first[1:], len(rank)]):
        shift = shift_forward(calls_by_rank[int(r)], call[a:b], need[a:b])
        repair.shift_ns[int(r)] = repair.shift_ns.get(int(r), 0) + shift
