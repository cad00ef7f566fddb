"""Analysis throughput per stage and peak memory, on synthetic runs, with 1, 2 and 4 analysis ranks.

    python benchmarks/bench_analysis.py [--records 1e5 1e6 1e7] [--nprocs 1 2 4] [--repeat 3]
                                        [--structure bsp|halo] [--trace-ranks 100 4096]
                                        [--algorithms dijkstra ...] [--prefault] [--run DIR]

With --run, a recorded run (a real program's: ``mpigraph run --analyze off --out DIR``) is
analysed instead of synthetic ones, and left where it is.

For each size it writes a synthetic run (mpigraph.testing.synth: 1024 trace
ranks from 1e7 records up, fewer below) into a temporary directory, then runs
``mpiexec -n K python bench_analysis.py --probe RUN`` which calls
mpigraph.analysis.analyze with MPIGRAPH_VERBOSE=1: every stage the pipeline
times through analysis.Progress is printed and parsed here, so a new stage
(match, path, ...) shows up in the table without a change to this script.
Each probe rank reports its peak RSS (getrusage) and its RSS before the
analysis started (Python, numpy, mpi4py imported).  The logs are read from
the page cache (they were just written): cold-cache reads are disk-bound.

Printed per (records, K, algorithm), first per analysis rank and stage, and for the whole
analyze() call ("whole"): its wall and CPU seconds (the least of the repeats), the records it
owns and the bytes it sent and received (mpigraph.comm.meter; exact counts, checked to be the same
in every repeat), each against 1/K of a total (and of the CPU, the seconds inside MPI calls,
MPIClock: with more ranks than cores those are mostly spinning while another rank works): CPU against K=1's (when K=1 ran first), records
against the run's, bytes against the K ranks' (K=1 moves none); and per stage whether every rank
is within 1.5x of 1/K ("ok"; CPU: at most 1.5x), and rank 0's CPU against the ranks' mean (at
most 2x): a rank-0 funnel shows in CPU seconds and bytes
even where K ranks share fewer cores and wall times cannot.  Then, as each finishes and again as
one markdown table at the end (as in docs/benchmarks.md): the median over repeats of each stage's seconds and
records/s per analysis rank, the whole analyze() call, and the largest peak
RSS of any analysis rank with its growth per million records it owned; last, the per-rank
figures as a markdown table (a row per K and rank).

Memory new to a process can cost far more than the analysis's own work: on a VM
whose guest hands freed memory back to the host, every page the analysis's
peak grows by is backed by the host again on first touch (the first line
after the machine's says how fast that is here, against writing the same
memory again).  With --prefault every configuration runs a
second time ("pre-faulted" rows) with each analysis rank's memory backed
beforehand: the rank first writes as much memory as the fresh run's largest
peak RSS and frees it, and glibc is told to keep freed memory in the process
(MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_), so the analysis reuses those
pages.  Those rows measure the analysis's own work, as on a machine where
fresh memory is cheap; the fresh rows what a user of this machine waits.
"""

import argparse
import contextlib
import dataclasses
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import compile_mpigraph, describe_machine, describe_memory, memory_gib  # noqa: E402

STAGE_LINE = re.compile(r"^mpigraph: (\S+)\s+([0-9.]+) s")
PROBE_LINE = re.compile(r"^probe rank (\d+) wall ([0-9.]+) base_kb (\d+) peak_kb (\d+) records (\d+)")
STAGE_RANK_LINE = re.compile(r"^probe stage rank (\d+) (\S+) wall ([0-9.]+) cpu ([0-9.]+) sent (\d+) received (\d+) "
                             r"mpi ([0-9.]+)")


# ---- inside the job: one analysis ------------------------------------------------

def vm_rss_kb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


class MPIClock:
    """CPU seconds this process spends inside mpi4py's calls, per stage (`by_stage`).

    A communicator whose every method is timed (time.process_time) stands in for the analysis's
    (``comm``), MPI.Request.Waitall is timed the same way (``install``), and the stages' Meter
    adds up each stage's share.  With more ranks than cores an MPI wait spins (MPICH polls):
    that CPU is waiting for another rank, not work.  Not counted: the idle waits' tests
    (comm.parallel.wait_idly sleeps between them, taking little CPU)."""

    def __init__(self):
        self.cpu = 0.0
        self.by_stage = {}

    def timed(self, call):
        def run(*args, **kwargs):
            started = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                self.cpu += time.process_time() - started
        return run

    def comm(self, comm):
        """`comm` with every method call timed."""
        clock = self

        class Timed:
            def __getattr__(self, name):
                value = getattr(comm, name)
                return clock.timed(value) if callable(value) else value
        return Timed()

    def install(self, MPI, meter):
        """Time MPI.Request.Waitall, and every stage's MPI seconds through meter.Meter."""
        clock = self

        class Request(MPI.Request):
            Waitall = staticmethod(self.timed(MPI.Request.Waitall))

        class Meter(meter.Meter):
            @contextlib.contextmanager
            def stage(self, name):
                before = clock.cpu
                try:
                    with super().stage(name):
                        yield
                finally:
                    clock.by_stage[name] = clock.cpu - before

        MPI.Request, meter.Meter = Request, Meter


def probe(run_dir, prefault_mb):
    import resource

    import numpy

    from mpi4py import MPI

    from mpigraph import analysis
    from mpigraph.comm import meter, parallel
    from mpigraph.trace import logs as trace
    from mpigraph.util.left_out import left_out

    mpi_clock = MPIClock()
    mpi_clock.install(MPI, meter)
    comm = MPI.COMM_WORLD
    info = trace.find_run(run_dir)
    owned = parallel.Ownership(info.world_size, comm.size).ranks_of(comm.rank)
    records = logged_records(run_dir, owned)
    base = vm_rss_kb()
    if prefault_mb:      # back the memory the analysis will need, then free it (glibc keeps it: see the doc)
        block = numpy.ones(prefault_mb * 2**20 // 8, numpy.int64)
        del block
    comm.Barrier()
    sent, received = meter.totals()
    started, cpu = time.perf_counter(), time.process_time()
    with left_out():      # as `mpigraph analyze` and the in-job analysis run it: without pandas
        analysis.analyze(run_dir, mpi_clock.comm(comm))
    wall = time.perf_counter() - started
    mpi_clock.by_stage[WHOLE] = mpi_clock.cpu
    # The whole analyze() call as one more "stage": what the rank did in all, between the stages too.
    whole = meter.Stage(WHOLE, wall, time.process_time() - cpu, meter.totals()[0] - sent, meter.totals()[1] - received)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for rank, line in enumerate(comm.gather((wall, base, peak, records), root=0) or []):
        print("probe rank %d wall %.6f base_kb %d peak_kb %d records %d" % ((rank,) + line), flush=True)
    for rank, (stages, in_mpi) in enumerate(comm.gather((meter.last.stages + [whole], mpi_clock.by_stage), root=0) or []):
        for s in stages:
            print("probe stage rank %d %s wall %.6f cpu %.6f sent %d received %d mpi %.6f"
                  % (rank, s.name, s.wall_s, s.cpu_s, s.sent, s.received, in_mpi.get(s.name, 0.0)), flush=True)


# ---- the driver ---------------------------------------------------------------------

def run_shape(records, ranks=None):
    """(trace ranks, calls per rank) for about `records` records (on `ranks` trace ranks when given)."""
    if ranks is None:
        ranks = 1024 if records >= 10_000_000 else max(8, records // 10_000)
    return ranks, max(3, round(records / ranks))


def logged_records(run_dir, ranks):
    """The records in the logs of trace ranks `ranks`, as each log's header counts them (the
    count the analysis reads; a log's file may hold padding after them)."""
    from mpigraph.trace import logs as trace

    return sum(int(trace.read_header(trace.log_path(run_dir, r))[0]["n_records"]) for r in ranks)


def recorded(run_dir):
    """(run_dir, records, trace ranks) of a recorded run."""
    from mpigraph.trace import logs as trace

    info = trace.find_run(run_dir)
    n = logged_records(run_dir, range(info.world_size))
    print("recorded run %s: %d ranks, %d records" % (info.run_dir, info.world_size, n), flush=True)
    return info.run_dir, n, info.world_size


def generate(workdir, records, structure, trace_ranks=None):
    from mpigraph.testing import synth

    ranks, calls = run_shape(records, trace_ranks)
    out = os.path.join(workdir, "%s-%d-%d" % (structure, records, ranks))
    started = time.perf_counter()
    synth.generate(out, ranks, calls, structure)
    size = sum(e.stat().st_size for e in os.scandir(os.path.join(out, "raw")))
    n = synth.Params(ranks=ranks, calls=calls, structure=structure).records_per_rank * ranks
    print("generated %s: %d ranks, %d records, %.2f GB, %.1f s"
          % (out, ranks, n, size / 1e9, time.perf_counter() - started), flush=True)
    return out, n, ranks


# glibc keeps what the analysis frees in the process, for the pre-faulted pages to be reused.
RETAIN_FREED_MEMORY = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**62)}


def analyse_once(run_dir, nprocs, algorithm, prefault_mb=0):
    from mpigraph.shim.launcher import find_mpi_tool

    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIGRAPH_") and k != "LD_PRELOAD"}
    env.update(MPIGRAPH_VERBOSE="1", MPIGRAPH_QUIET="1", MPIGRAPH_ALGORITHM=algorithm)
    if prefault_mb:
        env.update(RETAIN_FREED_MEMORY)
    cmd = [find_mpi_tool("mpiexec"), "-n", str(nprocs), sys.executable, os.path.abspath(__file__), "--probe", run_dir,
           "--prefault-mb", str(prefault_mb)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit("analysis failed (%s):\n%s" % (" ".join(cmd), result.stderr[-3000:]))
    stages = {}
    for line in result.stderr.splitlines():
        m = STAGE_LINE.match(line)
        if m:
            stages[m.group(1)] = float(m.group(2))
    probes = [tuple(map(float, m.groups())) for m in map(PROBE_LINE.match, result.stdout.splitlines()) if m]
    per_rank = {}      # {stage: [(rank, wall, cpu, sent, received, cpu in MPI)]}
    for m in filter(None, map(STAGE_RANK_LINE.match, result.stdout.splitlines())):
        rank, name, wall, cpu, sent, received, mpi = m.groups()
        per_rank.setdefault(name, []).append((int(rank), float(wall), float(cpu), int(sent), int(received),
                                              float(mpi)))
    return stages, probes, per_rank


def measure(run_dir, n_records, nprocs, algorithm, repeat, prefault_mb=0):
    """(stages, wall, peak, growth, base, per-rank figures): medians over `repeat` analyses; the
    per-rank figures (rank_figures) are the least CPU of the repeats."""
    runs = [analyse_once(run_dir, nprocs, algorithm, prefault_mb) for _ in range(repeat)]
    stage_names = list(runs[0][0])
    stages = {name: statistics.median(r[0].get(name, float("nan")) for r in runs) for name in stage_names}
    wall = statistics.median(max(p[1] for p in r[1]) for r in runs)
    peak = max(p[3] for r in runs for p in r[1])                 # KB, the largest rank
    growth = max((p[3] - p[2]) / max(p[4], 1) * 1e6 for r in runs for p in r[1])   # KB per M records owned
    base = statistics.median(p[2] for r in runs for p in r[1])
    per_rank = rank_figures([r[2] for r in runs], [[int(p[4]) for p in r[1]] for r in runs])
    return stages, wall, peak, growth, base, per_rank


# The probe's row for the whole analyze() call, after the stages' rows.
WHOLE = "whole"

# A rank's share of records, CPU seconds or bytes is balanced when it is within this factor of 1/K
# (issue 28: no rank-0 funnel).
BALANCE_FACTOR = 1.5


@dataclasses.dataclass
class RankFigures:
    """One configuration's per-rank figures, each a {stage: [value per rank]}: `cpu`, the least
    over the repeats (the machine's noise only adds), with `mpi`, the CPU inside MPI calls of
    that same repeat (MPIClock), and `wall`, the least; `sent`, `received` and `records[rank]`,
    counts that are the same in every repeat (`exact` says whether they were; else the first's)."""

    records: list
    cpu: dict
    mpi: dict
    wall: dict
    sent: dict
    received: dict
    exact: bool

    @property
    def k(self):
        return len(self.records)


def rank_figures(runs, records):
    """RankFigures from the repeats' per-rank rows ({stage: [(rank, wall, cpu, sent, received,
    mpi)]}) and records owned per rank."""
    by_rank = [{name: sorted(rows) for name, rows in run.items()} for run in runs]
    first = by_rank[0]
    cpu, mpi, wall = {}, {}, {}
    for name, rows in first.items():
        least = [min((run[name][rank] for run in by_rank), key=lambda row: row[2]) for rank in range(len(rows))]
        cpu[name], mpi[name] = [row[2] for row in least], [row[5] for row in least]
        wall[name] = [min(run[name][rank][1] for run in by_rank) for rank in range(len(rows))]
    counts = [({name: [row[3:5] for row in rows] for name, rows in run.items()}, rec) for run, rec in zip(by_rank, records)]
    return RankFigures(records[0], cpu, mpi, wall, {n: [r[3] for r in rows] for n, rows in first.items()},
                       {n: [r[4] for r in rows] for n, rows in first.items()}, all(c == counts[0] for c in counts))


def ratio(value, total, k):
    """`value` against 1/k of `total`: 1.00 when a rank has exactly its share (None: no total)."""
    return value * k / total if total else None


def ratio_cell(value):
    return "%.2fx" % value if value is not None else "-"


def within(ratios, upper_only=False):
    """Whether every ratio is within BALANCE_FACTOR of 1 (below it: upper_only); no ratios: yes."""
    ratios = [r for r in ratios if r is not None]
    return all(r <= BALANCE_FACTOR and (upper_only or r >= 1 / BALANCE_FACTOR) for r in ratios)


def print_rank_shares(figures, one):
    """Per stage and analysis rank: wall and CPU seconds, records owned, bytes sent and received,
    each against 1/K of a total: CPU against K=1's (`one`, the RankFigures of K=1; without it the
    sum over these K ranks), records against all, bytes against the sum over these K ranks (K=1
    moves none); then per stage whether each is within BALANCE_FACTOR of 1/K.

    CPU seconds and bytes show a rank-0 funnel where wall times cannot (more ranks than cores)."""
    k = figures.k
    base = "K=1" if one is not None else "K=%d" % k
    print("  per analysis rank (K=%d): x = value / (total / K); CPU against %s's total, records against all, bytes "
          "against these K ranks' total; ok = every rank within %.1fx of 1/K (CPU: at most); CPU least of the "
          "repeats (in MPI: of it, inside MPI calls: waiting, where ranks share cores), records and bytes %s"
          % (k, base, BALANCE_FACTOR,
                                               "exact (the same in every repeat)" if figures.exact
                                               else "DIFFERENT BETWEEN REPEATS (the first repeat's)"), flush=True)
    print("  %-8s %4s %8s %8s %7s %8s %11s %6s %12s %6s %12s %6s" % ("stage", "rank", "wall s", "cpu s", "x",
                                                                       "in MPI s", "records", "x", "sent B", "x",
                                                                       "received B", "x"))
    n_records = sum(figures.records)
    for name in figures.cpu:
        cpu, sent, received = figures.cpu[name], figures.sent[name], figures.received[name]
        cpu_total = sum(one.cpu[name]) if one is not None and name in one.cpu else sum(cpu)
        shares = {"records": [ratio(r, n_records, k) for r in figures.records],
                  "cpu": [ratio(c, cpu_total, k) for c in cpu],
                  "sent": [ratio(b, sum(sent), k) for b in sent], "received": [ratio(b, sum(received), k) for b in received]}
        for rank in range(k):
            print("  %-8s %4d %8.3f %8.3f %7s %8.3f %11d %6s %12d %6s %12d %6s"
                  % (name, rank, figures.wall[name][rank], cpu[rank], ratio_cell(shares["cpu"][rank]),
                     figures.mpi[name][rank], figures.records[rank], ratio_cell(shares["records"][rank]), sent[rank],
                     ratio_cell(shares["sent"][rank]), received[rank], ratio_cell(shares["received"][rank])))
        # Bytes by direction: in a funnel rank 0 receives what every other rank sends, so the sum
        # of both directions looks even at K=2 while the received bytes are all on rank 0.
        verdict = {"records": within(shares["records"]), "cpu": within(shares["cpu"], upper_only=True),
                   "bytes": within(shares["sent"]) and within(shares["received"])}
        print("  %-8s ok: %s; %s" % (name, ", ".join("%s %s" % (what, "yes" if ok else "NO")
                                                    for what, ok in verdict.items()), rank0_line(cpu)), flush=True)


# Issue 28: no stage on analysis rank 0 takes more than this many times its mean over the ranks.
RANK0_FACTOR = 2.0


def rank0_line(cpu):
    """"rank 0's CPU 1.05x the ranks' mean (at most 2x: yes)" for a stage's CPU seconds per rank."""
    of_mean = ratio(cpu[0], sum(cpu), len(cpu))
    if of_mean is None:
        return "rank 0's CPU: none spent"
    return "rank 0's CPU %.2fx the ranks' mean (at most %gx: %s)" % (of_mean, RANK0_FACTOR,
                                                                   "yes" if of_mean <= RANK0_FACTOR else "NO")


def prefault_fits(peak_mb, nprocs):
    """Whether every analysis rank can hold its pre-faulted block at once (they all do, before
    the analysis starts): a 1e8-record run's would not fit this 24 GiB machine."""
    return nprocs * peak_mb <= memory_gib("MemAvailable") * 1024 * 0.9


def rate(n_records, nprocs, seconds):
    """Records per second per analysis rank, in millions."""
    return n_records / nprocs / seconds / 1e6 if seconds > 0 else float("inf")


def print_row(n_records, ranks, nprocs, algorithm, memory, result):
    stages, wall, peak, growth, base, _ = result
    per_rank = n_records / nprocs
    cells = ["%-8s %6.3f s %7.2f M/s" % (name, s, rate(n_records, nprocs, s)) for name, s in stages.items()]
    print("%11d %5d %2d %-14s %-11s | %s | all %7.3f s %6.2f M/s/rank | peak RSS %6.0f MB (base %3.0f), %s MB per M records"
          % (n_records, ranks, nprocs, algorithm, memory, " | ".join(cells), wall, per_rank / wall / 1e6,
             peak / 1024, base / 1024, growth_cell(memory, growth)), flush=True)


def growth_cell(memory, growth_kb):
    """Peak growth per M records; not measured where the pre-faulted block is in the peak."""
    return "%.0f" % (growth_kb / 1024) if memory == FRESH else "-"


FRESH, PREFAULTED = "fresh", "pre-faulted"


TABLE_STAGES = ("trace", "clock", "match", "metrics", "path", "report")


def print_table(rows):
    """The rows again as a markdown table, as docs/benchmarks.md shows them."""
    print("\n| records | trace ranks | K | algorithm | memory | " + " | ".join(TABLE_STAGES)
          + " | whole analysis | peak RSS of a rank | MB per M records |")
    print("|" + " --- |" * (len(TABLE_STAGES) + 8))
    for n_records, ranks, nprocs, algorithm, memory, (stages, wall, peak, growth, _, _) in rows:
        cells = ["%.3f s (%.2f M/s)" % (stages[name], rate(n_records, nprocs, stages[name]))
                 if name in stages else "-" for name in TABLE_STAGES]
        print("| {:,} | {} | {} | {} | {} | {} | {:.2f} s ({:.2f} M/s) | {:.0f} MB | {} |".format(
            n_records, ranks, nprocs, algorithm, memory, " | ".join(cells), wall, rate(n_records, nprocs, wall),
            peak / 1024, growth_cell(memory, growth)), flush=True)


def print_rank_table(rows, one):
    """The fresh rows' per-rank figures as a markdown table: each rank's records, its CPU seconds
    per stage and whole (x: against 1/K of K=1's total, when K=1 ran; and the seconds of it inside
    MPI calls) and the bytes it sent and received in all (x: against 1/K of these K ranks' total)."""
    fresh = [row for row in rows if row[4] == FRESH]
    if not fresh:
        return
    names = list(fresh[0][5][5].cpu)
    print("\n| records | K | algorithm | rank | records owned | " + " | ".join(n + " CPU s (x; in MPI s)" for n in names)
          + " | sent B | received B |")
    print("|" + " --- |" * (len(names) + 7))
    for n_records, _, k, algorithm, _, result in fresh:
        f, base = result[5], one.get((n_records, algorithm))
        sent, received = f.sent[WHOLE], f.received[WHOLE]
        for rank in range(k):
            cpu = ["%.3f (%s; %.3f)" % (f.cpu[n][rank], ratio_cell(ratio(f.cpu[n][rank], sum((base or f).cpu[n]), k)),
                                         f.mpi[n][rank]) for n in names]
            print("| {:,} | {} | {} | {} | {:,} ({}) | {} | {:,} ({}) | {:,} ({}) |".format(
                n_records, k, algorithm, rank, f.records[rank], ratio_cell(ratio(f.records[rank], n_records, k)),
                " | ".join(cpu), sent[rank], ratio_cell(ratio(sent[rank], sum(sent), k)), received[rank],
                ratio_cell(ratio(received[rank], sum(received), k))), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", metavar="RUN", help=argparse.SUPPRESS)
    parser.add_argument("--records", nargs="+", type=float, default=[1e5, 1e6, 1e7])
    parser.add_argument("--nprocs", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--structure", default="bsp", choices=["bsp", "halo"])
    parser.add_argument("--trace-ranks", nargs="+", type=int, metavar="P",
                        help="trace ranks of each synthetic run (default: 1,024 from 1e7 records, else records / "
                             "10,000): the same records on more ranks show the analysis's cost per trace rank")
    parser.add_argument("--algorithms", nargs="+", default=["dijkstra"],
                        help="MPIGRAPH_ALGORITHM values to time (the path stage, once it exists)")
    parser.add_argument("--run", metavar="DIR", help="a recorded run to analyse instead of synthetic ones")
    parser.add_argument("--workdir", help="where the synthetic runs go (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic runs")
    parser.add_argument("--prefault", action="store_true",
                        help="run each configuration again with its memory backed beforehand (see the module doc)")
    parser.add_argument("--prefault-mb", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        return probe(args.probe, args.prefault_mb)
    print(describe_machine())
    print(describe_memory())
    print(compile_mpigraph())
    print("%s; median of %d; stage seconds and records/s per analysis rank (M/s)"
          % ("the recorded run " + args.run if args.run else "synthetic %s runs" % args.structure, args.repeat))
    workdir = args.workdir or tempfile.mkdtemp(prefix="mpigraph-bench-")
    rows = []
    one = {}      # (records, algorithm) -> RankFigures of K=1 (the first K when it is 1), for the CPU ratios
    try:
        sizes = [(None, None)] if args.run else [(r, t) for r in args.records for t in args.trace_ranks or [None]]
        for records, trace_ranks in sizes:
            run_dir, n_records, ranks = recorded(args.run) if args.run else generate(workdir, int(records),
                                                                                    args.structure, trace_ranks)
            print("%11s %5s %2s %-14s %-11s | stages" % ("records", "ranks", "K", "algorithm", "memory"))
            for nprocs in args.nprocs:
                for algorithm in args.algorithms:
                    result = measure(run_dir, n_records, nprocs, algorithm, args.repeat)
                    one.setdefault((n_records, algorithm), result[5] if nprocs == 1 else None)
                    print_rank_shares(result[5], one[n_records, algorithm])
                    print_row(n_records, ranks, nprocs, algorithm, FRESH, result)
                    rows.append((n_records, ranks, nprocs, algorithm, FRESH, result))
                    peak_mb = int(result[2] / 1024 * 1.1)     # the fresh runs' largest peak, and some room
                    if args.prefault and not prefault_fits(peak_mb, nprocs):
                        print("pre-faulted run left out: %d ranks x %d MB is more than the %.1f GiB available"
                              % (nprocs, peak_mb, memory_gib("MemAvailable")), flush=True)
                    elif args.prefault:
                        result = measure(run_dir, n_records, nprocs, algorithm, args.repeat, peak_mb)
                        print_rank_shares(result[5], None)
                        print_row(n_records, ranks, nprocs, algorithm, PREFAULTED, result)
                        rows.append((n_records, ranks, nprocs, algorithm, PREFAULTED, result))
            if not args.keep and not args.run:
                shutil.rmtree(run_dir)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(rows)
    print_rank_table(rows, one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
