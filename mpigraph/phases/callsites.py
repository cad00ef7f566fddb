"""The per-phase function table's per-call-site twin: phase_callsites.csv/.parquet.

One row per (phase, call site, MPI function) with callsites.csv's columns (count, time, wait,
bytes, ranks, time_cov, path_time), summed from the same calls-table blocks that make
callsites.csv (callsites.stats.Accumulator hands each block, its callsite column already the
run's ids, to ``PhaseSites.add``).  Every call is in exactly one phase, so summed over the phases
each call site's count, time, wait, bytes and path_time are callsites.csv's.

A call's phase is the segment it falls in (phases/regions.py): the k-th mark of a rank (its
MPI_Pcontrol or phase API call) starts segment k, so call c of the rank is in segment
``searchsorted(mark calls, c, "right")``.  Segments are keyed (phase, level, name) as in
phase_functions.csv; the keys of every analysis rank are gathered and sorted, so each analysis
rank numbers them as the phases stage does, the same for every number of analysis ranks.  Each
analysis rank sums its own trace ranks' calls per (phase, call site, function, trace rank);
analysis rank 0 adds the parts (the keys of two analysis ranks never meet: a trace rank has one
owner) and makes the table from the per-trace-rank sums alone (the COV too).
"""

import numpy as np

from mpigraph.callsites import stats
from mpigraph.comm import parallel
from mpigraph.phases import regions
from mpigraph.phases import stage as phases_stage
from mpigraph.trace import functions as mf
from mpigraph.util import arrays


def _rank_segments(rank_calls):
    """(call index of each mark, segment keys [(phase, level, name)]: 1 + marks) of one trace
    rank; no marks for calls made without a log (synthetic runs)."""
    if rank_calls.log is None:
        return np.zeros(0, np.int64), [(0, -1, "")]
    seg = regions.rank_segments(rank_calls.log)
    at = seg["marks"]
    record_call = rank_calls.record_call
    calls = at if record_call is None or len(record_call) == rank_calls.n_calls else record_call[at]
    return np.asarray(calls, np.int64), seg["keys"]


class PhaseSites:
    """Sums of the calls-table blocks per (phase, call site, function, trace rank) of an analysis
    rank's trace ranks (``tracker`` makes it and hands it to the callsites Accumulator)."""

    def __init__(self, accumulator: "stats.Accumulator", keys, segments):
        """`keys`: the run's phase keys, sorted; `segments`: trace rank -> (call index of each of its
        marks, the run's key index of each of its segments)."""
        self.keys, self.segments = keys, segments
        self.sites = accumulator.sites
        self.n_ranks, self.n_functions = accumulator.n_ranks, accumulator.n_functions
        self.n_sites = len(self.sites.places)
        self.sums = stats.KeyedSums()       # keys = ((phase * n_sites + site) * n_functions + function) * n_ranks + rank

    def add(self, block: dict) -> None:
        """Sums a calls-table block whose callsite column holds the run's ids."""
        rank = np.asarray(block["rank"], np.int64)
        call = np.asarray(block["call"], np.int64)
        func = np.asarray(block["function"].codes if hasattr(block["function"], "codes") else block["function"],
                          np.int64)
        phase = np.zeros(len(rank), np.int64)
        for r, mine in arrays.groups(rank):      # per rank
            mark_calls, key_of_segment = self.segments[int(r)]
            phase[mine] = key_of_segment[np.searchsorted(mark_calls, call[mine], side="right")]
        site = np.asarray(block["callsite"], np.int64)
        self.sums.add(block, ((phase * self.n_sites + site) * self.n_functions + func) * self.n_ranks + rank)

    def combined(self, comm, select=None):
        """The phase_callsites table (schema.PHASE_CALLSITE_COLUMNS) of the whole run on analysis
        rank 0 (None elsewhere), rows by phase, then time (longest first); `select` (--phase NAME)
        keeps that phase's rows (phases.stage.selected_rows).  Collective."""
        whole = self.sums.gathered(comm)
        if whole is None:
            return None
        table = self._table(*whole)
        if select is not None:
            keep = phases_stage.selected_rows(table, select)
            table = {k: v[keep] for k, v in table.items()}
        return table

    def _table(self, keys, sums):
        """Rows per (phase, call site, function) of the per-trace-rank sums."""
        triples, row = np.unique(keys // self.n_ranks, return_inverse=True)
        row = row.reshape(-1)
        n = len(triples)
        out = {name: np.bincount(row, sums[name], n).astype(np.int64) for name in stats.SUMS}
        out["ranks"] = np.bincount(row, None, n).astype(np.int64)
        out["time_cov"] = stats.cov(row, sums["time"], n)
        func = triples % self.n_functions
        site = triples // self.n_functions % self.n_sites
        phase = triples // self.n_functions // self.n_sites
        out["function"] = np.asarray(mf.names_array(), object)[func]
        out["callsite"] = site
        out["callsite_name"] = self.sites.names(site, out["function"])
        out["phase"] = np.array([self.keys[k][0] for k in phase.tolist()], np.int64)
        out["level"] = np.array([self.keys[k][1] for k in phase.tolist()], np.int64)
        out["name"] = np.array([self.keys[k][2] for k in phase.tolist()], object)
        order = np.lexsort((triples, -out["time"], phase))
        return {k: np.asarray(v)[order] for k, v in out.items()}


def tracker(comm, accumulator, calls):
    """A PhaseSites for this analysis rank's trace ranks (`calls`: trace rank -> match.RankCalls),
    attached to `accumulator` (a callsites.stats.Accumulator whose sites are shared), when some
    rank of the run marked a phase; None on every analysis rank otherwise.  Collective."""
    marked = any(c.log is not None and regions.marked(c.log) for c in calls.values())
    if not (comm.allreduce(marked) if comm.size > 1 else marked):
        return None
    # Reading a rank's marks and names may fail on one analysis rank: all raise, none waits below.
    local = parallel.collectively(comm, lambda: {rank: _rank_segments(c) for rank, c in calls.items()})
    mine = set(k for _, keys in local.values() for k in keys)
    gathered = comm.allgather(mine) if comm.size > 1 else [mine]
    keys = sorted(set().union(*gathered))
    index = {k: i for i, k in enumerate(keys)}
    segments = {rank: (m, np.array([index[k] for k in ks], np.int64)) for rank, (m, ks) in local.items()}
    twin = PhaseSites(accumulator, keys, segments)
    accumulator.twins.append(twin)
    return twin
