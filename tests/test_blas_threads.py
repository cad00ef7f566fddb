"""An analysis rank imports numpy with OpenBLAS held to one thread (mpigraph.util.blas), in the job
and offline, and leaves the user's OPENBLAS_NUM_THREADS as it was."""

import json
import os
import subprocess
import sys

import mpi_env

# Prints, as JSON: OpenBLAS's threads (None: numpy not loaded) and OPENBLAS_NUM_THREADS now.
REPORT_THREADS = """
import ctypes, json, os, sys

def openblas_threads():
    if "numpy" not in sys.modules:
        return None
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "openblas" in os.path.basename(path) and ".so" in path:
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                         "openblas_get_num_threads"):
                if hasattr(lib, name):
                    return getattr(lib, name)()
    raise AssertionError("numpy is loaded but no OpenBLAS library with a thread count is")

def report(**more):
    print("threads:", json.dumps(dict(openblas=openblas_threads(), setting=os.environ.get("OPENBLAS_NUM_THREADS"),
                                      **more)), flush=True)
"""

USER_SETTING = "4"


def reports(stdout):
    return [json.loads(line.split(":", 1)[1]) for line in stdout.splitlines() if line.startswith("threads:")]


def run_python(code, env_extra=None):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=USER_SETTING, PYTHONPATH=mpi_env.REPO, **(env_extra or {}))
    result = subprocess.run([sys.executable, "-c", REPORT_THREADS + code], capture_output=True, text=True, env=env,
                            cwd=mpi_env.NEUTRAL_CWD)
    assert result.returncode == 0, result.stderr
    return reports(result.stdout)


def test_numpy_imported_for_the_analysis_has_one_blas_thread_and_the_setting_is_the_users_again():
    plain = run_python("import numpy\nreport()")
    held = run_python("from mpigraph.util import blas\nblas.import_numpy()\nreport()")
    # The user's setting alone gives OpenBLAS as many threads as it asks, up to the CPUs.
    assert plain == [{"openblas": min(int(USER_SETTING), len(os.sched_getaffinity(0))), "setting": USER_SETTING}]
    assert held == [{"openblas": 1, "setting": USER_SETTING}]


def test_a_numpy_the_program_loaded_keeps_its_threads():
    kept = run_python("import numpy\nfrom mpigraph.util import blas\nblas.import_numpy()\nreport()")
    assert kept == [{"openblas": min(int(USER_SETTING), len(os.sched_getaffinity(0))), "setting": USER_SETTING}]


GOES_ON = REPORT_THREADS + """
from mpi4py import MPI

rank = MPI.COMM_WORLD.rank
MPI.Finalize()              # the shim analyses the run here (rank 0 only: a small run)
report(rank=rank)
"""


def test_the_analysis_ranks_blas_in_the_job_and_offline(wheel, tmp_path):
    program = tmp_path / "goes_on.py"
    program.write_text(GOES_ON)
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 2, [sys.executable, program], out=run,
                            rank_env={"MPIGRAPH_QUIET": "1", "OPENBLAS_NUM_THREADS": USER_SETTING})
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists(), result.stderr
    # Rank 0 analysed (numpy imported by the analysis: one thread); rank 1 left without numpy.
    assert sorted(reports(result.stdout), key=lambda r: r["rank"]) == [
        {"openblas": 1, "setting": USER_SETTING, "rank": 0}, {"openblas": None, "setting": USER_SETTING, "rank": 1}]
    offline = run_python("from mpigraph import cli\nassert cli.main(['analyze', %r, '--out', %r, '--quiet']) == 0\n"
                         "report()" % (str(run), str(tmp_path / "again")))
    assert offline == [{"openblas": 1, "setting": USER_SETTING}]
    assert (tmp_path / "again" / "summary.txt").exists()
