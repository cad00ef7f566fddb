"""Per-phase tables: each MPI_Pcontrol call starts a new phase of its rank's calls.

Phase 0 is every call before a rank's first MPI_Pcontrol; the k-th MPI_Pcontrol call of a rank
starts its phase k (and belongs to it), whatever its level: phases are numbered per rank and
added up across ranks by number, so an SPMD program that calls MPI_Pcontrol at the same places
on every rank gets one phase per region between them.  A phase's level is the level its
MPI_Pcontrol passed (-1 for phase 0).  Recording never stops at level 0: the matching and the
critical path need every call.

A phase is a contiguous run of a log's records, so its per-function sums are
metrics.profile.function_partials of that run: the phases' sums add up to functions.csv's
(calls, time_total, waits, execution, bytes) exactly.
"""

import numpy as np

from mpigraph import schema
from mpigraph.metrics import profile
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.traffic.matrix import int_sums

PCONTROL = mf.BY_NAME["MPI_Pcontrol"].id
SUMMED = ("calls", "time_total", "wait_before", "wait_after", "execution", "bytes_sent", "bytes_received",
          "bytes_collective")


class _Records:
    """Records a:b of a log, with the ``records`` and ``column`` that function_partials reads."""

    def __init__(self, log, a, b):
        self.records = log.records[a:b]
        self._log, self._a, self._b = log, a, b

    def column(self, name):
        return self._log.column(name)[self._a:self._b]


def rank_phases(log, start_ns, end_ns, waits):
    """Sparse rows (phase, level, func, SUMMED...) of one rank: its calls' sums per phase and function."""
    func, flags = log.column("func"), log.column("flags")
    is_call = (flags & record.PART) == 0
    marks = np.flatnonzero(is_call & (func == PCONTROL))
    bounds = np.concatenate([[0], marks, [len(func)]]).astype(np.int64)
    calls_before = np.concatenate([[0], np.cumsum(is_call)]).astype(np.int64)   # calls before record i
    levels = np.concatenate([[-1], log.records["tag"][marks]]).astype(np.int64)
    rows = []
    for phase, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        if a == b:
            continue
        ca, cb = calls_before[a], calls_before[b]
        part = profile.function_partials(_Records(log, a, b), start_ns[a:b], end_ns[a:b],
                                         {k: v[ca:cb] for k, v in waits.items()} if waits is not None else None)
        funcs = np.flatnonzero(part["calls"])
        rows.append({"phase": np.full(len(funcs), phase), "level": np.full(len(funcs), levels[phase]),
                     "func": funcs, **{name: part[name][funcs] for name in SUMMED}})
    return _concat(rows)


def _concat(rows):
    names = ("phase", "level", "func") + SUMMED
    return {n: np.concatenate([np.asarray(r[n], np.int64) for r in rows]) if rows else np.zeros(0, np.int64)
            for n in names}


def phases(comm, logs, times, linked):
    """{"phases", "phase_functions": tables (schema columns)} on analysis rank 0 when some rank
    called MPI_Pcontrol, else None (and None on the other ranks).  Collective over comm."""
    has = any(bool(np.any(log.column("func") == PCONTROL)) for log in logs.values())
    if not comm.allreduce(has):
        return None
    rows = [rank_phases(log, times[rank][0], times[rank][1], linked.waits[rank]) for rank, log in logs.items()]
    linked.waits.pack()     # asking for a rank's waits unpacked them: held encoded again through the path stage
    local = _concat(rows)
    local["ranks"] = np.ones(len(local["phase"]), np.int64)
    gathered = comm.gather(local, root=0)
    if comm.rank != 0:
        return None
    return tables({n: np.concatenate([g[n] for g in gathered]) for n in local})


def tables(rows):
    """The phase_functions table (a row per phase and function) and the phases table (a row per phase)."""
    names = SUMMED + ("ranks",)
    key = rows["phase"] * (mf.MAX_ID + 1) + rows["func"]
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    sums = {n: int_sums(inverse, rows[n], len(unique)) for n in names}
    per_function = {"phase": unique // (mf.MAX_ID + 1), "level": rows["level"][first],
                    "function": mf.names_array()[unique % (mf.MAX_ID + 1)], **sums}
    ph, ph_first, ph_inverse = np.unique(per_function["phase"], return_index=True, return_inverse=True)
    per_phase = {"phase": ph, "level": per_function["level"][ph_first],
                 "functions": np.bincount(ph_inverse, minlength=len(ph)).astype(np.int64)}
    for n in SUMMED:
        per_phase[n] = int_sums(ph_inverse, per_function[n], len(ph))
    # A rank is in a phase when it made a call in it: the most ranks any of the phase's functions had.
    per_phase["ranks"] = np.zeros(len(ph), np.int64)
    np.maximum.at(per_phase["ranks"], ph_inverse, per_function["ranks"])
    return {"phases": per_phase, "phase_functions": per_function}


COLUMNS = {"phases": schema.PHASE_COLUMNS, "phase_functions": schema.PHASE_FUNCTION_COLUMNS}
