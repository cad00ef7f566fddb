"""Is the analysis's MPI the one that launched the job?

mpi4py may load another MPI than the launcher's (a machine with Open MPI and MPICH, the mpich
wheel's mpi4py under the system's mpiexec).  Then every process is a world of one: each would
analyse the whole run alone and write the same report files as the others.  The launcher says
how many ranks it started in the environment it gives each process; a world of size 1 against
more there is that mismatch, found before any work (``check_world``).
"""

import os
import re
import sys

# Variables a launcher sets in every process it starts: (name, what it counts, the launcher).
# The size variables give the job's ranks; a rank variable above 0 says there are several too.
LAUNCHER_VARIABLES = [
    ("PMI_SIZE", "size", "a PMI launcher (MPICH's or Intel MPI's mpiexec, srun --mpi=pmi2)"),
    ("OMPI_COMM_WORLD_SIZE", "size", "Open MPI's mpiexec"),
    ("MPI_LOCALNRANKS", "size", "MPICH's mpiexec (Hydra)"),
    ("PMIX_SIZE", "size", "a PMIx launcher (Open MPI's mpiexec, prterun, srun --mpi=pmix)"),
    ("PMI_RANK", "rank", "a PMI launcher (MPICH's or Intel MPI's mpiexec, srun --mpi=pmi2)"),
    ("OMPI_COMM_WORLD_RANK", "rank", "Open MPI's mpiexec"),
    ("PMIX_RANK", "rank", "a PMIx launcher (Open MPI's mpiexec, prterun, srun --mpi=pmix)"),
]


class MPIMismatch(Exception):
    """The analysis's MPI is not the launcher's: the message names both and the fix."""


def launcher_ranks(environ=None):
    """(variable, value, launcher) of the first launcher variable that says the job has more than
    one rank (a size above 1 or a rank above 0), else None."""
    environ = os.environ if environ is None else environ
    for name, counts, launcher in LAUNCHER_VARIABLES:
        try:
            value = int(environ.get(name, ""))
        except ValueError:
            continue
        if (counts == "size" and value > 1) or (counts == "rank" and value > 0):
            return name, value, launcher
    return None


def check_world(environ=None):
    """Raise MPIMismatch when MPI_COMM_WORLD of the MPI that mpi4py loaded has one rank but the
    launcher's environment says the job has several; nothing else is checked, nothing is written.
    (The world, not the analysis's communicator: in a job a small run is analysed by fewer ranks.)"""
    from mpi4py import MPI

    if MPI.COMM_WORLD.size != 1:
        return
    found = launcher_ranks(environ)
    if found is not None:
        raise MPIMismatch(mismatch_message(found))


def check_initialized(mpi):
    """Inside a job the program initialised MPI before the analysis: an mpi4py that finds its MPI
    not initialised has loaded another library than the program's (MPIMismatch)."""
    if not mpi.Is_initialized():
        raise MPIMismatch("the program initialised MPI, but the MPI that mpi4py loaded (%s) is not "
                          "initialised: it is another library than the program's. %s"
                          % (analysis_mpi(), _fix()))


def mismatch_message(found):
    name, value, launcher = found
    return ("this process is a world of 1 rank, but %s=%d says %s launched the job with several: the "
            "analysis's MPI (%s) is not the launcher's. Nothing was analysed or written. %s"
            % (name, value, launcher, analysis_mpi(), _fix()))


def _fix():
    mpiexec = os.path.join(sys.prefix, "bin", "mpiexec")
    matching = ("%s (the mpiexec of mpigraph's environment)" % mpiexec if os.path.exists(mpiexec)
                else "the mpiexec of the MPI that mpi4py loads")
    return ("Fix: launch with %s, or make mpi4py load the launcher's MPI: MPI4PY_LIBMPI=/path/to/its "
            "libmpi.so (and MPI4PY_MPIABI=mpich or openmpi for mpi4py's multi-MPI wheels), exported to "
            "every rank" % matching)


def analysis_mpi():
    """The MPI that mpi4py loaded, in words: its version string's first line and its library file."""
    from mpi4py import MPI

    version = " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    library = loaded_libmpi()
    return version + (" from %s" % library if library else "")


# libmpi.so.12 (MPICH, Intel MPI), libmpi.so.40 (Open MPI), libmpich.so.12 (Debian), libmpi_cray.so;
# not libmpigraph.so, the shim.
_MPI_LIBRARY = re.compile(r"libmpi(ch|_[a-z]+)?\.so")


def loaded_libmpi():
    """The path of the MPI library mapped into this process (Linux's /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as maps:
            files = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return None
    mpi = sorted(f for f in files if _MPI_LIBRARY.match(os.path.basename(f)))
    return ", ".join(mpi) or None
