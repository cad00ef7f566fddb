"""Threshold: calls separated by less compute than the threshold merge into one block.

Seed 004's `threshold`: "computations of smaller sizes are not considered
individually".  A block of calls becomes one call of the graph: it starts
where its first call starts, ends where its last call ends, and is named
after its longest call.  MPI_Init and MPI_Finalize never merge: they anchor
the path's start and end.
"""

import numpy as np

from mpigraph.metrics import profile as metrics


def merge_calls(start_ns, end_ns, func, threshold_ns):
    """(start, end, func of the blocks, block index of every call) of one rank's calls."""
    start_ns, end_ns, func = (np.asarray(a, np.int64) for a in (start_ns, end_ns, func))
    n = len(start_ns)
    if threshold_ns <= 0 or n < 2:
        return start_ns, end_ns, func, np.arange(n, dtype=np.int64)
    anchor = metrics.IS_INIT[func] | metrics.IS_FINALIZE[func]
    apart = (start_ns[1:] - end_ns[:-1] >= threshold_ns) | anchor[:-1] | anchor[1:]
    block_of = np.concatenate(([0], np.cumsum(apart))).astype(np.int64)
    first = np.flatnonzero(np.concatenate(([True], apart)))
    # Longest call of each block (the earliest of equals): sorted by block, then by -duration.
    by_length = np.lexsort((-(end_ns - start_ns), block_of))
    longest = by_length[first]
    return start_ns[first], np.maximum.reduceat(end_ns, first), func[longest], block_of
