"""The tracing's own cost per call, estimated from the trace, and taken off the compute edges.

Every recorded call costs its rank some time outside the PMPI call: the shim's code after the
call's end stamp (writing the record) and before the next call's start stamp (entering the
wrapper).  The trace counts that time as the program's computation (the compute edge
E(r,k) -> S(r,k+1)); a run without the shim does not spend it.  So the traced run's T(0) is
the untraced run's plus about (calls on the critical path) x (cost per call).

Estimate (``recording_cost``): the gap between two consecutive calls of a rank is

    start(k+1) - end(k) = shim exit + the program's own work in between + shim entry,

and the program's work is >= 0, so where the program did nothing between two calls (back to
back: Irecv then Isend, Send then Recv) the gap is the recording's cost alone.  Per rank the
QUANTILE-th percentile of its gaps; o_rec = the minimum of that over the ranks.  A low
quantile, not the minimum, so that one unusually quick pair (or a gap the clock repair
shortened) does not set it; per rank, so that ranks which compute between every call (their
gaps tell nothing about the shim) are simply not the minimum, where pooled over all ranks they
would dilute the back-to-back gaps of the others.  Being a low quantile of the cost, o_rec is
below the mean cost per call (slow calls: a page fault on the log, a cache miss): the
compensation takes off less than the recording costs, never more than a back-to-back gap.

``shorten``: every compute edge's c becomes max(c - o_rec, 0).  Nothing else changes (call,
message and collective edges keep their measured weights): T(0) then predicts the untraced
program, and on a critical path that does not change, T(0) falls by exactly o_rec per compute
edge on it (less where a gap was shorter than o_rec: never below 0).
"""

import dataclasses

import numpy as np

from mpigraph.whatif.build import COMPUTE, WhatifError
from mpigraph.util import units

QUANTILE = 5.0          # percent: per rank, then the minimum over ranks (see the module doc)
# The recording costs tens to hundreds of ns per call (docs/benchmarks.md).  A rank whose low
# gaps are longer than this computes between every pair of its calls: they tell the program's
# work, not the shim's, and where no rank has back-to-back calls nothing is taken off (an
# Allreduce loop with 30 us of work per iteration would otherwise lose all of its work).
MAX_COST_NS = 1000.0
CHOICES = "auto, none or a time per call (70ns, 0.07us; a bare number is ns)"


@dataclasses.dataclass
class Overhead:
    """What was taken off each compute edge and why."""

    ns: float = 0.0              # o_rec: taken off every compute edge (0: nothing)
    source: str = "none"         # "none", "auto" or "given"
    T_traced_ns: float = np.nan  # T at the reference point without compensation (nan: none taken)

    def describe(self) -> str:
        if self.source == "auto" and self.ns == 0:
            return ("0 ns per call (auto: no rank has calls back to back, within %g ns of each other, "
                    "to tell the recording's cost by)" % MAX_COST_NS)
        if self.source == "auto":
            return ("%.0f ns per call (auto: the minimum over ranks of each rank's %g%% quantile of the time "
                    "between two consecutive calls)" % (self.ns, QUANTILE))
        return "%.0f ns per call (given)" % self.ns


def parse(spec) -> tuple:
    """('auto', nan), ('none', 0) or ('given', ns) from --overhead / whatif(overhead=...): 'auto',
    'none', a number of ns (int, float or a string such as '70', '70ns', '0.07us')."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none"):
        return "none", 0.0
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        return "auto", np.nan
    if isinstance(spec, (int, float, np.integer, np.floating)) and not isinstance(spec, bool):
        ns = float(spec)
    elif isinstance(spec, str):
        try:
            ns = units.parse_time(spec, "ns") * 1e9
        except units.UnitError:
            raise WhatifError("--overhead %s: %s" % (spec, CHOICES))
    else:
        raise WhatifError("--overhead %r: %s" % (spec, CHOICES))
    if not np.isfinite(ns) or ns < 0:
        raise WhatifError("--overhead %s: need a time >= 0 per call (%s)" % (spec, CHOICES))
    return ("given", ns) if ns > 0 else ("none", 0.0)


def recording_cost(gap_ns, rank) -> float:
    """o_rec in ns: min over ranks of the QUANTILE-th percentile of the rank's gaps between
    consecutive calls (gap_ns, rank: one entry per compute edge); 0 without any gap, or where
    that is over MAX_COST_NS (no calls back to back)."""
    gap_ns = np.asarray(gap_ns, np.float64)
    rank = np.asarray(rank, np.int64)
    if not len(gap_ns):
        return 0.0
    order = np.argsort(rank, kind="stable")
    ranks, first = np.unique(rank[order], return_index=True)
    per_rank = [np.percentile(g, QUANTILE) for g in np.split(gap_ns[order], first[1:])]   # a loop over ranks
    cost = max(min(per_rank), 0.0)
    return float(cost) if cost <= MAX_COST_NS else 0.0


def of_graph(graph) -> float:
    """recording_cost of a RunGraph's compute edges (their c is the measured gap, both models)."""
    compute = graph.kind == COMPUTE
    return recording_cost(graph.edges.c[compute], graph.src_rank[compute])


def shorten(c, kind, ns: float) -> np.ndarray:
    """A copy of the edge weights c with every compute edge's max(c - ns, 0)."""
    out = np.array(c, np.float64, copy=True)
    compute = np.asarray(kind) == COMPUTE
    out[compute] = np.maximum(out[compute] - ns, 0.0)
    return out
