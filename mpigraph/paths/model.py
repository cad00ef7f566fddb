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


def as_index(ids):
    """ids (a chunk of a graph's vertex ids or edge positions, int32 where they fit) as numpy's
    own index type, intp, before they index arrays: numpy converts an index of any other dtype
    to intp inside every fancy index, which makes a gather or a scatter by int32 indices two to
    three times as dear as by intp (4 M of them: a scatter 13 ms against 4 ms, the conversion
    1 ms).  The graph keeps its four bytes an edge; its passes convert a chunk at a time."""
    return np.asarray(ids).astype(np.intp, copy=False)


def slack_dtype(smallest, largest):
    """The dtype of a graph's edge slacks: uint32 where every slack from `smallest` to `largest`
    fits (up to 4.29 s: four bytes, not eight, per edge held through the search), else int64."""
    return np.uint32 if 0 <= smallest and largest <= np.iinfo(np.uint32).max else np.int64
