"""An analysed run as a pipit Trace (hpcgroup/pipit: pandas-based trace analysis), through the
OTF2 export: ``pipit_trace.to_pipit(RUN_DIR)`` writes the archive into a temporary directory and
reads it with ``pipit.Trace.from_otf2`` (which reads every event into its DataFrame, so the
archive can go).  pipit is not on PyPI: ``pip install 'mpigraph[pipit]'``.

pipit's comm_matrix takes an MpiSend's receiver as a world rank, so messages on a communicator
other than MPI_COMM_WORLD land on the receiver's rank in that communicator (docs/concepts.md,
OTF2 export); mpigraph's own commmatrix.csv has them right.
"""

import tempfile

from mpigraph.export import otf2_trace


def to_pipit(run_dir: str, num_processes: int = 1):
    """pipit.Trace of the analysed run in run_dir (its events: Enter/Leave per MPI call and per
    region, the MPI messages and collectives); num_processes: pipit's reader processes."""
    try:
        import pipit
    except ImportError:
        raise otf2_trace.ExportError("to_pipit needs pipit, which is not on PyPI: pip install 'mpigraph[pipit]' "
                                     "(or pip install git+https://github.com/hpcgroup/pipit)") from None
    with tempfile.TemporaryDirectory(prefix="mpigraph-otf2-") as tmp:
        otf2_trace.export(run_dir, tmp + "/otf2")
        return pipit.Trace.from_otf2(tmp + "/otf2", num_processes=num_processes)
