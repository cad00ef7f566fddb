"""The Python API: an analysed run directory as pandas DataFrames, Arrow tables, facts and text.

    >>> import mpigraph
    >>> run = mpigraph.load("demo-run")           # after: mpigraph demo --out demo-run
    >>> run
    <mpigraph.Run /home/me/demo-run: 4 ranks on 1 host, run time 0.527 s, 260 calls, dijkstra; tables: ...>
    >>> run.ranks[["rank", "mpi_time_ns", "wait_ns"]]         # a pandas DataFrame
    >>> run.critical_path.head()
    >>> run.calls.groupby("function")["wait_before_ns"].sum()
    >>> run.table("calls")                                    # the same rows as a pyarrow.Table
    >>> run.facts["algorithm"], run.facts["run_time_ns"]
    >>> print(run.summary)

A table is read on first access and kept.  Its Parquet form is read when there is one (times as
integer ns, columns ending in ``_ns``, exactly as analysed); a table with only a CSV file is read
from it (times as seconds, columns ending in ``_s``).  ``NAME.parquet`` may be one file or a
directory of Parquet part files (a Parquet dataset), and so may ``NAME/`` when it holds only
Parquet files: all read the same way.  The columns of every table are in ``mpigraph.schema``.

``mpigraph.analyze(run_dir)`` runs the analysis (as ``mpigraph analyze`` does) and returns the
Run.  Nothing heavy is imported with this module: pandas, pyarrow and mpi4py load when a table
is read or an analysis runs.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from mpigraph.report import outdir
from mpigraph.report.outdir import RAW, RUN_JSON

if TYPE_CHECKING:      # for the type hints only: importing mpigraph stays cheap
    import pandas
    import pyarrow

PathLike = Union[str, "os.PathLike[str]"]



class Run:
    """An analysed run directory (``mpigraph.load``): its tables, its facts and its summary.

    Attributes ``ranks``, ``functions``, ``calls``, ``collectives``, ``waitstates``,
    ``critical_path`` and ``unmatched`` are pandas DataFrames; ``run["name"]`` is any table the
    directory holds (``run.tables`` lists them), ``run.table("name")`` the same as a pyarrow.Table.

    Example:
        >>> run = Run("demo-run")
        >>> slowest = run.ranks.sort_values("mpi_time_ns").iloc[-1]
        >>> late = run.waitstates[run.waitstates["kind"] == "late_sender"]
    """

    def __init__(self, run_dir: PathLike) -> None:
        self.run_dir: str = os.path.abspath(os.fspath(run_dir))
        if not os.path.isdir(self.run_dir):
            raise FileNotFoundError("%s is not a directory: not an mpigraph run directory (make one with "
                                    "mpigraph run or mpigraph demo --out DIR)" % self.run_dir)
        self._arrow: Dict[str, Any] = {}
        self._frames: Dict[str, Any] = {}
        self._facts: Optional[Dict[str, Any]] = None

    # ---- tables -------------------------------------------------------------------------

    @property
    def tables(self) -> List[str]:
        """The names of the tables in the directory, sorted: every NAME.parquet (file or dataset
        directory), NAME.csv and dataset directory NAME/."""
        names = set()
        for entry in os.listdir(self.run_dir):
            stem, ext = os.path.splitext(entry)
            if ext in (".parquet", ".csv") and stem:
                names.add(stem)
            elif _is_dataset(os.path.join(self.run_dir, entry)):
                names.add(entry)
        return sorted(names)

    def table(self, name: str) -> "pyarrow.Table":
        """The table `name` as a pyarrow.Table, read once: NAME.parquet (a file or a directory of
        part files) when there is one, else NAME.csv.

        Example:
            >>> run.table("calls").num_rows
        """
        if name not in self._arrow:
            self._arrow[name] = _read_table(self.run_dir, name)
        return self._arrow[name]

    def frame(self, name: str) -> "pandas.DataFrame":
        """The table `name` as a pandas DataFrame, made once from ``table(name)``."""
        if name not in self._frames:
            self._frames[name] = self.table(name).to_pandas()
        return self._frames[name]

    def __getitem__(self, name: str) -> "pandas.DataFrame":
        return self.frame(name)

    def __contains__(self, name: object) -> bool:
        return name in self.tables

    @property
    def ranks(self) -> "pandas.DataFrame":
        """One row per rank: program, MPI, wait and compute time, bytes, wait states, time on the path."""
        return self.frame("ranks")

    @property
    def functions(self) -> "pandas.DataFrame":
        """One row per MPI function called, the longest total time first."""
        return self.frame("functions")

    @property
    def callsites(self) -> "pandas.DataFrame":
        """One row per call site (place in the program and MPI function), the longest time first:
        calls.parquet's callsite column refers to it."""
        return self.frame("callsites")

    @property
    def callsite_waitstates(self) -> "pandas.DataFrame":
        """The wait states per call site: (call site, function, kind) with calls and time."""
        return self.frame("callsite_waitstates")

    @property
    def callsite_sizes(self) -> "pandas.DataFrame":
        """The message-size histograms per call site: (call site, function, comm, bin) with count
        and bytes; summed over the call sites, ``sizes``."""
        return self.frame("callsite_sizes")

    @property
    def phase_callsites(self) -> "pandas.DataFrame":
        """The call sites per phase (a run with MPI_Pcontrol or named regions): (phase, level, name,
        call site, function) with callsites.csv's columns; summed over the phases, ``callsites``."""
        return self.frame("phase_callsites")

    @property
    def calls(self) -> "pandas.DataFrame":
        """One row per MPI call of every rank: times, peer, bytes, waits, wait state, on the path."""
        return self.frame("calls")

    @property
    def collectives(self) -> "pandas.DataFrame":
        """One row per collective instance: members, last to arrive, execution, wait, imbalance."""
        return self.frame("collectives")

    @property
    def waitstates(self) -> "pandas.DataFrame":
        """Calls and time per (rank, function, wait-state kind)."""
        return self.frame("waitstates")

    @property
    def critical_path(self) -> "pandas.DataFrame":
        """The critical path, one row per segment in path order (compute, mpi or message)."""
        return self.frame("critical_path")

    @property
    def unmatched(self) -> "pandas.DataFrame":
        """Operations without a partner (no rows when every message and collective matched)."""
        return self.frame("unmatched")

    @property
    def comm_matrix(self) -> "pandas.DataFrame":
        """Rank x rank traffic: src, dst, messages, bytes, kind (p2p or collective; dst -1: a
        collective's bytes without pairs).  ``run.comm_matrix.pivot_table(index="src", columns="dst",
        values="bytes", aggfunc="sum")`` is the matrix."""
        return self.frame("commmatrix")

    @property
    def sizes(self) -> "pandas.DataFrame":
        """Message-size histograms: function, comm, comm_id, bin_lo, bin_hi, count, bytes."""
        return self.frame("sizes")

    @property
    def communicators(self) -> "pandas.DataFrame":
        """The run's communicators: id, name, size, members, function, call, parent."""
        return self.frame("communicators")

    # ---- facts and text ---------------------------------------------------------------------

    @property
    def facts(self) -> Dict[str, Any]:
        """The facts of the run (run.json): job_id, ranks, finalized, hosts, run_time_ns,
        program_time_ns, mpi_time_ns, calls, records, algorithm, clock_method,
        receive_before_send, critical_path_ns, critical_path_segments, files, mpigraph_version.

        A report written before run.json existed gives what its ranks table and summary.txt
        say (the algorithm is then None).

        Example:
            >>> run.facts["run_time_ns"] / 1e9       # seconds from first MPI_Init to last MPI_Finalize
        """
        if self._facts is None:
            self._facts = self._read_facts()
        return self._facts

    @property
    def summary(self) -> str:
        """The text of summary.txt, as ``mpigraph report DIR`` prints it."""
        return outdir.read_summary(self.run_dir)

    def _read_facts(self) -> Dict[str, Any]:
        path = os.path.join(self.run_dir, RUN_JSON)
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        return _facts_of_older_report(self)

    def __repr__(self) -> str:
        try:
            facts = self.facts
            hosts = len(facts["hosts"])
            about = "%d ranks on %d host%s, run time %.3f s, %d calls%s" % (
                facts["ranks"], hosts, "" if hosts == 1 else "s", facts["run_time_ns"] / 1e9, facts["calls"],
                ", " + facts["algorithm"] if facts.get("algorithm") else "")
        except (OSError, ValueError, KeyError) as error:      # not analysed (yet): say so, do not fail
            about = "no report (%s)" % (error.__class__.__name__,)
        return "<mpigraph.Run %s: %s; tables: %s>" % (self.run_dir, about, ", ".join(self.tables) or "none")


def _read_table(run_dir: str, name: str) -> "pyarrow.Table":
    """NAME.parquet (file or dataset directory), a dataset directory NAME/, or else NAME.csv of run_dir."""
    parquet = os.path.join(run_dir, name + ".parquet")
    if not os.path.exists(parquet) and _is_dataset(os.path.join(run_dir, name)):
        parquet = os.path.join(run_dir, name)
    if os.path.exists(parquet):
        import pyarrow.parquet as pq

        # read_table reads a file or a directory of part files (pyarrow.dataset underneath).
        return pq.read_table(parquet)
    csv = os.path.join(run_dir, name + ".csv")
    if os.path.exists(csv):
        return _read_csv(csv, name)
    raise KeyError("%s: no table %r (no %s.parquet or %s.csv); tables here: %s"
                   % (run_dir, name, name, name, ", ".join(Run(run_dir).tables) or "none (not analysed?)"))


def _is_dataset(path: str) -> bool:
    """A directory of Parquet part files (not raw/, the logs)."""
    if os.path.basename(path) == RAW or not os.path.isdir(path):
        return False
    parts = os.listdir(path)
    return bool(parts) and all(part.endswith(".parquet") for part in parts)


def _read_csv(path: str, name: str) -> "pyarrow.Table":
    """A report CSV with the column types of its schema (mpigraph.schema) when it is one of the
    report's tables: an empty table (unmatched.csv of a clean run) has no rows to guess them from."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    types = {}
    columns = _schema_columns(name)
    if columns:
        arrow = {"time": pa.float64(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(),
                 "bool": pa.bool_()}
        types = {c.name + "_s" if c.kind == "time" else c.name: arrow[c.kind] for c in columns}
    return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=types))


def _schema_columns(name: str):
    from mpigraph import schema

    return {"ranks": schema.RANK_COLUMNS, "functions": schema.FUNCTION_COLUMNS, "calls": schema.CALL_COLUMNS,
            "collectives": schema.COLLECTIVE_COLUMNS, "waitstates": schema.WAITSTATE_COLUMNS,
            "unmatched": schema.UNMATCHED_COLUMNS, "critical_path": schema.SEGMENT_COLUMNS,
            "commmatrix": schema.COMM_MATRIX_COLUMNS, "sizes": schema.SIZE_COLUMNS,
            "communicators": schema.COMMUNICATOR_COLUMNS, "phases": schema.PHASE_COLUMNS,
            "phase_functions": schema.PHASE_FUNCTION_COLUMNS,
            "callsites": schema.CALLSITE_COLUMNS, "callsite_waitstates": schema.CALLSITE_WAITSTATE_COLUMNS,
            "callsite_sizes": schema.CALLSITE_SIZE_COLUMNS, "phase_callsites": schema.PHASE_CALLSITE_COLUMNS}.get(name)


def _facts_of_older_report(run: Run) -> Dict[str, Any]:
    """The facts a report without run.json holds: its ranks table and summary.txt's job id."""
    ranks = run.table("ranks").to_pydict()
    start, end = ranks.get("program_start_ns", [0]), ranks.get("program_end_ns", [0])
    job_id = None
    for line in run.summary.splitlines():
        if line.startswith("job id "):
            job_id = line[len("job id "):].split(" (")[0].strip()     # a note on the id may follow
    return {"job_id": job_id, "ranks": len(ranks["rank"]), "finalized": sum(ranks["finalized"]),
            "hosts": sorted(set(ranks["host"])), "run_time_ns": max(end) - min(start) if ranks["rank"] else 0,
            "program_time_ns": sum(ranks["program_time_ns"]), "mpi_time_ns": sum(ranks["mpi_time_ns"]),
            "calls": sum(ranks["calls"]), "records": sum(ranks["records"]), "algorithm": None,
            "clock_method": None, "files": sorted(os.listdir(run.run_dir))}


def load(run_dir: PathLike) -> Run:
    """The analysed run in run_dir (what ``mpigraph run``, ``demo`` or ``analyze`` wrote).

    Nothing is read until asked for: each table on first access.

    Example:
        >>> import mpigraph
        >>> run = mpigraph.load("demo-run")
        >>> run.ranks.head()
        >>> run.critical_path.groupby("kind")["duration_ns"].sum() / 1e9
    """
    return Run(run_dir)


def analyze(run_dir: PathLike, *, algorithm: Optional[str] = None, out_dir: Optional[PathLike] = None,
            comm: Any = None, quiet: bool = True, verbose: bool = False, clock: Optional[str] = None,
            threshold: Optional[float] = None, splits: Optional[bool] = None) -> Optional[Run]:
    """Analyse the raw logs in run_dir (``mpigraph analyze``) and return the Run of the report.

    The settings not given come from the MPIGRAPH_* environment variables (``mpigraph config``):
    `algorithm` (dijkstra, delta-stepping, parallel-dijkstra, parallel-delta-stepping, toposort,
    parallel-toposort), `clock` (pingpong, barrier, none), `threshold` (seconds: shorter compute
    gaps merge the calls around them), `splits` (split the graph at global synchronisation points).
    The report goes to `out_dir` (default run_dir itself); an existing directory there must be
    empty, a run directory or an earlier report (mpigraph.report.outdir).  `quiet` keeps the
    stage lines of a big run off stderr; `verbose` prints them for any run.  Nothing is printed
    on stdout: ``print(run.summary)`` prints the summary.

    Collective over `comm` (default MPI.COMM_WORLD; under ``mpiexec -n K python script.py`` the
    K processes share the work).  Returns the Run on analysis rank 0, None on the others.
    Raises mpigraph.trace.logs.TraceError for bad logs, mpigraph.config.ConfigError for a bad
    setting, mpigraph.report.outdir.OutputDirError for an output directory holding other files,
    mpigraph.report.writer.ReportError when the report cannot be written (on the analysis rank
    that found the problem; the others raise mpigraph.comm.parallel.PeerFailed).

    Example:
        >>> run = mpigraph.analyze("demo-run", algorithm="toposort", out_dir="demo-toposort")
        >>> run.facts["critical_path_ns"]
    """
    from mpigraph import config as settings

    out = os.fspath(out_dir) if out_dir is not None else None
    cfg = settings.from_env().with_overrides(
        algorithm=algorithm, quiet=bool(quiet), verbose=bool(verbose),
        clock=None if clock is None else settings.parse_clock(clock, "clock"),
        threshold=None if threshold is None else settings.parse_threshold(str(threshold), "threshold"),
        splits=None if splits is None else bool(splits))
    if analyze_text(os.fspath(run_dir), comm, cfg, out) is None:
        return None
    return Run(out if out is not None else run_dir)


def analyze_text(run_dir: str, comm: Any, cfg: Any, out_dir: Optional[str] = None) -> Optional[str]:
    """The analysis of ``analyze`` and ``mpigraph analyze`` with a config.Config: checks out_dir,
    runs mpigraph.analysis.analyze, returns summary.txt's text on analysis rank 0 (None on the
    others).  Prints nothing on stdout: the command prints the text."""
    from mpigraph import analysis
    from mpigraph.comm import parallel

    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    if out_dir is not None:
        # Rank 0 writes the report, so it checks; the others raise PeerFailed if it refuses.
        parallel.collectively(comm, lambda: outdir.check_report_dir(out_dir) if comm.rank == 0 else None)
    return analysis.analyze(run_dir, comm, cfg, out_dir=out_dir)
