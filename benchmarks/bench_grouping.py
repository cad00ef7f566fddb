"""Rows grouped by destination rank, as every exchange between analysis ranks groups them.

    python benchmarks/bench_grouping.py [--rows 1e6 4e6] [--ranks 2 4 8 16 64] [--rounds 5]

Each method gives the same stable order of random destination ranks and the rows per rank:
mpigraph's (``util.arrays.grouped``: a mask per rank up to FEW_GROUPS ranks, numpy's stable sort
of 8- or 16-bit ints beyond, a radix sort), a mask and flatnonzero per rank (K passes over the
rows), and a stable sort of the int32 destinations themselves (a merge sort).  Printed: the
least milliseconds of the rounds.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import describe_machine  # noqa: E402

from mpigraph.util import arrays  # noqa: E402


def mask_per_rank(dest, size):
    rows = [np.flatnonzero(dest == r) for r in range(size)]
    return np.concatenate(rows), np.array([len(r) for r in rows], np.int64)


def merge_sort(dest, size):
    return np.argsort(dest, kind="stable"), np.bincount(dest, minlength=size)


METHODS = [("arrays.grouped", arrays.grouped), ("a mask per rank", mask_per_rank),
           ("stable sort of int32", merge_sort)]


def least_ms(method, dest, size, rounds):
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        method(dest, size)
        best = min(best, time.perf_counter() - started)
    return 1e3 * best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=float, nargs="+", default=[1e6, 4e6])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16, 64])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(describe_machine())
    print("| rows | K | " + " | ".join("%s ms" % name for name, _ in METHODS) + " |")
    print("| --- | --- |" + " --- |" * len(METHODS))
    rng = np.random.default_rng(0)
    for n in (int(r) for r in args.rows):
        for size in args.ranks:
            dest = rng.integers(0, size, n).astype(np.int32)
            expected = np.argsort(dest, kind="stable")
            for _, method in METHODS:
                order, counts = method(dest, size)
                assert (order == expected).all() and (counts == np.bincount(dest, minlength=size)).all()
            print("| %s | %d | %s |" % (format(n, ","), size, " | ".join(
                "%.1f" % least_ms(method, dest, size, args.rounds) for _, method in METHODS)))


if __name__ == "__main__":
    main()
