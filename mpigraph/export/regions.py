"""A rank's phase marks as nested regions for trace viewers: enter and leave per named region
and per MPI_Pcontrol phase (the OTF2 export's user regions, trace.json's phase slices).

The marks (MPI_Pcontrol, mpigraph_phase_begin/_end) are cut into segments by
mpigraph.phases.regions, whose keys (phase, level, "outer/inner") say what is open after each
mark.  Here each key becomes a stack of regions, outermost first:

    [pcontrol K (level L)]  (from a rank's first MPI_Pcontrol on)  + the named regions, "outer", "inner"

and each mark a transition: the regions of the old stack above the common prefix are left
(innermost first), those of the new stack entered, all at the mark's time.  Viewers want regions
properly nested, so a Pcontrol phase is the outermost region: a new phase leaves the named regions
open around it and enters them again inside the new one.  Regions open at the rank's last call
are left at its end.  A name holding the separator "/" is split there (phases.regions joins the
path with it).  Phase 0 (before any MPI_Pcontrol) is no region.

The loop runs once per mark (marks are phases, not calls: a few per rank).
"""

import numpy as np

from mpigraph.phases import regions

LEAVE_CODE, ENTER_CODE = 0, 1
NAMED, PCONTROL = "region", "pcontrol"


def _stack(key):
    """[(kind, name)] open regions of a segment key, outermost first."""
    phase, level, path = key
    stack = [(PCONTROL, "pcontrol %d (level %d)" % (phase, level))] if phase > 0 else []
    return stack + [(NAMED, n) for n in path.split(regions.SEPARATOR)] if path else stack


def rank_region_events(func, tag, names):
    """A rank's region events: {"code": LEAVE_CODE/ENTER_CODE, "call": the call they happen at,
    "at_end": True for the leaves at the end of the rank's last call (call -1 then), "region": index
    into the returned list of (kind, name)}, in order; func, tag: every call's fields."""
    at = np.flatnonzero(regions.IS_MARK[np.asarray(func)])
    keys, _, _ = regions.segment_keys(np.asarray(func)[at], np.asarray(tag)[at], names)
    kinds, index = [], {}
    code, call, region = [], [], []

    def emit(c, k, r):
        if r not in index:
            index[r] = len(kinds)
            kinds.append(r)
        code.append(c), call.append(k), region.append(index[r])

    old = _stack(keys[0])
    for mark, key in zip(at.tolist() + [-1], keys[1:] + [(0, -1, "")]):
        new = _stack(key)
        common = 0
        while common < min(len(old), len(new)) and old[common] == new[common]:
            common += 1
        for r in reversed(old[common:]):
            emit(LEAVE_CODE, mark, r)
        for r in new[common:]:
            emit(ENTER_CODE, mark, r)
        old = new
    call = np.array(call, np.int64)
    return {"code": np.array(code, np.int64), "call": call, "at_end": call < 0,
            "region": np.array(region, np.int64)}, kinds
