"""Every critical-path algorithm, by name: the one registry the settings, the CLI and the path
stage read.  A leaf module (no numpy): ``mpigraph config`` and ``mpigraph lib`` stay fast."""

from collections import namedtuple

# method: "graph" (a search of the activity graph, mpigraph.paths.search) or "toposort" (the
# bulk-synchronous method without a graph, mpigraph.paths.toposort).  distributed: every
# analysis rank keeps its part, else the work is gathered onto analysis rank 0.
Algorithm = namedtuple("Algorithm", "name method distributed help")

_ALL = [
    Algorithm("dijkstra", "graph", False,
              "the graph gathered to analysis rank 0, scipy.sparse.csgraph's Dijkstra there"),
    Algorithm("delta-stepping", "graph", False,
              "the graph gathered to analysis rank 0, vectorised delta-stepping there"),
    Algorithm("parallel-dijkstra", "graph", True,
              "distributed Dijkstra by parts: csgraph's Dijkstra on each analysis rank's part, "
              "improved boundary offers exchanged until none improves"),
    Algorithm("parallel-delta-stepping", "graph", True,
              "distributed delta-stepping, each phase's offers sent to their vertices' owners"),
    Algorithm("toposort", "toposort", False,
              "bulk-synchronous programs: compute intervals sorted on analysis rank 0, no graph"),
    Algorithm("parallel-toposort", "toposort", True,
              "bulk-synchronous programs: compute intervals shuffled by start time, no graph"),
]

ALGORITHMS = {a.name: a for a in _ALL}
NAMES = tuple(ALGORITHMS)
GRAPH_ALGORITHMS = tuple(a.name for a in _ALL if a.method == "graph")
TOPOSORT_ALGORITHMS = tuple(a.name for a in _ALL if a.method == "toposort")


def get(name):
    """The Algorithm called `name`; ValueError naming the known ones otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError("unknown critical-path algorithm %r (known: %s)" % (name, ", ".join(NAMES))) from None
