"""The in-job analysis of a small run imports only what its stages need (issue 28: the fixed cost
of an analysis in the job is Python's start and its imports, not the work).  Python's own import
log (PYTHONPROFILEIMPORTTIME, set for the ranks) says which modules the analysis rank imported."""

import os
import re

import mpi_env

EMPTY = os.path.join(mpi_env.REPO, "benchmarks", "init_finalize.c")

# Modules no stage of a small run needs: pyarrow imports pandas on its own when it is installed.
NOT_NEEDED = ("pandas",)


def imported_modules(stderr):
    """The modules of Python's import log (lines 'import time: self | cumulative | name').

    The log has a line for a failed import too (pandas, which the analysis keeps pyarrow from
    importing): a package counts as imported when a submodule of it is in the log."""
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)\s*$", stderr, re.M)}


def loaded_packages(modules, packages):
    """The packages of `packages` of which a submodule was imported."""
    return sorted(p for p in packages if any(m.startswith(p + ".") for m in modules))


def test_an_empty_program_is_analysed_without_modules_it_does_not_need(wheel, builder, tmp_path):
    exe = builder.build(EMPTY, wheel.mpicc)
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 2, [exe], out=run, rank_env={"MPIGRAPH_QUIET": "1", "PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists(), result.stderr
    modules = imported_modules(result.stderr)
    assert "mpigraph.analysis" in modules, result.stderr[-2000:]     # the log is the analysis rank's
    assert loaded_packages(modules, NOT_NEEDED) == []
