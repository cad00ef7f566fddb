"""Stage path: the critical path of the linked run by the configured algorithm (the registry
in algorithms.py says which method runs it)."""

import dataclasses

from mpigraph.paths import algorithms, graph, segments as critical_path, toposort
from mpigraph.paths.search import critical_path as graph_search


def graph_input(world_size, linked):
    """The path stage's input from the match stage: corrected, repaired call times and the
    dependency edges into the owned ranks (match.py's interface).

    The edges move out of `linked` (the report does not read them) into an input that the
    graph's build lets go of once read (``PathInput.read_once``): they are not held through
    the build's peak and the search.  A polling run of probes is one wait on the path: its calls
    end where the next one starts (linked.path_ends)."""
    deps, linked.dependencies = linked.dependencies, None
    calls = {rank: dataclasses.replace(c, end_ns=linked.path_ends[rank]) if rank in linked.path_ends else c
             for rank, c in linked.calls.items()}
    return graph.PathInput(world_size, calls, deps, read_once=True)


def path_stage(comm, config, info, logs, linked, times, say=None):
    """Stage path: a critical_path.PathResult (the table on analysis rank 0) for config.algorithm;
    `say(text)` hears how a long round-based search is going."""
    if algorithms.get(config.algorithm).method == "toposort":
        return toposort.path_stage(comm, config, info.world_size, logs, times)
    table = graph_search(comm, graph_input(info.world_size, linked), config.algorithm, config.splits,
                         config.threshold, say=say)
    if comm.rank != 0:
        return critical_path.PathResult(None, [])
    lines = critical_path.summary_lines(table, info.world_size) + ["  segments in %s" % critical_path.CSV_NAME]
    return critical_path.PathResult(table, lines)
