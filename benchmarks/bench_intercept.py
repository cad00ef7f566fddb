"""Added cost per intercepted MPI call, with and without the shim, in one run.

    python benchmarks/bench_intercept.py [--calls N] [--rounds R] [--compare OTHER/libmpigraph.so]

Compiles benchmarks/intercept.c with the MPI's mpicc, then alternates runs
without and with the shim preloaded (recording on, analysis off) and prints,
after the machine line, a markdown table (the README's) of the median ns per
call of each and the difference, in wall time, in the calling thread's CPU
time (user + kernel: the log's page faults count, time spent preempted does
not, so it is the steadier figure on a shared machine) and in the whole
process's CPU time, which also counts the shim's helper thread that prepares
the log's next pages (work moved off the calling thread is still paid for, by
another core: on a node with a rank on every core it competes with them).  --compare also preloads another build of
the shim (say, of the previous commit) in the same rounds, so two builds are
compared under the same load.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from mpigraph._lib import library_path
from mpigraph.launcher import find_mpi_tool

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402

CASES = {"iprobe": "MPI_Iprobe on MPI_COMM_SELF", "sendrecv": "0-byte MPI_Sendrecv on MPI_COMM_SELF"}


def compile_probe(workdir):
    exe = os.path.join(workdir, "intercept")
    subprocess.run([find_mpi_tool("mpicc"), "-O2", "-o", exe, os.path.join(HERE, "intercept.c")], check=True)
    return exe


def run_once(exe, calls, lib, workdir, index):
    """{case: (wall ns, thread CPU ns, process CPU ns) per call} of one run, with `lib` preloaded (None: bare)."""
    cmd = [find_mpi_tool("mpiexec"), "-n", "1"]
    if lib:
        cmd += ["-genv", "LD_PRELOAD", lib,
                "-genv", "MPIGRAPH_OUT", os.path.join(workdir, "run-%d" % index),
                "-genv", "MPIGRAPH_ANALYZE", "off"]
    out = subprocess.run(cmd + [exe, str(calls)], check=True, capture_output=True, text=True).stdout
    shutil.rmtree(os.path.join(workdir, "run-%d" % index), ignore_errors=True)
    rows = (line.split() for line in out.splitlines() if line.strip())
    return {name: tuple(float(x) for x in values) for name, *values in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compare", metavar="LIB", help="another libmpigraph.so to measure in the same rounds")
    args = parser.parse_args()
    libs = {"bare": None, "shim": library_path()}
    if args.compare:
        libs["compare"] = os.path.abspath(args.compare)
    print(describe_machine())
    runs = {name: [] for name in libs}
    with tempfile.TemporaryDirectory() as workdir:
        exe = compile_probe(workdir)
        names = list(libs)
        for i in range(args.rounds):
            # Rotate the order each round: a run is cheaper right after another freed its log's pages.
            for name in names[i % len(names):] + names[:i % len(names)]:
                runs[name].append(run_once(exe, args.calls, libs[name], workdir, i))
    print("shim: %s%s" % (libs["shim"], "; compare: %s" % libs["compare"] if args.compare else ""))
    print("calls per run: %d, rounds: %d (median of rounds), load average at the end %.2f %.2f %.2f\n"
          % ((args.calls, args.rounds) + os.getloadavg()))
    def median(i):
        return {name: {case: statistics.median(r[case][i] for r in rs) for case in CASES} for name, rs in runs.items()}

    wall, cpu, proc = median(0), median(1), median(2)
    header = "| call | bare ns/call | with shim ns/call | added ns | added CPU ns | added process CPU ns |"
    if args.compare:
        header += " compare: added ns | compare: added CPU ns | compare: added process CPU ns |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for case, label in CASES.items():
        b, s = wall["bare"][case], wall["shim"][case]
        row = "| %s | %.1f | %.1f | %.1f | %.1f | %.1f |" % (label, b, s, s - b, cpu["shim"][case] - cpu["bare"][case],
                                                         proc["shim"][case] - proc["bare"][case])
        if args.compare:
            row += " %.1f | %.1f | %.1f |" % (wall["compare"][case] - b, cpu["compare"][case] - cpu["bare"][case],
                                             proc["compare"][case] - proc["bare"][case])
        print(row)

if __name__ == "__main__":
    main()
