"""The fixed cost of an analysis in the job: an empty MPI program bare, recording only, analysed.

    python benchmarks/bench_startup.py [--nprocs 2 4 16] [--rounds 5] [--breakdown]

The program is benchmarks/init_finalize.c (MPI_Init, MPI_Finalize, nothing between), built with
the MPI's mpicc.  For each rank count, each round runs it once in each mode, in turn, so a busy
moment of a shared machine hits all modes:

    bare      mpiexec -n N prog
    record    the shim preloaded, MPIGRAPH_ANALYZE=off (only the raw logs)
    analysis  the shim preloaded, the analysis at MPI_Finalize (MPIGRAPH_QUIET=1)

Printed, after the machine line: a markdown table with the best and the median wall time of the
whole mpiexec per mode, analysis - record (what the in-job analysis of an empty run costs: issue
28 asks at most 0.3 s at 16 ranks), the same difference in CPU seconds of all the job's
processes (steadier than wall time on a busy machine) and the analysis ranks the shim chose (the
part files of calls.parquet/).  With --breakdown, two more analysed runs per rank count: one with the analysis
rank's stage timings (MPIGRAPH_VERBOSE): the stages and the rest of analysis - record (Python's
start, the imports, the exit); one with Python's import log (PYTHONPROFILEIMPORTTIME): the
slowest imports.
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402
from bench_overhead import build_empty  # noqa: E402

MODES = ("bare", "record", "analysis")
STAGE_LINE = re.compile(r"^mpigraph: (\S+)\s+(\d+\.\d+) s  peak RSS", re.M)
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)\s*$", re.M)


def children_cpu():
    """CPU seconds (user + system) of this process's finished descendants: mpiexec, its proxies, the ranks."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(exe, nprocs, mode, workdir, extra_env=None):
    """(wall seconds of one mpiexec, CPU seconds of all its processes, its stderr, the run directory or
    None when bare)."""
    from mpigraph.shim.launcher import find_mpi_tool
    from mpigraph.shim.lib import library_path

    out = os.path.join(workdir, "run-%s" % mode)
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIGRAPH_") and k != "LD_PRELOAD"}
    cmd = [find_mpi_tool("mpiexec"), "-n", str(nprocs)]
    if mode != "bare":
        settings = {"LD_PRELOAD": library_path(), "MPIGRAPH_OUT": out, "MPIGRAPH_QUIET": "1",
                    "MPIGRAPH_ANALYZE": "off" if mode == "record" else "on", **(extra_env or {})}
        for name, value in settings.items():
            cmd += ["-genv", name, value]
    started, cpu = time.perf_counter(), children_cpu()
    result = subprocess.run(cmd + [exe], cwd=workdir, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu
    if result.returncode != 0:
        raise SystemExit("%s failed in mode %s:\n%s" % (" ".join(cmd + [exe]), mode, result.stderr[-2000:]))
    return wall, cpu, result.stderr, (out if mode != "bare" else None)


def analysis_ranks(run_dir):
    """How many ranks analysed the run: one part of calls.parquet/ per analysis rank."""
    parts = os.path.join(run_dir, "calls.parquet")
    return len(os.listdir(parts)) if os.path.isdir(parts) else 1


def measure(exe, nprocs, rounds, workdir):
    """({mode: [wall seconds per round]}, {mode: [CPU seconds per round]}, analysis ranks)."""
    times = {mode: [] for mode in MODES}
    cpu = {mode: [] for mode in MODES}
    ranks = None
    for _ in range(rounds):
        for mode in MODES:
            wall, seconds, _, run_dir = run_once(exe, nprocs, mode, workdir)
            times[mode].append(wall)
            cpu[mode].append(seconds)
            if mode == "analysis":
                ranks = analysis_ranks(run_dir)
    return times, cpu, ranks


def _best_median(values):
    return min(values), statistics.median(values)


def table_row(nprocs, times, cpu, ranks):
    cells = [str(nprocs)] + ["%.3f / %.3f" % _best_median(times[m]) for m in MODES]
    for figures in (times, cpu):
        (a, a_med), (r, r_med) = _best_median(figures["analysis"]), _best_median(figures["record"])
        cells.append("%.3f / %.3f" % (a - r, a_med - r_med))
    return "| " + " | ".join(cells + [str(ranks)]) + " |"


# CPU: of all the job's processes (what the analysis costs the machine, and a figure a busy
# machine disturbs less than wall time).
TABLE_HEADER = ("| ranks | bare s | record s | analysis s | analysis - record s | CPU analysis - record s "
                "| analysis ranks |\n| --- | --- | --- | --- | --- | --- | --- |")


def breakdown(exe, nprocs, workdir, record_s, top):
    """Lines: the stages of one analysed run and the rest of its cost over recording (Python's start,
    the imports, the exit); the slowest imports, from another run with Python's import log (which
    slows the imports down: not the run that is timed)."""
    wall, _, stderr, _ = run_once(exe, nprocs, "analysis", workdir, {"MPIGRAPH_VERBOSE": "1"})
    stages = [(name, float(s)) for name, s in STAGE_LINE.findall(stderr)]
    lines = ["%d ranks, one analysed run (MPIGRAPH_VERBOSE): %.3f s, recording only (best) %.3f s"
             % (nprocs, wall, record_s)]
    lines += ["  stage %-9s %.3f s" % stage for stage in stages]
    lines.append("  the rest (Python's start, imports, exit): %.3f s"
                 % (wall - record_s - sum(s for _, s in stages)))
    _, _, stderr, _ = run_once(exe, nprocs, "analysis", workdir, {"PYTHONPROFILEIMPORTTIME": "1"})
    imports = [(int(cum), name) for _, cum, indent, name in IMPORT_LINE.findall(stderr) if not indent]
    lines.append("  another run, with Python's import log: top-level imports %.3f s in all, the slowest:"
                 % (sum(c for c, _ in imports) / 1e6))
    for cumulative, name in sorted(imports, reverse=True)[:top]:
        lines.append("    import %-40s %.3f s" % (name, cumulative / 1e6))
    return lines


def setup_notes():
    """Lines on what, besides the code, sets the start-up's cost: compiled modules, pandas."""
    import importlib.util

    import mpigraph.analysis

    notes = []
    if not os.path.exists(importlib.util.cache_from_source(mpigraph.analysis.__file__)):
        notes.append("note: mpigraph's modules have no .pyc%s: every analysis compiles them (0.07 s on the 2-core "
                     "machine)" % (" and PYTHONDONTWRITEBYTECODE is set" if os.environ.get("PYTHONDONTWRITEBYTECODE")
                                   else ""))
    if importlib.util.find_spec("pandas") is not None:
        notes.append("note: pandas is installed (the in-job analysis keeps pyarrow from importing it)")
    return notes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--breakdown", action="store_true",
                        help="one more analysed run per rank count: its stages and slowest imports")
    parser.add_argument("--top", type=int, default=12, help="imports listed by --breakdown")
    parser.add_argument("--program", help="init_finalize.c built elsewhere (a machine without mpicc)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(describe_machine())
    for note in setup_notes():
        print(note)
    workdir = tempfile.mkdtemp(prefix="mpigraph-startup-")
    try:
        exe = os.path.abspath(args.program) if args.program else build_empty(workdir)
        print("an empty program (MPI_Init, MPI_Finalize), best / median of %d rounds (modes interleaved)\n"
              % args.rounds)
        print(TABLE_HEADER, flush=True)
        results = {}
        for nprocs in args.nprocs:
            results[nprocs] = measure(exe, nprocs, args.rounds, workdir)
            print(table_row(nprocs, *results[nprocs]), flush=True)
        if args.breakdown:
            for nprocs in args.nprocs:
                print()
                print("\n".join(breakdown(exe, nprocs, workdir, min(results[nprocs][0]["record"]), args.top)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\nload average at the end: %.2f %.2f %.2f; the benchmark took %.0f s"
          % (os.getloadavg() + (time.perf_counter() - started,)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
