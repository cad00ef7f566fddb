"""Build mpigraph's PMPI shim, libmpigraph.so, through cffi's embedding mode.

Called by setup.py at install time; tests call build_shim() to build a shim
against another MPI (tests/test_openmpi.py).

The shim is a shared library meant for LD_PRELOAD: C wrappers for the MPI
functions (csrc/, wrappers generated from mpigraph/trace/functions.py) plus an
embedded Python entry point that runs the analysis at MPI_Finalize.

The shim links no MPI library: it binds to the program's own MPI at run time
(csrc/pmpi.c).  Only the ABI is fixed at build time, by the mpi.h it is
compiled with:

- MPIGRAPH_MPICC=/path/to/mpicc (or the mpicc argument): the headers of that
  MPI's compiler wrapper (MPICH and its derivatives answer ``-show``, Open MPI
  ``--showme``); needed for Open MPI, whose ABI differs from MPICH's;
- otherwise the ``mpich`` wheel of the build environment (a build
  requirement): the MPICH ABI, shared by MPICH, its ``mpich`` wheel, Debian's
  libmpich.so.12, Intel MPI, MVAPICH and Cray MPICH.
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

CSRC = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libmpigraph.so"
C_SOURCES = ["shim.c", "pmpi.c", "logfile.c", "handle_map.c", "comms.c", "requests.c", "clock_sync.c",
             "messages.c", "fortran.c", "types.c", "spare_cpu.c", "analysis_ranks.c", "windows.c",
             "phases.c", "regions.c", "callsites.c", "gpu.c"]

# The Python side of the shim: cffi runs this once, in the program's process,
# at the first call into Python.
EMBEDDING_INIT = """
from _mpigraph_shim import ffi, lib
from mpigraph.shim import embedded as _embedded

@ffi.def_extern()
def mpigraph_py_finalize(run_dir):
    return _embedded.analyse_at_finalize(ffi.string(run_dir).decode())

@ffi.def_extern()
def mpigraph_py_register_atexit():
    return _embedded.register_atexit(ffi, lib)
"""

EMBEDDING_API = """
int mpigraph_py_finalize(const char *run_dir);
int mpigraph_py_register_atexit(void);
"""

# topology.c: a topology communicator's in-neighbours and the groups of one-sided epochs (groups.h).
C_SOURCES += ["topology.c"]

# C functions of shim.c that the Python side calls.
SHIM_API = """
int mpigraph_close_log(void);
const char *mpigraph_run_dir(void);
int mpigraph_analysis_wanted(void);
int mpigraph_analysis_ranks(void);
int mpigraph_analysis_rank(int i);
void mpigraph_mark_analysed(void);
"""


def mpicc_include_dirs(mpicc):
    """The include directories of an MPI compiler wrapper (its mpi.h fixes the ABI)."""
    for show in ("-show", "--showme"):
        try:
            out = subprocess.run([mpicc, show], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
        return [w[2:] for w in shlex.split(out) if w.startswith("-I")]
    raise SystemExit("mpigraph: %s answers neither -show nor --showme: is MPIGRAPH_MPICC an MPI compiler wrapper?"
                     % mpicc)


def wheel_mpich_include_dirs():
    """The MPICH-ABI headers of the `mpich` wheel (a build requirement)."""
    import importlib.metadata as metadata

    try:
        dist = metadata.distribution("mpich")
    except metadata.PackageNotFoundError:
        raise SystemExit("mpigraph: no MPI headers to build against: install the `mpich` wheel "
                         "(pip install mpich) or set MPIGRAPH_MPICC to your MPI's mpicc")
    mpi_h = next(f for f in dist.files if f.name == "mpi.h")
    return [os.path.dirname(os.path.realpath(str(dist.locate_file(mpi_h))))]


def build_compat_libmpi(out_dir, build_temp):
    """An empty library whose soname is libmpi.so.12.

    mpi4py's MPICH extension needs a libmpi.so.12; MPICH builds that call it
    libmpich.so.12 (Debian's) would leave mpi4py unable to load inside the
    profiled program.  Loading this stub first satisfies the name, and every
    MPI symbol then resolves, through the global scope, to the program's own
    MPI.  See mpigraph/shim/embedded.py.
    """
    src = os.path.join(build_temp, "compat.c")
    with open(src, "w") as f:
        f.write("/* intentionally empty: only the soname matters */\n")
    os.makedirs(out_dir, exist_ok=True)
    cc = sysconfig.get_config_var("CC") or "cc"
    cmd = shlex.split(cc) + ["-shared", "-fPIC", "-Wl,-soname,libmpi.so.12", "-o",
                            os.path.join(out_dir, "libmpi.so.12"), src]
    subprocess.run(cmd, check=True)


def python_link_flags():
    """The shim starts Python itself in C programs: link libpython explicitly."""
    libdir = sysconfig.get_config_var("LIBDIR")
    version = sysconfig.get_config_var("LDVERSION") or sysconfig.get_python_version()
    return ["-L" + libdir, "-lpython" + version, "-Wl,-rpath," + libdir]


def build_shim(out_dir, build_temp, verbose=False, mpicc=None):
    """Build libmpigraph.so (and compat/libmpi.so.12) into out_dir; returns the library's path."""
    import cffi

    sys.path.insert(0, CSRC)
    import generate

    os.makedirs(build_temp, exist_ok=True)
    wrappers = os.path.join(build_temp, "wrappers.c")
    with open(wrappers, "w") as f:
        f.write(generate.generate())
    with open(os.path.join(build_temp, "pmpi.h"), "w") as f:
        f.write(generate.generate_pmpi_header())
    with open(os.path.join(build_temp, "ids.h"), "w") as f:
        f.write(generate.generate_ids_header())

    mpicc = mpicc or os.environ.get("MPIGRAPH_MPICC")
    mpi_include_dirs = mpicc_include_dirs(mpicc) if mpicc else wheel_mpich_include_dirs()
    print("mpigraph: building the shim for the MPI ABI of %s" % (mpicc or "the mpich wheel (MPICH, libmpi.so.12)"))

    ffi = cffi.FFI()
    ffi.embedding_api(EMBEDDING_API)
    ffi.cdef(SHIM_API)
    ffi.embedding_init_code(EMBEDDING_INIT)
    # The interpreter as invoked, not its real path: in a virtual environment that is the
    # environment's python, whose site-packages hold mpigraph and its dependencies.
    python = os.path.abspath(sys.executable)
    ffi.set_source(
        "_mpigraph_shim",
        '#include "shim.h"\n' + SHIM_API,
        sources=[os.path.join(CSRC, name) for name in C_SOURCES] + [wrappers],
        include_dirs=[CSRC, build_temp] + mpi_include_dirs,
        define_macros=[("MG_BUILD_PYTHON", '"%s"' % python)],
        extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wno-unused-function"],
        extra_link_args=python_link_flags() + ["-ldl", "-pthread"],
    )
    # A fresh temporary directory each time: stale objects built against
    # another MPI must never be linked in.
    tmp = os.path.join(build_temp, "cffi")
    shutil.rmtree(tmp, ignore_errors=True)
    built = ffi.compile(tmpdir=tmp, target=LIBRARY, verbose=verbose)
    os.makedirs(out_dir, exist_ok=True)
    # Copy beside, then rename: programs running with the old library keep their
    # mapping (copying over it in place kills them with SIGBUS).
    target = os.path.join(out_dir, LIBRARY)
    shutil.copy(built, target + ".new")
    os.replace(target + ".new", target)
    build_compat_libmpi(os.path.join(out_dir, "compat"), build_temp)
    return os.path.join(out_dir, LIBRARY)
