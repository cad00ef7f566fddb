"""``mpigraph whatif RUN_DIR``: the run's time against added network latency and bandwidth."""

import re
import sys

from mpigraph.util import units
from mpigraph.whatif.options import COLLECTIVE_ALGORITHMS, MODELS, WhatifError


def parse_time(text, default_unit="us"):
    """'100us' -> 1e-4 (seconds); a bare number is in default_unit; negative allowed (dL < 0)."""
    return units.parse_time(text, default_unit, signed=True)


def parse_per_byte(text):
    """'0.02ns' (time per byte) or '10GB/s' (bandwidth) -> seconds per byte."""
    if units.is_bandwidth(text):
        return 1.0 / units.parse_bandwidth(text)
    return units.parse_time(text, "ns")


def parse_range(text, parse):
    if ":" not in text:
        raise WhatifError("%r: a range lo:hi, e.g. 0:100us" % text)
    lo, hi = text.split(":", 1)
    unit = re.search(r"[a-zµ/]+$", hi.strip(), re.I)        # 0:100us: the unit of hi applies to lo too
    if unit and not re.search(r"[a-zµ/]+$", lo.strip(), re.I):
        lo = lo + unit.group(0)
    return parse(lo), parse(hi)


def parse_loggps(text):
    """'L=3us,o=1us,G=0.018ns,S=256KiB' -> {L0_ns, o_ns, G0_ns, S_bytes}."""
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, _, value = item.partition("=")
        key = key.strip()
        if key in ("L", "o"):
            out["L0_ns" if key == "L" else "o_ns"] = parse_time(value) * 1e9
        elif key == "G":
            out["G0_ns"] = parse_per_byte(value) * 1e9
        elif key == "S":
            out["S_bytes"] = units.parse_size(value)
        else:
            raise WhatifError("--loggps %s: keys L, o, G, S (e.g. L=3us,o=1us,G=0.018ns,S=256KiB)" % item)
    if out:
        out["source"] = "--loggps %s" % text
    return out


def read_measured(path):
    """[(dL_s, T_s)] from a CSV with columns dL_s and T_s."""
    import csv

    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        return [(float(r["dL_s"]), float(r["T_s"])) for r in rows]
    except (OSError, KeyError, ValueError) as error:
        raise WhatifError("--measured %s: need a CSV with columns dL_s,T_s (%s)" % (path, error))


def cmd_whatif(args):
    from mpi4py import MPI

    from mpigraph.comm import launch
    from mpigraph.comm.meter import Meter
    from mpigraph.whatif.api import whatif

    launch.check_world()            # another MPI than the launcher's: say so before any work
    comm = MPI.COMM_WORLD           # `mpiexec -n K mpigraph whatif`: K analysis ranks
    meter = Meter()

    latency = parse_range(args.latency, parse_time)
    bandwidth = parse_range(args.bandwidth, parse_per_byte) if args.bandwidth else None
    try:
        tolerance = [float(x) for x in args.tolerance.split(",") if x.strip()]
    except ValueError:
        raise WhatifError("--tolerance %s: percentages like 1,2,5" % args.tolerance)
    result = whatif(args.run_dir, latency=latency, bandwidth=bandwidth, model=args.model, tolerance=tolerance,
                    params=args.params, loggps=parse_loggps(args.loggps) if args.loggps else None,
                    collectives=args.collectives, at=parse_time(args.at) if args.at else 0.0,
                    measured=read_measured(args.measured) if args.measured else None,
                    out=args.out or args.run_dir, comm=comm, meter=meter, overhead=args.overhead, pairs=args.pairs,
                    scale_pair=args.scale_pair or (), build=args.build)
    rows = comm.gather((comm.Get_rank(), result.spread, meter.stages,
                        (result.records_read, result.edges_built, result.edges_sent, result.edges_received)))
    if comm.Get_rank() == 0:
        sys.stdout.write(result.text)
        print("  files: %s  (%.2f s on %d analysis rank%s)" % (", ".join(result.files), result.seconds,
                                                               comm.Get_size(), "s" if comm.Get_size() > 1 else ""))
        if args.verbose:
            print("  model graph built on %s" % ("every analysis rank (its own trace ranks)" if result.build == "ranks"
                                                 else result.build))
            print(per_rank_table(rows))
    return 0


def per_rank_table(rows):
    """Per analysis rank: the trace records it read, the model-graph edges it built, sent to other
    ranks and received from them, the pieces and edges it solved; then each step's wall and CPU
    seconds and bytes sent and received (comm.meter).  A rank-0 funnel shows in the records,
    edges and CPU seconds even on a machine with fewer cores than ranks."""
    lines = ["  %4s %10s %10s %10s %10s %7s %9s" % ("rank", "records", "built", "sent", "received", "pieces",
                                                    "edges"),
             ]
    for rank, (units, edges), _, (records, built, sent, received) in rows:
        lines.append("  %4d %10d %10d %10d %10d %7d %9d" % (rank, records, built, sent, received, units, edges))
    lines.append("  %4s  %-17s %8s %8s %12s %12s" % ("rank", "step", "wall s", "cpu s", "sent B", "received B"))
    for rank, _, stages, _ in rows:
        for st in stages:
            lines.append("  %4d  %-17s %8.3f %8.3f %12d %12d"
                         % (rank, st.name, st.wall_s, st.cpu_s, st.sent, st.received))
    return "\n".join(lines)


def add_parser(subparsers):
    p = subparsers.add_parser("whatif", help="what if the network were slower: T against added latency, "
                                             "latency tolerance, critical messages")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--latency", default="0:100us", metavar="LO:HI",
                   help="latency interval (delta: added latency dL; loggps: L), default 0:100us")
    p.add_argument("--bandwidth", metavar="LO:HI", help="per-byte time interval to sweep too, e.g. 0.02:0.1ns "
                                                        "or 10GB/s:50GB/s")
    p.add_argument("--model", choices=MODELS, default="delta",
                   help="delta: the measured run plus dL (default); loggps: LogGPS costs with L, o, G")
    p.add_argument("--tolerance", default="1,2,5", metavar="PCTS", help="degradations in %% (default 1,2,5)")
    p.add_argument("--params", metavar="FILE", help="params.csv of 'mpigraph calibrate' (L, G, S)")
    p.add_argument("--loggps", metavar="K=V,...", help="parameters by hand: L=3us,o=1us,G=0.018ns,S=256KiB")
    p.add_argument("--collectives", choices=COLLECTIVE_ALGORITHMS, default="recdoub",
                   help="collectives: a hub of latency depth ceil(log2 P) (recdoub, default) or 2(P-1) "
                        "(ring), or their message rounds (dissemination)")
    p.add_argument("--at", metavar="TIME", help="reference point on the latency axis (default: dL = 0 / L0)")
    p.add_argument("--measured", metavar="CSV", help="measured points (dL_s,T_s) to draw in whatif.svg")
    p.add_argument("--overhead", default="none", metavar="auto|none|NS",
                   help="the tracing's cost per call to take off every compute edge, so that T(0) predicts the "
                        "untraced program: auto (estimated from the gaps between consecutive calls), none "
                        "(default: T(0) is the traced run's) or a time per call (70ns; a bare number is ns)")
    p.add_argument("--pairs", metavar="PAIRS_CSV",
                   help="netprobe's pairs.csv (--model loggps): each message between ranks on hosts x != y costs "
                        "the pair's latency_s instead of L; writes whatif_pairs.csv (dT/dl per host pair)")
    p.add_argument("--scale-pair", action="append", metavar="X,Y,K",
                   help="with --pairs: host pair (X, Y) K times slower (repeatable)")
    p.add_argument("--out", metavar="DIR", help="where to write the files (default RUN_DIR)")
    p.add_argument("--build", choices=("ranks", "rank0"), default="ranks",
                   help="where the model graph is built: on every analysis rank from the trace ranks it owns "
                        "(ranks, default), or whole on analysis rank 0 (rank0; also where ranks does not apply: --pairs, "
                        "--collectives dissemination, neighbourhood collectives, one-sided epochs)")
    p.add_argument("--verbose", action="store_true",
                   help="print per analysis rank (mpiexec -n K mpigraph whatif) the records it read, the edges it "
                        "built, sent and received, the pieces and edges it solved, and each step's seconds and "
                        "bytes")
    p.set_defaults(func=cmd_whatif)
