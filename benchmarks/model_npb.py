"""`mpigraph model` on strong-scaling series of the NAS Parallel Benchmarks (MPI), as seed 002 did.

    python benchmarks/model_npb.py NPB_BIN_DIR [--programs cg.W ft.W] [--nprocs 1 2 4] [--series 3]
                                   [--service measured calibrated] [--centres shared per-rank]
                                   [--out DIR [--model-only]] [--seed 1]

NPB_BIN_DIR holds NPB3.x-MPI executables built beforehand (cg.W.x, ft.W.x, ...; NPB 3.4 builds
one executable per class that runs at any P).  This script downloads nothing and builds
nothing: docs/model.md ("Measured") says how to fetch and build NPB with the mpich wheel.

For each series and program, the program runs at every P of --nprocs under the shim
(`mpigraph run -n P --out DIR -- ./prog.x`, in a shuffled order per series so that a change of
the machine's load does not always hit the same P), NPB's own verification is checked, and
`mpigraph model` (the API) models the P runs of that series.  It prints, per program, series and
service mode: the measured run time at each P (the longest rank's program time), the in-sample
error of each run's model, and the leave-one-out error per P (the laws fitted to the other
counts predict P's run time), with how many are within the seed's 10% and 30% (specs/model.md),
for each series and for all series pooled (series "all": the laws fitted to every run, the
measured time at P the mean of its runs), and the run-to-run spread of the measured time per P
over the series (the noise floor).

A benchmark, not a test: it never fails on a time.  On a machine with fewer cores than the
largest P the ranks are oversubscribed and the errors say little about the model.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import describe_machine  # noqa: E402

import numpy as np  # noqa: E402

from mpigraph.model.api import model_runs  # noqa: E402
from mpigraph.model.inputs import read_run  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir", help="directory of built NPB-MPI executables (cg.W.x, ft.W.x, ...)")
    ap.add_argument("--programs", nargs="+", default=["cg.W", "ft.W"], help="benchmark.class names")
    ap.add_argument("--nprocs", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--series", type=int, default=3, help="independent series per program")
    ap.add_argument("--service", nargs="+", default=["measured", "calibrated"],
                    choices=["measured", "calibrated"])
    ap.add_argument("--centres", nargs="+", default=["shared"], choices=["shared", "per-rank"],
                    help="layouts of the MPI centre to model (the runs are the same)")
    ap.add_argument("--model-only", action="store_true",
                    help="model the run directories already in --out (PROGRAM/sS/pP) without running anything")
    ap.add_argument("--out", help="keep the run directories here (default: a temporary directory)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the shuffled P order")
    return ap.parse_args(argv)


def record(exe, p, out):
    """Run exe on p ranks under mpigraph into out; NPB's own time and verification from its output."""
    # NPB's FT reads inputft.data from the working directory if present: run where there is none.
    with tempfile.TemporaryDirectory() as cwd:
        # This interpreter's mpigraph (the checkout being measured), not whichever is first on PATH.
        done = subprocess.run([sys.executable, "-m", "mpigraph", "run", "-n", str(p), "--out", out, "--", exe],
                              cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("%s at P=%d failed (%d):\n%s" % (exe, p, done.returncode, done.stderr[-3000:]))
    npb_time = next((line.split("=")[1].strip() for line in done.stdout.splitlines()
                     if "Time in seconds" in line), "?")
    verified = "SUCCESSFUL" in done.stdout
    return npb_time, verified


def record_series(args, base, program, series, rng):
    """Run directories of one series of program, in P order."""
    exe = os.path.join(os.path.abspath(args.bin_dir), program + ".x")
    if not os.path.exists(exe):
        raise SystemExit("%s is missing: build it first (docs/model.md, Measured)" % exe)
    order = list(args.nprocs)
    rng.shuffle(order)
    dirs = {}
    for p in order:
        out = os.path.join(base, program, "s%d" % series, "p%d" % p)
        npb_time, ok = record(exe, p, out)
        print("  %s series %d P=%d: NPB time %s s, verification %s" % (program, series, p, npb_time,
                                                                         "SUCCESSFUL" if ok else "FAILED"))
        dirs[p] = out
    return [dirs[p] for p in sorted(dirs)]


def rows(program, series, dirs, service, centres="shared"):
    """Table cells of one series (or of all series pooled): measured time, in-sample error and
    leave-one-out error per P.  Pooled, several runs share a P: the measured time is their mean
    (as the loo rows of model.csv have it) and the in-sample error their mean."""
    result = model_runs(dirs, service=service, centres=centres)
    total = result.table.filter(result.table.column("component").to_numpy(zero_copy_only=False) == "total")
    t = {c: np.array(total.column(c).to_pylist()) for c in ("P", "source", "measured", "rel_error")}
    counts = np.unique(t["P"])
    loo = [t["rel_error"][(t["source"] == "loo") & (t["P"] == p)][0] for p in counts]
    measured = ["%.3f" % t["measured"][(t["source"] == "loo") & (t["P"] == p)][0] for p in counts]
    in_sample = ["%+.1f%%" % (100 * t["rel_error"][(t["source"] == "run") & (t["P"] == p)].mean()) for p in counts]
    within = "%d/%d, %d/%d" % (sum(abs(e) <= 0.10 for e in loo), len(loo), sum(abs(e) <= 0.30 for e in loo), len(loo))
    mode = service if centres == "shared" else service + ", " + centres
    return ([program, str(series), mode] + measured + in_sample + ["%+.1f%%" % (100 * e) for e in loo] + [within],
            result.warnings)


def pooled(series_dirs):
    """All series of each program as one set of runs (laws fitted to every run), when there are several."""
    programs = dict.fromkeys(name for name, _, _ in series_dirs)
    groups = [(p, "all", [d for name, _, dirs in series_dirs if name == p for d in dirs]) for p in programs]
    return [g for g in groups if len(g[2]) > len(series_dirs[0][2])]


def print_spread(series_dirs, counts):
    """Run-to-run spread of the measured time per program and P: the noise floor of any error above."""
    print("\nmeasured run time across series, min / median / max (s) and (max - min) / median:\n")
    print("| program | " + " | ".join("P=%d" % p for p in counts) + " |")
    print("|---|" + "---|" * len(counts))
    for program in dict.fromkeys(name for name, _, _ in series_dirs):
        times = np.array([[read_run(d).wall_clock for d in dirs] for name, _, dirs in series_dirs if name == program])
        lo, mid, hi = times.min(axis=0), np.median(times, axis=0), times.max(axis=0)
        print("| %s | " % program + " | ".join("%.3f / %.3f / %.3f (%.0f%%)" % (a, b, c, 100 * (c - a) / b)
                                               for a, b, c in zip(lo, mid, hi)) + " |")


def main(argv=None):
    args = parse_args(argv)
    if args.model_only and not args.out:
        raise SystemExit("--model-only models the runs in --out DIR: give --out")
    print(describe_machine())
    base = args.out or tempfile.mkdtemp(prefix="model_npb_")
    rng = random.Random(args.seed)
    series_dirs = []
    for s in range(1, args.series + 1):
        for program in args.programs:      # interleaved: one series of each program per round
            if args.model_only:
                dirs = [os.path.join(base, program, "s%d" % s, "p%d" % p) for p in sorted(args.nprocs)]
            else:
                dirs = record_series(args, base, program, s, rng)
            series_dirs.append((program, s, dirs))
    counts = sorted(args.nprocs)
    head = (["program", "series", "service"] + ["T P=%d (s)" % p for p in counts]
            + ["run P=%d" % p for p in counts] + ["loo P=%d" % p for p in counts] + ["loo within 10% / 30%"])
    print("\nmeasured run time (longest rank), model error in sample (run) and leave-one-out (loo), "
          "(modelled - measured) / measured:\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    notes = set()
    for centres in args.centres:
        for service in args.service:
            for program, s, dirs in series_dirs + pooled(series_dirs):
                cells, warnings = rows(program, s, dirs, service, centres)
                notes.update(warnings)
                print("| " + " | ".join(cells) + " |")
    print_spread(series_dirs, counts)
    for note in sorted(notes):
        print("warning: " + note)
    print("run directories: " + base)


if __name__ == "__main__":
    main()
