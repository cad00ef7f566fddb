"""Critical path by topological sorting (seed 004, section 4.5): no graph at all.

The compute intervals of all ranks (the program's own work between two
consecutive MPI calls of a rank: end of call k -> start of call k+1) are put
in order of their start and cut into *groups* of overlapping intervals.  In
a bulk-synchronous program every phase is one group: all ranks compute at
the same time, then meet in MPI.  The longest interval of each group is the
work that held the phase up, so the critical path is those intervals joined
by the MPI time between them.

Groups.  With the intervals sorted by start, interval i opens a new group
when it starts strictly after the interval before it and no earlier-starting
interval is still running (start_i >= the furthest end of all intervals that
start before it).  Intervals with equal starts always share a group, so the
groups do not depend on how ties are ordered: the sequential and the parallel
algorithm see ties in different orders and must still agree.  The best
interval of a group is the longest; ties go to the earliest start, then the
lowest rank, then the lowest call index (a total order, again so the answer
never depends on the order rows arrive in).

Sequential ("toposort"): gather all intervals on analysis rank 0 (with the
shuffle module's codec), sort, group, pick.

Parallel ("parallel-toposort"): shuffle_by_key on the start time, so every
analysis rank holds an equal count of a contiguous time range; then two
small scans over the ranks join the groups that cross range boundaries:

1. (furthest end, last start) of all earlier ranks: with it, each rank finds
   exactly where its groups begin (a long interval on rank a-1 can swallow
   many of rank a's intervals into its group);
2. the open group's best interval so far, a segmented scan (a rank where a
   group begins resets it): the rank where a group ends merges it with its
   own part of the group and emits it.

Every group is emitted by exactly one rank, the chosen intervals go to rank 0
(in rank order, which is time order) and become the path there.  The result
equals the sequential one exactly; tests/test_toposort.py checks that.

Not bulk-synchronous.  The groups stand for phases only when no rank
depends on another within one: a point-to-point message whose receive
completes strictly inside a group's span (first start to furthest end of its
intervals) means a rank got work from another while the phase's compute was
still running (a pipeline, a halo that lets neighbours run ahead, a late
sender within a phase); the path then runs through several intervals of one
group, which toposort cannot see.  ``path_stage`` counts such messages (given
the receive ends of the late-sender dependencies) and, where there are any,
says so and leaves the path to a graph algorithm (analysis.path_stage).

Threshold: compute intervals shorter than config.threshold are not work of
their own (the calls around them merge into one MPI block): they are dropped
before sorting.

The path (critical_path.segments): from the run's start (the earliest end of
MPI_Init) an mpi segment to the first chosen interval, then alternately a
compute segment (the chosen interval) and an mpi segment (the MPI call that
ended the wait on the next chosen interval's rank, from the end of the
previous chosen interval to the start of the next), and a last mpi segment
to the run's end (the last MPI_Finalize).  Empty mpi segments are left out.
"""

import time

import numpy as np

from mpigraph.util import arrays
from mpigraph.paths import algorithms
from mpigraph.paths import segments as critical_path
from mpigraph.metrics import profile as metrics
from mpigraph.trace import functions as mpi_functions
from mpigraph.trace import record
from mpigraph.comm import shuffle
from mpigraph.comm.codec import Codec
from mpigraph.paths.segments import PathResult
from mpigraph.util.names import Labels
from mpigraph.comm.parallel import barrier_idly

ALGORITHMS = algorithms.TOPOSORT_ALGORITHMS

# Phase marks (MPI_Pcontrol, the phase API's begin/end) wait for no one and take no time: the
# compute around one is one interval, else a mark inside a rank's work would cut it in pieces
# shorter than another rank's and the group would pick the wrong work.
_MARK = np.zeros(1 << 16, bool)
_MARK[[f.id for f in mpi_functions.FUNCTIONS if f.kind in (mpi_functions.PHASE, mpi_functions.REGION)]] = True

# The columns of an interval, as shuffled (every rank must use these dtypes).
INTERVAL_DTYPES = {
    "start": np.int64,   # ns: end of the call before
    "end": np.int64,     # ns: start of the call after
    "rank": np.int32,    # trace rank
    "call": np.int64,    # index of the call before, among the rank's calls
    "before": np.uint16,  # function id of the call before
    "after": np.uint16,   # function id of the call after
}
# Hints for the codec: an end is best sent as its distance to the start (the
# interval's duration).  The other columns are left to the codec's trials.
CODEC_HINTS = {"end": "ref:start"}

_MIN = np.iinfo(np.int64).min
_NAMES = mpi_functions.names_array()



# ---------------------------------------------------------------------------
# Intervals.

def empty_intervals():
    return {name: np.zeros(0, dtype) for name, dtype in INTERVAL_DTYPES.items()}


def rank_intervals(log, start_ns, end_ns, threshold_ns=0, span=None):
    """The compute intervals of one rank log, inside its program span (`span`: its
    metrics.program_span, found when not given), at least threshold_ns long.

    Part records are not calls and are skipped, and so are phase marks (_MARK).  Intervals before the end of
    MPI_Init or after the start of MPI_Finalize are outside the program (the
    run's time axis starts and ends there), and negative ones (overlapping
    calls of a threaded program) are not work.
    """
    calls = np.flatnonzero((log.records["flags"] & record.PART) == 0)
    position = np.flatnonzero(~_MARK[log.records["func"][calls]])     # the calls that are not phase marks
    calls = calls[position]
    if len(calls) < 2:
        return empty_intervals()
    first, last = metrics.program_span(log, start_ns, end_ns) if span is None else span
    start, end = end_ns[calls[:-1]], start_ns[calls[1:]]
    keep = (start >= first) & (end <= last) & (end - start >= max(threshold_ns, 0))
    func = log.records["func"][calls]
    return {
        "start": start[keep].astype(np.int64),
        "end": end[keep].astype(np.int64),
        "rank": np.full(int(keep.sum()), log.rank, np.int32),
        "call": position[:-1][keep].astype(np.int64),
        "before": func[:-1][keep].astype(np.uint16),
        "after": func[1:][keep].astype(np.uint16),
    }


def local_intervals(logs, times, threshold_ns=0):
    """The intervals of all owned logs, concatenated (a loop per rank, not per interval)."""
    spans = metrics.owned_program_spans(logs, times)
    parts = [rank_intervals(log, *times[rank], threshold_ns, spans[rank]) for rank, log in logs.items()]
    return shuffle.concat_batches(parts, like=empty_intervals())


def run_span(comm, logs, times):
    """(start, end) ns of the run on every rank: earliest end of MPI_Init, latest start of MPI_Finalize.

    The same definition as the rank table's program_start/program_end, so the
    path's times line up with ranks.csv.
    """
    spans = [span for rank, span in metrics.owned_program_spans(logs, times).items() if logs[rank].n_records]
    first = min((s for s, _ in spans), default=np.iinfo(np.int64).max)
    last = max((e for _, e in spans), default=_MIN)
    first, last = comm.allreduce(first, op=_op("MIN")), comm.allreduce(last, op=_op("MAX"))
    return (0, 0) if first > last else (first, last)


def _op(name):
    from mpi4py import MPI

    return getattr(MPI, name)


def sort_intervals(columns):
    """The intervals in order of start.  How equal starts are ordered does not matter (the
    groups and the best interval do not depend on it), so one stable sort on one key does;
    on the concatenated sorted runs of a gather it is a cheap merge."""
    order = np.argsort(columns["start"], kind="stable")
    return {name: c[order] for name, c in columns.items()}


# ---------------------------------------------------------------------------
# Groups and their best interval.

def group_starts(start, end, carry_end=_MIN, carry_start=_MIN):
    """True where an interval opens a new group (intervals sorted by start).

    carry_end / carry_start: the furthest end and the last start of all
    intervals before these (on earlier ranks); _MIN when there are none.
    """
    if not len(start):
        return np.zeros(0, bool)
    reach = np.maximum.accumulate(np.concatenate(([carry_end], end[:-1])))  # furthest end before i
    previous = np.concatenate(([carry_start], start[:-1]))
    return (start > previous) & (start >= reach)


def best_per_group(columns, group):
    """Index of the best interval of each group (group ids 0..G-1, contiguous and increasing):
    longest, then earliest start, lowest rank, lowest call.

    The longest is found with one reduceat; only the intervals as long as their group's
    longest (ties are rare) are sorted to break ties.
    """
    if not len(group):
        return np.zeros(0, np.int64)
    duration = columns["end"] - columns["start"]
    first, sizes = arrays.runs(group)
    longest = np.maximum.reduceat(duration, first)
    candidates = np.flatnonzero(duration == np.repeat(longest, sizes))
    keys = [columns[name][candidates] for name in ("call", "rank", "start")] + [group[candidates]]
    order = np.lexsort(keys)
    candidates = candidates[order]
    grouped = group[candidates]
    return candidates[np.concatenate(([True], grouped[1:] != grouped[:-1]))]


def _take(columns, index):
    return {name: c[index] for name, c in columns.items()}


def choose(columns):
    """Sequential core: the best interval of every group of sorted intervals, in time order."""
    group = np.cumsum(group_starts(columns["start"], columns["end"])) - 1
    return _take(columns, best_per_group(columns, group))


# ---------------------------------------------------------------------------
# The scans that join groups across the ranks' time ranges.

# A best interval travels between ranks as one int64 row of these fields.
_ROW = ("start", "end", "rank", "call", "before", "after")


def _row(columns, i):
    return np.array([columns[name][i] for name in _ROW], np.int64)


def _better(a, b):
    """The better of two rows (None = no interval): the same order as best_per_group."""
    if a is None or b is None:
        return b if a is None else a
    key = lambda r: (-(r[1] - r[0]), r[0], r[2], r[3])  # noqa: E731 -- longest, earliest, lowest rank, call
    return a if key(a) <= key(b) else b


def _carry_in(comm, columns):
    """Scan 1: (furthest end, last start) of the intervals on the ranks before this one."""
    n = len(columns["start"])
    mine = np.array([columns["end"].max() if n else _MIN, columns["start"][-1] if n else _MIN], np.int64)
    everyone = np.empty((comm.Get_size(), 2), np.int64)
    comm.Allgather(mine, everyone)
    before = everyone[:comm.Get_rank()]
    # Sorted ranges: the last start of the ranks before is their largest.
    return (int(before[:, 0].max()), int(before[:, 1].max())) if len(before) else (_MIN, _MIN)


def _open_groups(comm, n_rows, continues, n_started, first_best, last_best):
    """Scan 2 (segmented): the best interval of the group open at this rank's left edge (None if
    no group is open), and whether this rank's last group goes on into a later rank."""
    size, rank = comm.Get_size(), comm.Get_rank()
    absent = np.full(len(_ROW), _MIN, np.int64)
    mine = np.concatenate(([n_rows, continues, n_started],
                           first_best if first_best is not None else absent,
                           last_best if last_best is not None else absent)).astype(np.int64)
    everyone = np.empty((size, len(mine)), np.int64)
    comm.Allgather(mine, everyone)
    width = len(_ROW)
    open_best = None
    for b in range(rank):             # a loop over ranks, not over intervals
        n, _, started = everyone[b, :3]
        if not n:
            continue
        if started:                   # a group began on rank b: its last group is the open one
            open_best = everyone[b, 3 + width:]
        else:                         # rank b lies wholly inside the open group
            open_best = _better(open_best, everyone[b, 3:3 + width])
    later = everyone[rank + 1:]
    later = later[later[:, 0] > 0]
    goes_on = bool(len(later) and later[0, 1])
    return open_best, goes_on


def choose_parallel(comm, columns):
    """The groups whose last interval lies on this rank, with their best interval (sorted input:
    this rank's contiguous time range).  Concatenated in rank order they equal choose() of all
    intervals."""
    carry_end, carry_start = _carry_in(comm, columns)
    new = group_starts(columns["start"], columns["end"], carry_end, carry_start)
    n = len(new)
    continues = n > 0 and not new[0]            # the first group began on an earlier rank
    group = np.cumsum(new) - (0 if continues else 1)   # group 0: the continued one, if any
    best = best_per_group(columns, group)
    first_best = _row(columns, best[0]) if n else None
    last_best = _row(columns, best[-1]) if n else None
    open_best, goes_on = _open_groups(comm, n, continues, int(new.sum()), first_best, last_best)
    chosen = _take(columns, best)
    if continues:                                # merge the group's part from earlier ranks
        merged = _better(open_best, first_best)
        for i, name in enumerate(_ROW):
            chosen[name][0] = merged[i]
    if goes_on and n:                            # a later rank finishes (and emits) the last group
        chosen = _take(chosen, slice(0, len(best) - 1))
    return chosen


# ---------------------------------------------------------------------------
# The path.

def path_from_chosen(chosen, run_start, run_end):
    """critical_path.segments of the chosen intervals (in time order), times from run_start."""
    g = len(chosen["start"])
    if not g:
        return critical_path.segments([], [], [], [], [])
    # 2g+1 slots: mpi, compute, mpi, compute, ..., mpi.
    starts = np.empty(2 * g + 1, np.int64)
    ends = np.empty(2 * g + 1, np.int64)
    ranks = np.empty(2 * g + 1, np.int64)
    funcs = np.empty(2 * g + 1, np.int64)
    starts[1::2], ends[1::2] = chosen["start"], chosen["end"]
    starts[0::2] = np.concatenate(([run_start], chosen["end"]))
    ends[0::2] = np.concatenate((chosen["start"], [run_end]))
    ranks[1::2] = chosen["rank"]
    # An mpi segment is the call that ended the wait: the call before the next chosen
    # interval, on its rank; the last one is the call after the last chosen interval.
    ranks[0::2] = np.concatenate((chosen["rank"], chosen["rank"][-1:]))
    funcs[0::2] = np.concatenate((chosen["before"], chosen["after"][-1:]))
    funcs[1::2] = 0
    # kind and function as codes into their names (names.Labels): a segment per call on a pipeline.
    compute = np.zeros(2 * g + 1, bool)
    compute[1::2] = True
    code = critical_path.KIND_CODE
    kind = np.where(compute, code["compute"], code["mpi"]).astype(np.int8)
    function = np.where(compute, len(_NAMES), funcs)          # _NAMES + [""]: compute has no function
    keep = compute | (ends > starts)
    return critical_path.segments(ranks[keep], Labels(kind[keep], critical_path.KINDS),
                                  Labels(function[keep], np.append(_NAMES, "")),
                                  starts[keep] - run_start, ends[keep] - run_start)


# ---------------------------------------------------------------------------
# The stage.

def codec_of(config):
    return Codec(config.compress or None, hints=CODEC_HINTS)


def group_spans(columns, carry_end=_MIN, carry_start=_MIN):
    """(continues, start, end): the span of every group of sorted intervals, from its first start
    to its furthest end.  With a carry (intervals on earlier ranks) the first span may belong to
    a group begun there (`continues`; its start is then this part's first start)."""
    new = group_starts(columns["start"], columns["end"], carry_end, carry_start)
    if not len(new):
        return False, np.zeros(0, np.int64), np.zeros(0, np.int64)
    continues = not new[0]
    first = np.flatnonzero(np.r_[True, new[1:]])
    return bool(continues), columns["start"][first], np.maximum.reduceat(columns["end"], first)


def merge_spans(parts):
    """The spans of all groups from each rank's (continues, start, end), in rank order."""
    starts, ends = [], []
    for continues, start, end in parts:             # a loop over ranks
        if not len(start):
            continue
        if continues and ends:                      # the open group goes on here
            ends[-1] = np.r_[ends[-1][:-1], max(ends[-1][-1], end[0])]
            start, end = start[1:], end[1:]
        if len(start):                              # (a rank inside one group adds none)
            starts.append(start)
            ends.append(end)
    join = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)  # noqa: E731
    return join(starts), join(ends)


def critical_path_of(comm, intervals, algorithm, codec):
    """(chosen intervals on rank 0, ShuffleStats of this rank, (start, end) of every group on
    rank 0) for `algorithm`.

    `intervals` is let go once shuffled: the caller should hold no other reference to it."""
    if algorithm == "toposort":
        everything, stats = shuffle.gather(comm, intervals, root=0, codec=codec)
        del intervals
        chosen, spans = empty_intervals(), None
        if comm.Get_rank() == 0:
            rows = sort_intervals(everything)
            chosen, spans = choose(rows), merge_spans([group_spans(rows)])
        barrier_idly(comm)     # the other ranks wait for rank 0's choice
    elif algorithm == "parallel-toposort":
        mine, stats = shuffle.shuffle_by_key(comm, intervals, "start", codec=codec)
        del intervals
        chosen = choose_parallel(comm, mine)          # shuffle_by_key delivers them sorted by start
        chosen, _ = shuffle.gather(comm, chosen, root=0, codec=codec)   # a few rows per group
        parts = comm.gather(group_spans(mine, *_carry_in(comm, mine)), root=0)   # a few per group
        spans = merge_spans(parts) if comm.Get_rank() == 0 else None
    else:
        raise ValueError("not a topological-sort algorithm: %r (known: %s)" % (algorithm, ", ".join(ALGORITHMS)))
    return chosen, stats, spans


def inside_groups(comm, spans, receive_ends):
    """How many of the receive ends (of every analysis rank) fall strictly inside a group's span;
    `spans` (start, end) sorted by start, on rank 0.  Collective."""
    start, end = comm.bcast(spans, root=0)
    ends = np.asarray(receive_ends, np.int64)
    i = np.searchsorted(start, ends, side="left") - 1          # the last group starting before
    inside = (i >= 0) & (ends < end[np.maximum(i, 0)]) if len(start) else np.zeros(len(ends), bool)
    return comm.allreduce(int(inside.sum())), comm.allreduce(len(ends))


def not_bulk_synchronous(inside, messages, algorithm):
    """The warning when `inside` of `messages` point-to-point messages complete inside a group."""
    return ("%s: the run is not bulk-synchronous (%d of %d point-to-point messages complete while other "
            "ranks still compute in the same phase): the longest compute per phase is not its path"
            % (algorithm, inside, messages))


def path_stage(comm, config, logs, times, receive_ends=None):
    """Stage path for toposort / parallel-toposort: a PathResult (the table on rank 0, its lines
    after the path's summary there: ``stage.finished`` adds that).

    With `receive_ends` (the receive completion ends of this analysis rank's late-sender
    messages) it first checks the run is bulk-synchronous; where it is not, the result's table
    is None and its lines hold the warning (``not_bulk_synchronous``), on every rank: the
    caller takes a graph algorithm instead."""
    t = time.perf_counter()
    threshold_ns = int(round(config.threshold * 1e9))
    run_start, run_end = run_span(comm, logs, times)
    chosen, stats, spans = critical_path_of(comm, local_intervals(logs, times, threshold_ns), config.algorithm,
                                            codec_of(config))
    if receive_ends is not None:
        inside, messages = inside_groups(comm, spans, receive_ends)
        if inside:
            return PathResult(None, [not_bulk_synchronous(inside, messages, config.algorithm)])
    summary = shuffle.summarize(comm, stats)
    n_intervals = comm.allreduce(stats.rows_before)
    seconds = comm.allreduce(time.perf_counter() - t, op=_op("MAX"))
    if comm.Get_rank() != 0:
        return PathResult(None, [])
    table = path_from_chosen(chosen, run_start, run_end)
    lines = ["  found by %s over %d analysis rank%s in %.3f s: %d compute intervals%s, %d groups of "
             "overlapping intervals" % (config.algorithm, comm.Get_size(), "" if comm.Get_size() == 1 else "s",
                                        seconds, n_intervals, " of at least %g s" % config.threshold
                                        if threshold_ns else "", len(chosen["start"]))]
    what = "gathered on rank 0" if config.algorithm == "toposort" else "shuffled by start time"
    compress = "zstd level %d" % config.compress if config.compress else "off"
    lines.append("  intervals %s (compression %s): " % (what, compress) + summary.format().replace("\n", "\n  "))
    return PathResult(table, lines)
