"""One-sided communication: general active target synchronisation (post/start/complete/wait).

Fences need nothing here: MPI_Win_fence is a collective over the window's group (csrc/windows.c
gives each window a communicator id of its own), grouped into instances by collectives.py like
MPI_Barrier, every member released by the last to arrive.

Post/start/complete/wait: the shim records the group of each MPI_Win_post (the origins that
may access this target) and MPI_Win_start (the targets this origin accesses) as part records,
one per member as a world rank (csrc/topology.c).  An origin's n-th access epoch to target t
on window w is t's n-th exposure epoch to that origin on w (MPI orders the epochs of a pair):

    key (w, target, origin, n)    n counted on the origin among its Win_start parts naming t,
                                  on the target among its Win_post parts naming the origin.

An access epoch is a Win_start and the next Win_complete on its window, an exposure epoch a
Win_post and the next Win_wait, or the next MPI_Win_test that returned flag 1 (the shim writes
the flag into the record's tag): a polling loop ends like a Win_wait, its successful test the
completing call.  Two waits follow (Scalasca's names):

- late post: the origin cannot access a target before the target posted.  The epoch waits for
  its latest target's Win_post, in the first of its calls from the Win_start to the
  Win_complete (the start itself, a Put, Get, Accumulate, ..., or the complete) that ended after
  that post started: where the implementation made it wait.  wait_before = clamp(post start -
  that call's start); graph edge rma_late_post from the post's start to that call's end.
- early wait: the target's Win_wait returns when every origin of the epoch called
  Win_complete.  It waits for the latest of them: wait_before = clamp(complete start - wait
  start); edge rma_early_wait from that complete's start to the Win_wait's end.

The puts, gets and accumulates of an epoch get no edges of their own: every one of them starts
before its origin's Win_complete, whose edge into the target's Win_wait has less slack, so the
critical path and the waits would never take theirs.  The same holds for fence epochs (the
closing fence is a collective over the window).  Passive target synchronisation (lock, unlock,
flush) is recorded as MPI time; who waits for whose lock is not matched.

Both waits are member rows (collectives.MEMBER_RESULTS: a Win_start row released by a post, a
Win_wait row released by a complete) appended to the collective members, so the waits
(metrics.waits), the receive-before-send repair and the edges treat them as any release.
"""

import numpy as np

from mpigraph.match import releases
from mpigraph.match.core import ordinal_within, pair_occurrences
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.util import arrays

POST, START, COMPLETE, WAIT, TEST = (mf.BY_NAME[n].id for n in ("MPI_Win_post", "MPI_Win_start", "MPI_Win_complete",
                                                                 "MPI_Win_wait", "MPI_Win_test"))


# The functions of general active target synchronisation: a rank that called none has no epoch.
_PSCW = np.zeros(len(mf.names_array()), bool)
_PSCW[[POST, START, COMPLETE, WAIT, TEST]] = True


def _epochs(rank_calls, opener, closer):
    """One rank's epochs: (call record index of each opener, its call, the call of its closer,
    -1 where none, the first call of the closing): the k-th opener on a window with the k-th
    closer on that window.  An exposure epoch's closer is its Win_wait or the Win_test that
    returned flag 1 (its record's tag, csrc/generate.py); the closing of a Win_test loop starts
    at the first Win_test on the window after the post."""
    records = np.asarray(rank_calls.records)
    flags, func = rank_calls.field("flags"), rank_calls.field("func")
    ok = (flags & (record.PART | record.ERROR)) == 0
    closing_call = func == closer
    tests = np.zeros(0, np.int64)
    if closer == WAIT:
        test = ok & (func == TEST)
        closing_call = closing_call | (test & (records["tag"] == 1))
        tests = np.flatnonzero(test)
    opens, closes = np.flatnonzero(ok & (func == opener)), np.flatnonzero(ok & closing_call)
    io, ic = pair_occurrences(records["comm"][opens], records["comm"][closes])
    closing = np.full(len(opens), -1, np.int64)
    closing[io] = rank_calls.record_call[closes[ic]]
    first = closing.copy()
    polled = io[func[closes[ic]] == TEST]
    if len(polled):
        first[polled] = rank_calls.record_call[_first_test_after(records["comm"], tests, opens[polled])]
    return opens, rank_calls.record_call[opens], closing, first


def _first_test_after(window, tests, opens):
    """Per opener record in `opens`: the first record of `tests` on its window after it (one
    exists: the test that closed its epoch)."""
    out = np.zeros(len(opens), np.int64)
    for w in np.unique(window[opens]):          # a loop over windows
        mine, on_w = window[opens] == w, tests[window[tests] == w]
        out[mine] = on_w[np.searchsorted(on_w, opens[mine], "right")]
    return out


def _named(rank_calls, opens, opener):
    """The part records of the openers `opens` (their group's members): (epoch, window, peer)."""
    records = np.asarray(rank_calls.records)
    flags, func = rank_calls.field("flags"), rank_calls.field("func")
    parts = np.flatnonzero(((flags & record.PART) != 0) & (func == opener) & (records["peer"] >= 0))
    # A part follows its call record: the epoch is the last opener at or before it.
    epoch = np.searchsorted(opens, parts, "right") - 1
    keep = epoch >= 0
    parts, epoch = parts[keep], epoch[keep]
    return epoch, records["comm"][parts].astype(np.int64), records["peer"][parts].astype(np.int64)


def _ranks_with_epochs(calls):
    """The owned ranks (sorted) that called a function of post/start/complete/wait: one lookup of
    every owned call's function, not one per rank (most ranks of most programs have none)."""
    ranks = sorted(calls)
    funcs = [calls[r].func for r in ranks]
    if not funcs:
        return []
    ends = np.cumsum([len(f) for f in funcs])
    # The calls that are such functions (none in most runs), each found in its rank's span.
    hits = np.flatnonzero(_PSCW[np.concatenate(funcs)])
    return [ranks[i] for i in np.unique(np.searchsorted(ends, hits, "right")).tolist()]


class Epochs:
    """The owned ranks' access and exposure epochs with their keys, made once (no times)."""

    def __init__(self, calls):
        cols = {name: [] for name in ("a_rank", "a_call", "a_close", "a_first", "e_rank", "e_call", "e_close",
                                      "e_first")}
        named = {name: [] for name in ("a_epoch", "a_win", "a_peer", "e_epoch", "e_win", "e_peer")}
        n_a = n_e = 0
        for r in _ranks_with_epochs(calls):
            c = calls[r]
            for side, opener, closer in (("a", START, COMPLETE), ("e", POST, WAIT)):
                opens, call, closing, first = _epochs(c, opener, closer)
                epoch, win, peer = _named(c, opens, opener)
                offset = n_a if side == "a" else n_e
                cols[side + "_rank"].append(np.full(len(call), r, np.int64))
                cols[side + "_call"].append(call)
                cols[side + "_close"].append(closing)
                cols[side + "_first"].append(first)
                named[side + "_epoch"].append(epoch + offset)
                named[side + "_win"].append(win)
                named[side + "_peer"].append(peer)
                if side == "a":
                    n_a += len(call)
                else:
                    n_e += len(call)
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)   # noqa: E731
        self.__dict__.update({name: cat(parts).astype(np.int64) for name, parts in {**cols, **named}.items()})
        # n: the epoch's position among the rank's epochs naming the same (window, peer)
        self.a_n = ordinal_within([self.a_rank[self.a_epoch], self.a_win, self.a_peer], self.a_epoch)
        self.e_n = ordinal_within([self.e_rank[self.e_epoch], self.e_win, self.e_peer], self.e_epoch)

    def __len__(self):
        return len(self.a_rank) + len(self.e_rank)

    def keys(self, side):
        """The (window, target, origin, n) keys of one side's named peers."""
        if side == "a":       # the origin names targets
            return {"k0": self.a_win, "k1": self.a_peer, "k2": self.a_rank[self.a_epoch], "k3": self.a_n}
        return {"k0": self.e_win, "k1": self.e_rank[self.e_epoch], "k2": self.e_peer, "k3": self.e_n}


def _first_ended_after(calls, rank, first, last, t, ends=None):
    """Per row: the first call of `rank` in [first, last] that ended at or after t (last if none);
    `ends`: {rank: end times} to read instead of the calls' own (polling_ends)."""
    out = np.asarray(last, np.int64).copy()
    ends_of = ends or {}
    for r, rows in arrays.groups(rank):
        ends = np.maximum.accumulate(ends_of.get(int(r), calls[int(r)].end_ns))   # nondecreasing: a search
        at = np.searchsorted(ends, t[rows], "left")
        out[rows] = np.clip(at, first[rows], last[rows])
    return out


def member_rows(comm, epochs, calls, template, codec=None):
    """Member result rows (the columns of `template`, collectives.MEMBER_RESULTS) of the owned
    epochs' waits: late post on the origins, early wait on the targets; collective over comm."""
    a_closed = epochs.a_close >= 0
    e_closed = epochs.e_close >= 0
    # late post: the origin's epochs want the targets' posts
    post_have = dict(epochs.keys("e"), rank=epochs.e_rank[epochs.e_epoch], call=epochs.e_call[epochs.e_epoch])
    post_have["start"] = _times(calls, post_have["rank"], post_have["call"], "start_ns")
    a_want = dict(epochs.keys("a"), row=epochs.a_epoch)
    late = releases.latest(comm, post_have, a_want, len(epochs.a_rank), codec)
    # early wait: the target's epochs want the origins' completes
    has_close = a_closed[epochs.a_epoch]
    complete_have = {k: v[has_close] for k, v in epochs.keys("a").items()}
    complete_have["rank"] = epochs.a_rank[epochs.a_epoch][has_close]
    complete_have["call"] = epochs.a_close[epochs.a_epoch][has_close]
    complete_have["start"] = _times(calls, complete_have["rank"], complete_have["call"], "start_ns")
    e_want = dict(epochs.keys("e"), row=epochs.e_epoch)
    early = releases.latest(comm, complete_have, e_want, len(epochs.e_rank), codec)

    # origin rows: released by the latest post, charged to the first call that ended after it
    a = np.flatnonzero(a_closed & (late[0] >= 0))
    done_a = _first_ended_after(calls, epochs.a_rank[a], epochs.a_call[a], epochs.a_close[a], late[2][a])
    # target rows: released by the latest complete, charged to the closing call (a Win_wait) or,
    # for a Win_test loop, to the first test of the loop that ended after that complete started
    e = np.flatnonzero(e_closed & (early[0] >= 0))
    polling = polling_ends(calls, epochs)
    done_e = _first_ended_after(calls, epochs.e_rank[e], epochs.e_first[e], epochs.e_close[e], early[2][e], polling)
    rank = np.concatenate([epochs.a_rank[a], epochs.e_rank[e]])
    call = np.concatenate([epochs.a_call[a], epochs.e_first[e]])
    done = np.concatenate([done_a, done_e])
    func = np.concatenate([np.full(len(a), START), np.full(len(e), WAIT)])
    start = _times(calls, rank, call, "start_ns")
    end = _times(calls, rank, done, "end_ns")
    # a polling test's end for the path (polling_ends): the release's edge must not end before it starts
    for r, rows in arrays.groups(rank):
        if int(r) in polling:
            end[rows] = polling[int(r)][done[rows]]
    release = [np.concatenate([late[i][a], early[i][e]]) for i in range(3)]
    values = {"rank": rank, "comm_rank": np.full(len(rank), -1), "call": call, "func": func,
              "root": np.full(len(rank), -1), "start": start, "end": end, "done_call": done,
              "max_start": release[2], "min_end": end, "release_rank": release[0], "release_call": release[1],
              "release_start": release[2]}
    return {name: np.asarray(values[name], template[name].dtype) for name in template}


def polling_ends(calls, epochs):
    """{rank: its calls' end times for the path stage} for the ranks where a Win_test loop closed
    an exposure epoch: each call of the loop before the successful test ends where the next call
    starts.  The loop's own instructions between two tests are polling, not work (match.probes
    does the same for Iprobe runs): without it a complete that started between two tests would
    release the next test only after the gap, and the path, finding the target's chain of tests
    and gaps without slack, would stay in the loop instead of going to the late origin."""
    polled = np.flatnonzero((epochs.e_close >= 0) & (epochs.e_first < epochs.e_close))
    out = {}
    for r in np.unique(epochs.e_rank[polled]):          # a loop over ranks
        rows = polled[epochs.e_rank[polled] == r]
        first, length = epochs.e_first[rows], epochs.e_close[rows] - epochs.e_first[rows]
        at = np.repeat(first - np.cumsum(np.r_[0, length[:-1]]), length) + np.arange(length.sum())
        c = calls[int(r)]
        column = np.array(c.end_ns, copy=True)
        column[at] = np.maximum(column[at], c.start_ns[at + 1])
        out[int(r)] = column
    return out


def _times(calls, rank, call, name):
    """calls[rank].<name>[call] for rows of (rank, call), one gather per rank."""
    out = np.zeros(len(rank), np.int64)
    for r, rows in arrays.groups(rank):
        out[rows] = getattr(calls[int(r)], name)[call[rows]]
    return out
