"""calibrate's fit against an older checkout's, on the same samples.

    mpiexec -n 2 python benchmarks/bench_calibrate.py --old OLD_CHECKOUT [--rounds 6] [--repeats 200]
                                                      [--save samples.npz]
    python benchmarks/bench_calibrate.py --old OLD_CHECKOUT --load samples.npz      # refit saved rounds

Each round measures the ping-pong times once (mpigraph.network.calibrate.measure, the default
sizes 0 B .. 4 MiB) and fits them twice: with OLD_CHECKOUT's mpigraph/network/fit.py (its
defaults) and with this tree's (protocols, then each protocol's hinges).  Separate runs of
`mpigraph calibrate` measure different samples, and on a shared machine the samples move more
from run to run than the fits differ; on the same samples only the fit differs.  Per round: the
1-minute load average before it, and per fit how many sizes have the fit within one spread of
the mean, where each line starts (its protocol's initial; h: a hinge of this tree's fit) and the
misses (size: fit - mean / spread, us); then the totals.  --save keeps the samples (an .npz of
every round's {size: one-way times}) so that a later --load refits them without MPI.
"""

import argparse
import importlib.util
import os
import sys

import numpy as np

from mpigraph.network import calibrate
from mpigraph.network import fit as new_fit


def load_old(checkout: str):
    """OLD_CHECKOUT's fit.py as a module of its own, with its own hinge.py where it has one
    (its `from mpigraph.network.hinge import` would otherwise take this tree's)."""
    def module(name: str, path: str):
        spec = importlib.util.spec_from_file_location(name, path)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded

    folder = os.path.join(checkout, "mpigraph", "network")
    key = "mpigraph.network.hinge"
    mine = sys.modules.get(key)
    try:
        if os.path.exists(os.path.join(folder, "hinge.py")):
            sys.modules[key] = module("old_hinge", os.path.join(folder, "hinge.py"))
        return module("old_fit", os.path.join(folder, "fit.py"))
    finally:
        if mine is not None:
            sys.modules[key] = mine


def describe(result) -> tuple:
    """(sizes within one spread, total, 'start/initial ...', misses)."""
    st = result.stats
    diff = result.predict(st.sizes) - st.mean
    within = np.abs(diff) <= st.spread
    starts = []
    for line in result.lines:
        starts.append("%d%s" % (line.start, line.protocol[0]))
        # This tree's Line.pieces starts with the protocol's first piece; an older Line.hinges
        # held the pieces after each bend.
        bends = line.pieces[1:] if hasattr(line, "pieces") else getattr(line, "hinges", [])
        starts += ["%.0fh" % piece.start for piece in bends]
    misses = ", ".join("%d: %+.1f/%.1f" % (s, d * 1e6, sp * 1e6)
                       for s, d, sp in zip(st.sizes[~within], diff[~within], st.spread[~within]))
    return int(within.sum()), len(within), " ".join(starts), misses


def collect(rounds: int, repeats: int):
    """[(load, {size: times})] on rank 0 ([] elsewhere): one calibrate measurement per round."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = []
    for _ in range(rounds):
        load = os.getloadavg()[0]
        samples = calibrate.measure(comm, calibrate.default_sizes(), repeats)
        if comm.Get_rank() == 0:
            out.append((load, next(iter(samples.values()))))
    return out


def save(path: str, rounds) -> None:
    arrays = {"load": np.array([load for load, _ in rounds])}
    for r, (_, by_size) in enumerate(rounds):
        for size, times in by_size.items():
            arrays["r%d_%d" % (r, size)] = times
    np.savez_compressed(path, **arrays)


def load(path: str):
    data = np.load(path)
    rounds = []
    for r, level in enumerate(data["load"]):
        prefix = "r%d_" % r
        rounds.append((float(level), {int(k[len(prefix):]): data[k] for k in data.files if k.startswith(prefix)}))
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, metavar="CHECKOUT", help="an older checkout (its fit.py)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=20, help="only the intervals need it (default 20)")
    parser.add_argument("--save", metavar="NPZ", help="keep the samples for --load")
    parser.add_argument("--load", metavar="NPZ", help="refit saved samples (no MPI)")
    args = parser.parse_args()
    if args.load:
        rounds = load(args.load)
    else:
        rounds = collect(args.rounds, args.repeats)
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() != 0:
            return
        if args.save:
            save(args.save, rounds)
    old = load_old(args.old)
    totals = np.zeros((2, 2), int)
    whole = np.zeros(2, int)         # rounds with the fit within one spread at every size
    print("%s; old fit from %s" % (os.uname().nodename, args.old))
    for r, (level, by_size) in enumerate(rounds):
        fits = (("old", old.fit(by_size, bootstrap=args.bootstrap)),
                ("new", new_fit.fit(by_size, bootstrap=args.bootstrap)))
        for k, (name, result) in enumerate(fits):
            within, total, lines, misses = describe(result)
            totals[k] += within, total
            whole[k] += within == total
            print("round %d load %.2f %s: %d of %d within one spread; lines from %s; misses %s"
                  % (r + 1, level, name, within, total, lines, misses or "none"))
    print("total: old %d of %d, new %d of %d sizes within one spread" % (*totals[0], *totals[1]))
    print("rounds with every size within one spread: old %d, new %d, of %d" % (whole[0], whole[1], len(rounds)))


if __name__ == "__main__":
    main()
