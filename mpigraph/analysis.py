"""The analysis pipeline: the same code inside the job (at MPI_Finalize) and offline.

Stages (docs/design.md, "Data flow"): trace -> clock -> match -> metrics -> traffic -> path -> report
(traffic: the communication matrix, size histograms and communicators, mpigraph.traffic).
clock and match are in match/link.py (their results: match/core.py's interface);
path_stage runs the topological-sort algorithms or the graph ones (mpigraph.paths).

Every stage runs on all analysis ranks of `comm`.  Analysis rank a works on
the trace ranks ``Ownership.ranks_of(a)`` and writes its part of the big tables
(report.datasets); analysis rank 0 gathers the small tables and writes them and
summary.txt.  Each stage goes through
``parallel.collectively``, so an error on one rank stops all of them instead
of leaving the others blocked in the next collective.
"""

import dataclasses
import resource
import sys
import time

from mpigraph import config as config_module
from mpigraph.comm import codec as codec_module
from mpigraph import paths
from mpigraph.paths import algorithms
from mpigraph.match import link
from mpigraph.metrics import run_tables as linked_tables
from mpigraph.metrics import profile as metrics
from mpigraph.comm import node_memory
from mpigraph.comm import launch, meter, parallel
from mpigraph.report import datasets, writer as report
from mpigraph import callsites
from mpigraph.callsites import path as path_sites
from mpigraph.trace import logs as trace
from mpigraph.traffic import stage as traffic_stage
from mpigraph.phases import callsites as phases_callsites
from mpigraph.phases import share as phases_share
from mpigraph.phases import stage as phases_stage

# Stage timings go to stderr when the run has more records than this (or MPIGRAPH_VERBOSE=1).
PROGRESS_RECORDS = 1_000_000


class Progress:
    """Stage names, timings and rank 0's peak memory so far on stderr, from analysis rank 0 only.

    Printed when config.verbose, or when the run is big unless config.quiet.
    The peak (getrusage's maxrss) only grows: the stage whose line shows it
    rising is the one that needed the memory.
    """

    def __init__(self, is_root, config):
        self.may_print = is_root and (config.verbose or not config.quiet)
        self.enabled = is_root and config.verbose
        self.done = []   # (stage, seconds, peak RSS MB, note) of the stages so far
        self.meter = meter.last = meter.Meter()    # every rank's own figures, for the benchmark

    def enable_for(self, n_records):
        """Switch on for big runs, printing the stages already done."""
        if self.may_print and not self.enabled and n_records > PROGRESS_RECORDS:
            self.enabled = True
            for entry in self.done:
                self._print(*entry)

    def run(self, name, step, *args, note=None):
        """step(*args), timed; `note(result)` adds a few words to the stage's line."""
        started = time.perf_counter()
        with self.meter.stage(name):
            result = step(*args)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024     # Linux: KiB
        self.done.append((name, time.perf_counter() - started, peak_mb, note(result) if note else ""))
        if self.enabled:
            self._print(*self.done[-1])
        return result

    def say(self, text):
        """A line of a stage at work (``paths.heartbeat``), when stage lines are printed."""
        if self.enabled:
            print("mpigraph: " + text, file=sys.stderr, flush=True)

    @staticmethod
    def _print(name, seconds, peak_mb, note):
        print("mpigraph: %-8s %8.3f s  peak RSS %6.0f MB%s" % (name, seconds, peak_mb, "  " + note if note else ""),
              file=sys.stderr, flush=True)


def _world():
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _open_owned_logs(comm, run_dir, in_job):
    """Stage trace: rank 0 checks the directory, each rank opens and validates the logs it owns.

    Returns (RunInfo, {trace rank: RankLog} of the owned logs, records of all ranks).
    """
    info = parallel.collectively(comm, lambda: trace.find_run(run_dir) if comm.rank == 0 else None)
    info = comm.bcast(info, root=0)
    if in_job and comm.size != info.world_size:
        # Inside the job analysis rank r must own trace rank r: the logs are not this job's.
        error = trace.TraceError("%s: the run has %d ranks but the job analysing it has %d"
                                 % (info.run_dir, info.world_size, comm.size))
        parallel.collectively(comm, _raise, error)
    ownership = parallel.Ownership(info.world_size, comm.size)
    logs = parallel.collectively(comm, trace.open_logs, info, ownership.ranks_of(comm.rank))
    n_records = comm.allreduce(sum(log.n_records for log in logs.values()))
    return info, logs, n_records


def _raise(error):
    raise error


def waits_packed_for_path(algorithm, comm):
    """Whether this rank holds the calls' waits packed through the path stage (CallWaits.pack):
    only analysis rank 0 of a serial algorithm with several analysis ranks, where the path stage
    gathers every rank's graph (dijkstra, delta-stepping) or compute intervals (toposort) on top
    of what the match holds (1e7 records, 2 ranks: packed, rank 0's peak is 8-12% lower).
    Elsewhere the match sets the peak, and packing and unpacking would only cost time (0.2-0.45 s
    at 4e6-1e7 records)."""
    return comm.size > 1 and comm.rank == 0 and not algorithms.ALGORITHMS[algorithm].distributed


def _metrics(comm, logs, linked, codec, times, algorithm):
    """Stage metrics: local tables on each rank, combined on rank 0 (None elsewhere).

    Returns (metrics.Tables, the linked run's small report tables, this rank's wait-state rows)
    on rank 0, (None, None, this rank's wait-state rows) elsewhere.  The calls table is made by
    the report, a chunk at a time; the wait-state rows (made once: the rank table's per-state sums
    are theirs) are gathered here and written by the report as this rank's part.
    """
    waitstates = parallel.collectively(comm, linked_tables.waitstate_rows, linked)
    local = parallel.collectively(comm, metrics.local_tables, logs, times, linked, waitstates)
    tables = parallel.collectively(comm, metrics.gather_tables, comm, local)
    extra = parallel.collectively(comm, linked_tables.gather, comm, linked, codec, waitstates)
    if extra is not None:
        extra["facts"] = {"clock_method": linked.clock.method, "repair": linked.repair, "algorithm": algorithm}
    linked.waits.before_path()   # only the report reads them after this
    return tables, extra, waitstates


def _traffic(comm, logs, times, linked, world_size, phase=None):
    """Stage traffic: (the communication matrix, sizes and communicators; the per-phase tables when a
    rank marked a phase: MPI_Pcontrol or the phase API, `phase` only when given) on rank 0, (None,
    None) elsewhere."""
    return (traffic_stage.traffic(comm, linked, world_size),
            phases_stage.phases(comm, logs, times, linked, select=phase))


def _path(comm, config, info, logs, linked, times, say):
    """Stage path (``paths.path_stage``), then every rank's part of the path and its Totals on
    rank 0 (``paths.finished``): two steps, so that a search that failed on one rank is known
    to all before they add up the parts."""
    found = parallel.collectively(comm, paths.path_stage, comm, config, info, logs, linked, times, say)
    return parallel.collectively(comm, paths.finished, comm, found, info.world_size)


def _write_report(comm, out_dir, info, tables, path, linked):
    """Stage report: every analysis rank writes its parts of the big tables (report.datasets: calls,
    wait states, critical path) and sums its calls per call site, then rank 0 the small tables
    (the call sites' from every rank's sums) and summary.txt (last: its presence means the
    report is complete)."""
    queries = linked_tables.owned_path_queries(comm, path.table, info.world_size)
    parallel.collectively(comm, lambda: datasets.prepare_all(out_dir, info, path.table is not None)
                          if comm.rank == 0 else None)
    # The sites are read here, then resolved and numbered by all ranks together (share).
    sites = parallel.collectively(comm, callsites.tracker, info, sorted(linked.calls), False)
    sites.sites.share(comm)
    by_phase = phases_callsites.tracker(comm, sites, linked.calls)     # sums the same blocks per phase too
    path = _path_with_sites(comm, path, linked, sites.sites, info.world_size)
    block = datasets.path_block(comm, path.table)
    summary_tables, extra, waitstates = tables
    calls_csv = comm.bcast(report.big_csv_written(summary_tables.ranks) if comm.rank == 0 else None, root=0)
    path_csv = comm.bcast(report.path_csv_written(path.totals) if comm.rank == 0 and path.totals else None, root=0)
    parallel.collectively(comm, datasets.write_parts, comm, out_dir, info, linked, waitstates, queries, block,
                          calls_csv, sites, path_csv)
    table = sites.combined(comm)
    waits_by_site = parallel.collectively(comm, sites.waitstate_sums)      # summed as the calls' blocks passed
    waits_by_site = callsites.stats.combined_waitstates(comm, waits_by_site, sites.sites)
    phases = extra.get("phases") if extra is not None else None
    by_phase = by_phase.combined(comm, phases["notes"]["selected"] if phases else None) if by_phase else None
    if comm.rank != 0:
        return None
    if extra is not None:
        extra["callsites"], extra["callsite_waitstates"] = table, waits_by_site
        if phases and by_phase is not None:
            phases["phase_callsites"] = by_phase
        if extra.get("traffic"):
            extra["traffic"]["communicators"] = callsites.stats.with_creating_sites(
                extra["traffic"]["communicators"], sites.sites)
            extra["traffic"]["callsite_sizes"] = traffic_stage.callsite_size_table(extra["traffic"], sites.sites)
    try:
        return report.write_report(out_dir, info, summary_tables, extra, path=path.totals, path_lines=path.lines,
                                   datasets=datasets.NAMES)
    except report.ReportError:
        datasets.remove_all(out_dir)      # no half-written report is left behind
        raise


def _path_with_sites(comm, path, linked, sites, n_trace_ranks):
    """The path (every rank's part) with its segments' call sites (callsites.path), and on rank 0
    a line naming the call sites it runs through after the line of its MPI functions.  Collective."""
    ids = path_sites.segment_sites(comm, path.table, linked, sites, n_trace_ranks)
    if ids is None:
        return path
    table = parallel.collectively(comm, path_sites.with_sites, path.table, ids, sites)
    line = path_sites.summary_line(comm, table, path.totals.duration if comm.rank == 0 else 0)
    lines = list(path.lines)
    if line:
        at = [i for i, text in enumerate(lines) if text.lstrip().startswith("MPI functions on the path")]
        lines.insert(at[0] + 1 if at else len(lines), line)
    return path._replace(table=table, lines=lines)


def analyze(run_dir, comm=None, config=None, in_job=False, out_dir=None):
    """Analyse the run in run_dir on the analysis ranks of `comm` (default MPI.COMM_WORLD).

    Collective over comm.  `config` is a config.Config (default: from the
    environment); `in_job` says the ranks of comm are the run's own ranks.
    Analysis rank 0 writes the report files into out_dir (default run_dir) and returns the
    summary text (the caller prints it); other ranks return None.
    Raises launch.MPIMismatch when comm's MPI is not the launcher's (before any work),
    trace.TraceError for bad logs, node_memory.NotEnoughMemory when a node
    cannot hold the analysis of the records its analysis ranks own (before any
    is read), report.ReportError when the report cannot be written (on the rank
    that found the problem; the others raise parallel.PeerFailed).
    """
    if comm is None:
        comm = _world()
    launch.check_world()      # another MPI than the launcher's: say so before any work
    if config is None:
        config = config_module.from_env()
    progress = Progress(comm.rank == 0, config)

    info, logs, n_records = progress.run("trace", _open_owned_logs, comm, run_dir, in_job,
                                         note=lambda r: "%d ranks, %d records" % (r[0].world_size, r[2]))
    progress.enable_for(n_records)
    parallel.collectively(comm, node_memory.require_room, comm, sum(log.n_records for log in logs.values()),
                          info.run_dir)
    ownership = parallel.Ownership(info.world_size, comm.size)
    codec = codec_module.Codec(level=config.compress or None)
    calls, clock_info = progress.run("clock", parallel.collectively, comm, link.aligned_calls, comm, logs,
                                     config.clock)
    algorithm, why = algorithms.choose(config.algorithm, comm.size, n_records)
    config = dataclasses.replace(config, algorithm=algorithm)
    on_graph = paths.ALGORITHMS[config.algorithm].method == "graph"     # toposort's path needs no edges
    linked = progress.run("match", parallel.collectively, comm, link.link, comm, ownership, calls,
                          info.world_size, clock_info, codec, on_graph,
                          note=lambda r: "%s, %d violations repaired"
                          % ("%d edges here" % len(r.dependencies) if on_graph else "no edges (not needed)",
                             r.repair.repaired))

    linked.waits.pack_for_path = waits_packed_for_path(config.algorithm, comm)
    # Every record's (start, end) on rank 0's clock, after the receive-before-send repair.
    times = {rank: calls.record_times() for rank, calls in linked.calls.items()}
    tables = progress.run("metrics", _metrics, comm, logs, linked, codec, times, config.algorithm)
    flows = progress.run("traffic", parallel.collectively, comm, _traffic, comm, logs, times, linked, info.world_size,
                         config.phase)
    if tables[1] is not None:
        tables[1]["traffic"], tables[1]["phases"] = flows
    if on_graph:
        times = None      # only toposort's path reads them: not held through the graph's build
    path = progress.run("path", _path, comm, config, info, logs, linked, times, progress.say)

    # The critical path's time in each phase: each rank adds its part's, rank 0 holds the phases.
    phases_share.add_path_share(comm, tables[1]["phases"] if tables[1] is not None else None, path.table)
    if path.lines:         # which algorithm ran, and why (the default picks one by the run's size)
        path = path._replace(lines=list(path.lines) + ["  algorithm %s (%s)" % (algorithm, why)])
    text = progress.run("report", parallel.collectively, comm, _write_report, comm, out_dir or info.run_dir, info, tables,
                        path, linked)
    return text
