"""mpigraph: an MPI profiler that finds why an MPI program is slow.

Importing the package is kept cheap (no numpy, mpi4py or pyarrow here): the
shim imports it inside every rank at MPI_Finalize.  The pipeline lives in
``mpigraph.analysis``, the command line in ``mpigraph.cli``.
"""

__version__ = "0.1.0"
