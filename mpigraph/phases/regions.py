"""A rank's phase marks -> its segments: consecutive runs of records, each with its phase key.

Marks are the call records of MPI_Pcontrol and of the phase API (mpigraph_phase_begin/_end,
csrc/regions.c).  Each mark starts a segment, which runs to the next mark; the records before
the first mark are segment 0.  A segment's key is (phase, level, name):

- phase, level: the Pcontrol phase (0 before the rank's first MPI_Pcontrol, k from its k-th on;
  level: the level that MPI_Pcontrol passed, -1 for phase 0);
- name: the open named regions, outermost first, joined by "/" ("solve/halo"); "" outside any.

Named regions nest.  A begin opens its name inside the innermost open region.  An end closes the
innermost open region of its name and every region opened inside it (an end that skips inner
regions closes them too); an end without a name (NULL, "") closes the innermost region; an end
whose name is not open is ignored (counted: unmatched_ends).  Regions still open at the rank's
last record end there (counted: unclosed).  Every mark belongs to the segment it starts: a
begin to its region, an end to the region around it.

The loop below runs once per mark, never per record: marks are rare (phases, not calls).
"""

import os

import numpy as np

from mpigraph.trace import functions as mf
from mpigraph.trace import record

PCONTROL = mf.BY_NAME["MPI_Pcontrol"].id
BEGIN = mf.BY_NAME["mpigraph_phase_begin"].id
END = mf.BY_NAME["mpigraph_phase_end"].id
IS_MARK = np.zeros(1 << 16, bool)
IS_MARK[[PCONTROL, BEGIN, END]] = True
SEPARATOR = "/"


def names_path(log_path):
    """raw/rank-N.names beside raw/rank-N.log: the rank's phase names ("id<TAB>name" lines)."""
    return os.path.splitext(log_path)[0] + ".names"


def read_names(log_path):
    """{id: name} of a rank's phase API names (csrc/regions.c); {} when it named none."""
    try:
        with open(names_path(log_path), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    names = {}
    for line in lines:
        number, sep, name = line.partition("\t")
        if sep and number.lstrip("-").isdigit():
            names[int(number)] = name
    return names


def marked(log):
    """Whether the rank has a mark record: one lookup per record, where most runs mark nothing
    (``marks`` takes a few more steps, which at thousands of ranks add up)."""
    return log.n_records > 0 and bool(IS_MARK[log.column("func")].any()) and len(marks(log)) > 0


def marks(log):
    """Indices of the rank's mark records (call records of MPI_Pcontrol and the phase API)."""
    is_call = (log.column("flags") & record.PART) == 0
    return np.flatnonzero(is_call & IS_MARK[log.column("func")])


def segment_keys(func, tag, names):
    """[(phase, level, name)] of segment 0 and of the segment each mark starts, and the counts
    (unmatched ends, regions still open at the end).  func, tag: the marks' fields."""
    phase, level, stack = 0, -1, []
    keys, unmatched = [(0, -1, "")], 0
    for f, t in zip(func.tolist(), tag.tolist()):
        if f == PCONTROL:
            phase, level = phase + 1, t
        elif f == BEGIN:
            stack.append(names.get(t, "name%d" % t))
        elif t < 0:                     # an end without a name: the innermost region
            if stack:
                stack.pop()
            else:
                unmatched += 1
        else:
            name = names.get(t, "name%d" % t)
            if name in stack:
                del stack[len(stack) - 1 - stack[::-1].index(name):]
            else:
                unmatched += 1
        keys.append((phase, level, SEPARATOR.join(stack)))
    return keys, unmatched, len(stack)


def rank_segments(log):
    """The segments of one rank: {"marks": mark record indices, "keys": [(phase, level, name)] per
    segment (1 + len(marks)), "unmatched_ends", "unclosed"}."""
    at = marks(log)
    names = read_names(log.path) if bool(np.any(log.column("func")[at] != PCONTROL)) else {}
    keys, unmatched, unclosed = segment_keys(log.column("func")[at], log.records["tag"][at], names)
    return {"marks": at, "keys": keys, "unmatched_ends": unmatched, "unclosed": unclosed}
