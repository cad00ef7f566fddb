"""No effect before its cause: the receive-before-send repair (a controlled logical clock).

After clock alignment a few dependencies may still point backwards in time
(a receive that ends before its send started, a collective member that leaves
before the member it waited for arrived): residual clock error.  Each such
violation is repaired by moving the released call's end forward to the
releasing event, and everything after it on that rank by the same amount
(the rank's later calls keep their durations and gaps).

A repair moves the rank's later sends too, which may now start after their
receives ended: the repair must follow whole dependency chains.  Moving one
hop per match round (match, repair the violations seen, match again) needs
as many rounds as the longest chain, and a chain runs through every
iteration of a tightly coupled program (a halo exchange whose receives end
just after their sends start): hundreds of rounds, each a whole match.  So a
round here follows the chains to the end (``repair_chains``): with the
dependencies of the last match fixed, each rank's shift is a step function of
its call index (nondecreasing: a shift carries to every later call), the
function of every rank is raised where a dependency still points backwards,
and that is repeated until no dependency does.  That is a longest-path
relaxation on the dependency DAG (each pass moves the repair one hop further
down every chain at once), so it ends after at most as many passes as the
longest chain of violated dependencies, each pass a few numpy operations on
the dependencies and an exchange of the step functions' breakpoints (one per
repaired call, not per call).  The match is redone after it only because a
collective's last arriver may change when its members move (its release
edges come from the times); that needs another round only when it did.
"""

import dataclasses

import numpy as np

MAX_ROUNDS = 64

# Breakpoint keys: rank * _CALLS + call, exact in int64 below 2^23 ranks of 2^40 calls each.
_CALLS = np.int64(1 << 40)


@dataclasses.dataclass
class Repair:
    """What the repair did, summed over all ranks (identical on every analysis rank)."""

    found: int = 0          # violations in the first round (before any repair)
    repaired: int = 0       # violations repaired, over every pass of every round
    remaining: int = 0      # violations left when MAX_ROUNDS ran out (0 normally)
    rounds: int = 0         # match rounds that repaired something (1 normally)
    shift_ns: dict = dataclasses.field(default_factory=dict)   # owned rank -> total forward shift at its end


@dataclasses.dataclass
class Edges:
    """Dependencies into the owned ranks: the source call's start must not follow the
    destination call's end (times as of the last match)."""

    src_rank: np.ndarray
    src_call: np.ndarray
    src_start: np.ndarray
    dst_rank: np.ndarray
    dst_call: np.ndarray
    dst_end: np.ndarray


def edges(messages, members):
    """The late-sender messages (send start -> receive completion end) and the collective
    releases (the releasing member's start -> the end of the call that completed the member),
    on the destinations' owner."""
    m = messages["r_done_call"] >= 0
    # A member is released in the call that completed it (a nonblocking collective's Wait/Test),
    # whose end is the member's end.
    c = (members["release_rank"] >= 0) & (members["done_call"] >= 0)

    def both(a, b):
        return np.concatenate([messages[a][m], members[b][c]]).astype(np.int64)

    return Edges(both("s_rank", "release_rank"), both("s_post_call", "release_call"),
                 both("s_post_start", "release_start"), both("r_rank", "rank"), both("r_done_call", "done_call"),
                 both("r_done_end", "end"))


def violations(messages, members):
    """(rank, call, needed end ns) of every dependency whose destination ends before its source started.

    `messages` are the matched messages on the receivers' owner (late-sender
    dependencies), `members` the collective member results on the members' owner.
    The same rows as ``edges`` (messages first, then members) where dst_end < src_start, found
    before any column is gathered: a run without violations (most) has an edge per call, and
    the edges' six columns would be made only to find none of them late.
    """
    m = (messages["r_done_call"] >= 0) & (messages["r_done_end"] < messages["s_post_start"])
    c = ((members["release_rank"] >= 0) & (members["done_call"] >= 0)
         & (members["end"] < members["release_start"]))
    return tuple(np.concatenate([messages[a][m], members[b][c]]).astype(np.int64)
                 for a, b in (("r_rank", "rank"), ("r_done_call", "done_call"), ("s_post_start", "release_start")))


class Steps:
    """Every rank's forward shift as a step function of its call index: breakpoints (key =
    rank * 2^40 + call, value = the shift of that call's end and of everything after it on
    its rank), sorted by key, values nondecreasing within a rank."""

    def __init__(self, key=None, value=None):
        self.key = np.zeros(0, np.int64) if key is None else key
        self.value = np.zeros(0, np.int64) if value is None else value

    def at(self, rank, call):
        """The shift of the end of (rank, call): the last breakpoint of that rank at or before
        the call; 0 before the first.  The start of call k shifts like the end of call k - 1."""
        rank = np.asarray(rank, np.int64)
        if not len(self.key):
            return np.zeros(rank.shape, np.int64)
        key = rank * _CALLS + np.asarray(call, np.int64)      # call -1: before the rank's first
        i = np.searchsorted(self.key, key, side="right") - 1
        same_rank = (i >= 0) & (self.key[np.maximum(i, 0)] // _CALLS == rank)
        return np.where(same_rank, self.value[np.maximum(i, 0)], 0)

    def raised(self, rank, call, need):
        """These steps with the shift from (rank, call) on raised to at least `need`."""
        key = np.concatenate([self.key, np.asarray(rank, np.int64) * _CALLS + np.asarray(call, np.int64)])
        value = np.concatenate([self.value, np.asarray(need, np.int64)])
        if not len(key):
            return Steps()
        order = np.lexsort((-value, key))         # per key the largest first
        key, value = key[order], value[order]
        rank_of = key // _CALLS
        firsts = np.flatnonzero(np.r_[True, rank_of[1:] != rank_of[:-1]])
        for a, b in zip(firsts, np.r_[firsts[1:], len(key)]):     # a loop over ranks, not calls
            np.maximum.accumulate(value[a:b], out=value[a:b])
        # Only the points where a rank's shift grows are steps.
        keep = np.r_[True, (rank_of[1:] != rank_of[:-1]) | (value[1:] > value[:-1])]
        return Steps(key[keep], value[keep])

    def of_ranks(self, ranks):
        """The breakpoints of `ranks` only."""
        mine = np.isin(self.key // _CALLS, np.asarray(list(ranks), np.int64))
        return Steps(self.key[mine], self.value[mine])

    @staticmethod
    def joined(parts):
        """The steps of disjoint rank sets in one (sorted by key)."""
        key = np.concatenate([p.key for p in parts])
        value = np.concatenate([p.value for p in parts])
        order = np.argsort(key, kind="stable")
        return Steps(key[order], value[order])


def repair_chains(comm, calls_by_rank, e, repair, max_passes):
    """Shift the owned ranks' calls until no edge of `e` points backwards (see the module doc).

    Each pass: every edge's source start and destination end with the shifts so far; where the
    end is still before the start the destination rank's shift is raised from that call on; the
    owned ranks' breakpoints go to every analysis rank (sources live anywhere).  Returns the
    violations left after `max_passes` passes (0 on a DAG of fewer hops; a cycle cannot be
    repaired by shifting forward)."""
    steps = Steps()
    owned = list(calls_by_rank)
    for _ in range(max_passes):
        start = e.src_start + steps.at(e.src_rank, e.src_call - 1)
        late = e.dst_end + steps.at(e.dst_rank, e.dst_call) < start
        n = comm.allreduce(int(late.sum()))
        if n == 0:
            break
        repair.repaired += n
        mine = steps.of_ranks(owned).raised(e.dst_rank[late], e.dst_call[late], start[late] - e.dst_end[late])
        steps = Steps.joined(comm.allgather(mine))
    else:
        start = e.src_start + steps.at(e.src_rank, e.src_call - 1)
        n = comm.allreduce(int((e.dst_end + steps.at(e.dst_rank, e.dst_call) < start).sum()))
    _apply(calls_by_rank, steps, repair)
    return n


def _apply(calls_by_rank, steps, repair):
    """Move every owned call by its rank's step function: its start like the previous call's end."""
    for rank, calls in calls_by_rank.items():          # a loop over ranks
        if not len(steps.of_ranks([rank]).key):
            continue
        index = np.arange(calls.n_calls, dtype=np.int64)
        calls.start_ns += steps.at(np.full(calls.n_calls, rank), index - 1)
        calls.end_ns += steps.at(np.full(calls.n_calls, rank), index)
        shift = int(steps.at(np.array([rank]), np.array([calls.n_calls - 1]))[0]) if calls.n_calls else 0
        repair.shift_ns[rank] = repair.shift_ns.get(rank, 0) + shift
