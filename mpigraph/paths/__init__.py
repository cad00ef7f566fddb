"""The critical path: the activity graph (graph.py, splits.py, threshold.py), its searches
(search.py and one module per algorithm), the bulk-synchronous method without a graph
(toposort.py), the path table (segments.py), and the stage that picks one by name (stage.py)
from the registry (algorithms.py).

``critical_path``, ``path_stage`` and ``finished`` are imported on first use: the registry is read by the
settings, which must not pull numpy and scipy in.
"""

from mpigraph.paths.algorithms import ALGORITHMS, GRAPH_ALGORITHMS, NAMES, TOPOSORT_ALGORITHMS  # noqa: F401


def __getattr__(name):
    if name == "critical_path":
        from mpigraph.paths.search import critical_path
        return critical_path
    if name in ("path_stage", "finished"):
        from mpigraph.paths import stage
        return getattr(stage, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
