"""`mpigraph demo`: build the bundled imbalanced MPI program and profile it.

demo.c is compiled with the MPI's own mpicc at first use and cached in
~/.cache/mpigraph (or $XDG_CACHE_HOME/mpigraph), keyed by the source and the
compiler, so a second run starts at once.
"""

import hashlib
import os
import subprocess

from mpigraph.shim.launcher import LauncherError, find_mpi_tool, run

DEMO_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo.c")


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mpigraph")

# -g: the report names the demo's call sites by file and line ("MPI_Allreduce at demo.c:60").
DEMO_FLAGS = ("-O2", "-g")


def build_demo(mpicc=None):
    """Path of the compiled demo, compiling it if the cache has no build for this source and mpicc."""
    mpicc = find_mpi_tool("mpicc", mpicc)
    with open(DEMO_SOURCE, "rb") as f:
        key = hashlib.sha256(f.read() + mpicc.encode() + " ".join(DEMO_FLAGS).encode()).hexdigest()[:16]
    exe = os.path.join(cache_dir(), "demo-" + key)
    if os.path.exists(exe):
        return exe
    os.makedirs(cache_dir(), exist_ok=True)
    tmp = "%s.%d.tmp" % (exe, os.getpid())
    result = subprocess.run([mpicc, *DEMO_FLAGS, "-o", tmp, DEMO_SOURCE], capture_output=True, text=True)
    if result.returncode != 0:
        raise LauncherError("cannot compile the demo with %s:\n%s" % (mpicc, result.stderr))
    os.replace(tmp, exe)  # atomic: a concurrent demo never sees a half-written binary
    return exe


def run_demo(n=4, out=None, iterations=None, options=None):
    """Build and run the demo on `n` ranks under mpigraph (`options`: MPIGRAPH_* variables for the
    ranks, as launcher.run takes them); returns its exit code."""
    exe = build_demo()
    # The demo's mpiexec must come from the same MPI as the mpicc that built it.
    mpiexec = os.path.join(os.path.dirname(find_mpi_tool("mpicc")), "mpiexec")
    args = [exe] + ([str(iterations)] if iterations else [])
    return run(args, n, out=out, options=options, mpiexec=mpiexec if os.path.exists(mpiexec) else None)
