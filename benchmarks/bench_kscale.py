"""How each stage's CPU grows with the analysis ranks: CPU seconds summed over K ranks against K=1.

    python benchmarks/bench_kscale.py [--records 1e6 4e6] [--nprocs 1 2 4] [--rounds 3]
                                      [--algorithm parallel-dijkstra] [--old CHECKOUT] [--run DIR]

Runs bench_analysis.py (one repeat, per-rank figures) `rounds` times per size and reads its
per-rank lines: for every stage, the CPU seconds summed over the K analysis ranks and the
largest rank's.  Their ratio to K=1's (the "overhead ratio") is 1.00 where the ranks split the
work without adding to it: every second above is work or waiting that K ranks do and one does
not (a pass over all trace ranks on every rank, an exchange, a fixed cost per rank, a rank
spinning in a collective while another works).  CPU seconds are per rank, so the ratio shows
on a machine with fewer cores than ranks, where wall times cannot.

With --old, a checkout of older code (`git worktree add DIR REV`, or `git archive REV | tar -x
-C DIR`) runs too, alternating with this tree round by round (the same data, the same load),
with PYTHONPATH=DIR so that its own mpigraph is imported.  With --run, a recorded run (a real
program's) is analysed instead of synthetic ones, by this tree's bench_analysis.py for both codes
(an older one may not know --run): the old code is then its mpigraph package alone.  Printed: best
of the rounds (the least CPU: the machine's noise only adds), as a markdown table.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STAGES = ("trace", "clock", "match", "metrics", "traffic", "path", "report")
K_LINE = re.compile(r"per analysis rank \(K=(\d+)\)")
RANK_LINE = re.compile(r"^\s+(\w+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s")      # stage rank wall cpu


def per_rank_cpu(text):
    """{(K, stage): [CPU s of each rank]} from bench_analysis's per-rank lines."""
    k, cpu = None, collections.defaultdict(list)
    for line in text.splitlines():
        m = K_LINE.search(line)
        if m:
            k = int(m.group(1))
            continue
        m = RANK_LINE.match(line)
        if m and k is not None and m.group(1) in STAGES:
            cpu[(k, m.group(1))].append(float(m.group(4)))
    return cpu


def run_bench(checkout, records, nprocs, algorithm, workdir, run=None):
    """bench_analysis.py of `checkout` (None: this tree; with `run`, a recorded run: this tree's
    script, the checkout's mpigraph) once; its per-rank CPU."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    bench = os.path.join(HERE, "bench_analysis.py")
    if checkout:
        env["PYTHONPATH"] = os.path.abspath(checkout)
        if not run:
            bench = os.path.join(os.path.abspath(checkout), "benchmarks", "bench_analysis.py")
    data = ["--run", run] if run else ["--records", records]
    cmd = [sys.executable, bench] + data + ["--nprocs"] + [str(k) for k in nprocs] + [
        "--repeat", "1", "--algorithms", algorithm, "--workdir", workdir, "--keep"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if done.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), done.stderr[-3000:]))
    return per_rank_cpu(done.stdout)


def best(rounds, k, stage):
    """(least sum over ranks, least largest rank) of a stage over the rounds; `stage` "all": the
    stages added up per round (the largest rank: each rank's stages added up)."""
    names = STAGES if stage == "all" else (stage,)
    per_rank = [[sum(cpus) for cpus in zip(*[r[(k, s)] for s in names])] for r in rounds]
    return min(sum(p) for p in per_rank), min(max(p) for p in per_rank)


def table(results, nprocs):
    """Markdown rows: per stage and code, K=1's CPU and each K's sum (largest rank) and ratio."""
    head = ["records", "stage", "code", "K=1 CPU s"] + ["K=%d sum (largest rank) s" % k for k in nprocs[1:]] + [
        "ratio K=%d" % k for k in nprocs[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for records, codes in results.items():
        for stage in STAGES + ("all",):
            for code, rounds in codes.items():
                one = best(rounds, nprocs[0], stage)[0]
                cells = [best(rounds, k, stage) for k in nprocs[1:]]
                row = [records, stage, code, "%.3f" % one] + ["%.3f (%.3f)" % c for c in cells] + [
                    "%.2f" % (c[0] / one) if one else "-" for c in cells]
                lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", nargs="+", default=["1e6"])
    parser.add_argument("--nprocs", nargs="+", type=int, default=[1, 2, 4], help="K values; the first is the base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--algorithm", default="parallel-dijkstra")
    parser.add_argument("--old", metavar="CHECKOUT", help="a checkout of older code, run alternately with this tree")
    parser.add_argument("--run", metavar="DIR", help="a recorded run to analyse instead of synthetic ones")
    args = parser.parse_args()
    codes = {"old": args.old, "new": None} if args.old else {"this tree": None}
    results = {}
    with tempfile.TemporaryDirectory(prefix="mpigraph-kscale-") as workdir:
        for records in [os.path.basename(os.path.normpath(args.run))] if args.run else args.records:
            results[records] = {code: [] for code in codes}
            for r in range(args.rounds):
                for code, checkout in codes.items():       # alternating: old, new, old, new, ...
                    results[records][code].append(run_bench(checkout, records, args.nprocs, args.algorithm, workdir,
                                                            args.run))
                    print("%s records, round %d, %s done" % (records, r + 1, code), flush=True)
    print(table(results, args.nprocs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
