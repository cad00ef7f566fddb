"""The independent call counter (shim_programs/count_calls.c), preloaded before the shim."""

import os
import re
from collections import Counter

import mpi_env

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim_programs", "count_calls.c")


def build(builder, mpi):
    """Path of count_calls.so built with `mpi`'s compiler wrapper."""
    return builder.build(SOURCE, mpi.mpicc, flags=("-shared", "-fPIC"))


def preload(counter):
    """rank_env for mpi_env.mpirun: the counter first, then the shim."""
    return {"LD_PRELOAD": "%s:%s" % (counter, mpi_env.shim_path())}


def totals(stderr):
    """{MPI function: calls summed over ranks} from the counter's lines on stderr."""
    counts = Counter()
    for m in re.finditer(r"^count_calls: rank \d+ (MPI_\w+) (\d+)$", stderr, re.M):
        counts[m.group(1)] += int(m.group(2))
    return dict(counts)
