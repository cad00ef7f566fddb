"""The Python side of the shim, run inside the profiled program's process.

The shim calls in here through cffi (see EMBEDDING_INIT in setup.py):

- C programs: ``analyse_at_finalize`` from the MPI_Finalize wrapper, before
  PMPI_Finalize, with the interpreter started by the shim;
- Python programs: ``register_atexit`` from MPI_Init; the analysis then runs
  from an atexit hook, because mpi4py finalises MPI only after the interpreter
  is gone.  If the program calls MPI.Finalize() itself, the shim analyses there.

Keep imports lazy: this module is imported at MPI_Init of every Python program.
"""

import contextlib
import sys


def _provide_libmpi_name():
    """Let mpi4py load inside a program whose MPICH is not called libmpi.so.12.

    mpi4py's MPICH extension needs a library named libmpi.so.12.  Debian's
    MPICH is libmpich.so.12: there, load the empty stub that carries that
    name, so every MPI symbol resolves to the program's own library through
    the global scope instead of mpi4py finding a second, foreign MPI.
    """
    import ctypes
    import os

    from mpigraph.shim.lib import PACKAGE_DIR

    program = ctypes.CDLL(None)
    if not hasattr(program, "MPI_Get_version") or hasattr(program, "ompi_mpi_comm_self"):
        return  # MPI loaded privately (a Python program) or Open MPI: nothing to do
    try:
        ctypes.CDLL("libmpi.so.12", mode=os.RTLD_NOLOAD)
    except OSError:
        ctypes.CDLL(os.path.join(PACKAGE_DIR, "compat", "libmpi.so.12"))


def _analyse(run_dir, process_ends):
    """Analyse the finished run on a private communicator of the analysis ranks; `process_ends`:
    nothing of the program runs after the analysis."""
    if "mpi4py.MPI" not in sys.modules:
        _provide_libmpi_name()
    import mpi4py

    # In a C program MPI is already initialised and will be finalised by the
    # program itself: mpi4py must do neither.
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI

    from mpigraph.util import blas

    blas.import_numpy()         # before any module of the analysis imports it
    from mpigraph import analysis, config
    from mpigraph.comm import launch
    from mpigraph.util.left_out import left_out

    launch.check_initialized(MPI)
    settings = config.from_env()
    comm = _analysis_comm(MPI)
    if settings.verbose and comm.rank == 0:
        import os

        import mpigraph

        # Which environment the shim found: the one mpigraph is installed in.
        print("mpigraph: analysing with the Python of %s, mpigraph from %s"
              % (sys.prefix, os.path.dirname(os.path.abspath(mpigraph.__file__))), file=sys.stderr)
    try:
        # pandas: pyarrow would import it (0.15-0.5 s), but only the program may decide it for the
        # rest of the process (a Python program that calls MPI_Finalize and goes on).
        with left_out() if process_ends else contextlib.nullcontext():
            # in_job: analysis rank r owns trace rank r; with fewer, the blocks of the offline analysis.
            text = analysis.analyze(run_dir, comm, settings, in_job=comm.size == MPI.COMM_WORLD.size)
    finally:
        comm.Free()
    if text is not None and not settings.quiet:      # analysis rank 0; `mpigraph run` sets quiet and prints it
        sys.stdout.write(text)
        sys.stdout.flush()


def _analysis_comm(mpi):
    """A private communicator of the analysis ranks, the K world ranks the shim chose from the
    run's records and the nodes' CPUs (csrc/analysis_ranks.c: all ranks of a big run on a core
    each, one of a small one), in world rank order.  The other ranks do not come here: they
    leave MPI_Finalize at once."""
    shim = sys.modules.get("_mpigraph_shim")
    k = shim.lib.mpigraph_analysis_ranks() if shim is not None else 0
    world = mpi.COMM_WORLD
    if not 0 < k < world.size:
        return world.Dup()
    group = world.Get_group().Incl([shim.lib.mpigraph_analysis_rank(i) for i in range(k)])
    try:
        return world.Create_group(group)      # collective over the group's ranks only
    finally:
        group.Free()


# True in a Python program (register_atexit ran at its MPI_Init): its own MPI_Finalize call may
# come before more of its work.  In a C program the shim's interpreter runs only the analysis.
_python_program = False


def analyse_at_finalize(run_dir, process_ends=None):
    """Entry point from the C MPI_Finalize wrapper; 1 on success (cffi returns 0 on failure).
    `process_ends` (default: in a C program) says nothing of the program runs after."""
    try:
        _analyse(run_dir, not _python_program if process_ends is None else process_ends)
        return 1
    except BaseException as error:
        _report_failure(error)
        return 0


def _loaded_class(module, name):
    """A class of a module already imported, else None (an error of a module never imported was never raised)."""
    return getattr(sys.modules.get(module), name, None)


def _report_failure(error):
    """One line for a problem the user can act on (bad logs, unwritable report); a traceback for a bug."""
    peer_failed = _loaded_class("mpigraph.comm.parallel", "PeerFailed")
    user_errors = tuple(c for c in (_loaded_class("mpigraph.trace.logs", "TraceError"),
                                    _loaded_class("mpigraph.report.writer", "ReportError"),
                                    _loaded_class("mpigraph.config", "ConfigError"),
                                    _loaded_class("mpigraph.comm.node_memory", "NotEnoughMemory"),
                                    _loaded_class("mpigraph.comm.launch", "MPIMismatch")) if c)
    if peer_failed and isinstance(error, peer_failed):
        pass   # the analysis rank that failed says why
    elif user_errors and isinstance(error, user_errors):
        # One write, newline included: print's two would let another rank's line in between.
        sys.stderr.write("mpigraph: error: %s\n" % error)
    else:
        import traceback

        traceback.print_exception(error)
    sys.stderr.flush()


def register_atexit(ffi, lib):
    global _python_program
    import atexit

    _python_program = True
    # The analysis at interpreter exit may import modules that register exit handlers of their
    # own on import, which Python refuses once it is shutting down: pyarrow imports pandas when it
    # is installed, and pandas imports concurrent.futures' thread pool.  Imported now, while the
    # interpreter runs, it registers its handler here and not in the middle of the report.
    import concurrent.futures.thread  # noqa: F401

    def analyse_at_exit():
        # Closing the log may rule the analysis out (MPI already finalised, a rank missing at the
        # end, MPIGRAPH_ANALYZE=off): only what is still wanted after it runs.
        lib.mpigraph_close_log()
        if lib.mpigraph_analysis_wanted():
            run_dir = ffi.string(lib.mpigraph_run_dir()).decode()
            if not analyse_at_finalize(run_dir, process_ends=True):
                print("mpigraph: the analysis did not complete; raw logs are in %s "
                      "(run: mpigraph analyze %s)" % (run_dir, run_dir), file=sys.stderr)
            lib.mpigraph_mark_analysed()

    atexit.register(analyse_at_exit)
    return 1
