"""The call sites of the critical path: which call site each of its segments is time in.

Each analysis rank holds a part of the path (critical_path table rows, mostly of the trace ranks
it owns); the calls and their sites are on the analysis rank owning each trace rank.  Every
rank sends the owners its segments of kind mpi and message (rank, start, end), each answers for
the trace ranks it owns, and the answers go back.  A segment's call:

- mpi: the longest call of its rank overlapping it (start < segment end, end > segment start;
  a zero-length segment: the call holding its time).  A block of calls merged by
  MPIGRAPH_THRESHOLD is named after its longest call (paths/threshold.py): the same call.
- message: the call on its rank holding the segment's end (the call the message released; the
  call ending there on a tie), as the calls table's on_path marks it (run_tables.mark_on_path).

Compute segments, and segments whose call was not found, have call site 0.
"""

import numpy as np

from mpigraph.comm import owner_exchange as exchange, parallel
from mpigraph.metrics import run_tables
from mpigraph.util import arrays
from mpigraph.util.names import Labels

KINDS = ("mpi", "message")


def segment_sites(comm, path, linked, sites, n_trace_ranks):
    """The call-site id of each segment of this rank's part of the path (int64, 0: compute or
    unknown); None everywhere when there is no path.  Collective; the local steps go through
    ``parallel.collectively`` (an error on one rank stops all of them), the exchanges between
    them do not fail.

    path: this rank's part of the critical_path table (None on every rank without a path);
    linked: this analysis rank's ``Linked`` (its calls, those of its ``Ownership`` block of the
    n_trace_ranks); sites: a callsites.stats.Sites (the run's ids)."""
    if path is None:
        return None
    asked = parallel.collectively(comm, asked_segments, path)
    if comm.size == 1:
        found = parallel.collectively(comm, owned_sites, asked, linked, sites)
    else:
        found = _answers_of_owners(comm, asked, linked, sites, n_trace_ranks)
    out = np.zeros(len(path["kind"]), np.int64)
    out[asked["index"]] = found
    return out


def _answers_of_owners(comm, asked, linked, sites, n_trace_ranks):
    """The call-site ids of this rank's `asked` segments, in their order: each segment asked of
    the analysis rank owning its trace rank.  Each rank gets only the segments of its own trace
    ranks: a pipelined program's path has millions, over every rank."""
    owner = parallel.Ownership(n_trace_ranks, comm.size).owner_of(asked["rank"])

    def answer(query):
        rank, message, start, end = query
        mine = {"rank": rank, "message": message.astype(bool), "start": start, "end": end}
        return [parallel.collectively(comm, owned_sites, mine, linked, sites)]

    (found,) = exchange.ask_owners(comm, owner, [asked["rank"], asked["message"].astype(np.int8), asked["start"],
                                                 asked["end"]], answer)
    return found


def asked_segments(path):
    """The segments whose call is asked for (kind mpi or message): their index, rank, kind
    (message or not), start and end."""
    kind = path["kind"]
    message = np.asarray(kind == "message", bool)
    which = np.flatnonzero(np.asarray(kind == "mpi", bool) | message)
    return {"index": which, "rank": np.asarray(path["rank"], np.int64)[which], "message": message[which],
            "start": np.asarray(path["start"], np.int64)[which], "end": np.asarray(path["end"], np.int64)[which]}


def owned_sites(asked, linked, sites):
    """The call-site ids of the asked segments of the trace ranks this analysis rank owns, 0 for
    the others'."""
    found = np.zeros(len(asked["rank"]), np.int64)
    # Grouped by one sort of the segments' ranks, not a pass over every segment per owned rank (a
    # pipelined program's path has a segment per call, over thousands of ranks).
    for rank, mine in arrays.groups(asked["rank"]):
        if int(rank) in linked.calls:
            found[mine] = _rank_sites(linked.calls[int(rank)], sites, int(rank), {k: v[mine] for k, v in asked.items()})
    return found


def _rank_sites(calls, sites, rank, asked):
    """The run's call-site ids of one trace rank's `asked` segments (0 where no call holds one)."""
    starts, ends = np.asarray(calls.start_ns, np.int64), np.asarray(calls.end_ns, np.int64)
    order = None
    if (np.diff(ends) < 0).any():        # threads overlapped the rank's calls: ordered by end
        order = np.argsort(ends, kind="stable")
        starts, ends = starts[order], ends[order]
    # Each kind's rule on its own segments only (a pipelined program's path: a million of each).
    message = np.asarray(asked["message"], bool)
    mpi = ~message
    call = np.empty(len(message), np.int64)
    call[message] = _holding(starts, ends, asked["end"][message])
    call[mpi] = _longest_overlapping(starts, ends, asked["start"][mpi], asked["end"][mpi])
    found = call >= 0
    # Only the calls found are looked up (a rank has few segments of a bulk-synchronous path).
    index = call[found] if order is None else order[call[found]]
    ids = np.zeros(len(call), np.int64)
    ids[found] = sites.run_ids(rank, calls.records["site"][run_tables._call_records(calls, slice(None))][index])
    return ids


def _holding(starts, ends, t):
    """Index of the first call ending at or after t, when it started by t; -1 otherwise."""
    first = np.searchsorted(ends, t, "left")
    holds = first < len(starts)
    holds[holds] = starts[first[holds]] <= t[holds]
    return np.where(holds, first, -1)


def _longest_overlapping(starts, ends, lo, hi):
    """Index of the longest call overlapping [lo, hi] (the first among equals), else the call
    holding hi, else -1.  The calls' ranges per segment are flattened into one array and sorted
    by (segment, -duration): the first of each segment is its longest."""
    first = np.searchsorted(ends, lo, "right")
    last = np.searchsorted(starts, hi, "left")
    count = np.maximum(last - first, 0)
    out = _holding(starts, ends, hi)
    # Most segments overlap one call (a pipelined program's path is a call per segment): that call
    # is the longest; only the segments overlapping several are ranked.
    one = count == 1
    out[one] = first[one]
    several = np.flatnonzero(count > 1)
    if not len(several):
        return out
    first, count = first[several], count[several]
    segment = np.repeat(several, count)
    offsets = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    call = np.repeat(first, count) + offsets
    order = np.lexsort((call, -(ends[call] - starts[call]), segment))
    segment, call = segment[order], call[order]
    head = np.r_[True, segment[1:] != segment[:-1]]
    out[segment[head]] = call[head]
    return out


def summary_line(comm, path, total, top=5):
    """On analysis rank 0: "  call sites on the path: MPI_Allreduce at solver.c:212 46.2%, ..."
    from every rank's part of the critical_path table with its callsite and callsite_name columns:
    the share of the path's time `total` (its length, known on rank 0) in each call site's calls
    (its mpi and message segments); None when no segment has a known site, and on the other
    ranks.  Collective."""
    times = comm.gather(site_times(path), root=0) if comm.size > 1 else [site_times(path)]
    if comm.rank != 0:
        return None
    summed = {}
    for part in times:
        for name, ns in part.items():
            summed[name] = summed.get(name, 0) + ns
    if total <= 0 or not summed:
        return None
    names = sorted(summed, key=lambda name: (-summed[name], name))[:top]
    return "  call sites on the path: " + ", ".join("%s %.1f%%" % (name, 100.0 * summed[name] / total)
                                                    for name in names)


def site_times(path):
    """{call-site name: ns of the path's segments in its calls} of a critical_path table (or a
    part of one), over its segments with a known site."""
    duration = np.asarray(path["duration"], np.int64)
    known = np.asarray(path["callsite"]) > 0
    if not known.any():
        return {}
    name = path["callsite_name"]
    if isinstance(name, Labels):
        # Summed by code, then by name: a pipelined program's path has millions of segments and
        # a few names, and a string per segment would cost more than the rest of this.
        names, of_code = np.unique(np.asarray(name.names, object).astype(str), return_inverse=True)
        at = of_code.reshape(-1)[np.asarray(name.codes)[known]]
    else:
        names, at = np.unique(np.asarray(name, object)[known].astype(str), return_inverse=True)
    at = at.reshape(-1)
    time = np.bincount(at, duration[known], len(names))
    used = np.bincount(at, minlength=len(names)) > 0
    return {str(n): int(t) for n, t, u in zip(names.tolist(), time.tolist(), used.tolist()) if u}


def with_sites(path, site_ids, sites):
    """The critical_path table with its callsite and callsite_name columns (the segment's
    function at its site; empty for site 0), the names made once per (site, function) pair."""
    function = path["function"]
    if isinstance(function, Labels):
        codes, names = np.asarray(function.codes, np.int64), np.asarray(function.names, object)
    else:
        names, codes = np.unique(np.asarray(function, object).astype(str), return_inverse=True)
    # Few sites times few functions: numbered by a table over their span, not a sort of the path.
    pair, row = arrays.unique_codes(np.asarray(site_ids, np.int64) * len(names) + codes.reshape(-1))
    site, func = pair // max(len(names), 1), pair % max(len(names), 1)
    pair_names = np.where(site > 0, sites.names(site, names[func] if len(names) else []), "")
    out = dict(path)
    out["callsite"] = np.asarray(site_ids, np.int64)
    out["callsite_name"] = Labels(row.reshape(-1), np.asarray(pair_names, object))
    return out
