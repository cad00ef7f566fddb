"""`mpigraph run`: start an MPI program under the shim with the right launcher line.

The launcher is MPICH's Hydra or Open MPI's mpirun; each passes environment
variables to the ranks its own way (``-genv NAME VALUE`` or ``-x NAME=VALUE``).
The variables go to the ranks only, not to mpiexec itself, so the launcher
never loads the shim.
"""

import os
import shutil
import subprocess
import sys
import time

from mpigraph import config
from mpigraph.report import outdir


class LauncherError(Exception):
    """No usable mpiexec, or it could not be started."""


def find_mpi_tool(name, explicit=None):
    """An MPI tool: the explicit path, $MPIGRAPH_<NAME>, PATH, then this Python's bin/."""
    candidates = [explicit, os.environ.get("MPIGRAPH_" + name.upper()), shutil.which(name),
                  os.path.join(sys.prefix, "bin", name)]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    if explicit:
        raise LauncherError("%s is not an executable file" % explicit)
    raise LauncherError("no %s found: install an MPI (pip install 'mpigraph[mpich]'), put its %s on PATH, "
                        "or name it with MPIGRAPH_%s" % (name, name, name.upper()))


def launcher_flavour(mpiexec):
    """'openmpi' or 'hydra' (MPICH and derivatives), from `mpiexec --version`."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LauncherError("cannot run %s --version: %s" % (mpiexec, e))
    text = out.stdout + out.stderr
    return "openmpi" if ("Open MPI" in text or "OpenRTE" in text) else "hydra"


def job_id():
    """The job's id, <date>-<time>-<pid> as the shim makes it; the ranks get it (MPIGRAPH_JOB_ID)."""
    return "%s-%x" % (time.strftime("%Y%m%d-%H%M%S"), os.getpid())


def default_run_dir(job=None):
    """The name the shim would choose: ./mpigraph-<job id>."""
    return os.path.abspath("mpigraph-%s" % (job or job_id()))


def command_line(mpiexec, flavour, nprocs, env, program):
    """The mpiexec argument list that runs `program` on `nprocs` ranks with `env` set in each."""
    cmd = [mpiexec, "-n", str(nprocs)]
    for name, value in env.items():
        cmd += ["-x", "%s=%s" % (name, value)] if flavour == "openmpi" else ["-genv", name, str(value)]
    if flavour == "openmpi" and nprocs > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    return cmd + list(program)


def rank_environment(out, options=None):
    """Variables every rank needs: the shim preloaded, the run directory, the settings."""
    from mpigraph.shim.lib import library_path

    preload = library_path()
    if os.environ.get("LD_PRELOAD"):
        preload += ":" + os.environ["LD_PRELOAD"]
    # The launcher prints the summary itself once the job is over, after all
    # of the program's output: the ranks stay quiet.
    env = {"LD_PRELOAD": preload, "MPIGRAPH_OUT": out, "MPIGRAPH_QUIET": "1"}
    env.update({k: str(v) for k, v in (options or {}).items()})
    return env


def _settings(options):
    """The settings in effect for the run: the environment's, with `options` over them."""
    return config.from_env(dict(os.environ, **(options or {})))


def analysis_wanted(options):
    return _settings(options).analyze


def run(argv_prog, nprocs, out=None, options=None, mpiexec=None):
    """Run `argv_prog` on `nprocs` ranks under the shim; returns the program's exit code.

    `options` are extra MPIGRAPH_* variables for the ranks.  The report goes to
    `out` (default ./mpigraph-<date>-<id>); its summary is printed afterwards unless
    MPIGRAPH_QUIET is set (in `options` or the environment: ``mpigraph run --quiet``).
    Raises outdir.OutputDirError, before the program starts, when `out` is an existing directory
    holding files and no raw/ (not a run directory: the user's own files are never written over).
    """
    if not argv_prog:
        raise LauncherError("no program to run: mpigraph run -n N -- ./app args")
    mpiexec = find_mpi_tool("mpiexec", mpiexec)
    job = job_id()
    out = os.path.abspath(out or default_run_dir(job))
    outdir.check_run_dir(out, "with --out")
    env = dict(rank_environment(out, options), MPIGRAPH_JOB_ID=job)    # the same id as the default directory's
    cmd = command_line(mpiexec, launcher_flavour(mpiexec), nprocs, env, argv_prog)
    try:
        code = subprocess.call(cmd)
    except OSError as e:
        raise LauncherError("cannot start %s: %s" % (mpiexec, e))
    summary = os.path.join(out, "summary.txt")
    if os.path.exists(summary):
        if not _settings(options).quiet:
            with open(summary) as f:
                sys.stdout.write(f.read())
            print("mpigraph: report in %s" % out)
    elif not analysis_wanted(options):
        print("mpigraph: raw logs in %s/raw (analysis off; run: mpigraph analyze %s)" % (out, out), file=sys.stderr)
    else:
        print("mpigraph: no report was written in %s (see the messages above; if %s/raw holds logs, "
              "run: mpigraph analyze %s)" % (out, out, out), file=sys.stderr)
    return code
