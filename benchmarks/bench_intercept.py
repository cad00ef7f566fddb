"""Added cost per intercepted MPI call, with and without the shim, in one run.

    python benchmarks/bench_intercept.py [--calls N] [--rounds R] [--compare OTHER/libmpigraph.so]

Compiles benchmarks/intercept.c with the MPI's mpicc, then alternates runs
bare, with the shim preloaded as a user runs it (recording on, analysis off,
MPIGRAPH_LOG_HELPER as set, by default auto), with its log helper thread off
and with failed polls each on their own record (MPIGRAPH_POLL_GAP_NS=0: by
default the iprobe case's polls share records), and prints, after the machine line, a markdown table (docs/benchmarks.md's) of the
median ns per call of each and the difference, in wall time, in the calling
thread's CPU time (user + kernel: the log's page faults count, time spent
preempted does not, so it is the steadier figure on a shared machine) and in
the whole process's CPU time, which also counts the helper thread that
prepares the log's next pages (work moved off the calling thread is still paid
for, by another CPU).  The "log helper" column says whether the helper ran, as
the run's log header records it (auto runs it where the rank has a CPU to
spare: one rank on a machine of two or more CPUs does).  --compare also
preloads another build of the shim (say, of the previous commit) in the same
rounds, so two builds are compared under the same load.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from mpigraph.trace import logs as trace
from mpigraph.shim.lib import library_path
from mpigraph.shim.launcher import find_mpi_tool

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402

CASES = {"iprobe": "MPI_Iprobe on MPI_COMM_SELF", "sendrecv": "0-byte MPI_Sendrecv on MPI_COMM_SELF"}


def compile_probe(workdir):
    exe = os.path.join(workdir, "intercept")
    subprocess.run([find_mpi_tool("mpicc"), "-O2", "-o", exe, os.path.join(HERE, "intercept.c")], check=True)
    return exe


def run_once(exe, calls, variant, workdir, index):
    """({case: (wall ns, thread CPU ns, process CPU ns) per call}, helper ran) of one run of `variant`."""
    lib, env = variant
    cmd = [find_mpi_tool("mpiexec"), "-n", "1"]
    out_dir = os.path.join(workdir, "run-%d" % index)
    if lib:
        for name, value in {"LD_PRELOAD": lib, "MPIGRAPH_OUT": out_dir, "MPIGRAPH_ANALYZE": "off", **env}.items():
            cmd += ["-genv", name, value]
    out = subprocess.run(cmd + [exe, str(calls)], check=True, capture_output=True, text=True).stdout
    helper = trace.open_log(os.path.join(out_dir, "raw", "rank-0.log")).log_helper if lib else None
    shutil.rmtree(out_dir, ignore_errors=True)
    rows = (line.split() for line in out.splitlines() if line.strip())
    return {name: tuple(float(x) for x in values) for name, *values in rows}, helper


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compare", metavar="LIB", help="another libmpigraph.so to measure in the same rounds")
    args = parser.parse_args()
    helper_setting = os.environ.get("MPIGRAPH_LOG_HELPER", "auto")
    # The iprobe case's failed polls share records by default (MPIGRAPH_POLL_GAP_NS): "polls not
    # merged" is the cost of a call that writes its own record.
    variants = {"bare": (None, {}),
                "shim": (library_path(), {}),
                "shim, helper off": (library_path(), {"MPIGRAPH_LOG_HELPER": "off"}),
                "shim, polls not merged": (library_path(), {"MPIGRAPH_POLL_GAP_NS": "0"})}
    if args.compare:
        variants["compare"] = (os.path.abspath(args.compare), {})
    print(describe_machine())
    runs = {name: [] for name in variants}
    helper_ran = {name: set() for name in variants}
    with tempfile.TemporaryDirectory() as workdir:
        exe = compile_probe(workdir)
        names = list(variants)
        for i in range(args.rounds):
            # Rotate the order each round: a run is cheaper right after another freed its log's pages.
            for name in names[i % len(names):] + names[:i % len(names)]:
                figures, helper = run_once(exe, args.calls, variants[name], workdir, i)
                runs[name].append(figures)
                helper_ran[name].add(helper)
    print("shim: %s%s; MPIGRAPH_LOG_HELPER=%s"
          % (library_path(), "; compare: %s" % args.compare if args.compare else "", helper_setting))
    print("calls per run: %d, rounds: %d (median of rounds), load average at the end %.2f %.2f %.2f\n"
          % ((args.calls, args.rounds) + os.getloadavg()))
    print_table(runs, helper_ran)


def print_table(runs, helper_ran):
    def median(i):
        return {name: {case: statistics.median(r[case][i] for r in rs) for case in CASES} for name, rs in runs.items()}

    wall, cpu, proc = median(0), median(1), median(2)
    print("| call | shim | log helper | bare ns/call | with shim ns/call | added ns | added CPU ns | added process CPU ns |")
    print("|" + " --- |" * 8)
    for case, label in CASES.items():
        b = wall["bare"][case]
        for name in runs:
            if name == "bare":
                continue
            helper = "/".join(sorted({True: "on", False: "off"}[h] for h in helper_ran[name]))
            print("| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f |"
                  % (label, name, helper, b, wall[name][case], wall[name][case] - b,
                     cpu[name][case] - cpu["bare"][case], proc[name][case] - proc["bare"][case]))


if __name__ == "__main__":
    main()
