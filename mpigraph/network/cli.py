"""`mpigraph calibrate`, `mpigraph decompose` and `mpigraph netprobe`.

    mpiexec -n 2 mpigraph calibrate [--out params.csv] [--sizes 0,8,1K,64K] [--repeats N] [--max-protocols 3]
                                    [--max-hinges 8]
    mpigraph decompose RUN_DIR [--params params.csv] [--out DIR]
    mpigraph netprobe --simulate fattree:8,3 [--seed 1] [--noise 0.02] [--repeats 5] [--oversample 2]
    mpiexec -n 4 mpigraph netprobe --topology T.json [--emulate] [--out netprobe]
"""

import sys

# No numpy here: mpigraph/cli.py builds every subcommand's parser on each call, and
# `mpigraph lib` must stay fast; the commands import what they need when they run.

MAX_HINGES = 8      # hinge.MAX_HINGES (tests/test_calibrate.py checks they agree), without its numpy


def add_parser(subparsers) -> None:
    """Register the three subcommands."""
    p = subparsers.add_parser(
        "calibrate", help="measure latency and per-byte time per protocol (mpiexec -n 2 mpigraph calibrate)")
    p.add_argument("--out", metavar="FILE", default="params.csv", help="the parameters file (default params.csv)")
    p.add_argument("--sizes", metavar="LIST",
                   help="message sizes in bytes, comma separated, K/M suffixes allowed "
                        "(default 0 B .. 4 MiB: the powers of two and the midpoints between them)")
    p.add_argument("--repeats", type=int, default=200, metavar="N",
                   help="round trips per size up to 64 KiB, fewer above (default 200)")
    p.add_argument("--bootstrap", type=int, default=400, metavar="B", help="bootstrap replicates (default 400)")
    p.add_argument("--seed", type=int, default=1, help="bootstrap seed (default 1)")
    p.add_argument("--max-protocols", type=int, default=3, choices=(1, 2, 3), metavar="M",
                   help="fit at most M protocols: 3 = eager, medium, rendezvous, 2 = eager and rendezvous "
                        "(the data choose how many, up to M; default 3)")
    p.add_argument("--max-hinges", type=int, default=MAX_HINGES, metavar="H",
                   help="let each protocol's per-byte time bend (continuously: caches, copy chunks) at most H "
                        "times; the data choose how many (default %d; 0: one line a protocol)" % MAX_HINGES)
    p.set_defaults(func=cmd_calibrate)

    p = subparsers.add_parser(
        "decompose", help="split every call's MPI time into synchronisation, network and MPI stack (seed 003)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="an analysed run directory")
    p.add_argument("--params", metavar="FILE",
                   help="network parameters from mpigraph calibrate (default: built-in ones fitted on one host)")
    p.add_argument("--out", metavar="DIR", help="where the decomposition files go (default RUN_DIR)")
    p.set_defaults(func=cmd_decompose)

    p = subparsers.add_parser(
        "netprobe", help="every node pair's latency from O(links) ping-pongs in parallel rounds (seed 001)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--simulate", metavar="TOPOLOGY",
                        help="plan and solve without MPI on fattree:PORTS,LEVELS or a topology JSON file")
    source.add_argument("--topology", metavar="JSON", help="the network (run under mpiexec, one rank per node)")
    p.add_argument("--emulate", action="store_true",
                   help="one host: rank i is terminal i and the responder adds the route's emulated latency")
    p.add_argument("--out", metavar="DIR", default="netprobe", help="output directory (default netprobe)")
    p.add_argument("--seed", type=int, default=1, help="random orders, oversampling, truth (default 1)")
    p.add_argument("--noise", type=float, default=0.0, help="--simulate: one-sided multiplicative noise (0.02 = 2%%)")
    p.add_argument("--repeats", type=int, metavar="K",
                   help="ping-pongs per pair, the minimum kept (default 1 simulated, 60 real)")
    p.add_argument("--passes", type=int, default=3,
                   help="real runs: the schedule runs this many times, the repeats spread over them (default 3)")
    p.add_argument("--warmup", type=int, default=5, help="untimed ping-pongs before each pair's (default 5)")
    p.add_argument("--oversample", type=float, default=1.0, metavar="F",
                   help="measure about F x rank(S) pairs: the minimal set plus random others (default 1)")
    p.add_argument("--orders", type=int, default=6, metavar="K",
                   help="row orders tried: lexicographic, round-robin and K-2 random (default 6)")
    p.add_argument("--validate", type=int, default=64, metavar="N",
                   help="real runs: pairs outside the plan measured directly as a check (default 64)")
    p.set_defaults(func=cmd_netprobe)


def cmd_calibrate(args) -> int:
    from mpigraph.network import calibrate

    sizes = calibrate.parse_sizes(args.sizes) if args.sizes else calibrate.default_sizes()
    return calibrate.main(args.out, sizes, args.repeats, args.bootstrap, args.seed, args.max_protocols,
                          args.max_hinges)


def cmd_decompose(args) -> int:
    from mpigraph.network.decompose import decompose
    from mpigraph.network.decompose_report import print_table

    result = decompose(args.run_dir, params=args.params, out=args.out)
    print(result.text.rstrip("\n"))
    print(print_table(result.ranks))
    print("  wrote " + ", ".join(result.files))
    return 0


def cmd_netprobe(args) -> int:
    from mpigraph.network import topology

    if args.simulate:
        return _simulate(args, topology.parse_simulate(args.simulate))
    return _real(args, topology.load(args.topology))


def _simulate(args, topo) -> int:
    import numpy as np

    from mpigraph.network import outputs
    from mpigraph.network.simulate import HIGH, LOW, simulate
    from mpigraph.network.solve import aggregated_links

    sim = simulate(topo, seed=args.seed, noise=args.noise, repeats=args.repeats or 1,
                   oversample=args.oversample, orders=args.orders)
    status = np.where(np.isnan(sim.measured_rtt), "no", "plan").astype(object)
    table = outputs.PairTable(topo.terminals, sim.x, sim.y, status, sim.measured_rtt, sim.predicted_rtt,
                              sim.predicted_se, sim.true_rtt)
    aggregates = aggregated_links(sim.S[sim.plan.measured], sim.solution)
    paths = outputs.write(args.out, sim.plan, table, aggregates, topo.links)
    error = sim.relative_error
    print(outputs.summary(topo.description, topo.n, topo.m, sim.plan, sim.solution.residual_rms,
                          sim.solution.condition))
    print("  simulated: link latencies U(%.2g, %.2g) s, noise %g (one-sided), min of %d repeats"
          % (LOW, HIGH, args.noise, args.repeats or 1))
    print("  error of every pair's RTT against the truth: median %.3g%%, max %.3g%%"
          % (100 * np.median(error), 100 * error.max()))
    print("  wrote " + ", ".join(paths))
    return 0


def _real(args, topo) -> int:
    from mpigraph.network import outputs, runner

    result = runner.run(topo, orders=args.orders, oversample=args.oversample, seed=args.seed, emulate=args.emulate,
                        warmup=args.warmup, repeats=args.repeats or 60, validate=args.validate,
                        passes=args.passes)
    if result is None or result is False:
        return 0 if result is None else 2     # rank 0 says what went wrong
    plan, table, aggregates, solution, notes = result
    paths = outputs.write(args.out, plan, table, aggregates, topo.links)
    print(outputs.summary(topo.description, plan.n, topo.m, plan, solution.residual_rms, solution.condition))
    if args.emulate:
        print("  emulated: link latencies U(%g, %g) us added by the responders"
              % (runner.EMULATED_LOW * 1e6, runner.EMULATED_HIGH * 1e6))
    for note in notes:
        print("  note: " + note)
    print("\n".join(outputs.held_out_lines(table)))
    print("  wrote " + ", ".join(paths))
    sys.stdout.flush()
    return 0
