"""Validate `mpigraph whatif` against real runs with injected latency (2 ranks on one host).

    python benchmarks/validate_whatif.py [--runs 5] [--programs pingpong,halo,allreduce] [--out DIR]
                                         [--measure untraced|traced] [--warmup 2]

For each test program of tests/whatif_programs (compiled here with mpicc):

1. the injector's base (calibrate.c: the median one-way delivery time of a small message);
2. --warmup untimed runs, then one traced run at dL = 0 under the shim (`mpigraph run
   --analyze off`), and `whatif` on it in delta mode with that base as the model's delivery
   time (--loggps L=base,o=0): the predicted T(dL).  The warm-up runs put the traced run in
   the conditions of the measured ones (binary and libraries in the page cache, cores awake)
   instead of making it the first run of the sequence;
3. runs with the test-program injector (inject.h: a received message's completion is held
   until its send's start + base + dL) for dL in {0, 1, 2, 5, 10, 20, 50, 100} us, --runs
   each, in a shuffled order per round (a change of the machine's load hits every dL alike),
   two ways side by side (--measure both, the default; or one of them):
   traced: under the shim like the traced run, T from each run's own trace: the same
   measure on both sides, the recording's own cost included on both;
   untraced: plain mpiexec, no shim, as the spec's "trace once" and the paper have it; each
   run's T is the program's own measure (inject.h, WHATIF_REPORT=1: CLOCK_MONOTONIC when
   MPI_Init returned and when MPI_Finalize was called on each rank; the earliest start to
   the latest end), the definition whatif's T has on a trace (earliest end of MPI_Init to the
   latest start of MPI_Finalize).  The traced run prints the same stamps, and its two
   measures are printed side by side (they agree to microseconds).  The difference from the
   traced runs is what recording costs the program;
4. RRMSE = RMSE(predicted, mean measured per dL) / mean(measured), as the paper's Table I.
   The untraced runs are compared twice: with whatif's T as traced (--overhead none) and with
   the recording's cost per call estimated from the trace and taken off every compute edge
   (--overhead auto, mpigraph/whatif/overhead.py): the traced run's T(0) includes the shim's
   cost per call, an untraced run does not.

Per program and way it prints T(0) of the traced run (its trace and the program's stamps)
against the measured runs at dL = 0 (mean, sd, min): a difference there is the same at every dL (the
slope is lambda_L by construction) and is the part of the RRMSE the model cannot remove.  It
also prints when the traced run's first message was received: the start-up of MPI's first
exchange is inside T and varies from run to run (up to a millisecond on a quiet machine,
several on a loaded one), which is why the ping-pong runs 2000 round trips (T(0) several
ms), not 200 (under 1 ms, where one run's start-up was half of T).

Writes measured_<program>_<way>.csv (dL_s, T_s) and the whatif files of each traced run into
--out.  Timing on a shared machine: the load average is printed with the results; a loaded
machine stretches the spinning ranks' times.
"""
import argparse
import csv
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpigraph.whatif import build as build_module, whatif  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(HERE, "tests", "whatif_programs")
DL_US = (0, 1, 2, 5, 10, 20, 50, 100)
# (arguments, what lambda_L must be by construction, RRMSE bound of the issue)
CASES = {
    # 2000 round trips: T(0) is several ms, so the start-up of the first exchange (up to a ms,
    # varying from run to run) is a small part of it; with 200 (T(0) ~ 0.6 ms) one traced run's
    # start-up was half of its T(0) and the whole difference between prediction and runs
    "pingpong": (["2000", "8"], "2N = 4000 (every message on the path)", 0.02),
    "halo": (["200", "30", "8"], "0 until dL ~ W = 30 us, then N = 200", 0.02),
    "allreduce": (["200", "30"], "N = 200 (one latency per 2-rank Allreduce)", 0.03),
}
# Busy polling, as a program runs: the tests' throttle (usleep in the progress loop) would add
# its wake-up time to every message.  WHATIF_YIELD=1: the injector sleeps through all but the
# last 30 us of a long hold (inject.h), so that on this shared 2-core machine a rank waiting
# for the "network" leaves its core to the others (spinning ranks were descheduled for
# milliseconds: 3 of 6 runs of the ping-pong took up to 14 times as long).
ENV = {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "0", "WHATIF_YIELD": "1"}
# the untraced runs compared with whatif --overhead auto (the recording's cost per call taken off)
AUTO = "untraced, overhead auto"
# MPIGRAPH_LOG_HELPER for the traced runs (--log-helper; None: the shim's default, auto)
LOG_HELPER = None


def mpi_tool(name):
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.exists(here) else shutil.which(name)


def compile_programs(directory):
    """The test programs, compiled with mpicc into `directory`; or, where WHATIF_PROGRAMS names a
    folder of them built elsewhere (a machine without a compiler), those."""
    built = os.environ.get("WHATIF_PROGRAMS")
    if built:
        return {name: os.path.join(built, name) for name in list(CASES) + ["calibrate"]}
    mpicc = mpi_tool("mpicc")
    out = {}
    for name in list(CASES) + ["calibrate"]:
        exe = os.path.join(directory, name)
        subprocess.run([mpicc, "-O1", "-o", exe, os.path.join(PROGRAMS, name + ".c")], check=True)
        out[name] = exe
    return out


def env(extra):
    e = dict(os.environ, **ENV)
    e.pop("LD_PRELOAD", None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def calibrate(exe):
    out = subprocess.run([mpi_tool("mpiexec"), "-n", "2", exe, "4000", "8"], capture_output=True, text=True,
                         env=env({}), check=True)
    return int(out.stdout.split()[0])


def program_time(stdout):
    """T from the programs' own stamps (inject.h, WHATIF_REPORT=1): the earliest return from
    MPI_Init to the latest call of MPI_Finalize over the ranks, in s."""
    rows = [line.split() for line in stdout.splitlines() if line.startswith("WHATIF_T ")]
    if not rows:
        raise RuntimeError("the program printed no WHATIF_T line (built without inject.h's wi_report?)")
    return (max(int(r[3]) for r in rows) - min(int(r[2]) for r in rows)) * 1e-9


def traced_run(exe, args, run_dir, dl_ns, base_ns):
    """(T from the trace, T from the program's stamps, the matched run) of a run under the shim."""
    shutil.rmtree(run_dir, ignore_errors=True)
    extra = {"WHATIF_INJECT_NS": dl_ns, "WHATIF_BASE_NS": base_ns, "WHATIF_REPORT": 1}
    if LOG_HELPER:
        extra["MPIGRAPH_LOG_HELPER"] = LOG_HELPER
    out = subprocess.run([sys.executable, "-m", "mpigraph", "run", "-n", "2", "--out", run_dir, "--analyze", "off",
                          "--", exe] + args, capture_output=True, text=True, check=True, env=env(extra))
    matched = build_module.matched_run(run_dir)
    return build_module.build(matched).measured_ns * 1e-9, program_time(out.stdout), matched


def untraced_run(exe, args, dl_ns, base_ns):
    """T of a plain run (no shim) from the program's own stamps, in s."""
    out = subprocess.run([mpi_tool("mpiexec"), "-n", "2", exe] + args, capture_output=True, text=True, check=True,
                         env=env({"WHATIF_INJECT_NS": dl_ns, "WHATIF_BASE_NS": base_ns, "WHATIF_REPORT": 1}))
    return program_time(out.stdout)


def log_helpers(run_dir):
    """How many of the run's ranks had the shim's log helper thread (it faults the log's next
    step in from MPI_Init on: on a run that short, work at the program's start)."""
    from mpigraph.trace import logs, record

    info = logs.find_run(run_dir)
    return sum(bool(int(log.header["flags"]) & record.HEADER_LOG_HELPER)
               for log in logs.open_logs(info, range(info.world_size)).values())


def first_receive_s(matched):
    """When the run's first message was received (s from the start): MPI's first exchange."""
    m = matched.messages
    done = m["r_done_call"] >= 0
    return float(m["r_done_end"][done].min()) * 1e-9 if done.any() else float("nan")


def validate(name, exe, base_ns, runs, out_dir, work, trace_tries=1, measure="untraced", warmup=2):
    args, expect, bound = CASES[name]
    traced = os.path.join(work, name + "-traced")
    for _ in range(warmup):              # untimed: the traced run is not the first of the sequence
        untraced_run(exe, args, 0, base_ns)
    # with trace_tries > 1 the fastest of that many traced runs is kept: on a loaded machine
    # the least disturbed one (the others are thrown away, not averaged)
    best = None
    for i in range(trace_tries):
        t, stamps, matched = traced_run(exe, args, traced + "-try", 0, base_ns)
        if best is None or t < best[0]:
            best = (t, stamps, first_receive_s(matched), log_helpers(traced + "-try"))
            shutil.rmtree(traced, ignore_errors=True)
            shutil.copytree(traced + "-try", traced)
    result = whatif(traced, latency=(0.0, 100e-6), loggps={"L0_ns": float(base_ns), "o_ns": 0.0,
                                                           "source": "injector base %d ns" % base_ns},
                    out=os.path.join(out_dir, name) if out_dir else None)
    pieces = result.pieces
    # the same trace with the recording's cost per call taken off: what an untraced run should take
    auto = whatif(traced, latency=(0.0, 100e-6), loggps={"L0_ns": float(base_ns), "o_ns": 0.0,
                                                         "source": "injector base %d ns" % base_ns},
                  out=os.path.join(out_dir, name + "-overhead-auto") if out_dir else None, overhead="auto")
    modes = ("traced", "untraced") if measure == "both" else (measure,)
    measured = {mode: {dl: [] for dl in DL_US} for mode in modes}
    run_dir = os.path.join(work, name + "-run")
    for _ in range(runs):
        order = list(DL_US)
        random.shuffle(order)
        for dl in order:
            for mode in modes:         # side by side: a change of the machine's load hits both alike
                if mode == "traced":
                    measured[mode][dl].append(traced_run(exe, args, run_dir, dl * 1000, base_ns)[0])
                else:
                    measured[mode][dl].append(untraced_run(exe, args, dl * 1000, base_ns))
    predicted = np.array([_t_at(pieces, x) for x in np.array(DL_US) * 1e-6])
    predicted_auto = np.array([_t_at(auto.pieces, x) for x in np.array(DL_US) * 1e-6])
    print("\n%s %s: lambda_L by construction %s" % (name, " ".join(args), expect))
    print("  whatif: T(0) = %.6f s, lambda_L %s on 0..100 us (pieces at %s us)"
          % (result.T0_s, "/".join("%g" % p["lambda_L"] for p in pieces),
             ", ".join("%.2f" % (p["dL_from_s"] * 1e6) for p in pieces)))
    print("  whatif --overhead auto: %.0f ns per call taken off every compute edge; T(0) = %.6f s (%+.1f us, %d "
          "compute edges on the critical path), lambda_L %s"
          % (auto.overhead_ns, auto.T0_s, (auto.T0_s - auto.T0_traced_s) * 1e6, auto.path_compute_edges,
             "/".join("%g" % p["lambda_L"] for p in auto.pieces)))
    t_trace, t_stamps, first, helpers = best
    print("  traced run at dL = 0: T %.3f ms from its trace, %.3f ms from the program's stamps; its first message "
          "received %.3f ms after the start (MPI's first exchange, inside T); the shim's log helper ran on %d of 2 "
          "ranks" % (t_trace * 1e3, t_stamps * 1e3, first * 1e3, helpers))
    out = {}
    for mode in modes:
        out[mode] = _compare(measured[mode], predicted, t_trace, mode, bound)
        if mode == "untraced":          # the same runs against the prediction without the recording's cost
            out[AUTO] = _compare(measured[mode], predicted_auto, auto.T0_s, AUTO, bound)
        if out_dir:
            with open(os.path.join(out_dir, "measured_%s_%s.csv" % (name, mode)), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["dL_s", "T_s"])
                for dl in DL_US:
                    for t in measured[mode][dl]:
                        w.writerow(["%.9g" % (dl * 1e-6), "%.9g" % t])
    return out


def _compare(measured, predicted, t_trace, mode, bound):
    """Print the measured runs of one mode against the prediction; (RRMSE of means, medians,
    minima, (T(0) predicted, mean measured at dL = 0)).  mode AUTO: the untraced runs against
    whatif --overhead auto, whose T(0) is t_trace here."""
    mean = np.array([np.mean(measured[dl]) for dl in DL_US])
    median = np.array([np.median(measured[dl]) for dl in DL_US])
    least = np.array([np.min(measured[dl]) for dl in DL_US])
    sd = np.array([np.std(measured[dl]) for dl in DL_US])

    def rrmse_of(ref):
        return float(np.sqrt(np.mean((predicted - ref) ** 2)) / np.mean(ref))

    m0, s0 = mean[0], sd[0]
    print("  runs %s (T from %s): at dL = 0 mean %.3f ms, sd %.3f, min %.3f (%d runs); T(0) %s - mean "
          "%+.3f ms = %+.1f%%%s" % (mode, "each run's trace" if mode == "traced" else "the program's stamps",
                                    m0 * 1e3, s0 * 1e3, least[0] * 1e3, len(measured[0]),
                                    "predicted, overhead taken off," if mode == AUTO else "traced",
                                    (t_trace - m0) * 1e3,
                                    100 * (t_trace - m0) / m0, " = %+.1f sd" % ((t_trace - m0) / s0) if s0 > 0 else ""))
    print("  %8s %12s %10s %12s %12s %12s %8s" % ("dL us", "mean s", "sd s", "median s", "min s", "predicted s",
                                                  "err %"))
    for dl, m, s, md, mn, p in zip(DL_US, mean, sd, median, least, predicted):
        print("  %8g %12.6f %10.6f %12.6f %12.6f %12.6f %8.2f" % (dl, m, s, md, mn, p, 100 * (p - m) / m))
    rrmse = (rrmse_of(mean), rrmse_of(median), rrmse_of(least))
    print("  RRMSE (%s runs) %.2f%% against the means, %.2f%% the medians, %.2f%% the minima (issue: <= %g%%)"
          % ((mode,) + tuple(100 * r for r in rrmse) + (100 * bound,)))
    return rrmse + ((t_trace, m0),)


def _t_at(pieces, x):
    for p in pieces:
        if p["dL_from_s"] <= x <= p["dL_to_s"]:
            return p["lambda_L"] * x + p["C_s"]
    return pieces[-1]["lambda_L"] * x + pieces[-1]["C_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per dL")
    parser.add_argument("--programs", default=",".join(CASES))
    parser.add_argument("--out", metavar="DIR", help="keep the whatif files and measured points here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure", choices=("both", "traced", "untraced"), default="both",
                        help="the runs at each dL: under the shim (T from each run's trace), plain (T from the "
                             "program's stamps), or both side by side (default)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs before the traced one")
    parser.add_argument("--log-helper", choices=("auto", "on", "off"),
                        help="MPIGRAPH_LOG_HELPER of the traced runs (default: the shim's, auto: on where a core "
                             "is spare); its faulting at the start delayed a short run's first exchange")
    parser.add_argument("--trace-tries", type=int, default=1,
                        help="trace this many times at dL = 0 and keep the fastest (a loaded machine)")
    args = parser.parse_args()
    global LOG_HELPER
    LOG_HELPER = args.log_helper
    random.seed(args.seed)
    started = time.time()
    print("load average at start: %.2f %.2f %.2f" % os.getloadavg())
    work = tempfile.mkdtemp(prefix="validate-whatif-")
    try:
        exes = compile_programs(work)
        base = calibrate(exes["calibrate"])
        print("injector base (median one-way delivery of 8 bytes): %d ns" % base)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
        results = {name: validate(name, exes[name], base, args.runs, args.out, work, args.trace_tries,
                                   args.measure, args.warmup)
                   for name in args.programs.split(",")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for mode in ("traced", "untraced", AUTO):
        got = {k: v[mode] for k, v in results.items() if mode in v}
        if got:
            print("\nruns %s: RRMSE (means / medians / minima): " % mode
                  + ", ".join("%s %.2f%% / %.2f%% / %.2f%%" % (k, 100 * v[0], 100 * v[1], 100 * v[2])
                              for k, v in got.items()))
            print("runs %s: T(0) predicted / mean measured at dL = 0: " % mode
                  + ", ".join("%s %.3f / %.3f ms" % (k, 1e3 * v[3][0], 1e3 * v[3][1]) for k, v in got.items()))
    print("load average at end: %.2f %.2f %.2f; %.0f s" % (os.getloadavg() + (time.time() - started,)))


if __name__ == "__main__":
    main()
