"""Added cost per intercepted MPI call, with and without the shim, in one run.

    python benchmarks/bench_intercept.py [--calls N] [--rounds R]

Compiles benchmarks/intercept.c with the MPI's mpicc, then alternates runs
without and with the shim preloaded (recording on, analysis off) and prints
the median ns per call of each and the difference.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from mpigraph._lib import library_path
from mpigraph.launcher import find_mpi_tool

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402


def compile_probe(workdir):
    exe = os.path.join(workdir, "intercept")
    subprocess.run([find_mpi_tool("mpicc"), "-O2", "-o", exe, os.path.join(HERE, "intercept.c")], check=True)
    return exe


def run_once(exe, calls, preload, workdir, index):
    env = dict(os.environ)
    cmd = [find_mpi_tool("mpiexec"), "-n", "1"]
    if preload:
        cmd += ["-genv", "LD_PRELOAD", library_path(),
                "-genv", "MPIGRAPH_OUT", os.path.join(workdir, "run-%d" % index),
                "-genv", "MPIGRAPH_ANALYZE", "off"]
    out = subprocess.run(cmd + [exe, str(calls)], env=env, check=True, capture_output=True, text=True).stdout
    return {name: float(value) for name, value in (line.split() for line in out.splitlines() if line.strip())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        exe = compile_probe(workdir)
        bare, shim = [], []
        for i in range(args.rounds):
            bare.append(run_once(exe, args.calls, False, workdir, i))
            shim.append(run_once(exe, args.calls, True, workdir, i))
    print(describe_machine())
    print("calls per run: %d, rounds: %d (median of rounds)" % (args.calls, args.rounds))
    print("%-10s %14s %14s %12s" % ("call", "bare ns/call", "shim ns/call", "added ns"))
    for case in bare[0]:
        b = statistics.median(r[case] for r in bare)
        s = statistics.median(r[case] for r in shim)
        print("%-10s %14.1f %14.1f %12.1f" % (case, b, s, s - b))


if __name__ == "__main__":
    main()
