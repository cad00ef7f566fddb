"""`mpigraph model RUN_DIR [RUN_DIR ...]`: seed 002's queuing-network model of the runs."""

import os
import sys


def add_parser(subparsers) -> None:
    """Add the `model` subcommand."""
    p = subparsers.add_parser(
        "model", help="model run time as compute + switch + MPI service + contention (queuing network, seed 002) "
                      "and, from runs at 3+ process counts, predict it at others")
    p.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="analysed run directories (one program, any P)")
    p.add_argument("--params", metavar="CSV", help="switch latency and per-byte time: the params.csv of "
                   "mpigraph calibrate (columns protocol, latency_s, per_byte_s, ...; the eager row is used)")
    p.add_argument("--latency", metavar="T", help="switch latency, e.g. 1us (default 0 on one host, 1us on several)")
    p.add_argument("--bandwidth", metavar="BW", help="switch bandwidth, e.g. 10GB/s (default infinite on one host, "
                   "10GB/s on several)")
    p.add_argument("--predict", metavar="P", type=int, nargs="+", default=[],
                   help="predict the run time at these process counts (needs runs at 3+ counts)")
    p.add_argument("--service", choices=("measured", "calibrated"), default="measured",
                   help="MPI service demand: the calls' measured execution time (default), or calibrated so that "
                        "service + contention = MPI time (the paper's mode)")
    p.add_argument("--centres", choices=("shared", "per-rank"), default="shared",
                   help="one MPI queueing centre shared by all ranks (default) or one per rank")
    p.add_argument("--collective-messages", metavar="K", type=float, default=1.0,
                   help="messages counted per collective call (default 1)")
    p.add_argument("--out", metavar="DIR", help="where to write model.csv, model.parquet, model_ranks.csv, "
                   "model.txt and model.svg (default: the last RUN_DIR, whose summary.txt also gets the paragraph)")
    p.set_defaults(func=cmd_model)


def cmd_model(args) -> int:
    from mpigraph.model.api import model_runs
    from mpigraph.model.report import write_model

    result = model_runs(args.run_dirs, params=args.params, latency=args.latency, bandwidth=args.bandwidth,
                        predict=args.predict, service=args.service, centres=args.centres,
                        collective_messages=args.collective_messages)
    out = args.out or args.run_dirs[-1]
    same = os.path.abspath(out) == os.path.abspath(args.run_dirs[-1])
    paths = write_model(result, out, summary=same)
    print(result.text, end="")
    print("written: " + ", ".join(paths))
    # Warnings also where scripts look (as `mpigraph analyze` does): they qualify the numbers.
    for warning in result.warnings:
        print("mpigraph: warning: " + warning, file=sys.stderr)
    return 0
