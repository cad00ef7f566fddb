"""`mpigraph whatif` on synthetic runs (mpigraph.testing.synth) on 1, 2 and 4 analysis ranks.

    python benchmarks/bench_whatif.py [--records 1e6] [--ranks 64] [--structure halo] [--repeat 3]
                                      [--nprocs 1 2 4]

Writes the run (raw logs exactly as the shim writes them) into a temporary directory, then
times ``mpigraph.whatif.whatif`` (trace, clock and match stages, the model graph, the
envelope on 0..100 us, the 1/2/5% tolerances, the critical messages) and each of its
steps on one analysis rank in this process; prints the medians and the machine's load.
The issue's target: under 10 s for 1e6 records on one analysis rank.

Then, for each K of --nprocs and each --build (ranks: every analysis rank reads, matches and
builds its own trace ranks' part of the model graph, whatif/distributed.py; rank0: rank 0 builds
it whole, as before), ``mpiexec -n K python bench_whatif.py --probe RUN`` runs whatif on K
analysis ranks and prints per rank its CPU seconds, peak memory (ru_maxrss), bytes sent and the
edges it built, sent and received (medians of --repeat), then per rank and step its wall and CPU
seconds, the records it read, the bytes it sent and received (mpigraph.comm.meter) and each
one's share against 1/K, as bench_analysis.py does.  CPU seconds, memory and bytes show a
rank-0 funnel where wall times cannot (more ranks than cores).

    python benchmarks/bench_whatif.py --records 1e6 --repeat 1 --nprocs 1 2 4 --build rank0 ranks
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpigraph.testing import synth  # noqa: E402
from mpigraph.whatif import build as build_module, whatif  # noqa: E402
from mpigraph.whatif.cuts import split_union  # noqa: E402
from mpigraph.whatif.envelope import Model  # noqa: E402


def steps(run_dir):
    """Seconds of each step of whatif, done by hand in the same order."""
    out = {}
    t = time.perf_counter()
    matched = build_module.matched_run(run_dir)
    out["match"] = time.perf_counter() - t
    t = time.perf_counter()
    graph = build_module.build(matched)
    out["build"] = time.perf_counter() - t
    t = time.perf_counter()
    edges, kept, edge_piece = split_union(graph.edges, graph.cuts, graph.piece)
    model = Model(edges, edge_piece)
    out["order"] = time.perf_counter() - t          # the split and the pass's vertex order
    t = time.perf_counter()
    model.forward([0.0])
    out["one pass"] = time.perf_counter() - t
    return out, len(graph.edges.src), len(kept), model.n_levels


def probe(run_dir, collectives="recdoub", build="ranks"):
    """One whatif on this process's MPI_COMM_WORLD; per rank its lines (parsed by ``on_ranks``)."""
    import resource

    from mpi4py import MPI

    from mpigraph.comm.meter import Meter

    comm = MPI.COMM_WORLD
    meter = Meter()
    comm.Barrier()
    started = time.perf_counter()
    result = whatif(run_dir, latency=(0.0, 100e-6), collectives=collectives, comm=comm, meter=meter, build=build)
    wall = time.perf_counter() - started
    records = result.records_read
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024         # Linux: KiB
    edges = (result.edges_built, result.edges_sent, result.edges_received)
    rows = comm.gather((wall, records, result.spread, meter.stages, result.T0_s, len(result.pieces), peak_mb, edges),
                       root=0)
    for rank, (wall, records, (units, edges), stages, t0, n_pieces, peak_mb, moved) in enumerate(rows or []):
        print("probe rank %d wall %.6f records %d pieces %d edges %d T0 %.12g envelope %d"
              % (rank, wall, records, units, edges, t0, n_pieces), flush=True)
        print("probe graph rank %d peak_mb %.1f built %d sent %d received %d cpu %.6f bytes_sent %d"
              % (rank, peak_mb, *moved, sum(st.cpu_s for st in stages), sum(st.sent for st in stages)), flush=True)
        for st in stages:
            print("probe stage rank %d %s wall %.6f cpu %.6f sent %d received %d"
                  % (rank, st.name.replace(" ", "_"), st.wall_s, st.cpu_s, st.sent, st.received), flush=True)


PROBE_LINE = re.compile(r"probe rank (\d+) wall (\S+) records (\d+) pieces (\d+) edges (\d+) T0 (\S+) envelope (\d+)")
STAGE_RANK_LINE = re.compile(r"probe stage rank (\d+) (\S+) wall (\S+) cpu (\S+) sent (\d+) received (\d+)")
GRAPH_LINE = re.compile(r"probe graph rank (\d+) peak_mb (\S+) built (\d+) sent (\d+) received (\d+) cpu (\S+) "
                        r"bytes_sent (\d+)")


def on_ranks(run_dir, nprocs, collectives="recdoub", build="ranks"):
    """(per rank (wall, records, pieces, edges, T0, envelope pieces), {step: [(rank, wall, cpu, sent,
    received)]}, per rank (peak MB, edges built, sent, received, CPU s, bytes sent)) of whatif on
    nprocs analysis ranks."""
    from mpigraph.shim.launcher import find_mpi_tool

    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIGRAPH_") and k != "LD_PRELOAD"}
    cmd = [find_mpi_tool("mpiexec"), "-n", str(nprocs), sys.executable, os.path.abspath(__file__), "--probe", run_dir,
           "--collectives", collectives, "--build", build]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit("whatif failed (%s):\n%s" % (" ".join(cmd), done.stderr[-3000:]))
    ranks = [m.groups() for m in map(PROBE_LINE.match, done.stdout.splitlines()) if m]
    ranks = [(float(w), int(r), int(u), int(e), float(t), int(n))
             for _, w, r, u, e, t, n in sorted(ranks, key=lambda x: int(x[0]))]
    steps = {}
    for m in filter(None, map(STAGE_RANK_LINE.match, done.stdout.splitlines())):
        rank, name, wall, cpu, sent, received = m.groups()
        steps.setdefault(name, []).append((int(rank), float(wall), float(cpu), int(sent), int(received)))
    graph = sorted((int(g[0]), float(g[1]), int(g[2]), int(g[3]), int(g[4]), float(g[5]), int(g[6]))
                   for g in (m.groups() for m in filter(None, map(GRAPH_LINE.match, done.stdout.splitlines()))))
    return ranks, steps, [g[1:] for g in graph]


def print_on_ranks(run_dir, nprocs_list, repeat, collectives="recdoub", build="ranks"):
    """Per K: the whole call's median wall (the slowest rank), per rank its pieces and edges, its
    CPU seconds, peak memory, bytes sent and the edges it built, sent and received (medians over
    the repeats), and bench_analysis's per-rank shares table of the first repeat."""
    from bench_analysis import print_rank_shares

    answers = set()
    for k in nprocs_list:
        runs = [on_ranks(run_dir, k, collectives, build) for _ in range(repeat)]
        ranks, steps, _ = runs[0]
        answers.add((ranks[0][4], ranks[0][5]))
        print("\nwhatif on %d analysis rank%s: %.2f s (median of %d, the slowest rank); pieces / edges per rank: %s"
              % (k, "s" if k > 1 else "", statistics.median(max(r[0] for r in run[0]) for run in runs), repeat,
                 ", ".join("%d: %d / %d" % (i, r[2], r[3]) for i, r in enumerate(ranks))))
        print("  build %s, K=%d: %4s %8s %9s %12s %10s %10s %10s %10s" % (
            build, k, "rank", "cpu s", "peak MB", "sent B", "records", "built", "sent", "received"))
        for rank in range(k):
            med = [statistics.median(run[2][rank][i] for run in runs) for i in range(6)]
            print("  build %s, K=%d: %4d %8.2f %9.0f %12d %10d %10d %10d %10d" % (
                build, k, rank, med[4], med[0], med[5], ranks[rank][1], med[1], med[2], med[3]))
        print_rank_shares(steps, [r[1] for r in ranks])
    print("\nT(0) and the envelope's pieces the same for every K: %s" % ("yes" if len(answers) == 1 else
                                                                       "NO: %s" % sorted(answers)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=float, default=1e6, help="records in all logs together")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--structure", default="halo", choices=synth.STRUCTURES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="write the run here and keep it")
    parser.add_argument("--nprocs", type=int, nargs="*", default=[1, 2, 4],
                        help="analysis ranks to run whatif on under mpiexec (none: only the in-process timing)")
    parser.add_argument("--collectives", default="recdoub", choices=build_module.COLLECTIVE_ALGORITHMS,
                        help="whatif's --collectives (dissemination: no cuts, the columns are shared)")
    parser.add_argument("--build", nargs="*", default=["ranks"], choices=("ranks", "rank0"),
                        help="where the model graph is built on K ranks (whatif --build): ranks (default), "
                             "rank0 (rank 0 builds it whole), or both to compare")
    parser.add_argument("--probe", metavar="RUN", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        return probe(args.probe, args.collectives, args.build[0])
    print("load average at start: %.2f %.2f %.2f" % os.getloadavg())
    per_rank = int(args.records) // args.ranks
    phases = (per_rank - 2) // synth.RECORDS_PER_PHASE[args.structure]
    calls = 2 + phases * synth.CALLS_PER_PHASE[args.structure]
    run_dir = args.keep or tempfile.mkdtemp(prefix="bench-whatif-")
    try:
        expected = synth.generate(run_dir, args.ranks, calls, args.structure)
        records = expected.params.records_per_rank * args.ranks
        totals, parts = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            result = whatif(run_dir, latency=(0.0, 100e-6), collectives=args.collectives)
            totals.append(time.perf_counter() - t)
            parts.append(steps(run_dir))
        step_names = list(parts[0][0])
        _, n_edges, n_cuts, n_levels = parts[0]
        print("run: %s, %d ranks, %d records; model graph %d edges, %d pieces, %d levels"
              % (args.structure, args.ranks, records, n_edges, n_cuts + 1, n_levels))
        print("whatif on one analysis rank: %.2f s (median of %d; %.0f records/s)"
              % (statistics.median(totals), len(totals), records / statistics.median(totals)))
        for name in step_names:
            print("  %-9s %.2f s" % (name, statistics.median(p[0][name] for p in parts)))
        print("T(0) = %.6f s, lambda_L = %g, 1%% tolerance +%.3g us, %d pieces on 0..100 us"
              % (result.T0_s, result.lambda_L, result.tolerances[0]["added_latency_s"] * 1e6, len(result.pieces)))
        for build in args.build if args.nprocs else []:
            print_on_ranks(run_dir, args.nprocs, args.repeat, args.collectives, build)
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
