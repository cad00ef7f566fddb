"""What the per-call-site twins (phase_callsites, callsite_sizes) cost the analysis.

    python benchmarks/bench_twins.py [--iterations 100000] [--nprocs 2] [--repeat 3]

Runs tests/programs/phases.c (ITER ring Send/Recv rounds, then ITER Allreduces, in MPI_Pcontrol
phases) under the shim without the in-job analysis, then analyses the run in this process
(K = 1) `--repeat` times with the twins' own steps wrapped: each row is the CPU seconds
(time.process_time: steadier than wall time on a shared machine) of one step, the median over
the repeats, beside the whole analysis's.  The twins' steps:

  PhaseSites.add         phase_callsites' sums of each calls-table block (a searchsorted per rank
                         and block, and one more unique/bincount of the block's keys)
  phases tracker         each rank's marks as segments, the keys allgathered
  PhaseSites.combined    the per-(phase, site, function, rank) sums made a table on rank 0
  p2p_sites              the call site of each point-to-point operation (callsite_sizes)
  callsite_size_table    the site keys relabelled with the run's ids on rank 0
  from_match             the match stage's size histograms and rank pairs, now per site too
"""

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402

PROGRAM = os.path.join(HERE, os.pardir, "tests", "programs", "phases.c")


def record(workdir, iterations, nprocs):
    """The run directory of phases.c's `iterations` rounds on `nprocs` ranks, recorded only."""
    from mpigraph.shim.launcher import find_mpi_tool
    from mpigraph.shim.lib import library_path

    exe = os.path.join(workdir, "phases")
    subprocess.run([find_mpi_tool("mpicc"), "-O2", "-g", "-o", exe, PROGRAM], check=True)
    run = os.path.join(workdir, "run")
    subprocess.run([find_mpi_tool("mpiexec"), "-n", str(nprocs), "-genv", "LD_PRELOAD", library_path(),
                    "-genv", "MPIGRAPH_OUT", run, "-genv", "MPIGRAPH_ANALYZE", "off", exe, str(iterations)],
                   check=True, stdout=subprocess.DEVNULL)
    return run


def wrap(spent):
    """Wraps the twins' steps so that each adds its CPU seconds to spent[name]."""
    from mpigraph.phases import callsites as phase_sites
    from mpigraph.traffic import sizes, stage

    def timed(owner, name):
        f = getattr(owner, name)

        def wrapper(*a, **k):
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[name] += time.process_time() - t
        setattr(owner, name, wrapper)

    timed(phase_sites.PhaseSites, "add")
    timed(phase_sites.PhaseSites, "combined")
    timed(phase_sites, "tracker")
    timed(sizes, "p2p_sites")
    timed(stage, "callsite_size_table")
    timed(stage, "from_match")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100000, help="phases.c's ITER (default 100000)")
    parser.add_argument("--nprocs", type=int, default=2, help="ranks of the recorded run (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="analyses to take the median of (default 3)")
    args = parser.parse_args()
    import mpigraph

    print(describe_machine())
    with tempfile.TemporaryDirectory() as workdir:
        run = record(workdir, args.iterations, args.nprocs)
        rows = collections.defaultdict(list)
        spent = collections.Counter()
        wrap(spent)
        for i in range(args.repeat):
            spent.clear()
            t = time.process_time()
            result = mpigraph.analyze(run, out_dir=os.path.join(workdir, "out%d" % i))
            rows["whole analysis"].append(time.process_time() - t)
            for name in ("add", "tracker", "combined", "p2p_sites", "callsite_size_table", "from_match"):
                rows[name].append(spent[name])
        calls = int(result.facts["calls"])
    print("phases.c %d iterations on %d ranks: %d calls; CPU seconds, median of %d analyses (K = 1)"
          % (args.iterations, args.nprocs, calls, args.repeat))
    print("| step | CPU s |\n| --- | --- |")
    for name, values in rows.items():
        print("| %s | %.3f |" % (name, statistics.median(values)))


if __name__ == "__main__":
    main()
