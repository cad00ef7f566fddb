"""Write the report files into the run directory.

Files and their schemas (times are seconds as floats in CSV, columns ending
in ``_s``; integer nanoseconds in Parquet, columns ending in ``_ns``; booleans
are ``true``/``false`` in CSV; an empty CSV field is a missing value):

summary.txt
    A human summary: run directory, job id, ranks, hosts, run time, the
    per-rank table, then the MPI functions that took the most time.

ranks.csv, ranks.parquet: one row per rank, in rank order
    rank                  int     MPI_COMM_WORLD rank
    host                  str     host name
    pid                   int     process id
    program_start_s/_ns   time    end of the rank's first MPI_Init, from the run's start
                                  (the earliest program_start of all ranks)
    program_end_s/_ns     time    start of its last MPI_Finalize (end of its last record
                                  if it never finalised), from the run's start
    program_time_s/_ns    time    program_end - program_start
    mpi_time_s/_ns        time    summed duration of its MPI calls, Init and Finalize excluded
    mpi_fraction          float   mpi_time / program_time (empty when program_time is 0)
    calls                 int     MPI calls (call records)
    records               int     records in its log (calls and their parts)
    bytes_sent            int     point-to-point bytes sent
    bytes_received        int     point-to-point bytes received
    bytes_collective      int     bytes passed to collectives
    finalized             bool    the rank reached MPI_Finalize (false: crashed or killed before)
    recording_dropped     bool    the shim stopped recording early (disk full): calls are missing
    log_closed            bool    the shim closed the log in MPI_Finalize (false: the job ended
                                  while the rank was finalising, or before)
    incomplete_requests   int     nonblocking operations started and never completed or freed
                                  (cut off by a crash, or never waited for)

functions.csv: one row per MPI function called, the longest time_total first
    function              str     MPI function name
    function_id           int     mpigraph's function id (mpigraph.mpi_functions)
    kind                  str     function kind (send, recv, n_to_n, completion, ...)
    calls                 int     calls over all ranks
    ranks                 int     ranks that called it
    time_total_s          time    summed duration of its calls
    time_mean_s           time    time_total / calls
    time_min_s            time    shortest call
    time_max_s            time    longest call
    bytes_sent            int     point-to-point bytes sent
    bytes_received        int     point-to-point bytes received
    bytes_collective      int     bytes passed to collectives

How bytes are counted is in ``mpigraph.metrics``.
"""

import csv
import os
import sys
import tempfile

import numpy as np

from mpigraph import __version__, metrics
from mpigraph import mpi_functions as mf

SUMMARY = "summary.txt"
RANKS_CSV = "ranks.csv"
RANKS_PARQUET = "ranks.parquet"
FUNCTIONS_CSV = "functions.csv"

MAX_RANK_ROWS = 64      # summary.txt lists every rank up to this many, then points to ranks.csv
MAX_FUNCTION_ROWS = 20


# ---- CSV and Parquet ---------------------------------------------------------

def csv_name(column):
    return column.name + "_s" if column.kind == "time" else column.name


def parquet_name(column):
    return column.name + "_ns" if column.kind == "time" else column.name


def _csv_cells(column, values):
    """The CSV text of one column (a list of strings)."""
    if column.kind == "time":
        return ["%.9f" % (v / 1e9) for v in values.tolist()]   # exact to the ns
    if column.kind == "float":
        return ["" if np.isnan(v) else "%.6f" % v for v in values.tolist()]
    if column.kind == "bool":
        return ["true" if v else "false" for v in values.tolist()]
    return [str(v) for v in values.tolist()]


def write_csv(path, table, columns):
    cells = [_csv_cells(c, np.asarray(table[c.name])) for c in columns]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow([csv_name(c) for c in columns])
        writer.writerows(zip(*cells))


def arrow_table(table, columns):
    """A pyarrow Table of `table` with the Parquet column names, types and per-column descriptions."""
    import pyarrow as pa

    types = {"time": pa.int64(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_()}
    fields, arrays = [], []
    for c in columns:
        values = np.asarray(table[c.name])
        array = pa.array(values.tolist() if c.kind == "str" else values, type=types[c.kind],
                         from_pandas=c.kind == "float")   # NaN -> null for missing fractions
        fields.append(pa.field(parquet_name(c), types[c.kind], metadata={"description": c.help}))
        arrays.append(array)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata={"mpigraph_version": __version__}))


def write_parquet(path, table, columns):
    import pyarrow.parquet as pq

    pq.write_table(arrow_table(table, columns), path)


# ---- summary.txt ---------------------------------------------------------------

def _seconds(ns):
    return "%.6f" % (ns / 1e9)


def _percent(fraction):
    return "-" if np.isnan(fraction) else "%.1f%%" % (100 * fraction)


def _size(n):
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return "%d %s" % (n, unit) if unit == "B" else "%.1f %s" % (n, unit)
        n /= 1000.0


def _text_table(header, rows, left=1):
    """Aligned columns: the first `left` columns left-aligned, the others right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = []
    for row in [header] + rows:
        cells = [str(x).ljust(w) if i < left else str(x).rjust(w) for i, (x, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return lines


def _rank_section(ranks):
    header = ["rank", "host", "program s", "MPI s", "MPI %", "calls", "sent", "received", "collective",
              "finalized"]

    def row(i):
        return [ranks["rank"][i], ranks["host"][i], _seconds(ranks["program_time"][i]),
                _seconds(ranks["mpi_time"][i]), _percent(ranks["mpi_fraction"][i]), ranks["calls"][i],
                _size(ranks["bytes_sent"][i]), _size(ranks["bytes_received"][i]),
                _size(ranks["bytes_collective"][i]), "yes" if ranks["finalized"][i] else "NO"]

    n = len(ranks["rank"])
    rows = [row(i) for i in range(min(n, MAX_RANK_ROWS))]
    if n:
        for label, pick in (("min", np.argmin), ("max", np.argmax)):
            i = pick(ranks["mpi_time"])
            rows.append([label + " MPI", "rank %d" % ranks["rank"][i], _seconds(ranks["program_time"][i]),
                         _seconds(ranks["mpi_time"][i]), _percent(ranks["mpi_fraction"][i]), ranks["calls"][i],
                         "", "", "", ""])
    lines = ["Ranks"] + _text_table(header, rows, left=2)
    if n > MAX_RANK_ROWS:
        lines.append("... %d more ranks in %s" % (n - MAX_RANK_ROWS, RANKS_CSV))
    return lines


def _function_section(functions, mpi_time_total):
    user_calls = ~np.isin(functions["kind"], [mf.INIT, mf.FINALIZE])
    index = np.flatnonzero(user_calls)[:MAX_FUNCTION_ROWS]   # the table is sorted by time_total
    header = ["function", "calls", "total s", "% MPI", "mean s", "min s", "max s", "sent", "received",
              "collective"]
    rows = [[functions["function"][i], functions["calls"][i], _seconds(functions["time_total"][i]),
             _percent(functions["time_total"][i] / mpi_time_total if mpi_time_total else np.nan),
             _seconds(functions["time_mean"][i]), _seconds(functions["time_min"][i]),
             _seconds(functions["time_max"][i]), _size(functions["bytes_sent"][i]),
             _size(functions["bytes_received"][i]), _size(functions["bytes_collective"][i])] for i in index]
    title = "Top MPI functions by time (MPI_Init and MPI_Finalize left out; all functions in %s)" % FUNCTIONS_CSV
    if not rows:
        return [title, "(no MPI calls besides MPI_Init and MPI_Finalize)"]
    return [title] + _text_table(header, rows)


def _warnings(ranks):
    lines = []
    unfinished = ranks["rank"][~ranks["finalized"]]
    if len(unfinished):
        lines.append("warning: rank%s %s did not reach MPI_Finalize (crashed or killed): their times end at "
                     "their last record" % ("s" if len(unfinished) > 1 else "", _list(unfinished)))
    cut_short = ranks["rank"][ranks["finalized"] & ~ranks["log_closed"]]
    if len(cut_short):
        lines.append("warning: rank%s %s reached MPI_Finalize but the job ended before the shim closed the log "
                     "(waiting for the other ranks?)" % ("s" if len(cut_short) > 1 else "", _list(cut_short)))
    open_ops = ranks["incomplete_requests"]
    if open_ops.sum():
        where = ranks["rank"][open_ops > 0]
        lines.append("warning: %d nonblocking operation%s started and never completed, on rank%s %s (see "
                     "incomplete_requests in %s): cut off by the end of the log, or never waited for"
                     % (open_ops.sum(), "s" if open_ops.sum() > 1 else "", "s" if len(where) > 1 else "",
                        _list(where), RANKS_CSV))
    dropped = ranks["rank"][ranks["recording_dropped"]]
    if len(dropped):
        lines.append("warning: the shim stopped recording early on rank%s %s (the log could not grow: disk "
                     "full?): calls after that are missing" % ("s" if len(dropped) > 1 else "", _list(dropped)))
    return lines


def _list(ranks, limit=16):
    text = ", ".join(str(r) for r in ranks[:limit])
    return text + (" and %d more" % (len(ranks) - limit) if len(ranks) > limit else "")


def summary_text(info, tables):
    """The text of summary.txt; `info` is a trace.RunInfo, `tables` a metrics.Tables."""
    ranks, functions = tables.ranks, tables.functions
    hosts = sorted(set(ranks["host"].tolist()))
    program_total = int(ranks["program_time"].sum())
    mpi_total = int(ranks["mpi_time"].sum())
    run_time = int(ranks["program_end"].max() - ranks["program_start"].min()) if len(hosts) else 0
    finalized = int(ranks["finalized"].sum())
    lines = [
        "mpigraph %s report" % __version__,
        "run directory  %s" % info.run_dir,
        "job id         %s" % info.job_id,
        "ranks          %d (%s)" % (info.world_size, "all finalized" if finalized == info.world_size
                                    else "%d finalized" % finalized),
        "hosts          %d (%s)" % (len(hosts), _list(np.array(hosts, dtype=object), limit=8)),
        "run time       %s s (first MPI_Init to last MPI_Finalize%s)"
        % (_seconds(run_time), "" if finalized == info.world_size else " or last record"),
        "MPI time       %s s summed over ranks, %s of their program time"
        % (_seconds(mpi_total), _percent(mpi_total / program_total if program_total else np.nan)),
        "calls          %d (%d records)" % (ranks["calls"].sum(), ranks["records"].sum()),
    ]
    lines += _warnings(ranks)
    lines += [""] + _rank_section(ranks) + [""] + _function_section(functions, mpi_total)
    return "\n".join(lines) + "\n"


# ---- the report ------------------------------------------------------------------

class ReportError(Exception):
    """The report files cannot be written (read-only or full file system); the message names the file."""


def write_report(out_dir, info, tables):
    """Write every report file into out_dir (created if needed); returns the summary text.

    Raises ReportError naming the file that could not be written; what was
    written of an incomplete report is removed, the raw logs are never touched.
    """
    text = summary_text(info, tables)
    written = []
    try:
        os.makedirs(out_dir, exist_ok=True)
        for name, write in ((RANKS_CSV, lambda p: write_csv(p, tables.ranks, metrics.RANK_COLUMNS)),
                            (RANKS_PARQUET, lambda p: write_parquet(p, tables.ranks, metrics.RANK_COLUMNS)),
                            (FUNCTIONS_CSV, lambda p: write_csv(p, tables.functions, metrics.FUNCTION_COLUMNS)),
                            (SUMMARY, lambda p: _write_text(p, text))):   # summary.txt last: the report is complete
            path = os.path.join(out_dir, name)
            written.append(path)
            write(path)
    except OSError as e:
        _remove(written)
        where = e.filename or (written[-1] if written else out_dir)
        raise ReportError("cannot write the report: %s: %s (the raw logs in %s are intact: mpigraph analyze "
                          "%s --out <another directory>)" % (where, e.strerror or e, raw_dir_of(info), info.run_dir)
                          ) from None
    return text


def raw_dir_of(info):
    return os.path.join(info.run_dir, "raw")


def _write_text(path, text):
    """Write through a private temporary file and rename: never follows a planted file, never half-written."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        _remove([tmp])
        raise


def _remove(paths):
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


def read_summary(run_dir):
    """The text of run_dir/summary.txt; FileNotFoundError with a hint when there is none."""
    path = os.path.join(run_dir, SUMMARY)
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError("%s does not exist: analyse the run first (mpigraph analyze %s)"
                                % (path, run_dir)) from None


def print_summary(run_dir, file=None):
    """Print run_dir/summary.txt again."""
    (file or sys.stdout).write(read_summary(run_dir))
