"""The analysis pipeline: the same code inside the job (at MPI_Finalize) and offline.

Stages (DESIGN.md): trace -> clock -> match -> metrics -> path -> report.
This version runs trace, clock, metrics and report; match and path are the
hook points marked below, filled by later issues.

Every stage runs on all analysis ranks of `comm`.  Analysis rank a works on
the trace ranks ``Ownership.ranks_of(a)``; analysis rank 0 gathers the small
tables and writes the report.  Each stage goes through
``parallel.collectively``, so an error on one rank stops all of them instead
of leaving the others blocked in the next collective.
"""

import sys
import time

from mpigraph import clock, metrics, parallel, report, trace

# Stage timings go to stderr when the run has more records than this (or MPIGRAPH_VERBOSE=1).
PROGRESS_RECORDS = 1_000_000


class Progress:
    """Stage names and timings on stderr, from analysis rank 0 only.

    Printed when config.verbose, or when the run is big unless config.quiet.
    """

    def __init__(self, is_root, config):
        self.may_print = is_root and (config.verbose or not config.quiet)
        self.enabled = is_root and config.verbose
        self.done = []   # (stage, seconds, note) of the stages so far

    def enable_for(self, n_records):
        """Switch on for big runs, printing the stages already done."""
        if self.may_print and not self.enabled and n_records > PROGRESS_RECORDS:
            self.enabled = True
            for entry in self.done:
                self._print(*entry)

    def run(self, name, step, *args, note=None):
        """step(*args), timed; `note(result)` adds a few words to the stage's line."""
        started = time.perf_counter()
        result = step(*args)
        self.done.append((name, time.perf_counter() - started, note(result) if note else ""))
        if self.enabled:
            self._print(*self.done[-1])
        return result

    @staticmethod
    def _print(name, seconds, note):
        print("mpigraph: %-8s %8.3f s%s" % (name, seconds, "  " + note if note else ""), file=sys.stderr, flush=True)


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


def _to_ns(logs):
    """Stage clock: corrected int64 ns (start, end) of every owned record, by trace rank."""
    return {rank: (clock.to_ns(log, log.records["t_start"]), clock.to_ns(log, log.records["t_end"]))
            for rank, log in logs.items()}


def _metrics(comm, logs, times):
    """Stage metrics: local tables on each rank, combined on rank 0 (None elsewhere)."""
    local = parallel.collectively(comm, metrics.local_tables, logs, times)
    return parallel.collectively(comm, metrics.gather_tables, comm, local)


def _write_report(comm, out_dir, info, tables):
    return report.write_report(out_dir, info, tables) if comm.rank == 0 else None


def analyze(run_dir, comm=None, config=None, in_job=False, out_dir=None):
    """Analyse the run in run_dir on the analysis ranks of `comm` (default MPI.COMM_WORLD).

    Collective over comm.  `config` is a config.Config (default: from the
    environment); `in_job` says the ranks of comm are the run's own ranks.
    Analysis rank 0 writes the report files into out_dir (default run_dir), prints summary.txt
    unless config.quiet, and returns the summary text; other ranks return None.
    Raises trace.TraceError for bad logs, report.ReportError when the report
    cannot be written (on the rank that found the problem; the others raise
    parallel.PeerFailed).
    """
    if comm is None:
        comm = _world()
    if config is None:
        from mpigraph import config as config_module

        config = config_module.from_env()
    progress = Progress(comm.rank == 0, config)

    info, logs, n_records = progress.run("trace", _open_owned_logs, comm, run_dir, in_job,
                                         note=lambda r: "%d ranks, %d records" % (r[0].world_size, r[2]))
    progress.enable_for(n_records)
    times = progress.run("clock", parallel.collectively, comm, _to_ns, logs)

    # Hook: match (a later issue).  Pair sends with receives, requests with their
    # completions and the members of each collective instance; build the activity
    # graph (DESIGN.md).  Wait states and imbalance then join the metrics stage.

    tables = progress.run("metrics", _metrics, comm, logs, times)

    # Hook: path (a later issue).  The critical path of the matched graph with
    # config.algorithm, config.splits and config.threshold; its tables join the report.

    text = progress.run("report", parallel.collectively, comm, _write_report, comm, out_dir or info.run_dir, info,
                        tables)
    if comm.rank == 0 and not config.quiet:
        sys.stdout.write(text)
        sys.stdout.flush()
    return text
