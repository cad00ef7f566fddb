"""Every critical-path algorithm, by name: the one registry the settings, the CLI and the path
stage read.  A leaf module (no numpy): ``mpigraph config`` and ``mpigraph lib`` stay fast."""

from collections import namedtuple

# method: "auto" (the default: choose() picks a graph algorithm from the run's size), "graph" (a search of the activity graph, mpigraph.paths.search) or "toposort" (the
# bulk-synchronous method without a graph, mpigraph.paths.toposort).  distributed: every
# analysis rank keeps its part, else the work is gathered onto analysis rank 0.
Algorithm = namedtuple("Algorithm", "name method distributed help")

_ALL = [
    Algorithm("auto", "auto", True,
              "the default: dijkstra where the graph is gathered to one rank cheaply (one analysis rank, "
              "or a run of at most AUTO_GATHER_RECORDS records), parallel-dijkstra otherwise"),
    Algorithm("dijkstra", "graph", False,
              "the graph gathered to analysis rank 0, scipy.sparse.csgraph's Dijkstra there"),
    Algorithm("delta-stepping", "graph", False,
              "the graph gathered to analysis rank 0, vectorised delta-stepping there"),
    Algorithm("parallel-dijkstra", "graph", True,
              "distributed Dijkstra by parts: each analysis rank searches its part, improved boundary "
              "offers exchanged until none improves; a path that changes rank at nearly every step (a "
              "pipeline) is found in one sweep of the parts joined, slab of time after slab"),
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


# The most records whose graph "auto" gathers to one analysis rank when there are several.  Up to
# here the gather and csgraph's Dijkstra on one rank cost less than the distributed search's
# rounds of collectives; above it the gathered graph (tens of bytes per record) and the one
# rank's search grow with the run while the other ranks wait: the funnel issue 28 measured (a
# 48.5 M-record run's path stage took 38 s on rank 0).  Path stage on 2 cores (bsp, synthetic):
# 1e5 records, dijkstra 0.39-0.43 s, parallel-dijkstra 0.63-0.84 s (K = 2, 4); 1e6 records,
# K = 4: dijkstra 1.97 s, parallel-dijkstra 1.41 s.  Small runs keep dijkstra's path, the same
# for every number of analysis ranks.
AUTO_GATHER_RECORDS = 1_000_000


def choose(name, n_analysis_ranks, n_records):
    """(the algorithm to run, why in a few words) for the setting `name`: itself unless "auto".

    The words do not name the number of analysis ranks where the choice does not depend on it:
    the report of a small run is the same for every K."""
    if name != "auto":
        return name, "as set"
    limit = format(AUTO_GATHER_RECORDS, ",")
    if n_records <= AUTO_GATHER_RECORDS:
        return "dijkstra", "auto: %s records, at most %s: the graph on one analysis rank" % (
            format(n_records, ","), limit)
    if n_analysis_ranks == 1:
        return "dijkstra", "auto: one analysis rank"
    return "parallel-dijkstra", "auto: %s records, more than %s: the graph spread over the analysis ranks" % (
        format(n_records, ","), limit)


def get(name):
    """The Algorithm called `name`; ValueError naming the known ones otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError("unknown critical-path algorithm %r (known: %s)" % (name, ", ".join(NAMES))) from None
