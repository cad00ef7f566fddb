"""Point-to-point synchronisations that are not messages: neighbourhood collectives and
post/start/complete/wait epochs, as (source call, destination call) pairs for the model graph.

The match stage (match.neighbors, match.rma) keeps only the *latest* partner of each member,
which is what a wait at L = 0 is.  With added latency another partner may become the latest,
so the model graph gets an edge from *every* partner, each one message (spec whatif.md: a
dependency between two ranks is a message); at dL = 0 the latest one is the tight edge, as
the match stage has it:

- neighbourhood collective (match.neighbors): member i gets the data of each in-neighbour j:
  S(j's member call) -> E(call completing i's member: the call itself, or the Wait/Test of an
  MPI_Ineighbor_*), bytes = j's buffer (its record's bytes);
- late post (match.rma): origin epoch (w, t, o, n) waits for target t's MPI_Win_post:
  S(post) -> E(the first call of the epoch, MPI_Win_start .. MPI_Win_complete, that ended at
  or after the post started: where the implementation made it wait);
- early wait: target t's MPI_Win_wait waits for every origin's MPI_Win_complete:
  S(complete) -> E(wait); an epoch closed by a MPI_Win_test loop (match.rma): -> E(the first
  test of the loop that ended at or after the complete started), by the calls' measured ends
  (the match stage's path reads the loop's polling ends, rma.polling_ends: here the measured
  times must come back at dL = 0).

The keys are the match stage's own (Wants, Epochs), joined on one analysis rank
(releases._join: the same sorted search as releases.latest, without keeping the latest).
"""

import numpy as np

from mpigraph.match import neighbors, releases, rma
from mpigraph.match.collectives import pattern_of
from mpigraph.match.core import COLLECTIVE_NEIGHBOR
from mpigraph.trace import functions as mf

NEIGHBOR, LATE_POST, EARLY_WAIT = range(3)
PAIR_COLUMNS = ("src_rank", "src_call", "dst_rank", "dst_call", "bytes", "func", "kind")


def _empty():
    return {name: np.zeros(0, np.int64) for name in PAIR_COLUMNS}


def _pairs(src_rank, src_call, dst_rank, dst_call, nbytes, func, kind):
    n = len(src_rank)
    cols = (src_rank, src_call, dst_rank, dst_call, nbytes, func, np.full(n, kind))
    return {name: np.asarray(np.broadcast_to(c, (n,)), np.int64) for name, c in zip(PAIR_COLUMNS, cols)}


def neighbour_pairs(calls: dict, members: dict, comm_of_member, seq_of_member, member_bytes) -> dict:
    """Every (in-neighbour's member call, completing call of the member) pair of the run's
    neighbourhood collective instances; `members`: collectives.MEMBER_RESULTS rows of the
    instances (match_collectives' order), their communicators, sequence numbers and bytes."""
    if not (pattern_of(members["func"]) == COLLECTIVE_NEIGHBOR).any():
        return _empty()
    wants = neighbors.Wants.of(neighbors.owned_in_neighbours(calls), members, comm_of_member, seq_of_member)
    rows = wants.rows
    have = {k: np.asarray(v, np.int64) for k, v in wants.have_keys.items()}
    want = {k: np.asarray(v, np.int64) for k, v in wants.want.items()}
    at = releases._join(have, want)                  # per (member, in-neighbour): the neighbour's row
    dst, src = rows[want["row"][at >= 0]], rows[at[at >= 0]]
    keep = (src != dst) & (members["done_call"][dst] >= 0)      # a periodic ring of one: itself
    dst, src = dst[keep], src[keep]
    return _pairs(members["rank"][src], members["call"][src], members["rank"][dst], members["done_call"][dst],
                  member_bytes[src], members["func"][dst], NEIGHBOR)


def epoch_pairs(calls: dict) -> dict:
    """Every late-post (target's post -> origin's epoch) and early-wait (origin's complete ->
    target's wait) pair of the run's post/start/complete/wait epochs (closed ones only)."""
    ep = rma.Epochs(calls)
    if not len(ep):
        return _empty()
    # late post: each origin epoch's named target -> that target's post naming the origin
    post = dict(ep.keys("e"), rank=ep.e_rank[ep.e_epoch], call=ep.e_call[ep.e_epoch])
    epoch, p = _joined(post, dict(ep.keys("a"), row=ep.a_epoch), ep.a_close)
    post_start = rma._times(calls, post["rank"][p], post["call"][p], "start_ns")
    done = rma._first_ended_after(calls, ep.a_rank[epoch], ep.a_call[epoch], ep.a_close[epoch], post_start)
    late = _pairs(post["rank"][p], post["call"][p], ep.a_rank[epoch], done, 0, rma.POST, LATE_POST)
    # early wait: each target epoch's named origin -> that origin's complete
    has_close = ep.a_close[ep.a_epoch] >= 0
    complete = {k: v[has_close] for k, v in ep.keys("a").items()}
    complete.update(rank=ep.a_rank[ep.a_epoch][has_close], call=ep.a_close[ep.a_epoch][has_close])
    epoch, c = _joined(complete, dict(ep.keys("e"), row=ep.e_epoch), ep.e_close)
    complete_start = rma._times(calls, complete["rank"][c], complete["call"][c], "start_ns")
    done = rma._first_ended_after(calls, ep.e_rank[epoch], ep.e_first[epoch], ep.e_close[epoch], complete_start)
    early = _pairs(complete["rank"][c], complete["call"][c], ep.e_rank[epoch], done, 0,
                   mf.BY_NAME["MPI_Win_complete"].id, EARLY_WAIT)
    return {name: np.concatenate([late[name], early[name]]) for name in PAIR_COLUMNS}


def _joined(have, want, close):
    """(epoch, have row) of every want row (an epoch's named peer) whose key has a have row, for
    the epochs that were closed (`close` >= 0)."""
    at = releases._join(_int64(have), _int64(want))
    epoch, h = want["row"][at >= 0], at[at >= 0]
    closed = close[epoch] >= 0
    return epoch[closed], h[closed]


def _int64(columns):
    return {k: np.asarray(v, np.int64) for k, v in columns.items()}
