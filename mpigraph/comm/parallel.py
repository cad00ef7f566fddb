"""How the analysis ranks share the work.

K analysis ranks analyse the logs of P trace ranks.  Analysis rank a owns a
contiguous block of trace ranks (the first P % K analysis ranks one more than
the others); inside the job K == P and analysis rank r owns trace rank r.
Every step asks the Ownership, never assumes "my rank == trace rank".

``collectively`` keeps a failure on one analysis rank from leaving the others
waiting forever in the next collective: all of them fail together.
"""

import time

import numpy as np


class Ownership:
    """Which analysis rank owns which trace ranks: contiguous blocks."""

    def __init__(self, n_trace_ranks, n_analysis_ranks):
        if n_trace_ranks < 0 or n_analysis_ranks < 1:
            raise ValueError("bad ownership: %d trace ranks over %d analysis ranks"
                             % (n_trace_ranks, n_analysis_ranks))
        self.n_trace_ranks = n_trace_ranks
        self.n_analysis_ranks = n_analysis_ranks
        self._base, self._extra = divmod(n_trace_ranks, n_analysis_ranks)

    def first_of(self, analysis_rank):
        """The first trace rank of analysis rank a's block (the block ends at first_of(a + 1))."""
        return analysis_rank * self._base + min(analysis_rank, self._extra)

    def ranks_of(self, analysis_rank):
        """The trace ranks analysis rank a owns, as a range (empty when K > P and a has none)."""
        return range(self.first_of(analysis_rank), self.first_of(analysis_rank + 1))

    def owner_of(self, trace_ranks):
        """Owning analysis rank of each trace rank (vectorised: an int64 array in, an int64 array out)."""
        trace_ranks = np.asarray(trace_ranks, np.int64)
        wide = self._base + 1                     # block size of the first `extra` analysis ranks
        in_wide = trace_ranks < self._extra * wide
        narrow = self._extra + (trace_ranks - self._extra * wide) // max(self._base, 1)
        return np.where(in_wide, trace_ranks // wide, narrow)

    def __repr__(self):
        return "Ownership(%d trace ranks over %d analysis ranks)" % (self.n_trace_ranks, self.n_analysis_ranks)


class PeerFailed(Exception):
    """Another analysis rank failed; that rank reports its own error, this one only stops."""

    def __init__(self, rank, kind, message):
        super().__init__("analysis rank %d failed: %s: %s" % (rank, kind, message))
        self.rank = rank


def collectively(comm, step, *args):
    """Run step(*args) on every rank of comm; if it raises anywhere, raise everywhere.

    The rank whose step raised re-raises its own exception (traceback intact);
    the others raise PeerFailed naming the first failed rank.  Costs one
    allgather of a small object per call: use it once per stage, not per item.
    """
    try:
        result, failure = step(*args), None
    except Exception as error:   # noqa: BLE001 -- re-raised below, after the others know
        result, failure = None, error
    summary = None if failure is None else (type(failure).__name__, str(failure))
    barrier_idly(comm)
    failures = [(rank, s) for rank, s in enumerate(comm.allgather(summary)) if s is not None]
    if failure is not None:
        raise failure
    if failures:
        rank, (kind, message) = failures[0]
        raise PeerFailed(rank, kind, message)
    return result


IDLE_PAUSE_S = 0.0005
# How long a wait polls before it starts to sleep: a collective whose ranks are all there ends
# within it (tens of microseconds), so only a wait for a rank still at work pays a pause.
IDLE_SPIN_S = 0.001


def wait_idly(request):
    """Wait for the MPI `request`: polling for IDLE_SPIN_S, then sleeping between tests.

    An MPI wait polls without pause: on a node with more ranks than cores the ranks that wait
    take CPU from those at work (analysis rank 0 writing the report while the others wait for
    it), and the whole analysis waits for the busiest rank.  A pause adds at most IDLE_PAUSE_S
    to a wait longer than IDLE_SPIN_S."""
    spin_until = time.perf_counter() + IDLE_SPIN_S
    while not request.Test():
        if time.perf_counter() >= spin_until:
            time.sleep(IDLE_PAUSE_S)


def barrier_idly(comm):
    """A barrier where the ranks done first wait for the others without spinning (``wait_idly``):
    before a collective that follows one rank's work alone."""
    wait_idly(comm.Ibarrier())
