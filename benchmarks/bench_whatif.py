"""`mpigraph whatif` on synthetic runs (mpigraph.testing.synth) on one analysis rank.

    python benchmarks/bench_whatif.py [--records 1e6] [--ranks 64] [--structure halo] [--repeat 3]

Writes the run (raw logs exactly as the shim writes them) into a temporary directory, then
times ``mpigraph.whatif.whatif`` (trace, clock and match stages, the model graph, the
envelope on 0..100 us, the 1/2/5% tolerances, the critical messages) and each of its
steps; prints the medians and the machine's load.  The issue's target: under 10 s for
1e6 records on one analysis rank.
"""

import argparse
import os
import shutil
import statistics
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=float, default=1e6, help="records in all logs together")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--structure", default="halo", choices=synth.STRUCTURES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="write the run here and keep it")
    args = parser.parse_args()
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
            result = whatif(run_dir, latency=(0.0, 100e-6))
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
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
