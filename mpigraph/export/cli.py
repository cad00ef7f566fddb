"""`mpigraph export RUN_DIR --otf2 DIR`: the analysed run as a trace other tools open."""

# No numpy here: mpigraph/cli.py builds every subcommand's parser on each call.


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("export", help="write an analysed run as an OTF2 trace (Vampir, Scalasca, pipit): "
                                             "mpigraph export DIR --otf2 OUT")
    p.add_argument("run_dir", metavar="DIR", help="an analysed run directory")
    p.add_argument("--otf2", metavar="OUT", required=True,
                   help="directory for the OTF2 archive (OUT/traces.otf2); must not hold one already")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from mpigraph.export import otf2_trace

    counts = otf2_trace.export(args.run_dir, args.otf2)
    print("mpigraph: wrote %s/traces.otf2: %s" % (args.otf2, ", ".join("%d %s" % (n, name)
                                                                         for name, n in counts.items())))
    return 0
