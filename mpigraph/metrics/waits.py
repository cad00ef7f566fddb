"""Wait before, wait after and execution time of every call; wait states by kind.

Every wait is clamped to its call: 0 <= wait_before + wait_after <= duration, so
execution = duration - wait_before - wait_after is never negative and a rank's
waits never exceed its MPI time.

Collectives, per member i of an instance, by the pattern of its function
(who waits for whom; the same rule makes the graph's edges, link.dependency_edges):
    N-to-N (Allreduce, Barrier, Alltoall, ..., communicator creation): every member
        waits for the last to arrive;  wait_before = clamp(max_j start_j - start_i),
        wait_after = clamp(end_i - min_j end_j) (others left earlier: the seed's wait
        after, within what is left of the call);
    1-to-N (Bcast, Scatter(v)): a non-root member waits for the root (late broadcast),
        wait_before = clamp(root start - start_i); the root does not wait;
    N-to-1 (Reduce, Gather(v)): the root waits for the last other member (early
        reduce), wait_before = clamp(max_j start_j - root start); the others do not, but
        where their MPI held them (below);
    Scan, Exscan: the member of rank i waits for the latest of the ranks < i (early
        scan), wait_before = clamp(max_{j<i} start_j - start_i), i and j ranks of the
        communicator (whose order may differ from MPI_COMM_WORLD's); or, where its MPI held
        it until the last member came (its completing call ended at or after that:
        recursive doubling exchanges with higher ranks too), for the last member;
    neighbourhood collectives (MPI_Neighbor_*, MPI_Ineighbor_*): the member waits for the
        latest of its in-neighbours, wait_before = clamp(max_{j in in(i)} start_j - start_i)
        (match.neighbors);
    post/start/complete/wait epochs (match.rma): an origin's access epoch waits for its
        targets' latest MPI_Win_post (late post), in the first call of the epoch that ended
        after it; a target's MPI_Win_wait for its origins' latest MPI_Win_complete (early wait);
and, beyond the pattern, where the MPI library held a member of a 1-to-N or N-to-1 collective
(match.collectives._with_holds; held): a member whose completing call (its own, or the Wait/Test
of a nonblocking one) ended at or after a member's start waited for it, an N-to-1 non-root for
its root (MPICH's shared-memory Reduce keeps them, and a large Ireduce's in their Wait), any for
the last arrival (a large Bcast keeps the root and the others until the last member came),
wait_before = clamp(that start - start of the completing call);
where clamp(x) = min(max(x, 0), duration).  A nonblocking collective (MPI_Iallreduce,
MPI_Ibarrier, ...) arrives when its call starts and waits in the Wait/Test call that
completed its request: that call's wait_before is clamp(releasing start - its start)
within its own duration; the nonblocking call itself is all execution.
Point-to-point (seed 003 equations 1-4), per message:
    late sender   = max(0, send start - start of the call the receive completed in)
                    (the Recv itself, or the Wait/Test of a deferred receive),
                    at most that call's duration;
    late receiver = max(0, receive post - start of the call the send completed in),
                    only when that call ended after the receive was posted
                    (an eager send that returned before is not waiting).
A call that completed several messages or collectives (Waitall) waited for them at
the same time: its wait_before is the largest of them.  Its point-to-point part is charged
to late sender and late receiver message by message (metrics.message_kinds: the airport
rule); when a collective's wait is the largest, the call's wait state is that collective's.
Probes (match.probes): a probe that found a message, and the probes that found nothing right
before it, waited for that message's send: late sender.  Only N-to-N blocking collectives
have a wait_after.  Other calls: execution = duration.

Wait states (Scalasca's names): the wait before of each call, by kind:
    late_sender, late_receiver   as above;
    wait_nxn      N-to-N collectives but Barrier (and communicator creation):
                  until the last member arrived;
    wait_barrier  the same for MPI_Barrier (and MPI_Ibarrier);
    late_broadcast  1-to-N non-root members: until the root arrived;
    early_reduce    N-to-1 root: until the last member arrived;
    held            what the MPI held a member beyond its pattern: an N-to-1 non-root, a
                    1-to-N root, a 1-to-N non-root for another than the root; until the
                    member it was held for arrived;
    early_scan      Scan, Exscan: until the latest lower rank arrived;
    wait_neighbor   neighbourhood collectives: until the latest in-neighbour arrived;
    late_post       one-sided origin: until its target posted the exposure epoch;
    early_wait      one-sided target's MPI_Win_wait: until the last origin completed.
"""

import collections.abc

import numpy as np

from mpigraph.comm import codec as codec_module
from mpigraph.metrics import message_kinds
from mpigraph.match import kernel
from mpigraph.match.collectives import PATTERN_OF_FUNC
from mpigraph.match.core import (BARRIER_ID, COLLECTIVE_N_TO_N, COLLECTIVE_N_TO_ONE, COLLECTIVE_NEIGHBOR,
                                 COLLECTIVE_ONE_TO_N, NONBLOCKING, RMA_EARLY_WAIT, RMA_LATE_POST, SCAN, CallIndex)
from mpigraph.trace import functions as mf
from mpigraph.util import arrays
from mpigraph.schema import WAIT_STATES  # noqa: F401  (the kinds, in the order of the codes below)

(LATE_SENDER, LATE_RECEIVER, WAIT_NXN, WAIT_BARRIER, LATE_BROADCAST, EARLY_REDUCE, EARLY_SCAN, WAIT_NEIGHBOR,
 LATE_POST, EARLY_WAIT, HELD) = range(11)
NO_STATE = -1


class CallWaits(collections.abc.Mapping):
    """{owned rank: {column: that rank's per-call values}} of ``owned_waits``, held as one
    column each over all owned calls (``match.CallIndex``'s numbering).

    After the metrics only the report reads them: ``pack`` keeps them encoded (``codec``)
    while the path stage runs, and the first rank asked for unpacks them all again: five
    int64 columns per call, mostly zeros, which the codec packs to a few percent.  That lowers
    the analysis's peak only where the path stage holds more than the match did
    (``pack_for_path``, which ``before_path`` follows); elsewhere it is time spent for nothing.
    """

    def __init__(self, index, columns):
        self._index, self._columns, self._packed = index, columns, None
        self.pack_for_path = True

    def pack(self):
        """Hold the columns encoded until a rank's are asked for."""
        if self._columns is not None:
            self._packed, self._columns = codec_module.Codec(level=1).encode(self._columns), None

    def before_path(self):
        """The path stage comes next: ``pack`` where pack_for_path."""
        if self.pack_for_path:
            self.pack()

    def __getitem__(self, rank):
        return self.of_ranks([rank])

    def of_ranks(self, ranks):
        """{column: the per-call values of the owned `ranks`, one rank's after another}: views of
        the columns where the ranks are consecutive owned ranks in order (a batch of them), else
        copies.  KeyError for a rank not owned."""
        if self._columns is None:
            self._columns, self._packed = codec_module.decode(self._packed), None
        ranks = np.asarray(ranks, np.int64).reshape(-1)
        owned, offsets = self._index.ranks, self._index.offsets
        at = np.searchsorted(owned, ranks)
        known = at < len(owned)
        known[known] = owned[at[known]] == ranks[known]
        if not known.all():
            raise KeyError(int(ranks[~known][0]))
        if len(at) and (np.diff(at) == 1).all():
            rows = slice(offsets[at[0]], offsets[at[-1] + 1])
        else:
            rows = arrays.ranges(offsets[at], offsets[at + 1] - 1)
        return {name: column[rows] for name, column in self._columns.items()}

    def __iter__(self):
        return (int(r) for r in self._index.ranks)

    def __len__(self):
        return len(self._index.ranks)


def _clip(x, upper):
    """min(max(x, 0), max(upper, 0)), computed in x (both are the caller's temporaries)."""
    np.maximum(x, 0, out=x)
    np.maximum(upper, 0, out=upper)
    return np.minimum(x, upper, out=x)


def _rows_where(done):
    """An index of the rows where `done`: all of them as a slice where every row is (the columns'
    views, not copies of every column: most runs complete every message)."""
    return slice(None) if done.all() else done


def late_sender(messages):
    """(rank, call, ns) of the late-sender time of the receives (messages on the receivers' owner)."""
    done = _rows_where(messages["r_done_call"] >= 0)
    start, end = messages["r_done_start"][done], messages["r_done_end"][done]
    return (messages["r_rank"][done], messages["r_done_call"][done],
            _clip(messages["s_post_start"][done] - start, end - start))


def late_receiver(messages):
    """(rank, call, ns) of the late-receiver time of the sends (messages on the senders' owner)."""
    done = _rows_where(messages["s_done_call"] >= 0)
    start, end = messages["s_done_start"][done], messages["s_done_end"][done]
    posted = messages["r_post_start"][done]
    waited = np.where(posted <= end, posted - start, 0)
    return messages["s_rank"][done], messages["s_done_call"][done], _clip(waited, end - start)


def _collective_state_table():
    """[function id, 0: a non-root released by the root or nobody, 1: the root, 2: a non-root
    released by another member]: the member's wait-state code (NO_STATE: none)."""
    funcs = np.arange(len(PATTERN_OF_FUNC))
    table = np.full((len(funcs), 3), NO_STATE, np.int8)
    nxn = PATTERN_OF_FUNC == COLLECTIVE_N_TO_N
    barrier = np.isin(funcs, [BARRIER_ID, mf.BY_NAME["MPI_Ibarrier"].id, mf.BY_NAME["MPI_Barrier_init"].id])
    table[nxn, :] = np.where(barrier[nxn], WAIT_BARRIER, WAIT_NXN)[:, None]
    table[PATTERN_OF_FUNC == SCAN, :] = EARLY_SCAN
    table[PATTERN_OF_FUNC == COLLECTIVE_NEIGHBOR, :] = WAIT_NEIGHBOR
    table[PATTERN_OF_FUNC == RMA_LATE_POST, :] = LATE_POST
    table[PATTERN_OF_FUNC == RMA_EARLY_WAIT, :] = EARLY_WAIT
    table[PATTERN_OF_FUNC == COLLECTIVE_ONE_TO_N, 0] = LATE_BROADCAST
    table[PATTERN_OF_FUNC == COLLECTIVE_N_TO_ONE, 1] = EARLY_REDUCE
    table[:, 2] = table[:, 0]
    # What the MPI held beyond the pattern (match.collectives._with_holds): the N-to-1 non-roots'
    # waits, the 1-to-N root's, a 1-to-N non-root's for another than the root.
    table[PATTERN_OF_FUNC == COLLECTIVE_N_TO_ONE, 0] = HELD
    table[PATTERN_OF_FUNC == COLLECTIVE_N_TO_ONE, 2] = HELD
    table[PATTERN_OF_FUNC == COLLECTIVE_ONE_TO_N, 1:] = HELD
    return table


_COLLECTIVE_STATE = _collective_state_table()


def collective_state(func, rank, root, release_rank):
    """Wait-state code of each member call (a lookup by function, not a pass per state): every
    member's as a non-root released by the root, then the others' (the roots, one per instance
    at most, and the members a hold released) looked up again."""
    state = _COLLECTIVE_STATE[:, 0].take(func)
    roots = rank == root
    other = np.flatnonzero(roots | ((release_rank != root) & (release_rank >= 0)))
    state[other] = _COLLECTIVE_STATE[func[other], np.where(roots[other], 1, 2)]
    return state


def charged_states(w):
    """(kind, time) of every charge of a rank's calls `w` (owned_waits' columns): the calls'
    wait states, then the other point-to-point kind's parts (other_state_time); kind -1 where
    there is none, so both arrays have 2 x calls rows (a call's two charges n calls apart).
    Kinds in int8, and the other kind looked up on the few calls charged to both only."""
    state, other_time = np.asarray(w["wait_state"]), w["other_state_time"]
    n = len(state)
    kind = np.full(2 * n, NO_STATE, np.int8)
    kind[:n] = state
    both = np.flatnonzero(other_time > 0)
    kind[n + both] = np.where(state[both] == LATE_SENDER, LATE_RECEIVER, LATE_SENDER)
    return kind, np.concatenate([w["wait_state_time"], other_time])


def _wait_after_table():
    """Per function id: a member has a wait after (the blocking N-to-N collectives)."""
    return (PATTERN_OF_FUNC == COLLECTIVE_N_TO_N) & ~NONBLOCKING[:len(PATTERN_OF_FUNC)]


_NO_WAIT_AFTER = ~_wait_after_table()


def member_waits(index, start_ns, end_ns, members):
    """Per collective member (rows of `members`): where its wait is charged and how long.

    Returns {"done": the completing call in `index`'s numbering (-1: never completed),
    "wait_before", "wait_after", "duration" (of the completing call), "state", "own": every
    member completed in its own call (all blocking: no call completed two)}; see the module doc
    for the rules.  `start_ns`, `end_ns`: index.column of the calls' times."""
    done_call = members["done_call"]
    completed = done_call >= 0
    every = bool(completed.all())            # blocking collectives: always
    done = index.of(members["rank"], done_call if every else np.maximum(done_call, 0))
    # Every member blocking: each completed in its own call, whose times the member rows carry
    # (start, end): no lookup of millions of calls in the members' order (by instance, so rank
    # after rank: a cache miss each).
    own_call = every and np.array_equal(done_call, members["call"])
    start = members["start"] if own_call else start_ns[done]
    end = members["end"] if own_call else end_ns[done]
    duration = end - start
    if not every:
        duration[~completed] = 0
        done[~completed] = -1
    # Released members only: the others' release_start is -1, far before their start.
    before = _clip(members["release_start"] - start, duration)       # duration clamped at 0 in place
    before[members["release_rank"] < 0] = 0
    func = members["func"]
    # The seed's wait after, for blocking N-to-N members only, within what the wait before left:
    # min(max(after, 0), duration - before), as min(max(after, 0) + before, duration) - before
    # in place (0 <= before <= duration), with no temporary of every member.
    after = end - members["min_end"]
    np.maximum(after, 0, out=after)
    after += before
    np.minimum(after, duration, out=after)
    after -= before
    after[_NO_WAIT_AFTER.take(func)] = 0
    state = collective_state(func, members["rank"], members["root"], members["release_rank"])
    state[before == 0] = NO_STATE
    return {"done": done, "wait_before": before, "wait_after": after, "duration": duration, "state": state,
            "own": own_call}


def _per_call(n, done, before, state, own):
    """(wait, state) per call 0..n-1 of the collective members it completed: the largest wait
    before of its members (0: none) and that member's state (the last such member's).  Call by
    call, so that the rest are passes in call order, not scatters in the members' order."""
    wait = np.zeros(n, np.int64)
    member_state = np.full(n, NO_STATE, np.int8)
    if own:                                      # a blocking member is its own call: one each
        wait[done] = before
        member_state[done] = state
    else:                                        # a Wait/Test may complete several members
        np.maximum.at(wait, done, before)
        largest = before == wait[done]
        member_state[done[largest]] = state[largest]
    return wait, member_state


def owned_waits(calls_by_rank, to_me, from_me, members, probe_waits=None):
    """{owned rank: per-call columns wait_before, wait_after, execution, wait_state, wait_state_time,
    other_state_time}.

    `to_me`: messages on the receivers' owner; `from_me`: the same on the
    senders' owner; `members`: collective member results of the owned ranks;
    `probe_waits`: (rank, call, ns) late-sender time of probes (match.probes).
    All owned ranks are done at once in one call numbering (match.CallIndex).
    A call's point-to-point wait is charged to late sender and late receiver
    per message (metrics.message_kinds): wait_state_time is its kind's part,
    other_state_time the other kind's.
    """
    return waits_and_member_totals(calls_by_rank, to_me, from_me, members, probe_waits)[0]


def _with_point_to_point(index, parts, collective, member_state):
    """(wait_before, state, state_time, other_time) per call of `index` from the point-to-point
    waits `parts` ((rank, call, ns) of each kind: late sender, late receiver, probes) charged by
    kind (metrics.message_kinds) and the collectives' (`collective`, `member_state`: _per_call's)."""
    n = len(index)
    position = np.concatenate([index.of(rank, call) for rank, call, _ in parts])
    ns = np.concatenate([ns for _, _, ns in parts])
    is_receiver = np.repeat(np.arange(len(parts)) == 1, [len(ns) for _, _, ns in parts])
    p2p, ls, lr = message_kinds.charged(position, ns, is_receiver, n)
    del position, ns, is_receiver
    # int8 codes; state_time and other_time are ls and lr, swapped in place where late receiver
    state, state_time, other_time = message_kinds.state_of(p2p, ls, lr, np.int8(LATE_SENDER),
                                                           np.int8(LATE_RECEIVER), np.int8(NO_STATE))
    # Where a collective's wait is the call's (point-to-point wins a tie), its state and all its time.
    top = collective > p2p
    np.copyto(state, member_state, where=top)
    np.copyto(state_time, collective, where=top)
    np.copyto(other_time, 0, where=top)
    return np.maximum(p2p, collective, out=p2p), state, state_time, other_time


def waits_and_member_totals(calls_by_rank, to_me, from_me, members, probe_waits=None):
    """(owned_waits, (wait, time) per collective member): the member's wait before + after, and
    the duration of the call it is charged to (0, 0 when it never completed); an instance's sums
    of them make its wait and imbalance (collectives.instance_waits)."""
    index = CallIndex(calls_by_rank)
    start_ns, end_ns = index.column(calls_by_rank, "start_ns"), index.column(calls_by_rank, "end_ns")
    n = len(index)
    collective, member_state, wait_after, member_wait, member_time = _collective_waits(index, start_ns, end_ns,
                                                                                       members)
    parts = [late_sender(to_me), late_receiver(from_me)] + ([probe_waits] if probe_waits is not None else [])
    if any(len(ns) for _, _, ns in parts):
        wait_before, state, state_time, other_time = _with_point_to_point(index, parts, collective, member_state)
    else:
        # No point-to-point waits (a run of collectives): the calls' waits are the collectives'.
        # A call without one has member_state NO_STATE (member_waits' state of a zero wait).
        wait_before, state, state_time, other_time = collective, member_state, collective.copy(), np.zeros(n, np.int64)
    execution = np.subtract(end_ns, start_ns, out=end_ns)      # the duration, in the concatenated copy
    execution -= wait_before
    execution -= wait_after
    waits = CallWaits(index, {"wait_before": wait_before, "wait_after": wait_after, "execution": execution,
                              "wait_state": state, "wait_state_time": state_time, "other_state_time": other_time})
    return waits, (member_wait, member_time)


def _collective_waits(index, start_ns, end_ns, members):
    """(per call of `index`: its collective wait before, state and wait after; per member: its
    wait before + after and the duration of the call it is charged to): member_waits and
    _per_call, in one pass of the match's kernel where every member is its own call's."""
    n = len(index)
    if index.first_call_table is not None and len(members["rank"]):
        found = kernel.member_waits(members, int(index.ranks[0]), index.first_call_table, n, _COLLECTIVE_STATE,
                                    _NO_WAIT_AFTER, NO_STATE)
        if found is not None:
            return found
    m = member_waits(index, start_ns, end_ns, members)
    charged = m["done"] >= 0
    every = bool(charged.all())
    done = m["done"] if every else m["done"][charged]
    member_before = m["wait_before"] if every else m["wait_before"][charged]
    collective, member_state = _per_call(n, done, member_before,
                                         m["state"] if every else m["state"][charged], m["own"])
    wait_after = np.zeros(n, np.int64)
    wait_after[done] = m["wait_after"] if every else m["wait_after"][charged]   # blocking: one per call
    # The members' wait before + after, in wait_before's array (read for the last time above).
    return collective, member_state, wait_after, np.add(m["wait_before"], m["wait_after"], out=m["wait_before"]), \
        m["duration"]
