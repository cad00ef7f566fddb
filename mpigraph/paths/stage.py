"""Stage path: the critical path of the linked run by the configured algorithm (the registry
in algorithms.py says which method runs it)."""

import dataclasses
import sys

from mpigraph.comm.codec import Codec
from mpigraph.comm.parallel import Ownership
from mpigraph.match import link
from mpigraph.paths import algorithms, graph, segments as critical_path, toposort
from mpigraph.paths.search import critical_path as graph_search


def graph_input(world_size, linked):
    """The path stage's input from the match stage: corrected, repaired call times and the
    dependency edges into the owned ranks (match.py's interface).

    The edges move out of `linked` (the report does not read them) into an input that hands
    them over to the graph's build (``graph.HandedOverInput``): they are not held through
    the build's peak and the search.  A polling run of probes is one wait on the path: its calls
    end where the next one starts (linked.path_ends)."""
    deps, linked.dependencies = linked.dependencies, None
    calls = {rank: dataclasses.replace(c, end_ns=linked.path_ends[rank]) if rank in linked.path_ends else c
             for rank, c in linked.calls.items()}
    return graph.HandedOverInput(world_size, calls, deps)


def path_stage(comm, config, info, logs, linked, times, say=None):
    """Stage path: a critical_path.PathResult for config.algorithm: the table where it was
    found (every rank's part, or all of it on analysis rank 0 and None elsewhere), and on rank 0
    the words after the path's summary (``finished`` adds that, and the Totals).  `say(text)`
    hears how a long round-based search is going.  toposort on a run that is not
    bulk-synchronous says so (summary and stderr) and leaves the path to parallel-dijkstra
    (dijkstra on one analysis rank).

    After the search no collective is made: where analysis rank 0's search failed, the others
    only learn it when the stage ends (``parallel.collectively``)."""
    algorithm, notes = config.algorithm, []
    if algorithms.get(algorithm).method == "toposort":
        result = toposort.path_stage(comm, config, logs, times, linked.receive_ends)
        if result.table is not None or not result.lines:
            return result
        algorithm = "parallel-dijkstra" if comm.size > 1 else "dijkstra"
        notes = ["  %s; the path was found by %s instead" % (result.lines[0], algorithm)]
        if comm.rank == 0:
            print("mpigraph: warning: " + notes[0].strip(), file=sys.stderr, flush=True)
        # The match stage made no edges for toposort: match again, with them (the calls are
        # repaired already: no violation is left to repair).
        linked = link.link(comm, Ownership(info.world_size, comm.size), linked.calls, info.world_size,
                           linked.clock, Codec(level=config.compress or None), True)
    table = graph_search(comm, graph_input(info.world_size, linked), algorithm, config.splits,
                         config.threshold, say=say)
    if comm.rank != 0:
        return critical_path.PathResult(table, [])
    return critical_path.PathResult(table, notes + [
        "  found by %s; the path segment by segment: %s" % (algorithm, critical_path.PARQUET_NAME)])


def finished(comm, found, world_size):
    """The PathResult of the path stage's `found`: every rank a part of the table (an empty one
    where it has none of its rows; None everywhere without a path), and on rank 0 the path's
    Totals and its words (``summary_lines``, then the stage's).  Collective: after the stage,
    once every rank knows the search did not fail."""
    table, lines = found.table, found.lines
    if not comm.bcast(table is not None if comm.rank == 0 else None, root=0):
        return critical_path.PathResult(None, lines if comm.rank == 0 else [])
    part = critical_path.empty() if table is None else table
    totals = critical_path.reduce_totals(comm, part, world_size)
    if comm.rank != 0:
        return critical_path.PathResult(part, [])
    # The same words on any number of analysis ranks: the path is the same (tests/test_cli_offline.py).
    return critical_path.PathResult(part, critical_path.summary_lines(totals, world_size) + list(lines), totals)
