"""numpy imported for an analysis rank, its BLAS held to one thread.

numpy's wheels bundle OpenBLAS, which starts a thread per core as numpy is imported, and each of
those threads then spins for about 0.1 s (2^28 cycles) waiting for work before it sleeps.  The
analysis never calls BLAS, and it runs as one rank per core: every analysis rank paid about 0.1 s
of CPU per other core for threads that never work (``import numpy`` alone on 2 cores: 0.24 s
of CPU, 0.12 s with one thread), and a node of 16 analysis ranks would start 240 of them at once.
"""

import os
import sys

# OpenBLAS reads it once, when numpy loads it; it comes before OMP_NUM_THREADS and GOTO_NUM_THREADS.
THREADS_SETTING = "OPENBLAS_NUM_THREADS"


def import_numpy():
    """Import numpy with OpenBLAS's threads held to one, unless numpy is loaded already (a Python
    program's own numpy keeps its threads).  The environment is left as it was: the program's
    later children see the user's setting, not ours."""
    if "numpy" in sys.modules:
        return
    before = os.environ.get(THREADS_SETTING)
    os.environ[THREADS_SETTING] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if before is None:
            del os.environ[THREADS_SETTING]
        else:
            os.environ[THREADS_SETTING] = before
