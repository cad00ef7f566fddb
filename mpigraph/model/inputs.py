"""The model's inputs from a run directory's report files (specs/model.md, Inputs).

Per rank r, from ranks.parquet:
    T_app[r] = program_time   (end of MPI_Init to start of MPI_Finalize)
    T_mpi[r] = mpi_time       (summed MPI call durations, Init and Finalize excluded)
    T_comp[r] = T_app[r] - T_mpi[r]   [paper: mpiP AppTime - MPI time]
From calls.parquet (Init and Finalize excluded, as in T_mpi):
    M[r]     = point-to-point sends (Send family, Sendrecv, Isend family)
               + collective_messages per collective call (default 1) [paper: mpiP
               message counts; one message per collective is the spec's choice]
    bytes[r] = bytes of those calls; the run's mean message size L = sum bytes / sum M
    T_svc[r] = sum over calls of max(execution, 0)   [measured service: the calls'
               execution time, their wait excluded; a collective's execution
               min end - max start is negative when it did not synchronise: 0 then]
Persistent sends (MPI_Start) are not counted as messages: the call does not say
which request it starts.  Communicator creation and freeing are not messages.
"""

import os
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

from mpigraph.trace import functions as mf
from mpigraph.model.mva import ModelError

SEND_KINDS = frozenset({mf.SEND, mf.SENDRECV, mf.ISEND})
MESSAGE_COLLECTIVES = frozenset({mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN})
NOT_SERVICE = frozenset({mf.INIT, mf.FINALIZE})


@dataclass(frozen=True)
class RunInputs:
    """One run's inputs, per rank (arrays in seconds, counts, bytes) and its name."""

    run_dir: str
    ranks: np.ndarray          # world rank of each row
    hosts: int                 # distinct host names
    app: np.ndarray            # T_app per rank (s)
    mpi: np.ndarray            # T_mpi per rank (s)
    service: np.ndarray        # measured T_svc per rank (s)
    messages: np.ndarray       # M per rank
    message_bytes: np.ndarray  # bytes of the counted messages per rank

    @property
    def population(self) -> int:
        """P: the number of ranks."""
        return len(self.ranks)

    @property
    def compute(self) -> np.ndarray:
        """T_comp = T_app - T_mpi per rank, never below 0."""
        return np.maximum(self.app - self.mpi, 0.0)

    @property
    def wall_clock(self) -> float:
        """The measured run time: the longest rank's T_app (the spec: max for the wall clock)."""
        return float(self.app.max())

    @property
    def mean_bytes(self) -> float:
        """L: mean size of a counted message over the run (0 when there are none)."""
        total = self.messages.sum()
        return float(self.message_bytes.sum() / total) if total > 0 else 0.0

    def rank_mean_bytes(self) -> np.ndarray:
        """Mean message size of each rank (0 where a rank sent none)."""
        return np.divide(self.message_bytes, self.messages, out=np.zeros_like(self.message_bytes),
                         where=self.messages > 0)


def _kinds_of(functions: np.ndarray) -> np.ndarray:
    """The kind of each call from its function name (large-count _c variants share their kind)."""
    names, index = np.unique(functions, return_inverse=True)
    kinds = np.array([_kind(str(n)) for n in names], dtype=object)   # per distinct name, not per call
    return kinds[index]


def _kind(name):
    f = mf.BY_NAME.get(name) or mf.BY_NAME.get(name[:-2] if name.endswith("_c") else name)
    return f.kind if f else ""


def _read(path, columns):
    if not os.path.exists(path):       # a file, or a Parquet dataset's directory (calls.parquet)
        raise ModelError("%s is missing: the model reads a run directory's report files; run "
                         "`mpigraph analyze %s` first" % (path, os.path.dirname(path) or "."))
    table = pq.read_table(path, columns=columns)
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in columns}


def read_run(run_dir: str, collective_messages: float = 1.0) -> RunInputs:
    """The inputs of the run in run_dir (see the module docstring for every formula)."""
    if not collective_messages >= 0:
        raise ModelError("messages per collective call must be >= 0, got %r" % collective_messages)
    ranks = _read(os.path.join(run_dir, "ranks.parquet"), ["rank", "host", "program_time_ns", "mpi_time_ns"])
    calls = _read(os.path.join(run_dir, "calls.parquet"), ["rank", "function", "bytes", "execution_ns"])
    order = np.argsort(ranks["rank"])
    rank_ids = ranks["rank"][order]
    if len(rank_ids) == 0:
        raise ModelError("%s has no ranks in ranks.parquet" % run_dir)
    # Row of each call's rank in the sorted ranks table.
    row = np.searchsorted(rank_ids, calls["rank"])
    if (row >= len(rank_ids)).any() or (rank_ids[np.minimum(row, len(rank_ids) - 1)] != calls["rank"]).any():
        raise ModelError("%s: calls.parquet names ranks that ranks.parquet lacks; analyse the run again" % run_dir)
    kinds = _kinds_of(calls["function"])
    is_send = np.isin(kinds, list(SEND_KINDS))
    is_collective = np.isin(kinds, list(MESSAGE_COLLECTIVES))
    weight = is_send + collective_messages * is_collective
    served = ~np.isin(kinds, list(NOT_SERVICE))
    n = len(rank_ids)
    execution = np.where(served, np.maximum(calls["execution_ns"], 0), 0).astype(float)
    return RunInputs(
        run_dir=run_dir, ranks=rank_ids, hosts=len(set(ranks["host"].tolist())),
        app=ranks["program_time_ns"][order] * 1e-9, mpi=ranks["mpi_time_ns"][order] * 1e-9,
        service=np.bincount(row, execution, n) * 1e-9,
        messages=np.bincount(row, weight, n),
        message_bytes=np.bincount(row, weight * calls["bytes"], n))
