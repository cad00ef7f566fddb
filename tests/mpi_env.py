"""Find the MPI tools the integration tests use, build test programs, run them.

Two MPIs are used when present:

- the ``mpich`` wheel installed with mpigraph (``pip install '.[mpich]'``):
  mpicc and mpiexec in this Python's bin/ (or on PATH); no Fortran compiler;
- Debian's system MPICH (apt-get install mpich libmpich-dev gfortran):
  /usr/bin/mpicc.mpich, mpif90.mpich and mpiexec.mpich (named explicitly,
  because installing Open MPI switches the plain mpicc/mpiexec alternatives).

Both are MPICH-ABI (libmpi.so.12 / libmpich.so.12), so one shim serves both.
Debian's Open MPI (openmpi-bin, libopenmpi-dev; mpicc.openmpi, mpirun.openmpi)
has another ABI: its runs preload a shim built for it (``build_openmpi_shim``).

Oversubscription: the tests run 4 ranks on machines that may have 2 cores,
and MPICH's ranks busy-poll while they wait.  With the mpich 5 wheel (ch4),
MPIR_CVAR_CH4_PROGRESS_THROTTLE=1 with ..._NO_PROGRESS_COUNT=16 makes a
waiting rank usleep(1) after 16 polls without progress, so the three ranks
waiting in a collective leave the cores to the one computing, and the tests'
runs take a fraction of the time.  Debian's MPICH 4.0.2 (ch4:ucx) does not
know that variable and ignores it (neither MPIR_CVAR_POLLS_BEFORE_YIELD nor
hydra's -bind-to changed its times measurably), so its runs stay short instead.
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
REPO = os.path.dirname(HERE)

# Where the commands the tests start run unless told otherwise: not the repository's root,
# where `python -m mpigraph` would import the source tree's mpigraph/ (no compiled shim there
# after a plain `pip install .`) instead of the installed package.
NEUTRAL_CWD = HERE

# Set for every MPI run the tests start (mpiexec passes its environment on to the ranks).
QUIET_POLLING = {
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "16",
}


class MPI:
    """One MPI installation: its compiler wrappers and its launcher (None when absent), and the
    shim its runs preload (None: the installed one, `python -m mpigraph lib`)."""

    def __init__(self, name, mpicc, mpiexec, mpif90=None, shim=None):
        self.name, self.mpicc, self.mpiexec, self.mpif90, self.shim = name, mpicc, mpiexec, mpif90, shim

    def __repr__(self):
        return "MPI(%s: %s, %s, %s)" % (self.name, self.mpicc, self.mpiexec, self.mpif90)


def _executable(path):
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def _tool(name):
    """`name` from this Python's bin/ (where the mpich wheel puts it), else from PATH."""
    return _executable(os.path.join(os.path.dirname(sys.executable), name)) or \
        _executable(os.path.join(sys.prefix, "bin", name)) or _executable(shutil.which(name))


def wheel_mpi():
    """The MPI mpigraph was installed with: the mpich wheel, or whatever mpicc/mpiexec PATH has."""
    mpicc, mpiexec = _tool("mpicc"), _tool("mpiexec")
    return MPI("wheel", mpicc, mpiexec) if mpicc and mpiexec else None


def debian_mpich():
    """Debian's MPICH (mpich + libmpich-dev), with gfortran when mpif90.mpich works."""
    mpicc, mpiexec = _executable("/usr/bin/mpicc.mpich"), _executable("/usr/bin/mpiexec.mpich")
    mpif90 = _executable("/usr/bin/mpif90.mpich") if shutil.which("gfortran") else None
    return MPI("debian-mpich", mpicc, mpiexec, mpif90) if mpicc and mpiexec else None


def open_mpi(shim=None):
    """Debian's Open MPI, when its compiler wrapper and launcher are installed; `shim`: the
    shim built for it (build_openmpi_shim)."""
    mpicc, mpirun = shutil.which("mpicc.openmpi"), shutil.which("mpirun.openmpi")
    return MPI("openmpi", mpicc, mpirun, shim=shim) if mpicc and mpirun else None


def build_openmpi_shim(directory):
    """libmpigraph.so built against Open MPI's headers (csrc/build.py) under `directory`; its path."""
    sys.path.insert(0, os.path.join(REPO, "csrc"))
    try:
        from build import build_shim
    finally:
        sys.path.pop(0)
    return build_shim(os.path.join(directory, "mpigraph"), os.path.join(directory, "build"), mpicc="mpicc.openmpi")


def also_under_openmpi(cases, openmpi_cases=None):
    """Test parameters: each of `cases` (under the mpich wheel), and each of `openmpi_cases`
    (default: the same) again as "openmpi:CASE" where Open MPI is installed (.ci/run installs
    it).  ``mpi_of`` splits one."""
    again = list(cases) if openmpi_cases is None else openmpi_cases
    return list(cases) + (["openmpi:%s" % case for case in again] if open_mpi() else [])


def mpi_of(param):
    """(MPI name: "mpich" or "openmpi", case) of an also_under_openmpi parameter."""
    name, _, case = param.rpartition(":")
    return name or "mpich", case


def mpi_for(request, param):
    """(MPI, case) of an also_under_openmpi parameter, from the test's fixtures (conftest): the
    mpich wheel, or Open MPI with the shim built for it once per session."""
    name, case = mpi_of(param)
    return request.getfixturevalue("openmpi" if name == "openmpi" else "wheel"), case


# Open MPI's mpirun refuses to start as root (the CI's containers) without these.
OPENMPI_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def shim_path():
    """The shim to preload, as the user finds it: `python -m mpigraph lib`."""
    out = subprocess.run([sys.executable, "-m", "mpigraph", "lib"], capture_output=True, text=True, env=base_env(),
                         cwd=NEUTRAL_CWD)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError("`python -m mpigraph lib` failed (%d): %s" % (out.returncode, out.stderr))
    return out.stdout.strip()


def base_env(extra=None):
    """The environment for the commands the tests start.

    The test process's own, without LD_PRELOAD and MPIGRAPH_* settings, plus
    QUIET_POLLING, and with the directory of the mpigraph package the tests
    import first on PYTHONPATH: commands and ranks use the same mpigraph as
    the tests (the installed one, or a source checkout's).
    """
    import mpigraph

    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("MPIGRAPH_")}
    env.update(QUIET_POLLING)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(mpigraph.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + [p for p in [env.get("PYTHONPATH")] if p])
    env.update(extra or {})
    return env


class Builder:
    """Compiles programs once per test session into a private directory."""

    def __init__(self, directory):
        self.directory = directory
        self.cache = {}

    def build(self, source, compiler, flags=()):
        """Path of `source` (a file name under tests/programs or a path) built with `compiler`."""
        path = source if os.path.isabs(source) else os.path.join(PROGRAMS, source)
        key = (path, compiler, tuple(flags))
        if key not in self.cache:
            stem = os.path.basename(path).replace(".", "_")
            exe = os.path.join(self.directory, "%s-%s" % (stem, os.path.basename(compiler)))
            workdir = exe + ".d"      # Fortran .mod files go here, one directory per build
            os.makedirs(workdir, exist_ok=True)
            result = subprocess.run([compiler, "-O1", *flags, "-o", exe, path], cwd=workdir,
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError("cannot build %s with %s:\n%s%s" % (path, compiler, result.stdout, result.stderr))
            self.cache[key] = exe
        return self.cache[key]


def mpirun(mpi, nprocs, argv, out=None, rank_env=None, cwd=None, prefix=(), mpiexec_args=()):
    """Run `argv` on `nprocs` ranks with `mpi`'s mpiexec; returns the CompletedProcess.

    With `out`, the ranks run under the shim (LD_PRELOAD, set for the ranks
    only with -genv, as the README tells users) and write their run into `out`.
    `rank_env` holds further variables for the ranks.  `prefix` comes before mpiexec (taskset),
    `mpiexec_args` after it (-hosts).  No time limit.
    Open MPI's mpirun passes on only the variables named with -x: the ranks
    get PYTHONPATH too, so that the analysis imports this mpigraph.
    """
    env_for_ranks = dict(rank_env or {})
    if out is not None:
        env_for_ranks = {"LD_PRELOAD": mpi.shim or shim_path(), "MPIGRAPH_OUT": str(out), **env_for_ranks}
    env = base_env()
    if mpi.name == "openmpi":
        env.update(OPENMPI_AS_ROOT)
        env_for_ranks.setdefault("PYTHONPATH", os.pathsep.join(p for p in [env["PYTHONPATH"]] + sys.path if p))
        cmd = [*prefix, mpi.mpiexec, *mpiexec_args, "-np", str(nprocs), "--oversubscribe"]
        for name, value in env_for_ranks.items():
            cmd += ["-x", "%s=%s" % (name, value)]
    else:
        cmd = [*prefix, mpi.mpiexec, *mpiexec_args, "-n", str(nprocs)]
        for name, value in env_for_ranks.items():
            cmd += ["-genv", name, str(value)]
    return subprocess.run(cmd + [str(a) for a in argv], capture_output=True, text=True, env=env,
                          cwd=cwd or NEUTRAL_CWD)


def mpigraph(args, nprocs=None, mpi=None, cwd=None, env_extra=None):
    """Run the mpigraph command (`python -m mpigraph args`), under mpiexec -n nprocs if given,
    with the variables of `env_extra` set."""
    cmd = [sys.executable, "-m", "mpigraph", *[str(a) for a in args]]
    if nprocs:
        cmd = [(mpi or wheel_mpi()).mpiexec, "-n", str(nprocs)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=base_env(env_extra), cwd=cwd or NEUTRAL_CWD)


def raw_files(nprocs):
    """The files of raw/ after a run of nprocs ranks: per rank its log, its call sites and the
    memory map that resolves them."""
    return sorted("rank-%d.%s" % (r, ext) for r in range(nprocs) for ext in ("log", "maps", "sites"))


def read_functions_csv(path):
    """{function: calls} from a functions.csv."""
    import csv

    with open(path, newline="") as f:
        return {row["function"]: int(row["calls"]) for row in csv.DictReader(f)}


def run_mpi_checks(module, ranks, extra_env=None, hang_seconds=600):
    """Run the checks of tests/<module> (a pytest file whose name does not start with test_, so a
    plain ``pytest tests`` does not collect it) on `ranks` ranks under mpiexec.

    Returns (returncode, stdout, stderr).  Every rank runs pytest and prints its own
    "N passed" line.  If the ranks hang (a rank left in a collective) the run is stopped
    after hang_seconds with SIGTERM, which mpiexec forwards to its ranks (SIGKILL would
    orphan them), and (None, stdout, stderr) is returned: a guard against hangs, not a
    timing of anything.
    """
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", os.path.join(HERE, module)]
    return run_guarded(argv, ranks, extra_env, hang_seconds)


def run_guarded(argv, ranks, extra_env=None, hang_seconds=600):
    """Run `argv` on `ranks` ranks under mpiexec, stopped after hang_seconds if it hangs
    (see run_mpi_checks); returns (returncode or None, stdout, stderr)."""
    mpi = wheel_mpi()
    if mpi is None:
        raise RuntimeError("no mpiexec found: install with pip install '.[mpich,test]'")
    cmd = [mpi.mpiexec, "-n", str(ranks)] + [str(a) for a in argv]
    proc = subprocess.Popen(cmd, cwd=REPO, env=base_env(extra_env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=hang_seconds)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        return None, stdout, stderr
    return proc.returncode, stdout, stderr
