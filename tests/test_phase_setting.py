"""MPIGRAPH_PHASE: the in-job twin of `mpigraph analyze --phase NAME` (the analysis at
MPI_Finalize keeps one phase's rows).  tests/programs/phases.c with ITER=3 on 2 ranks: its
Pcontrol phase 2 (level 2) is the MPI_Pcontrol(2) call and 3 Allreduces per rank."""

import csv

import mpi_env
from mpigraph import config

RANKS, ITER = 2, 3


def test_the_setting_is_read_from_the_environment():
    assert config.from_env({"MPIGRAPH_PHASE": " solve "}).phase == "solve"
    assert config.from_env({"MPIGRAPH_PHASE": ""}).phase is None
    assert config.from_env({}).phase is None
    assert "MPIGRAPH_PHASE" in config.settings_table()


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_analysis_at_finalize_keeps_the_phase_the_setting_names(tmp_path):
    mpi = mpi_env.wheel_mpi()
    exe = mpi_env.Builder(str(tmp_path / "programs")).build("phases.c", mpi.mpicc)
    run = tmp_path / "run"
    result = mpi_env.mpirun(mpi, RANKS, [exe, str(ITER)], out=str(run),
                            rank_env={"MPIGRAPH_QUIET": "1", "MPIGRAPH_PHASE": "2"})
    assert result.returncode == 0, result.stdout + result.stderr
    phases = _rows(run / "phases.csv")
    assert [(r["phase"], r["level"], r["name"], r["calls"]) for r in phases] == [("2", "2", "", str(RANKS * (ITER + 1)))]
    functions = {r["function"]: int(r["calls"]) for r in _rows(run / "phase_functions.csv")}
    assert functions == {"MPI_Allreduce": RANKS * ITER, "MPI_Pcontrol": RANKS}
