"""The activity graph's vocabulary: edge kinds, vertex ends, "unreached", and the dtypes of its
columns (docs/design.md, the graph model).  Apart from graph.py so that the modules the build
uses (splits) need not import the build."""

import numpy as np

from mpigraph.match import core as match

# The match stage's edge table and its codes (one definition, in mpigraph.match.core).  An N-to-N
# collective has an edge from the last arriver's start to every member's end, the last
# arriver's own included: without it the instance is never a global synchronisation point.
LATE_SENDER, LATE_RECEIVER = match.MESSAGE_LATE_SENDER, match.MESSAGE_LATE_RECEIVER
N_TO_N, ONE_TO_N, N_TO_ONE, SCAN = (match.COLLECTIVE_N_TO_N, match.COLLECTIVE_ONE_TO_N, match.COLLECTIVE_N_TO_ONE,
                                    match.SCAN)
KIND_NAMES = match.KIND_NAMES
START, END = match.VERTEX_START, match.VERTEX_END   # src_vertex: the start or the end of the source call

INF = np.iinfo(np.int64).max // 4   # "unreached": room to add slacks without overflow

# A vertex's function id (mpi_functions: a few hundred), -1 for a hub: two bytes, not eight,
# per vertex held through the search.
FUNC_DTYPE = np.int16


def index_dtype(largest):
    """The dtype of a graph's edge sources (vertex ids) and indptr (edge positions): int32 where
    every value up to `largest` fits (four bytes, not eight, per edge and per vertex held through
    the search), else int64."""
    return np.int32 if largest <= np.iinfo(np.int32).max else np.int64


def slack_dtype(smallest, largest):
    """The dtype of a graph's edge slacks: uint32 where every slack from `smallest` to `largest`
    fits (up to 4.29 s: four bytes, not eight, per edge held through the search), else int64."""
    return np.uint32 if 0 <= smallest and largest <= np.iinfo(np.uint32).max else np.int64
