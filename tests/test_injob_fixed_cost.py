"""The fixed cost of the in-job analysis (issue 28): the analysis rank of a small run imports only
what its stages need (Python's own import log, PYTHONPROFILEIMPORTTIME set for the ranks, says
which modules it imported), and the ranks that do not analyse leave MPI_Finalize at once."""

import os
import re
import sys

import mpi_env

EMPTY = os.path.join(mpi_env.REPO, "benchmarks", "init_finalize.c")

# Modules no stage of a small run needs: pyarrow imports pandas on its own when it is installed
# (mpigraph.shim.embedded.LEFT_OUT).
NOT_NEEDED = ("pandas",)


def imported_packages(stderr, packages):
    """The packages of `packages` that Python's import log (lines 'import time: self | cumulative |
    name', a nested import indented under the module that imported it, listed before it) shows
    imported.

    The log has lines for failed imports too (pandas, which the analysis keeps pyarrow from
    importing): a package counts as imported when its own line has a nested line,
    a module its __init__ imported (pandas imports many)."""
    lines = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|( +)(\S+)\s*$", stderr, re.M)
    return sorted({name for (indent, name), (before, _) in zip(lines[1:], lines)
                   if name in packages and len(before) > len(indent)})


def test_an_empty_program_is_analysed_without_modules_it_does_not_need(wheel, builder, tmp_path):
    exe = builder.build(EMPTY, wheel.mpicc)
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 2, [exe], out=run, rank_env={"MPIGRAPH_QUIET": "1", "PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists(), result.stderr
    # The log is the analysis rank's, and it shows a package imported as such.
    assert imported_packages(result.stderr, ["mpigraph.analysis"]) == ["mpigraph.analysis"], result.stderr[-2000:]
    assert imported_packages(result.stderr, NOT_NEEDED) == []


PROGRAM_GOES_ON = """
from mpi4py import MPI

MPI.COMM_WORLD.Barrier()
MPI.Finalize()              # the shim analyses the run here, and the program goes on
import pandas
import pyarrow

print("after MPI_Finalize:", pyarrow.array(pandas.Series(["a", "b", "a"], dtype="category")).type)
"""


def test_a_python_program_that_goes_on_after_mpi_finalize_keeps_pandas_in_pyarrow(wheel, tmp_path):
    # pyarrow takes a pandas categorical for a dictionary array only while it knows pandas is
    # there: the analysis must not have left pandas out of a process whose program goes on.
    program = tmp_path / "goes_on.py"
    program.write_text(PROGRAM_GOES_ON)
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 2, [sys.executable, program], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists(), result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("after MPI_Finalize:")]
    assert len(lines) == 2 and all(line.startswith("after MPI_Finalize: dictionary<") for line in lines), lines


def test_the_ranks_that_do_not_analyse_leave_mpi_finalize_before_the_report_exists(wheel, builder, tmp_path):
    # With the mpich wheel MPI_Finalize is collective unless the shim makes it local: the other
    # ranks would return only once rank 0 has analysed the run and written summary.txt.
    exe = builder.build("leave_finalize.c", wheel.mpicc)
    run = tmp_path / "run"
    result = mpi_env.mpirun(wheel, 3, [exe], out=run, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr
    assert (run / "summary.txt").exists(), result.stderr
    assert os.listdir(run / "calls.parquet") == ["part-0000.parquet"]      # one analysis rank
    assert sorted(result.stdout.splitlines()) == ["rank %d left MPI_Finalize before the report" % r for r in (1, 2)]
