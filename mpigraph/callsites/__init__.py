"""Call sites: where in the program each MPI call was made (mpiP's call-site statistics).

The shim records in each record a rank-local call-site id, an index into the rank's table of
return addresses (``raw/rank-N.sites``), and copies the process's load map beside it
(``raw/rank-N.maps``).  ``files`` reads them, ``resolve`` turns an address into the object,
function, source file and line (pyelftools: ELF symbols and DWARF line tables), ``stats``
numbers the call sites of a run and sums their calls into ``callsites.csv``/``.parquet``
(written by mpigraph.report.writer).
"""

from mpigraph.callsites.stats import Accumulator, Sites, tracker  # noqa: F401
