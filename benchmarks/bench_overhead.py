"""Run time of real MPI programs without the shim, recording only, and recording + analysis.

    python benchmarks/bench_overhead.py [--nprocs 2] [--rounds 3] [--only demo prk-stencil ...]

Programs: the bundled demo (built by mpigraph) and public MPI programs that you
build yourself (see benchmarks/README.md): they are looked for in
$MPIGRAPH_BENCH_APPS/<name>/<binary> (default ~/.cache/mpigraph/apps) and
skipped with a message when absent.  Each round runs every program once in
each mode, in turn, so a busy moment of the (shared) machine hits all modes:

    bare     mpiexec -n N prog
    record   the shim preloaded, MPIGRAPH_ANALYZE=off (only the raw logs)
    full     the shim preloaded, analysis at MPI_Finalize (MPIGRAPH_QUIET=1)

Printed: median wall time of the whole mpiexec per mode, the overhead of each
mode as (t_mode - t_bare) / t_bare, and the records the shim wrote.
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

Program = collections.namedtuple("Program", "name binary args kind")

# name (directory under the apps dir), binary, arguments, what kind of program it is
PROGRAMS = [
    Program("prk-stencil", "stencil", ["100", "2000"], "PRK Stencil: 2-D stencil, halo exchange, C"),
    Program("prk-transpose", "transpose", ["50", "2000"], "PRK Transpose: all-to-all style blocks, C"),
    Program("prk-p2p", "p2p", ["200", "2000", "2000"], "PRK Synch_p2p: pipelined point-to-point wavefront, C"),
    Program("hpcg", "xhpcg", ["--nx=16", "--ny=16", "--nz=16", "--rt=1"], "HPCG: CG with multigrid, C++"),
    Program("minife", "miniFE.x", ["-nx", "60", "-ny", "60", "-nz", "60"], "miniFE: implicit finite elements, C++"),
]
MODES = ("bare", "record", "full")


def apps_dir():
    return os.environ.get("MPIGRAPH_BENCH_APPS") or os.path.join(os.path.expanduser("~"), ".cache", "mpigraph",
                                                                 "apps")


def find_programs(only):
    """[(Program, path)] of the programs present; says which are skipped and why."""
    from mpigraph.demo import build_demo

    found = [(Program("demo", "demo", [], "mpigraph demo: imbalanced Allreduce + ring, C"), build_demo())]
    for program in PROGRAMS:
        path = os.path.join(apps_dir(), program.name, program.binary)
        if os.access(path, os.X_OK):
            found.append((program, path))
        else:
            print("skipped %s: no %s (build it as benchmarks/README.md says)" % (program.name, path))
    return [(p, path) for p, path in found if not only or p.name in only]


def run_once(path, args, nprocs, mode, workdir):
    """Wall seconds of one mpiexec, and the records written (record/full)."""
    from mpigraph._lib import library_path

    out = os.path.join(workdir, "run-%s" % mode)
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIGRAPH_") and k != "LD_PRELOAD"}
    cmd = ["mpiexec", "-n", str(nprocs)]
    if mode != "bare":
        cmd += ["-genv", "LD_PRELOAD", library_path(), "-genv", "MPIGRAPH_OUT", out,
                "-genv", "MPIGRAPH_ANALYZE", "off" if mode == "record" else "on", "-genv", "MPIGRAPH_QUIET", "1"]
    started = time.perf_counter()
    result = subprocess.run(cmd + [path] + args, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit("%s failed in mode %s:\n%s" % (" ".join(cmd + [path] + args), mode, result.stderr[-2000:]))
    return wall, count_records(out) if mode != "bare" else 0


def count_records(run_dir):
    from mpigraph import trace

    return sum(log.n_records for log in trace.open_run(run_dir).logs.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", help="program names to run (default: all found)")
    args = parser.parse_args()
    print(describe_machine())
    programs = find_programs(args.only)
    print("%d ranks per program, median of %d rounds (modes interleaved); overhead = (t - t_bare) / t_bare"
          % (args.nprocs, args.rounds))
    print("%-14s %9s %9s %9s %9s %9s %10s  %s" % ("program", "bare s", "record s", "full s", "record", "full",
                                                  "records", "kind"))
    workdir = tempfile.mkdtemp(prefix="mpigraph-overhead-")
    try:
        for program, path in programs:
            times = {mode: [] for mode in MODES}
            records = 0
            for _ in range(args.rounds):
                for mode in MODES:
                    wall, n = run_once(path, program.args, args.nprocs, mode, workdir)
                    times[mode].append(wall)
                    records = max(records, n)
            t = {mode: statistics.median(v) for mode, v in times.items()}
            print("%-14s %9.3f %9.3f %9.3f %8.1f%% %8.1f%% %10d  %s"
                  % (program.name, t["bare"], t["record"], t["full"], 100 * (t["record"] / t["bare"] - 1),
                     100 * (t["full"] / t["bare"] - 1), records, program.kind), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
