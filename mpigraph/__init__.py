"""mpigraph: an MPI profiler that finds why an MPI program is slow.

The Python API (mpigraph.run): an analysed run directory as pandas DataFrames::

    import mpigraph
    run = mpigraph.load("demo-run")          # after: mpigraph demo --out demo-run
    run.ranks                                # one row per rank
    run.critical_path.head()                 # the critical path, a segment per row
    run.facts["run_time_ns"], run.summary    # the facts of the run, summary.txt
    run = mpigraph.analyze("demo-run", algorithm="toposort", out_dir="again")
    with mpigraph.phase("solve"): ...        # a named region of a program run under mpigraph

Importing the package is kept cheap (no numpy, mpi4py, pyarrow or pandas here): the
shim imports it inside every rank at MPI_Finalize.  The pipeline lives in
``mpigraph.analysis``, the command line in ``mpigraph.cli``.
"""

__version__ = "0.1.0"

from mpigraph.run import Run, analyze, load  # noqa: E402 -- after __version__, which the report reads
from mpigraph.phases.api import phase, phase_begin, phase_end  # noqa: E402 -- the phase API: ctypes only
__all__ = ["Run", "analyze", "load", "phase", "phase_begin", "phase_end", "__version__"]
