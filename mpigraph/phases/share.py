"""The critical path's time in each phase.

A path segment is time of one rank (critical_path.csv's rank: for a message, the receiving
rank).  On that rank the phases are a partition of the time line: segment j of the rank's
marks runs from the start of mark j-1 to the start of mark j (phases/regions.py; the first from
minus infinity, the last to plus infinity).  A path segment [s, e) is cut at the marks inside
it, and each piece counts for its interval's phase:

    critical_path[phase] = sum over path segments, over the rank's intervals i of that phase,
                           of |[s, e) intersected with interval i|

so the phases' shares add up to the path's length (the sum of its segments' durations).
Vectorised per rank: searchsorted finds the marks inside each segment, np.repeat makes the
pieces.
"""

import numpy as np

from mpigraph.util import arrays


def pieces(bounds, start, end):
    """The pieces of segments [start, end) cut at the sorted `bounds`: (segment index, interval
    index, piece length), interval i lying between bounds[i-1] and bounds[i] (unbounded at the ends)."""
    edges = np.concatenate([[np.iinfo(np.int64).min], bounds, [np.iinfo(np.int64).max]])
    first = np.searchsorted(bounds, start, side="right")      # interval holding each segment's start
    last = np.maximum(np.searchsorted(bounds, end, side="left"), first)   # interval holding its end
    count = last - first + 1
    segment = np.repeat(np.arange(len(start)), count)
    interval = first[segment] + np.arange(len(segment)) - np.repeat(np.cumsum(count) - count, count)
    lo = np.maximum(start[segment], edges[interval])
    hi = np.minimum(end[segment], edges[interval + 1])
    return segment, interval, np.maximum(hi - lo, 0)


def path_share(intervals, path, run_start, n_phases):
    """Critical path ns per global phase index (length n_phases).  `intervals`: {rank: (mark start
    times in absolute ns, global phase of each of the rank's segments)}; `path`: the critical
    path table (rank, start, end in ns from the run's start at `run_start`)."""
    share = np.zeros(n_phases, np.int64)
    rank = np.asarray(path["rank"], np.int64)
    start = np.asarray(path["start"], np.int64) + run_start
    end = np.asarray(path["end"], np.int64) + run_start
    for r, mine in arrays.groups(rank):       # one sort, not a pass over the path per rank
        if int(r) not in intervals:
            continue
        bounds, segment_phase = intervals[int(r)]
        _, interval, length = pieces(np.asarray(bounds, np.int64), start[mine], end[mine])
        np.add.at(share, segment_phase[interval], length)
    return share


def add_path_share(comm, result, path):
    """Fill the phases table's critical_path column (`result`: the phases stage's, on analysis rank
    0) from the path: `path` is this rank's part of it (None: no path).  Collective: each rank
    adds up its own segments' share, with the intervals of the trace ranks in its part, which
    rank 0 sends it (a part's segments are mostly of the trace ranks the rank owns: each rank's
    intervals go to one rank, not to all)."""
    from mpi4py import MPI

    if not comm.bcast(bool(result) and path is not None if comm.rank == 0 else None, root=0):
        return
    notes = result["notes"] if comm.rank == 0 else None
    run_start, n_keys = comm.bcast((notes["run_start"], notes["n_keys"]) if comm.rank == 0 else None, root=0)
    wanted = comm.gather(np.unique(np.asarray(path["rank"], np.int64)).tolist(), root=0)
    sent = None
    if comm.rank == 0:
        intervals = result["intervals"]
        sent = [{r: intervals[r] for r in ranks if r in intervals} for ranks in wanted]
    share = path_share(comm.scatter(sent, root=0), path, run_start, n_keys)
    comm.Reduce(MPI.IN_PLACE if comm.rank == 0 else share, share, op=MPI.SUM, root=0)
    if comm.rank != 0:
        return
    result["phases"]["critical_path"] = share[notes["phase_of_key"]]
    notes["path_total"] = int(share.sum())      # the whole path's, for a selected phase's share
