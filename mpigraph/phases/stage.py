"""Per-phase tables: the run's calls split at the phase marks (MPI_Pcontrol and named regions).

A phase is a key (phase, level, name) (phases/regions.py): the Pcontrol phase number and level,
and the named regions open around the calls ("" outside any).  Phase 0 is every call before a
rank's first MPI_Pcontrol; the k-th MPI_Pcontrol call of a rank starts its phase k (and belongs
to it), whatever its level: phases are numbered per rank and added up across ranks by key, so an
SPMD program that marks the same places on every rank gets one phase per region between them.
Recording never stops at level 0: the matching and the critical path need every call.

Every record belongs to exactly one phase (the innermost region: a nested region's calls are
its own, not its parent's), so the phases' per-function sums are metrics.profile.function_partials
of their records and add up to functions.csv's (calls, time_total, waits, execution, bytes)
exactly.  Each phase also gets the ranks' time in it (``time``: per rank, from the mark that
starts a segment to the next mark, clipped to the rank's program span, summed over ranks: the
phases' times add up to ranks.csv's program_time) and, once the path is known, the critical
path's time in it (phases/share.py).
"""

import numpy as np

from mpigraph import schema
from mpigraph.metrics import profile
from mpigraph.phases import regions
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.traffic.matrix import int_sums

PCONTROL = regions.PCONTROL
SUMMED = ("calls", "time_total", "wait_before", "wait_after", "execution", "bytes_sent", "bytes_received",
          "bytes_collective")


class PhaseError(ValueError):
    """--phase names a phase the run does not have (the message lists those it has)."""


class _Records:
    """Records `rows` (a slice or indices) of a log, with the ``records`` and ``column`` that function_partials
    reads."""

    def __init__(self, log, rows):
        self.records = log.records[rows]
        self._log, self._rows = log, rows

    def column(self, name):
        return self._log.column(name)[self._rows]


def _ranges(a, b):
    """The indices a[0]..b[0]-1, a[1]..b[1]-1, ... in one array (no Python loop)."""
    lengths = b - a
    return np.repeat(a - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))


def _key_rows(seg_start, seg_end, seg_calls, segments):
    """Records and calls of the segments `segments` (ascending): a slice each when there is one
    segment (a view: the common case, a Pcontrol phase), else index arrays."""
    if len(segments) == 1:
        s = int(segments[0])
        return slice(seg_start[s], seg_end[s]), slice(seg_calls[s], seg_calls[s + 1])
    return (_ranges(seg_start[segments], seg_end[segments]),
            _ranges(seg_calls[segments], seg_calls[segments + 1]))


def rank_phases(log, start_ns, end_ns, waits):
    """One rank's phases: {"keys": its distinct phase keys, "rows": sparse rows (key, func, SUMMED...)
    indexing them, "time": its time per key, "bounds"/"segment_key": its segments' start times and
    key indices (for the path's share), counts of unmatched ends and unclosed regions}.

    Segment j is records [start_j, end_j) (the marks start their segments); its calls are the calls
    numbered [calls_j, calls_j+1) among the rank's calls (the waits are per call).  No array per
    record is made beyond the is-a-call mask: a phase's records are read through a slice, or the
    indices of its own segments."""
    seg = regions.rank_segments(log)
    keys = sorted(set(seg["keys"]))
    index = {k: i for i, k in enumerate(keys)}
    key_of_segment = np.array([index[k] for k in seg["keys"]], np.int64)
    at = seg["marks"]
    seg_start = np.concatenate([[0], at]).astype(np.int64)
    seg_end = np.concatenate([at, [log.n_records]]).astype(np.int64)
    is_call = (log.column("flags") & record.PART) == 0
    # A loop per segment, each a count over its records.
    calls_in = np.array([np.count_nonzero(is_call[a:b]) for a, b in zip(seg_start.tolist(), seg_end.tolist())],
                        np.int64)
    seg_calls = np.concatenate([[0], np.cumsum(calls_in)])
    rows = []
    for k in range(len(keys)):
        mine, calls = _key_rows(seg_start, seg_end, seg_calls, np.flatnonzero(key_of_segment == k))
        part = profile.function_partials(_Records(log, mine), start_ns[mine], end_ns[mine],
                                         {n: v[calls] for n, v in waits.items()} if waits is not None else None)
        funcs = np.flatnonzero(part["calls"])
        rows.append({"key": np.full(len(funcs), k), "func": funcs, **{n: part[n][funcs] for n in SUMMED}})
    first, last = profile.program_span(log, start_ns, end_ns)
    bounds = start_ns[at].astype(np.int64)
    starts = np.clip(np.concatenate([[first], bounds]), first, last)
    ends = np.clip(np.concatenate([bounds, [last]]), first, last)
    return {"keys": keys, "rows": _concat(rows), "time": int_sums(key_of_segment, ends - starts, len(keys)),
            "bounds": bounds, "segment_key": key_of_segment, "program_start": first,
            "unmatched_ends": seg["unmatched_ends"], "unclosed": seg["unclosed"]}


def _concat(rows):
    names = ("key", "func") + SUMMED
    return {n: np.concatenate([np.asarray(r[n], np.int64) for r in rows]) if rows else np.zeros(0, np.int64)
            for n in names}


def phases(comm, logs, times, linked, select=None):
    """{"phases", "phase_functions": tables (schema columns), "intervals", "notes"} on analysis rank 0
    when some rank marked a phase (MPI_Pcontrol or the phase API), else None (and None on the other
    ranks).  `select` (--phase NAME) keeps the rows of that phase only (``matching``).  Collective
    over comm."""
    has = any(regions.marked(log) for log in logs.values())
    if not comm.allreduce(has):
        if select is not None and comm.rank == 0:
            raise PhaseError("--phase %s: the run has no phases (no rank called MPI_Pcontrol or "
                             "mpigraph_phase_begin)" % select)
        return None
    local = {rank: rank_phases(log, times[rank][0], times[rank][1], linked.waits[rank])
             for rank, log in logs.items()}
    linked.waits.before_path()     # asking for a rank's waits unpacked them
    gathered = comm.gather(local, root=0)
    if comm.rank != 0:
        return None
    per_rank = {rank: p for part in gathered for rank, p in part.items()}
    result = tables(per_rank)
    return matching(result, select) if select is not None else result


def tables(per_rank):
    """The phase_functions table (a row per phase and function), the phases table (a row per
    phase), and each rank's segments as global phase indices (for the path's share)."""
    keys = sorted(set(k for p in per_rank.values() for k in p["keys"]))
    index = {k: i for i, k in enumerate(keys)}
    global_of = {rank: np.array([index[k] for k in p["keys"]], np.int64) for rank, p in per_rank.items()}
    rows = {n: np.concatenate([p["rows"][n] for p in per_rank.values()]) for n in ("func",) + SUMMED}
    rows["key"] = np.concatenate([global_of[r][p["rows"]["key"]] for r, p in per_rank.items()])
    rows["ranks"] = np.ones(len(rows["key"]), np.int64)
    per_function = _sums(rows)
    key_phase = np.array([k[0] for k in keys], np.int64)
    key_level = np.array([k[1] for k in keys], np.int64)
    key_name = np.array([k[2] for k in keys], dtype=object)
    fkey = per_function.pop("key")
    per_function = {"phase": key_phase[fkey], "level": key_level[fkey], "name": key_name[fkey], **per_function}
    ph, ph_inverse = np.unique(fkey, return_inverse=True)
    per_phase = {"phase": key_phase[ph], "level": key_level[ph], "name": key_name[ph],
                 "functions": np.bincount(ph_inverse, minlength=len(ph)).astype(np.int64)}
    for n in SUMMED:
        per_phase[n] = int_sums(ph_inverse, per_function[n], len(ph))
    # A rank is in a phase when it made a call in it: the most ranks any of the phase's functions had.
    per_phase["ranks"] = np.zeros(len(ph), np.int64)
    np.maximum.at(per_phase["ranks"], ph_inverse, per_function["ranks"])
    time = np.zeros(len(keys), np.int64)
    for rank, p in per_rank.items():
        np.add.at(time, global_of[rank], p["time"])
    per_phase["time"] = time[ph]
    per_phase["critical_path"] = np.zeros(len(ph), np.int64)     # phases/share.py, once the path is known
    intervals = {rank: (p["bounds"], global_of[rank][p["segment_key"]]) for rank, p in per_rank.items()}
    notes = {"unmatched_ends": sum(p["unmatched_ends"] for p in per_rank.values()),
             "unclosed": sum(p["unclosed"] for p in per_rank.values()),
             "run_start": min((p["program_start"] for p in per_rank.values()), default=0),
             "phase_of_key": ph, "n_keys": len(keys), "selected": None}
    return {"phases": per_phase, "phase_functions": per_function, "intervals": intervals, "notes": notes}


def _sums(rows):
    """Rows summed per (key, func): {"key", "function", SUMMED..., "ranks"} in (key, func) order."""
    names = SUMMED + ("ranks",)
    key = rows["key"] * (mf.MAX_ID + 1) + rows["func"]
    unique, inverse = np.unique(key, return_inverse=True)
    return {"key": unique // (mf.MAX_ID + 1), "function": mf.names_array()[unique % (mf.MAX_ID + 1)],
            **{n: int_sums(inverse, rows[n], len(unique)) for n in names}}


def selected_rows(table, select):
    """Rows of a phases table that `select` names: a region name, at any depth, with the regions
    nested in it ("solve" picks "solve" and "solve/halo"; "solve/halo" picks that path), else a
    Pcontrol phase number ("2")."""
    sep = regions.SEPARATOR
    # Whole path components: "/solve/" is in "/solve/", "/solve/halo/" and "/outer/solve/", not in "/solver/".
    by_name = np.array([sep + select + sep in sep + n + sep for n in table["name"].tolist()], bool)
    if by_name.any() or not select.lstrip("-").isdigit():
        return by_name
    return table["phase"] == int(select)


def matching(result, select):
    """`result` with the phases and phase_functions rows of phase `select` only; PhaseError (naming
    the run's phases) when none matches."""
    keep = selected_rows(result["phases"], select)
    if not keep.any():
        known = ["%s" % n if n else "%d" % p for p, n in zip(result["phases"]["phase"], result["phases"]["name"])]
        raise PhaseError("--phase %s: no such phase in this run; its phases: %s (a region name, or a "
                         "Pcontrol phase number)" % (select, ", ".join(sorted(set(known)))))
    fkeep = selected_rows(result["phase_functions"], select)
    out = dict(result)
    out["phases"] = {n: v[keep] for n, v in result["phases"].items()}
    out["phase_functions"] = {n: v[fkeep] for n, v in result["phase_functions"].items()}
    out["notes"] = dict(result["notes"], phase_of_key=result["notes"]["phase_of_key"][keep], selected=select)
    return out


COLUMNS = {"phases": schema.PHASE_COLUMNS, "phase_functions": schema.PHASE_FUNCTION_COLUMNS}
