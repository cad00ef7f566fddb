"""The ``mpigraph`` command.

    mpigraph lib                          path of the shim library to LD_PRELOAD
    mpigraph demo [-n 4] [--out DIR] [--quiet] [--verbose]
                                          profile the bundled imbalanced demo
    mpigraph run -n N [--out DIR] [--algorithm A] [--quiet] [--verbose] [--mpiexec PATH] -- prog args
    mpigraph analyze DIR [--out OUT] [--algorithm A] [--phase NAME] [--quiet] [--verbose]
                                          analyse saved logs again (serially, or
                                          under mpiexec -n K in parallel)
    mpigraph report DIR                   print DIR/summary.txt again
    mpigraph include                      directory of mpigraph.h / mpigraph.f90 (the phase API)
    mpigraph view DIR [--out OUT] [--perfetto]
                                          write timeline.html and ranks.svg (and
                                          trace.json for Perfetto UI) into DIR or OUT
    mpigraph config                       the MPIGRAPH_* settings
    mpigraph model DIR [DIR ...] [--predict P ...]
                                          queuing-network model of run time (seed 002)
    mpiexec -n 2 mpigraph calibrate [--out params.csv]
                                          latency and per-byte time per protocol
    mpigraph netprobe --simulate fattree:8,3 | --topology T.json
                                          every node pair's latency (seed 001)

The flags that several subcommands have mean the same in each: --out names the directory
written into (run, demo: the run directory; analyze, view: where the report or the pictures
go instead of DIR), --quiet prints no summary (and no stage lines), --verbose prints every
analysis stage with its time on stderr, --algorithm picks the critical-path algorithm.
An existing --out directory must be empty or mpigraph's own (mpigraph.report.outdir).

Errors the user can fix (bad logs, bad settings, no MPI) print one line
``mpigraph: error: ...`` on stderr and exit with status 2.  Subcommands import
what they need when they run: ``mpigraph lib`` is used in ``$(...)`` and must
stay fast, and the launcher modules are optional here.
"""

import argparse
import os
import sys

from mpigraph import __version__
from mpigraph import config as settings

EXIT_USER_ERROR = 2


def cmd_lib(args):
    from mpigraph.shim.lib import library_path

    print(library_path())
    return 0


def cmd_demo(args):
    from mpigraph.shim.demo import run_demo

    return run_demo(args.n, args.out, options=_switch_options(args))


RUN_SETTINGS = [s for s in settings.SETTINGS if s.name != "MPIGRAPH_OUT"]

# Settings that are on/off switches on the command line (flags without a value, as in analyze).
SWITCHES = {"MPIGRAPH_QUIET": "quiet", "MPIGRAPH_VERBOSE": "verbose"}
# What `run --quiet 1` gave the switch when it took a value: caught in main, not run as a program.
_SWITCH_VALUES = ("0", "1", "on", "off", "yes", "no", "true", "false")


def _switch_options(args):
    """{MPIGRAPH_QUIET/VERBOSE: "1"} for the switches given on the command line."""
    return {name: "1" for name, dest in SWITCHES.items() if getattr(args, dest, False)}


def setting_flag(name):
    """The `mpigraph run` flag of an MPIGRAPH_* setting: MPIGRAPH_CLOCK_SOURCE -> --clock-source."""
    return "--" + name[len("MPIGRAPH_"):].lower().replace("_", "-")


def cmd_run(args):
    from mpigraph.shim.launcher import run

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    options = {s.name: getattr(args, s.name) for s in RUN_SETTINGS
               if s.name not in SWITCHES and getattr(args, s.name) is not None}
    options.update(_switch_options(args))
    # A bad setting fails here, once, not in every rank at MPI_Finalize.
    settings.from_env(dict(os.environ, **options))
    return run(program, args.n, out=args.out, options=options, mpiexec=args.mpiexec)


def cmd_analyze(args):
    from mpigraph.util import blas

    blas.import_numpy()         # an analysis rank, as in the job: BLAS held to one thread
    from mpigraph import run as api
    from mpigraph.util.left_out import left_out

    try:
        cfg = settings.from_env().with_overrides(
            algorithm=args.algorithm, quiet=True if args.quiet else None, verbose=True if args.verbose else None,
            phase=args.phase)
    except settings.ConfigError:
        if _analysis_rank() != 0:
            return EXIT_USER_ERROR   # every rank found the same error: rank 0 says it
        raise
    # pandas left out, as in the job: pyarrow would import it on every analysis rank (0.15-0.2 s
    # of CPU each, a fixed cost that K ranks pay K times) only to find no pandas objects; the
    # process ends after the analysis, so nothing else can miss it.
    with left_out():
        text = api.analyze_text(args.run_dir, None, cfg, out_dir=args.out)
    if text is not None and not cfg.quiet:      # analysis rank 0 has the text
        sys.stdout.write(text)
        sys.stdout.flush()
    # A report of a crashed run is still a report (exit 0), but say so where scripts and people look.
    for line in (text or "").splitlines():
        if line.startswith("warning: "):
            print("mpigraph: " + line, file=sys.stderr)
    return 0


def _analysis_rank():
    from mpi4py import MPI

    return MPI.COMM_WORLD.rank


def cmd_report(args):
    from mpigraph.report.writer import print_summary

    print_summary(args.run_dir)
    return 0


def cmd_view(args):
    from mpigraph.view import write_views

    written, notes, seconds = write_views(args.run_dir, perfetto=args.perfetto, out_dir=args.out)
    for path, note in written:
        print("%s  (%s)" % (path, note))
    for note in notes:
        print("note: %s" % note)
    return 0


def cmd_config(args):
    sys.stdout.write(settings.settings_table())
    in_effect = [s.name for s in settings.SETTINGS + settings.TOOL_SETTINGS if os.environ.get(s.name)]
    if in_effect:
        print("\nset in this environment:")
        for name in in_effect:
            print("  %s=%s" % (name, os.environ[name]))
    settings.from_env()   # say so if one of them is not valid
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="mpigraph", description="Profile an MPI program and find why it is slow.",
        epilog="Settings are MPIGRAPH_* environment variables: see 'mpigraph config'.")
    parser.add_argument("--version", action="version", version="mpigraph " + __version__)
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True

    p = sub.add_parser("lib", help="print the path of the shim library to LD_PRELOAD")
    p.set_defaults(func=cmd_lib)

    p = sub.add_parser("demo", help="profile the bundled, deliberately imbalanced MPI program")
    p.add_argument("-n", type=int, default=4, help="ranks (default 4)")
    _add_out(p, RUN_DIR_HELP)
    _add_quiet_verbose(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("run", help="run an MPI program under mpigraph: mpigraph run -n N -- ./app args")
    p.add_argument("-n", type=int, required=True, help="ranks")
    _add_out(p, RUN_DIR_HELP)
    p.add_argument("--mpiexec", metavar="PATH", help="the mpiexec to use (default: from PATH)")
    _add_quiet_verbose(p)
    # Every other MPIGRAPH_* setting has its flag: MPIGRAPH_CLOCK_SOURCE is --clock-source.
    for s in RUN_SETTINGS:
        if s.name == "MPIGRAPH_ALGORITHM":
            _add_algorithm(p, dest=s.name)
        elif s.name not in SWITCHES:
            p.add_argument(setting_flag(s.name), metavar="VALUE", dest=s.name,
                           help="%s (default %s)" % (s.help, s.default))
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- the program and its arguments")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("analyze", help="analyse a run directory again (mpiexec -n K mpigraph analyze DIR)")
    p.add_argument("run_dir", metavar="DIR")
    _add_algorithm(p, dest="algorithm")
    _add_out(p, "write the report files into OUT (default: DIR itself)", metavar="OUT")
    _add_quiet_verbose(p)
    p.add_argument("--phase", metavar="NAME",
                   help="phases.csv, phase_functions.csv and phase_callsites.csv of this phase only (a region "
                        "name, with the regions nested in it, or a Pcontrol phase number), and its section in the "
                        "summary")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("report", help="print the summary of an analysed run again")
    p.add_argument("run_dir", metavar="DIR")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("view", help="write the timeline page (timeline.html) and ranks.svg of a run directory")
    p.add_argument("run_dir", metavar="DIR")
    _add_out(p, "write the pictures into OUT (default: DIR itself; for a run directory you cannot write to)",
             metavar="OUT")
    p.add_argument("--perfetto", action="store_true",
                   help="also write trace.json (Chrome trace event format) for Perfetto UI and chrome://tracing")
    p.set_defaults(func=cmd_view)

    from mpigraph.whatif import cli as whatif_cli

    whatif_cli.add_parser(sub)

    p = sub.add_parser("config", help="list the MPIGRAPH_* settings and their defaults")
    p.set_defaults(func=cmd_config)

    from mpigraph.model.cli import add_parser as add_model_parser
    add_model_parser(sub)

    from mpigraph.network.cli import add_parser as add_network_parsers   # calibrate, netprobe
    add_network_parsers(sub)

    from mpigraph.export.cli import add_parser as add_export_parser    # export --otf2
    add_export_parser(sub)

    from mpigraph.phases.cli import add_parser as add_phases_parser    # include (the phase API's header)
    add_phases_parser(sub)
    return parser


RUN_DIR_HELP = ("run directory: raw logs and report (default ./mpigraph-<date>-<id>; an existing one must be "
                "empty or a run directory, holding raw/)")


def _add_out(parser, help, metavar="DIR"):
    parser.add_argument("--out", metavar=metavar, help=help)


def _add_quiet_verbose(parser):
    """--quiet and --verbose, flags with the same meaning in every subcommand (MPIGRAPH_QUIET/VERBOSE=1)."""
    parser.add_argument("--quiet", action="store_true", help="do not print the summary (MPIGRAPH_QUIET=1)")
    parser.add_argument("--verbose", action="store_true",
                        help="print each analysis stage and its time on stderr (MPIGRAPH_VERBOSE=1)")


def _add_algorithm(parser, dest):
    parser.add_argument("--algorithm", choices=settings.ALGORITHMS, dest=dest,
                        help="critical-path algorithm (MPIGRAPH_ALGORITHM; default auto: dijkstra for small runs "
                             "or one analysis rank, parallel-dijkstra otherwise)")


def _user_error_types():
    """Errors that mean bad input, not a bug: one line, no traceback.

    Looked up in sys.modules so the fast subcommands do not import numpy just
    to name TraceError: an error class that was never imported was never raised.
    """
    types = [settings.ConfigError, FileNotFoundError]
    for module, name in (("mpigraph.trace.logs", "TraceError"), ("mpigraph.shim.launcher", "LauncherError"),
                         ("mpigraph.report.writer", "ReportError"), ("mpigraph.comm.node_memory", "NotEnoughMemory"),
                         ("mpigraph.model.mva", "ModelError"), ("mpigraph.report.outdir", "OutputDirError"),
                         ("mpigraph.view", "ViewError"), ("mpigraph.network", "NetworkError"),
                         ("mpigraph.whatif.options", "WhatifError"), ("mpigraph.comm.launch", "MPIMismatch"),
                         ("mpigraph.export.otf2_trace", "ExportError"), ("mpigraph.phases.stage", "PhaseError"),
                         ("mpigraph.util.units", "UnitError")):
        if module in sys.modules:
            types.append(getattr(sys.modules[module], name))
    return tuple(types)


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.func is cmd_run and not [a for a in args.program if a != "--"]:
        build_parser().error("run: no program given (mpigraph run -n N -- ./app args)")
    if args.func is cmd_run and args.program[1:2] == ["--"] and args.program[0].lower() in _SWITCH_VALUES:
        build_parser().error("run: %r before -- is not a program: --quiet and --verbose take no value "
                             "(mpigraph run -n N --quiet -- ./app args)" % args.program[0])
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as error:   # noqa: BLE001 -- sorted into user errors and bugs just below
        if "mpigraph.comm.parallel" in sys.modules and isinstance(error, sys.modules["mpigraph.comm.parallel"].PeerFailed):
            return EXIT_USER_ERROR   # the analysis rank that failed printed its own error
        if isinstance(error, _user_error_types()):
            print("mpigraph: error: %s" % error, file=sys.stderr)
            return EXIT_USER_ERROR
        raise
