"""Run time of real MPI programs without the shim, recording only, and recording + analysis.

    python benchmarks/bench_overhead.py [--nprocs 2] [--rounds 3] [--only demo prk-stencil ...]

Programs: an empty one (MPI_Init and MPI_Finalize only, benchmarks/init_finalize.c,
at least 15 rounds: its record - bare is the shim's fixed cost per run), the
bundled demo (built by mpigraph) and public MPI programs that you
build yourself (see benchmarks/README.md): they are looked for in
$MPIGRAPH_BENCH_APPS/<name>/<binary> (default ~/.cache/mpigraph/apps) and
skipped with a message when absent.  Each round runs every program once in
each mode, in turn, so a busy moment of the (shared) machine hits all modes:

    bare     mpiexec -n N prog
    record   the shim preloaded, MPIGRAPH_ANALYZE=off (only the raw logs)
    full     the shim preloaded, analysis at MPI_Finalize (MPIGRAPH_QUIET=1)

Printed, after the machine line: a markdown table (docs/benchmarks.md's) with the
median wall time of the whole mpiexec per mode, the overhead of each mode as
(t_mode - t_bare) / t_bare, the records the shim wrote and the MPI calls per
second per rank (calls: records without the PART flag, over t_bare); then the
time of every round, to judge the noise.
"""

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402

# analyse: False skips the "full" mode, for a program whose in-job analysis needs more
# memory than a benchmark machine should give it.
Program = collections.namedtuple("Program", "name binary args kind analyse min_rounds", defaults=(True, 0))

# name (directory under the apps dir), binary, arguments, what kind of program it is.
# Sized for runs of about 5-10 s bare on 2 ranks of a quiet 2-core machine, so that
# the fixed start-up costs (MPI_Init's clock samples, the log file) do not dominate.
# Every program does a fixed amount of work: HPCG gets --rt=0 (one timed CG set),
# since with --rt=T it runs as many sets as fit in T seconds and would hide any overhead.
PROGRAMS = [
    Program("prk-stencil", "stencil", ["2000", "2000"], "2-D stencil, halo exchange (C)"),
    Program("prk-transpose", "transpose", ["800", "2000"], "distributed transpose, all-to-all blocks (C)"),
    # 16 M records (8000 messages per iteration and rank), a critical path of 16 M segments: the
    # extreme case of calls per second, and of a path's length for the in-job analysis.
    Program("prk-p2p", "p2p", ["1000", "1000", "8000"], "pipelined wavefront, one message per row (C)"),
    Program("hpcg", "xhpcg", ["--nx=48", "--ny=48", "--nz=48", "--rt=0"], "CG + multigrid, halo + allreduce (C++)"),
    Program("minife", "miniFE.x", ["-nx", "100", "-ny", "100", "-nz", "100"], "implicit finite elements, CG (C++)"),
]
DEMO = Program("demo", "demo", ["1000"], "the bundled demo: imbalanced allreduce + ring (C)")
# Its record - bare is the shim's fixed cost per run; a fraction of a second a run, so more rounds.
EMPTY = Program("empty", "init_finalize", [], "MPI_Init and MPI_Finalize only: the fixed cost of a run (C)",
                min_rounds=15)
MODES = ("bare", "record", "full")


def apps_dir():
    return os.environ.get("MPIGRAPH_BENCH_APPS") or os.path.join(os.path.expanduser("~"), ".cache", "mpigraph",
                                                                 "apps")


def find_programs(only, workdir):
    """[(Program, path)] of the programs present; says which are skipped and why."""
    from mpigraph.shim.demo import build_demo

    found = [(EMPTY, build_empty(workdir)), (DEMO, build_demo())]
    for program in PROGRAMS:
        path = os.path.join(apps_dir(), program.name, program.binary)
        if os.access(path, os.X_OK):
            found.append((program, path))
        else:
            print("skipped %s: no %s (build it as benchmarks/README.md says)" % (program.name, path))
    return [(p, path) for p, path in found if not only or p.name in only]


def build_empty(workdir):
    """benchmarks/init_finalize.c compiled with the MPI's mpicc, into workdir."""
    from mpigraph.shim.launcher import find_mpi_tool

    exe = os.path.join(workdir, "init_finalize")
    subprocess.run([find_mpi_tool("mpicc"), "-O2", "-o", exe, os.path.join(HERE, "init_finalize.c")], check=True)
    return exe


def run_once(path, args, nprocs, mode, workdir):
    """Wall seconds of one mpiexec, and (records, calls) written (0, 0 when bare)."""
    from mpigraph.shim.lib import library_path
    from mpigraph.shim.launcher import find_mpi_tool

    out = os.path.join(workdir, "run-%s" % mode)
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIGRAPH_") and k != "LD_PRELOAD"}
    cmd = [find_mpi_tool("mpiexec"), "-n", str(nprocs)]
    if mode != "bare":
        cmd += ["-genv", "LD_PRELOAD", library_path(), "-genv", "MPIGRAPH_OUT", out,
                "-genv", "MPIGRAPH_ANALYZE", "off" if mode == "record" else "on", "-genv", "MPIGRAPH_QUIET", "1"]
    started = time.perf_counter()
    result = subprocess.run(cmd + [path] + args, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit("%s failed in mode %s:\n%s" % (" ".join(cmd + [path] + args), mode, result.stderr[-2000:]))
    counts = count_records(out) if mode != "bare" else (0, 0)
    shutil.rmtree(out, ignore_errors=True)  # a long run's logs take hundreds of MB
    return wall, counts


def count_records(run_dir):
    """(records, calls) in a run's logs: calls are the records that are not parts of another."""
    from mpigraph.trace import record
    from mpigraph.trace import logs as trace

    logs = trace.open_run(run_dir).logs.values()
    records = sum(log.n_records for log in logs)
    parts = sum(int(((log.column("flags") & record.PART) != 0).sum()) for log in logs)
    return records, records - parts


Result = collections.namedtuple("Result", "program times records calls")


def measure(program, path, nprocs, rounds, workdir):
    """Result of `rounds` interleaved rounds of the three modes."""
    modes = MODES if program.analyse else MODES[:2]
    times = {mode: [] for mode in modes}
    counts = set()
    for _ in range(max(rounds, program.min_rounds)):
        for mode in modes:
            wall, n = run_once(path, program.args, nprocs, mode, workdir)
            times[mode].append(wall)
            if mode != "bare":
                counts.add(n)
    if len(counts) > 1:
        # Not an error: which Test or Waitany call completes a request can vary from run to run.
        print("note: %s wrote a different number of records in different runs: %s"
              % (program.name, ", ".join("%d" % r for r, _ in sorted(counts))), file=sys.stderr)
    records, calls = max(counts)
    return Result(program, times, records, calls)


def percent(t, t_bare):
    return "%.1f%%" % (100 * (t / t_bare - 1)) if t else "not run"


def table_row(result, nprocs):
    t = {mode: statistics.median(v) for mode, v in result.times.items()}
    t.setdefault("full", None)
    calls_per_s = result.calls / nprocs / t["bare"]
    cells = [result.program.name, result.program.kind, "%.3f" % t["bare"], "%.3f" % t["record"],
             "%.3f" % t["full"] if t["full"] else "not run", percent(t["record"], t["bare"]),
             percent(t["full"], t["bare"]), "{:,}".format(result.records), "{:,.0f}".format(calls_per_s)]
    return "| " + " | ".join(cells) + " |"


TABLE_HEADER = ("| program | kind | bare s | record s | full s | record % | full % | records | calls/s per rank |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def print_rounds(results):
    print("\nwall seconds of each round (bare / record / full):")
    for result in results:
        rounds = zip(*result.times.values())
        print("  %-14s %s" % (result.program.name, "  ".join("/".join("%.2f" % t for t in r) for r in rounds)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", help="program names to run (default: all found)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(describe_machine())
    workdir = tempfile.mkdtemp(prefix="mpigraph-overhead-")
    results = []
    try:
        programs = find_programs(args.only, workdir)
        print("%d ranks per program, median of %d rounds (modes interleaved); overhead = (t - t_bare) / t_bare; "
              "calls/s per rank = calls (records without PART) / ranks / t_bare\n" % (args.nprocs, args.rounds))
        print(TABLE_HEADER, flush=True)
        for program, path in programs:
            results.append(measure(program, path, args.nprocs, args.rounds, workdir))
            print(table_row(results[-1], args.nprocs), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_rounds(results)
    print("\nload average at the end: %.2f %.2f %.2f; the benchmark took %.0f s"
          % (os.getloadavg() + (time.perf_counter() - started,)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
