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
    execution_s/_ns       time    summed execution time of its calls (mpigraph.metrics.waits)
    wait_before_s/_ns     time    summed wait before its calls
    wait_after_s/_ns      time    summed wait after its calls
    wait_s/_ns            time    wait_before + wait_after
    compute_s/_ns         time    time between its MPI calls (compute edges)
    imbalance             float   wait / (wait + execution + compute), 0 to 1
    late_sender_s/_ns     time    wait states (mpigraph.metrics.waits): receives waiting for a late send,
    late_receiver_s/_ns   time      sends waiting for a late receive, N-to-N collectives and
    wait_nxn_s/_ns        time      barriers waiting for the last member, 1-to-N members waiting
    wait_barrier_s/_ns    time      for the root, the N-to-1 root waiting for the last member,
    late_broadcast_s/_ns  time      Scan members waiting for the latest lower rank, neighbourhood
    early_reduce_s/_ns    time      collectives waiting for the latest in-neighbour, one-sided
    early_scan_s/_ns      time      origins waiting for a late MPI_Win_post, MPI_Win_wait waiting
    wait_neighbor_s/_ns   time      for the last MPI_Win_complete, members their MPI held beyond
    late_post_s/_ns       time      their pattern until a later member arrived
    early_wait_s/_ns      time
    held_s/_ns            time
    clock_offset_s/_ns    time    clock correction applied: offset to rank 0 at MPI_Init
    clock_drift_ppm       float   clock correction applied: drift against rank 0 (ppm)
    clock_shift_s/_ns     time    forward shift at its end from the receive-before-send repair
    calls                 int     MPI calls (call records)
    records               int     records in its log (calls and their parts)
    bytes_sent            int     point-to-point bytes sent
    bytes_received        int     point-to-point bytes received
    bytes_collective      int     bytes passed to collectives
    finalized             bool    the rank reached MPI_Finalize (false: crashed or killed before)
    recording_dropped     bool    the shim stopped recording early (disk full): calls are missing
    time_on_path_s/_ns    time    time of the rank's segments on the critical path (0 when no path)

ranks.svg
    A bar per rank: compute, MPI time (split into execution and wait when the
    ranks table has a wait column) and, when known, time on the critical path.
    ``mpigraph view DIR`` writes it again from the calls and the path it reads.

    log_closed            bool    the shim closed the log in MPI_Finalize (false: the job ended
                                  while the rank was finalising, or before)
    incomplete_requests   int     nonblocking operations started and never completed or freed
                                  (cut off by a crash, or never waited for)

functions.csv, functions.parquet: one row per MPI function called, the longest time_total first
    function              str     MPI function name
    function_id           int     mpigraph's function id (mpigraph.trace.functions)
    kind                  str     function kind (send, recv, n_to_n, completion, ...)
    calls                 int     calls over all ranks
    ranks                 int     ranks that called it
    time_total_s          time    summed duration of its calls
    time_mean_s           time    time_total / calls
    time_min_s            time    shortest call
    time_max_s            time    longest call
    wait_before_s         time    summed wait before its calls
    wait_after_s          time    summed wait after its calls
    execution_s           time    summed execution time of its calls
    bytes_sent            int     point-to-point bytes sent
    bytes_received        int     point-to-point bytes received
    bytes_collective      int     bytes passed to collectives
    device_calls          int     calls with a GPU device buffer (calls.parquet's device_buffer)
    time_on_path_s        time    time of its calls and the messages into them on the critical path

critical_path.csv, critical_path.parquet: the critical path, one row per segment
(schema in ``mpigraph.paths.segments``); written when a path was computed, the CSV when the
path has at most MAX_CSV_ROWS segments (summary.txt says so when it is left out).

How bytes are counted is in ``mpigraph.metrics.profile``.  ranks.csv also has the
wait, imbalance, wait-state and clock columns of ``metrics.RANK_COLUMNS`` and
functions.csv wait_before, wait_after and execution (see mpigraph.metrics.waits).

The tables of the linked run (schemas in ``mpigraph.schema``):
calls.parquet (one row per call of every rank), collectives.parquet (one row
per collective instance), waitstates.csv/.parquet (rank, function, wait-state
kind), unmatched.csv/.parquet (operations without partner; no rows when none),
callsites.csv/.parquet (one row per call site and MPI function: made on analysis rank 0 from
every analysis rank's sums, mpigraph.callsites.stats).
calls.csv and collectives.csv hold the same columns when the run has at most
MAX_CSV_ROWS calls (a CSV of 1e8 calls is gigabytes no one reads as text);
summary.txt says so when they are left out.

run.json: the facts of the run (job id, ranks, hosts, run time, algorithm,
clock method, the critical path's length, the table files written), for
programs (``mpigraph.load(DIR).facts``).
"""

import concurrent.futures.thread  # noqa: F401  (see below)
import dataclasses
import json
import os
import sys

import numpy as np

from mpigraph import __version__
from mpigraph.metrics import call_kernel, run_tables as linked_tables
from mpigraph.metrics import profile as metrics
from mpigraph.util import threads
from mpigraph.util.atomic import atomic_write
from mpigraph.util.names import Labels, rows_of
from mpigraph import schema
from mpigraph.paths import segments as cp
from mpigraph.view import svg
from mpigraph.report import csv_kernel, diagnosis
from mpigraph.report.outdir import read_summary
from mpigraph.trace import functions as mf
from mpigraph.trace import inflight

# concurrent.futures.thread, imported above: pyarrow imports pandas where it is installed, and
# pandas that module, which registers an exit handler on import.  A report written at interpreter
# exit (an mpi4py program's analysis) would import it then, which Python refuses; imported with
# the writer, it is there already.

SUMMARY = "summary.txt"
RANKS_CSV = "ranks.csv"
RANKS_PARQUET = "ranks.parquet"
FUNCTIONS_CSV = "functions.csv"
FUNCTIONS_PARQUET = "functions.parquet"
CALLS_PARQUET = "calls.parquet"
CALLS_CSV = "calls.csv"
COLLECTIVES_PARQUET = "collectives.parquet"
COLLECTIVES_CSV = "collectives.csv"
RUN_JSON = "run.json"
CALLSITES_CSV = "callsites.csv"
CALLSITES_PARQUET = "callsites.parquet"
CALLSITE_WAITSTATES_CSV = "callsite_waitstates.csv"
CALLSITE_WAITSTATES_PARQUET = "callsite_waitstates.parquet"
WAITSTATES_CSV = "waitstates.csv"
WAITSTATES_PARQUET = "waitstates.parquet"
UNMATCHED_CSV = "unmatched.csv"
UNMATCHED_PARQUET = "unmatched.parquet"
MAX_COLLECTIVE_ROWS = 10
MAX_UNMATCHED_ROWS = 10

# calls.csv and collectives.csv are written only for runs of at most this many calls: past it the
# text is gigabytes (about 100 bytes a call) that no one reads as text; Parquet has every row.
MAX_CSV_ROWS = 1_000_000

MAX_RANK_ROWS = 64      # summary.txt lists every rank up to this many, then points to ranks.csv
MAX_FUNCTION_ROWS = 20


# ---- CSV and Parquet ---------------------------------------------------------

def csv_name(column):
    return column.name + "_s" if column.kind == "time" else column.name


def parquet_name(column):
    return column.name + "_ns" if column.kind == "time" else column.name


# Rows per block of write_csv: the text of one block is in memory at a time.
CSV_BLOCK_ROWS = 1 << 20


def write_csv(path, table, columns, header=True):
    """`table` (a dict of columns) as CSV: a header of csv_name()s (unless not `header`), then one
    line per row.

    The text is made a block of rows at a time, not a Python string per cell (a path table can
    have a row per MPI call: gigabytes of text): by the C kernel of report.csv_kernel, or where it
    does not run (no compiler; a float column) by pyarrow's string kernels, or for a block of at
    most PYTHON_CSV_ROWS rows by Python's formatting: the same text each way.  CSV_THREADS threads
    make the blocks' text at once (the kernels let go of the GIL), and they are written in order.
    Fields are quoted as Python's csv module quotes them (QUOTE_MINIMAL)."""
    n = len(table[columns[0].name]) if columns else 0
    with open(path, "wb") as f, threads.pool(CSV_THREADS, "mpigraph-csv") as pool:
        if header:
            f.write(_csv_header(columns))
        for text in _in_order(pool, lambda rows: _csv_lines(table, columns, rows), _blocks(n), CSV_THREADS):
            f.write(text)


# A block of at most this many rows gets its CSV text from Python's formatting (``_python_lines``),
# the same bytes as the string kernels': the report of a small run then never imports
# pyarrow.compute, which was a third of an empty program's report stage (0.05-0.1 s of imports on
# every in-job analysis).
PYTHON_CSV_ROWS = 4096


def _csv_header(columns):
    return (",".join(_python_quoted(csv_name(c)) for c in columns) + "\n").encode()


def _python_lines(table, columns, rows):
    """``_csv_lines`` of a few rows (a slice), by Python's formatting: the same text, as bytes."""
    cells = [_python_fields(c, rows_of(table[c.name], rows)) for c in columns]
    return "".join(",".join(fields) + "\n" for fields in zip(*cells)).encode()


def _python_fields(column, values):
    """The CSV fields (str) of a column's `values`, as ``_csv_text`` writes them."""
    if column.kind == "time":
        return ["%s%d.%09d" % (("-" if ns < 0 else "",) + divmod(abs(ns), 10**9))
                for ns in np.asarray(values, np.int64).tolist()]
    if column.kind == "float":
        return ["" if v != v else "%.6f" % v for v in np.asarray(values, np.float64).tolist()]
    if column.kind == "bool":
        return ["true" if v else "false" for v in np.asarray(values, bool).tolist()]
    if column.kind == "int":
        return [str(v) for v in np.asarray(values, np.int64).tolist()]
    return ["" if v is None else _python_quoted(v) for v in np.asarray(values, object).tolist()]


def _python_quoted(text):
    """A CSV field of `text`, quoted as Python's csv module quotes it (QUOTE_MINIMAL): ``_quoted``."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _blocks(n, size=None):
    """Slices of `size` rows (default CSV_BLOCK_ROWS, looked up when called) over n rows."""
    size = size or CSV_BLOCK_ROWS
    return (slice(a, min(a + size, n)) for a in range(0, n, size))


# Threads making a CSV's text: a CSV of millions of rows is the report's longest file to make.
CSV_THREADS = 2


def _csv_lines(table, columns, rows):
    """The CSV text of table's `rows` (a slice), a line per row, as a memoryview (bytes)."""
    text = _kernel_lines(table, columns, rows)
    if text is not None:
        return text
    if rows.stop - rows.start <= PYTHON_CSV_ROWS:        # the slices of _blocks
        return _python_lines(table, columns, rows)
    import pyarrow as pa
    import pyarrow.csv as pcsv

    cells = [_csv_text(c, table[c.name], rows) for c in columns]
    # Arrow's CSV writer joins the fields a column at a time, a fifth faster than joining them
    # row by row (calls.csv of 1e6 calls: 0.62 -> 0.50 s of CPU).  Told to quote nothing, it
    # writes each field's text as it is, and refuses a field holding a quote, a comma or a line
    # end: only a field _quoted has quoted holds them, and its lines are joined by the kernels.
    sink = pa.BufferOutputStream()
    try:
        pcsv.write_csv(pa.Table.from_arrays(cells, [c.name for c in columns]), sink,
                       pcsv.WriteOptions(include_header=False, quoting_style="none"))
    except pa.ArrowInvalid:
        return _joined_lines(cells)
    return memoryview(sink.getvalue())


def _kernel_lines(table, columns, rows):
    """``_csv_lines`` by the C kernel (report.csv_kernel); None where it does not run, or a column
    is a float column (a table of few rows) or a str column of other than names.Labels of str."""
    fields = []
    for c in columns:
        values = rows_of(table[c.name], rows)
        names = values.names.tolist() if c.kind == "str" and isinstance(values, Labels) else None
        if c.kind in ("int", "time", "bool"):
            fields.append((c.kind, values, None))
        elif names is not None and all(isinstance(n, str) or n is None for n in names):
            fields.append(("str", values.codes, [_python_quoted(n or "").encode() for n in names]))
        else:
            return None
    return csv_kernel.lines(fields)


def _joined_lines(cells):
    """The CSV lines of the fields' text `cells` (pyarrow string arrays), by the string kernels."""
    import pyarrow.compute as pc

    # The line's end joined to its last field, not to the whole line: one copy of the text, not two.
    cells[-1] = pc.binary_join_element_wise(cells[-1], "\n", "")
    lines = pc.binary_join_element_wise(*cells, ",")
    offsets, data = lines.buffers()[1:]
    bounds = np.frombuffer(offsets, np.int32)[[lines.offset, lines.offset + len(lines)]]
    return memoryview(data)[int(bounds[0]):int(bounds[1])]


def _in_order(pool, function, items, ahead):
    """function(item) of each item, computed by `pool` at most `ahead` at a time, yielded in order."""
    import collections

    running = collections.deque()
    for item in items:
        if len(running) == ahead:
            yield running.popleft().result()
        running.append(pool.submit(function, item))
    while running:
        yield running.popleft().result()


def _csv_text(column, values, rows):
    """A pyarrow string array: the CSV fields of `values[rows]`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = rows_of(values, rows)
    if column.kind == "time":
        return _span_text(np.asarray(values, np.int64), _seconds_text)
    if column.kind == "float":           # few rows (per rank or function): Python's formatting
        return pa.array(["" if np.isnan(v) else "%.6f" % v for v in values.tolist()], pa.string())
    if column.kind == "bool":
        return pc.if_else(pa.array(np.asarray(values, bool)), "true", "false")
    if column.kind == "int":
        return _int_text(np.asarray(values, np.int64))
    if isinstance(values, Labels):       # a few names: each quoted once, then taken by code
        return _quoted(_arrow_array(values.names, "str", pa.string()).fill_null("")).take(pa.array(values.codes))
    return _quoted(_arrow_array(values, "str", pa.string()).fill_null(""))


def _quoted(text):
    """CSV fields of a pyarrow string array, quoted as Python's csv module quotes them (QUOTE_MINIMAL)."""
    import pyarrow.compute as pc

    special = pc.match_substring_regex(text, '[,"\r\n]')
    if not pc.any(special).as_py():
        return text
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
    return pc.if_else(special, quoted, text)


# An int or time column whose values span fewer than this many integers (ranks, tags,
# communicators, root, call sites; waits that are mostly 0) has its text taken from the texts of
# that span, each made once.
_SPAN_TEXTS = 4096


def _int_text(values):
    """A pyarrow string array: the decimal text of int64 `values`."""
    import pyarrow as pa

    return _span_text(values, lambda v: pa.array(v).cast(pa.string()))


def _span_text(values, text_of):
    """text_of(values) (int64 values -> pyarrow string array), made once per integer of the values'
    span when they span few integers (and there are many more rows than that): taking each row's
    text from the span's costs a copy of its bytes, a third of an integer cast (about a fifth of a
    time's text)."""
    import pyarrow as pa

    lo, hi = int(values.min(initial=0)), int(values.max(initial=0))
    if hi - lo >= min(_SPAN_TEXTS, len(values) // 8):
        return text_of(values)
    return text_of(np.arange(lo, hi + 1)).take(pa.array(values - lo))


# Whole seconds up to which _seconds_text makes its text from one integer cast (the integer of
# the digits below must fit an int64: 922,337,202 s, 29 years, is the most); times past it
# (never a run's, but any int64 is a valid column) take the general way.
_ONE_CAST_MAX_S = 900_000_000


def _seconds_text(ns):
    """A pyarrow string array of ns as seconds, exact to the ns: [-]s.nnnnnnnnn.

    One integer cast makes the digits: |ns| = s * 10**9 + n is written as the integer
    ±(max(s, 1) * 10**10 + 10**9 + n) (the sign of ns), whose text ends in "1nnnnnnnnn" (the 1 keeps n's
    leading zeros); that 1 becomes the point, and for s = 0 the leading "1" of max(s, 1) a "0".
    Arrow's cast writes the sign.  Two byte fixes in numpy cost far less than the string kernels
    (pad or slice, join) that make the text per field otherwise."""
    import pyarrow as pa

    # Both below 2**63 (whole < 2**64 / 10**9): int64 views of them, not copies.
    whole, part = (q.view(np.int64) for q in np.divmod(_magnitude(ns), np.uint64(10**9)))
    if whole.max(initial=0) > _ONE_CAST_MAX_S:
        return _seconds_text_joined(ns, whole, part)
    number = np.maximum(whole, 1) * 10**10 + (10**9 + part)
    if ns.min(initial=0) < 0:       # times and waits are rarely negative: no pass for the sign then
        number = np.where(ns < 0, -number, number)
    text = pa.array(number).cast(pa.string())
    offsets, data = text.buffers()[1:]
    ends = np.frombuffer(offsets, np.int32)[1:len(text) + 1]
    chars = np.frombuffer(data, np.uint8)[:ends[-1] if len(text) else 0].copy()
    chars[ends - 10] = ord(".")
    chars[ends[whole == 0] - 11] = ord("0")
    return pa.StringArray.from_buffers(len(text), offsets, pa.py_buffer(chars))


def _magnitude(ns):
    """|ns| as uint64: exact for int64's least too, whose np.abs overflows back to itself."""
    magnitude = ns.astype(np.uint64)
    np.negative(magnitude, out=magnitude, where=ns < 0)        # 0 - x modulo 2**64: |x|
    return magnitude


def _seconds_text_joined(ns, whole, part):
    """_seconds_text of any int64 (no integer to overflow): the whole seconds, a point and the 9
    digits of the ns, the 9 digits being the last 9 of 10**9 + part's text (a slice is cheaper
    than a pad: it copies code units, where a pad measures and rebuilds every string)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    digits = pc.utf8_slice_codeunits(pa.array(part + 10**9).cast(pa.string()), 1)
    text = pc.binary_join_element_wise(pa.array(whole).cast(pa.string()), digits, ".")
    return pc.if_else(pa.array(ns < 0), pc.binary_join_element_wise("-", text, ""), text) if ns.min(initial=0) < 0 \
        else text


# The kinds whose columns may hold a missing value: a fraction with nothing to divide (NaN, written
# as null) and a missing name (None).  The others are required columns in Parquet: a
# nullable one has a definition level per value to compute and encode, about a sixth of the calls
# table's encoding (1 M calls: 145 -> 122 ns a row).  A missing value in a required column stops
# the writer with an error naming the column.
NULLABLE_KINDS = ("float", "str")


def arrow_table(table, columns):
    """A pyarrow Table of `table` with the Parquet column names, types and per-column descriptions.

    `table` is a dict of columns, or a list of them (row blocks, written as the table's chunks
    without concatenating them); a str column may be a names.Labels (codes into names)."""
    import pyarrow as pa

    types = {"time": pa.int64(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_()}
    blocks = table if isinstance(table, list) else [table]
    fields, arrays = [], []
    for c in columns:
        chunks = [_arrow_array(block[c.name], c.kind, types[c.kind]) for block in blocks]
        fields.append(pa.field(parquet_name(c), types[c.kind], nullable=c.kind in NULLABLE_KINDS,
                               metadata={"description": c.help}))
        arrays.append(chunks[0] if len(chunks) == 1 else pa.chunked_array(chunks, types[c.kind]))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata={"mpigraph_version": __version__}))


def _arrow_array(values, kind, arrow_type):
    import pyarrow as pa

    if isinstance(values, Labels) and arrow_type == pa.string():     # the text made from the codes in C
        text = call_kernel.label_strings(values.codes, np.asarray(values.names).tolist())
        if text is not None:
            return text
    if isinstance(values, Labels):      # a few names, taken by code in C++
        return pa.array(np.asarray(values.names).tolist(), arrow_type).take(pa.array(values.codes))
    values = np.asarray(values, object if kind == "str" else None)
    return pa.array(values, type=arrow_type, from_pandas=kind == "float")   # NaN -> null for missing fractions


# zstd rather than pyarrow's default snappy, every integer and time column delta-encoded and
# only the string columns dictionary-encoded: times and call indices grow in small steps, which
# delta encoding turns into few bits, so the calls table is about half as big and quicker to
# write.  Every Parquet reader knows zstd and DELTA_BINARY_PACKED (Parquet 2).
PARQUET_COMPRESSION = "zstd"
PARQUET_LEVEL = 1             # as small as level 3 on these tables, faster

# Min/max statistics are written for these columns only: the tables' rows are in rank, call and
# time order, so a row group's range of them lets a reader (pyarrow.dataset, DuckDB, Spark) skip
# it for a filter on a rank or a time window.  The other columns (waits, tags, bytes, ...) span
# nearly their whole range in every row group, where statistics skip nothing; computing them
# was about a tenth of the calls table's encoding (4e6 calls: 0.07 s of 0.76 s, the file 0.5%
# larger).
PARQUET_STATISTICS = ("rank", "call", "start", "end")


def _parquet_options(columns):
    """pyarrow.parquet writer options for a table of these columns."""
    names = lambda kinds: [parquet_name(c) for c in columns if c.kind in kinds]  # noqa: E731
    return {"compression": PARQUET_COMPRESSION, "compression_level": PARQUET_LEVEL,
            "use_dictionary": names(("str",)),
            "column_encoding": {name: "DELTA_BINARY_PACKED" for name in names(("int", "time"))},
            "write_statistics": [parquet_name(c) for c in columns if c.name in PARQUET_STATISTICS]}


# Rows per row group of write_parquet: pyarrow's own default for a table written whole (1024 *
# 1024), so the file is byte for byte the one write_table makes.
PARQUET_BLOCK_ROWS = 1 << 20


def write_parquet(path, table, columns):
    """`table` (a dict of columns) as Parquet, a row group at a time (``write_parquet_blocks``):
    the Arrow arrays of one row group are in memory at once, not the whole table's (a pipelined
    program's path table has a row per call, and its kind and function names as Arrow strings
    would add to the report's peak)."""
    n = len(table[columns[0].name]) if columns else 0
    if not n:
        _write_parquet_whole(path, table, columns)
        return
    blocks = ({c.name: rows_of(table[c.name], slice(a, a + PARQUET_BLOCK_ROWS)) for c in columns}
              for a in range(0, n, PARQUET_BLOCK_ROWS))
    write_parquet_blocks(path, blocks, columns)


def _write_parquet_whole(path, table, columns):
    import pyarrow.parquet as pq

    pq.write_table(arrow_table(table, columns), path, **_parquet_options(columns))


def write_parquet_blocks(path, blocks, columns):
    """write_parquet of a table that arrives as row blocks (any iterable of column dicts): a row
    group per block, so the whole table is never in memory.

    A writer thread encodes and compresses each block while this thread pulls and converts the
    next (pyarrow lets go of the GIL while it writes; the blocks' iterable, which may talk MPI,
    stays on this thread).  At most one block is being written, in order: writing and pulling
    are each a large share of the calls table's time, so they overlap.
    """
    import pyarrow.parquet as pq
    from concurrent.futures import wait

    writer = writing = None
    with threads.pool(1, "mpigraph-parquet") as pool:
        try:
            for block in blocks:
                table = arrow_table(block, columns)
                if writer is None:
                    writer = pq.ParquetWriter(path, table.schema, **_parquet_options(columns))
                if writing is not None:
                    writing.result()          # raises what the writer raised
                writing = pool.submit(writer.write_table, table)
                del table, block
            if writing is not None:
                writing.result()
            if writer is None:        # no rows at all: the schema alone
                _write_parquet_whole(path, _empty_block(columns), columns)
        finally:
            if writing is not None:
                wait([writing])       # a block still being written when this thread failed
            if writer is not None:
                writer.close()


def _empty_block(columns):
    dtypes = {"time": np.int64, "int": np.int64, "float": np.float64, "str": object, "bool": bool}
    return {c.name: np.zeros(0, dtypes[c.kind]) for c in columns}


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
    # The phase API's marks (kind region) are no MPI time: phases.csv shows them.
    user_calls = ~np.isin(functions["kind"], [mf.INIT, mf.FINALIZE, mf.REGION])
    index = np.flatnonzero(user_calls)[:MAX_FUNCTION_ROWS]   # the table is sorted by time_total
    header = ["function", "calls", "total s", "% MPI", "mean s", "min s", "max s", "sent", "received",
              "collective"]
    rows = [[functions["function"][i], functions["calls"][i], _seconds(functions["time_total"][i]),
             _percent(functions["time_total"][i] / mpi_time_total if mpi_time_total else np.nan),
             _seconds(functions["time_mean"][i]), _seconds(functions["time_min"][i]),
             _seconds(functions["time_max"][i]), _size(functions["bytes_sent"][i]),
             _size(functions["bytes_received"][i]), _size(functions["bytes_collective"][i])] for i in index]
    title = ("Top MPI functions by time (MPI_Init, MPI_Finalize and phase marks left out; all functions in %s)"
             % FUNCTIONS_CSV)
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


def _wait_section(ranks):
    """Per-process imbalance table (seed 004's example output) with totals and the program's imbalance."""
    header = ["rank", "program s", "MPI s", "execution s", "compute s", "wait s", "imbalance", "late sender",
              "late recv", "wait NxN", "barrier", "late bcast", "early red", "early scan", "neighbour", "late post",
              "early wait", "held", "calls"]
    kinds = schema.WAIT_STATES          # in the order of the header's short names above

    def cells(label, values, imbalance):
        return ([label] + [_seconds(values[k]) for k in ("program_time", "mpi_time", "execution", "compute", "wait")]
                + [_percent(imbalance)] + [_seconds(values[k]) for k in kinds] + [values["calls"]])

    n = len(ranks["rank"])
    rows = [cells(ranks["rank"][i], {k: ranks[k][i] for k in ranks}, ranks["imbalance"][i])
            for i in range(min(n, MAX_RANK_ROWS))]
    totals = {k: ranks[k].sum() for k in ranks if ranks[k].dtype.kind in "iu"}
    rows.append(cells("total", totals, metrics.imbalance(totals["wait"], totals["execution"], totals["compute"])))
    return (["Imbalance and wait states per process (imbalance = wait / (wait + execution + compute): the share "
             "of its time a rank waited; total row: the program's)"] + _text_table(header, rows))


def _collective_section(collectives, names=None):
    n = len(collectives["seq"])
    if n == 0:
        return ["Collectives: none"]
    top = np.argsort(-collectives["wait_total"], kind="stable")[:MAX_COLLECTIVE_ROWS]
    header = ["function", "comm", "seq", "members", "wait s", "execution s", "imbalance", "last rank"]
    rows = [[collectives["function"][i], _comm_name(names, collectives["comm"][i]), collectives["seq"][i],
             collectives["members"][i],
             _seconds(collectives["wait_total"][i]), _seconds(collectives["execution"][i]),
             _percent(collectives["imbalance"][i]), collectives["last_rank"][i]] for i in top]
    return (["Top imbalanced collectives by summed wait (%d instances, all in %s)" % (n, COLLECTIVES_PARQUET)]
            + _text_table(header, rows))


def _comm_name(names, comm_id):
    """A communicator's name in the summary ("world", "split#1 (4 ranks)"); its id without names."""
    return comm_id if names is None else names.name(comm_id)


def _clock_section(ranks, facts):
    repair = facts["repair"]
    lines = ["Clock correction: %s; receive-before-send violations found %d, repaired %d in %d round%s%s"
             % (facts["clock_method"], repair.found, repair.repaired, repair.rounds,
                "" if repair.rounds == 1 else "s", ", %d LEFT" % repair.remaining if repair.remaining else "")]
    if facts["clock_method"] != "none":
        n_hosts = len(set(ranks["host"].tolist()))
        lines.append("  %d host%s; the ranks of a host share its clock (one offset, no drift), hosts are aligned by %s"
                     % (n_hosts, "" if n_hosts == 1 else "s", facts["clock_method"]))
    header = ["rank", "offset s", "drift ppm", "repair shift s"]
    rows = [[ranks["rank"][i], "%.9f" % (ranks["clock_offset"][i] / 1e9), "%.3f" % ranks["clock_drift_ppm"][i],
             _seconds(ranks["clock_shift"][i])] for i in range(min(len(ranks["rank"]), MAX_RANK_ROWS))]
    return lines + _text_table(header, rows)


def _unmatched_section(unmatched, names=None):
    n = len(unmatched["rank"])
    if n == 0:
        return ["Unmatched operations: none"]
    lines = ["Unmatched operations: %d (all in %s)" % (n, UNMATCHED_CSV)]
    for i in range(min(n, MAX_UNMATCHED_ROWS)):
        lines.append("  rank %d %s %s (call %d, comm %s, peer %d, tag %d, %d bytes): %s"
                     % (unmatched["rank"][i], unmatched["function"][i], unmatched["what"][i], unmatched["call"][i],
                        _comm_name(names, unmatched["comm"][i]), unmatched["peer"][i], unmatched["tag"][i],
                        unmatched["bytes"][i],
                        unmatched["reason"][i]))
    return lines


def summary_text(info, tables, linked=None, path_lines=(), in_flight=None):
    """The text of summary.txt; `info` is a trace.RunInfo, `tables` a metrics.Tables, `linked` the
    linked run's tables (or None; its "callsites" table, when there, names the call sites in the
    diagnosis and adds their section), `path_lines` the critical path in words (from the path
    stage), `in_flight` the calls in flight when the run ended (trace.inflight.read; None: all
    finalised)."""
    ranks, functions = tables.ranks, tables.functions
    hosts = sorted(set(ranks["host"].tolist()))
    program_total = int(ranks["program_time"].sum())
    mpi_total = int(ranks["mpi_time"].sum())
    run_time = int(ranks["program_end"].max() - ranks["program_start"].min()) if len(hosts) else 0
    finalized = int(ranks["finalized"].sum())
    lines = ["mpigraph %s report" % __version__, ""] + diagnosis.diagnosis_lines(ranks, linked, run_time)
    lines += [
        "",
        "run directory  %s" % info.run_dir,
        "job id         %s%s" % (info.job_id, _job_id_note(info)),
        "ranks          %d (%s)" % (info.world_size, "all finalized" if finalized == info.world_size
                                    else "%d finalized" % finalized),
        "hosts          %d (%s)" % (len(hosts), _list(np.array(hosts, dtype=object), limit=8)),
        # Every time in the report counts from the end of the first MPI_Init (time 0).
        "run time       %s s (time 0 = end of the first MPI_Init, to the start of the last MPI_Finalize%s)"
        % (_seconds(run_time), "" if finalized == info.world_size else " or the last record"),
        "MPI time       %s s summed over ranks, %s of their program time"
        % (_seconds(mpi_total), _percent(mpi_total / program_total if program_total else np.nan)),
        "calls          %d (%d records)" % (ranks["calls"].sum(), ranks["records"].sum()),
    ]
    lines += _device_line(functions)
    lines += _warnings(ranks)
    if in_flight is not None:
        lines += inflight.summary_lines(in_flight)
    if path_lines:
        lines += [""] + list(path_lines)
    names = linked["traffic"]["names"] if linked is not None and linked.get("traffic") else None
    if linked is not None:      # the waits first: what the diagnosis is made of
        lines += [""] + _wait_section(ranks) + [""] + _collective_section(linked["collectives"], names)
    lines += [""] + _rank_section(ranks) + [""] + _function_section(functions, mpi_total)
    lines += _callsite_section(linked)
    if linked is not None and linked.get("phases"):
        from mpigraph.phases import summary as phases_summary

        lines += [""] + phases_summary.section(linked["phases"], _text_table)
    if linked is not None:
        lines += ([""] + _unmatched_section(linked["unmatched"], names) + [""]
                  + _clock_section(ranks, linked["facts"]))
        lines += _csv_left_out(ranks)
    return "\n".join(lines) + "\n"


def _device_line(functions):
    """summary.txt's line on calls with GPU device buffers (csrc/gpu.c), when the run has some."""
    n = int(np.sum(functions["device_calls"])) if "device_calls" in functions else 0
    if not n:
        return []
    return ["device buffers %d calls with a GPU device buffer (device_buffer in %s)" % (n, CALLS_PARQUET)]


def big_csv_written(ranks):
    """Whether calls.csv and collectives.csv are written: the run has at most MAX_CSV_ROWS calls."""
    return int(ranks["calls"].sum()) <= MAX_CSV_ROWS


def path_csv_written(path):
    """Whether critical_path.csv is written: the path (a table or its Totals) has at most
    MAX_CSV_ROWS segments (a pipelined program's path has a segment per call)."""
    return _segments(path) <= MAX_CSV_ROWS


def _segments(path):
    """The segments of a path table or of its Totals."""
    return path.segments if isinstance(path, cp.Totals) else len(path["rank"])


def _path_csv_left_out(path):
    """summary.txt's line on critical_path.csv when the path is too long for it."""
    if path is None or path_csv_written(path):
        return []
    return ["%s not written: the path has %d segments, more than %d (the same rows are in %s)"
            % (cp.CSV_NAME, _segments(path), MAX_CSV_ROWS, cp.PARQUET_NAME)]


def _csv_left_out(ranks):
    """summary.txt's line on calls.csv and collectives.csv when the run is too big for them."""
    if big_csv_written(ranks):
        return []
    return ["", "%s and %s not written: the run has %d calls, more than %d (the same rows are in %s and %s)"
            % (CALLS_CSV, COLLECTIVES_CSV, ranks["calls"].sum(), MAX_CSV_ROWS, CALLS_PARQUET, COLLECTIVES_PARQUET)]


def _job_id_note(info):
    """Why the job id is not the run directory's suffix, where it is not (a directory the user named)."""
    name = os.path.basename(os.path.normpath(info.run_dir))
    if not info.job_id or name == "mpigraph-%s" % info.job_id:
        return ""
    return " (not the run directory's suffix: its name was given, MPIGRAPH_OUT or --out)"


# ---- the report ------------------------------------------------------------------

@dataclasses.dataclass
class File:
    """A report file: its name, what writes it to a path, whether that talks MPI (then it runs
    on the calling thread, the only one that does), and the names of files it also writes."""

    name: str
    write: object
    talks_mpi: bool = False
    also: tuple = ()


def _linked_files(linked, with_csv):
    """The linked run's tables (mpigraph.metrics.run_tables); calls.parquet pulls its blocks from the
    other analysis ranks.  calls.csv and collectives.csv when `with_csv` (a run small enough)."""
    lt = linked_tables
    files = [File(CALLS_PARQUET, lambda p: _write_calls(p, linked["calls"], with_csv), True,
                   (CALLS_CSV,) if with_csv else ()),
             File(COLLECTIVES_PARQUET, lambda p: write_parquet(p, linked["collectives"], lt.COLLECTIVE_COLUMNS))]
    if with_csv:
        files.append(File(COLLECTIVES_CSV, lambda p: write_csv(p, linked["collectives"], lt.COLLECTIVE_COLUMNS)))
    return files + [
        File(WAITSTATES_CSV, lambda p: write_csv(p, linked["waitstates"], lt.WAITSTATE_COLUMNS)),
        File(WAITSTATES_PARQUET, lambda p: write_parquet(p, linked["waitstates"], lt.WAITSTATE_COLUMNS)),
        File(UNMATCHED_CSV, lambda p: write_csv(p, linked["unmatched"], lt.UNMATCHED_COLUMNS)),
        File(UNMATCHED_PARQUET, lambda p: write_parquet(p, linked["unmatched"], lt.UNMATCHED_COLUMNS))]


COMM_MATRIX_CSV, COMM_MATRIX_PARQUET = "commmatrix.csv", "commmatrix.parquet"
SIZES_CSV, SIZES_PARQUET = "sizes.csv", "sizes.parquet"
COMMUNICATORS_CSV, COMMUNICATORS_PARQUET = "communicators.csv", "communicators.parquet"
CALLSITE_SIZES_CSV, CALLSITE_SIZES_PARQUET = "callsite_sizes.csv", "callsite_sizes.parquet"


def _traffic_files(traffic):
    """The communication matrix (CSV, Parquet, heatmap), the size histograms and the communicators
    (mpigraph.traffic); none when the traffic stage did not run."""
    if not traffic:
        return []
    from mpigraph.traffic import heatmap

    files = _table_files(traffic, (((COMM_MATRIX_CSV, COMM_MATRIX_PARQUET), "matrix", schema.COMM_MATRIX_COLUMNS),
                                   ((SIZES_CSV, SIZES_PARQUET), "sizes", schema.SIZE_COLUMNS),
                                   ((COMMUNICATORS_CSV, COMMUNICATORS_PARQUET), "communicators",
                                    schema.COMMUNICATOR_COLUMNS),
                                   ((CALLSITE_SIZES_CSV, CALLSITE_SIZES_PARQUET), "callsite_sizes",
                                    schema.CALLSITE_SIZE_COLUMNS)))
    text = heatmap.svg_text(traffic["matrix"], traffic["world_size"])
    return files + [File(heatmap.SVG_NAME, lambda p: _write_text(p, text))]


PHASES_CSV, PHASES_PARQUET = "phases.csv", "phases.parquet"
PHASE_FUNCTIONS_CSV, PHASE_FUNCTIONS_PARQUET = "phase_functions.csv", "phase_functions.parquet"
PHASE_CALLSITES_CSV, PHASE_CALLSITES_PARQUET = "phase_callsites.csv", "phase_callsites.parquet"


def _phase_files(phases):
    """The per-phase tables (mpigraph.phases); none when no rank marked a phase."""
    if not phases:
        return []
    return _table_files(phases, (((PHASES_CSV, PHASES_PARQUET), "phases", schema.PHASE_COLUMNS),
                                 ((PHASE_FUNCTIONS_CSV, PHASE_FUNCTIONS_PARQUET), "phase_functions",
                                  schema.PHASE_FUNCTION_COLUMNS),
                                 ((PHASE_CALLSITES_CSV, PHASE_CALLSITES_PARQUET), "phase_callsites",
                                  schema.PHASE_CALLSITE_COLUMNS)))


def _table_files(tables, specs):
    """A CSV and a Parquet file for each ((csv name, parquet name), key, columns) of `specs`
    whose table is in `tables`.  A table still missing is left out: the call-site twins are
    made in the report stage, once the call sites are numbered."""
    files = []
    for names, key, columns in specs:
        table = tables.get(key)
        if table is None:
            continue
        files += [File(names[0], lambda p, t=table, c=columns: write_csv(p, t, c)),
                  File(names[1], lambda p, t=table, c=columns: write_parquet(p, t, c))]
    return files


# Rows of calls.csv made into text at a time: fewer than CSV_BLOCK_ROWS, since the calls table's
# block is held meanwhile.  A synthetic run of 4 x 240,000 calls: analysis rank 0's peak RSS was
# 668 MB without calls.csv and collectives.csv, about 760 MB with them, 980 MB with CSV_BLOCK_ROWS.
CALLS_CSV_BLOCK_ROWS = 1 << 16


def _write_calls(path, blocks, with_csv):
    """calls.parquet from its row blocks (any iterable, consumed once: they come from the other
    analysis ranks), and calls.csv beside it from the same blocks as they pass when `with_csv`."""
    csv_path = os.path.join(os.path.dirname(path), CALLS_CSV) if with_csv else None
    write_calls_blocks(path, blocks, csv_path)


def write_calls_blocks(path, blocks, csv_path=None, header=True):
    """The calls table's row blocks (any iterable, consumed once) as Parquet at `path`, and as CSV
    text at `csv_path` (with the header line when `header`) from the same blocks as they pass: no
    block is kept or read back, so the CSV costs its text's time, not the table's memory."""
    columns = linked_tables.CALL_COLUMNS
    if csv_path is None:
        write_parquet_blocks(path, blocks, columns)
        return
    with open(csv_path, "wb") as f, threads.pool(CSV_THREADS, "mpigraph-csv") as pool:
        if header:
            f.write(_csv_header(columns))

        def passing():
            for block in blocks:
                rows = _blocks(len(block[columns[0].name]), CALLS_CSV_BLOCK_ROWS)
                for text in _in_order(pool, lambda r: _csv_lines(block, columns, r), rows, CSV_THREADS):
                    f.write(text)
                yield block

        write_parquet_blocks(path, passing(), columns)


# Each analysis rank writes the CSV text of its own rows of a big table (calls.csv,
# critical_path.csv) as a hidden file beside the report (rank 0's with the header line), as it
# writes its part of the Parquet dataset; then each copies its text into the CSV file at its
# offset (``datasets.join_csv``), all at once.  Making the text is
# the costly part (a hundred bytes a call): it is shared by the ranks, and nothing is read back
# from Parquet and decoded.  The leading dot keeps the parts out of a directory listing's report
# files.
CSV_PART = ".%s.part-"


def csv_part(out_dir, name, analysis_rank, n_analysis_ranks):
    """The path of analysis rank a's CSV text of the file `name`: zero-padded so name order is rank order."""
    return os.path.join(out_dir, "%s%0*d" % (CSV_PART % name, max(4, len(str(n_analysis_ranks - 1))), analysis_rank))


def calls_csv_part(out_dir, analysis_rank, n_analysis_ranks):
    """The path of analysis rank a's CSV text of calls.csv."""
    return csv_part(out_dir, CALLS_CSV, analysis_rank, n_analysis_ranks)


def csv_parts(out_dir, names=(CALLS_CSV, cp.CSV_NAME)):
    """The CSV parts in out_dir of the files `names` (default: every file written in parts), in
    rank order per file."""
    try:
        entries = os.listdir(out_dir)
    except FileNotFoundError:
        return []
    prefixes = tuple(CSV_PART % name for name in names)
    return [os.path.join(out_dir, n) for n in sorted(entries) if n.startswith(prefixes)]


def _report_files(info, tables, linked, path, text):
    """Every report file but the analysis ranks' parts; summary.txt last: its presence means the
    report is complete."""
    files = [File(RANKS_CSV, lambda p: write_csv(p, tables.ranks, metrics.RANK_COLUMNS)),
             File(RANKS_PARQUET, lambda p: write_parquet(p, tables.ranks, metrics.RANK_COLUMNS)),
             File(FUNCTIONS_CSV, lambda p: write_csv(p, tables.functions, metrics.FUNCTION_COLUMNS)),
             File(FUNCTIONS_PARQUET, lambda p: write_parquet(p, tables.functions, metrics.FUNCTION_COLUMNS))]
    if linked is not None:
        files += _linked_files(linked, big_csv_written(tables.ranks))
        files += _traffic_files(linked.get("traffic"))
        files += _phase_files(linked.get("phases"))
    chart = svg.per_rank_from_table(tables.ranks)
    files.append(File(svg.SVG_NAME, lambda p: svg.write_rank_chart(os.path.dirname(p), chart)))
    files += _callsite_files(linked)
    path_files = [] if path is None else [cp.PARQUET_NAME] + ([cp.CSV_NAME] if path_csv_written(path) else [])
    facts = run_facts(info, tables, linked, path, sorted([n for f in files for n in (f.name,) + f.also] + path_files))
    files += [File(RUN_JSON, lambda p: _write_text(p, json.dumps(facts, indent=1) + "\n")),
              File(SUMMARY, lambda p: _write_text(p, text))]
    return files


def _callsite_files(linked):
    """callsites.csv and .parquet when the linked run has the call-site table (linked["callsites"],
    made on analysis rank 0 from every analysis rank's sums: callsites.stats.Accumulator.combined)."""
    table = linked.get("callsites") if linked is not None else None
    if table is None:
        return []
    files = [File(CALLSITES_CSV, lambda p: write_csv(p, table, schema.CALLSITE_COLUMNS)),
             File(CALLSITES_PARQUET, lambda p: write_parquet(p, table, schema.CALLSITE_COLUMNS))]
    waits = linked.get("callsite_waitstates")
    if waits is not None:
        files += [File(CALLSITE_WAITSTATES_CSV, lambda p: write_csv(p, waits, schema.CALLSITE_WAITSTATE_COLUMNS)),
                  File(CALLSITE_WAITSTATES_PARQUET,
                        lambda p: write_parquet(p, waits, schema.CALLSITE_WAITSTATE_COLUMNS))]
    return files


def _callsite_section(linked):
    """The summary's call-site lines (callsites.stats.summary_lines); none without the table."""
    table = linked.get("callsites") if linked is not None else None
    if table is None:
        return []
    from mpigraph.callsites import stats

    return stats.summary_lines(table)


def run_facts(info, tables, linked=None, path=None, files=()):
    """The facts of the run that run.json holds: a dict of JSON values (times in integer ns).

    The same numbers as summary.txt's head (run time: first MPI_Init to last MPI_Finalize), plus
    what the analysis chose (algorithm, clock method) and the report's file names (`files`);
    `path`: the critical path's Totals (None: no path)."""
    ranks = tables.ranks
    facts = linked["facts"] if linked is not None else {}
    repair = facts.get("repair")
    n = len(ranks["rank"])
    return {
        "mpigraph_version": __version__,
        "run_dir": info.run_dir,
        "job_id": info.job_id,
        "ranks": int(info.world_size),
        "finalized": int(ranks["finalized"].sum()),
        "hosts": sorted(set(ranks["host"].tolist())),
        "run_time_ns": int(ranks["program_end"].max() - ranks["program_start"].min()) if n else 0,
        "program_time_ns": int(ranks["program_time"].sum()),
        "mpi_time_ns": int(ranks["mpi_time"].sum()),
        "calls": int(ranks["calls"].sum()),
        "records": int(ranks["records"].sum()),
        "algorithm": facts.get("algorithm"),
        "clock_method": facts.get("clock_method"),
        "receive_before_send": None if repair is None else {
            "found": int(repair.found), "repaired": int(repair.repaired), "rounds": int(repair.rounds),
            "remaining": int(repair.remaining)},
        "critical_path_ns": None if path is None else path.duration,
        "critical_path_segments": None if path is None else path.segments,
        "files": sorted(set(files) | {RUN_JSON, SUMMARY}),
    }


def write_path(run_dir, path):
    """critical_path.parquet of a path table in run_dir (a file, in place of an analysis's dataset
    directory of that name), and critical_path.csv up to MAX_CSV_ROWS segments."""
    dataset = os.path.join(run_dir, cp.PARQUET_NAME)
    if os.path.isdir(dataset):
        import shutil

        shutil.rmtree(dataset)
    if path_csv_written(path):
        write_csv(os.path.join(run_dir, cp.CSV_NAME), path, cp.SEGMENT_COLUMNS)
    write_parquet(os.path.join(run_dir, cp.PARQUET_NAME), path, cp.SEGMENT_COLUMNS)


class ReportError(Exception):
    """The report files cannot be written (read-only or full file system); the message names the file."""


def write_report(out_dir, info, tables, linked=None, path=None, path_lines=(), datasets=()):
    """Write every report file into out_dir (created if needed); returns the summary text.

    `linked` (linked_tables.gather's tables, plus "facts" and "calls", the calls table's row
    blocks in order: any iterable, consumed once) adds the linked run's files and sections;
    `path` is the critical path's Totals (critical_path.reduce_totals; None when there is no
    path), which fill time_on_path; `path_lines` are its words.  The path's rows are the analysis
    ranks' (critical_path.parquet and .csv, written by them: mpigraph.report.datasets).  Raises
    ReportError naming the file that could not be written; what was written of an incomplete
    report is removed, the raw logs are never touched.  `datasets`: names of files the analysis
    ranks wrote as Parquet datasets (mpigraph.report.datasets), left out here.
    """
    tables = metrics.with_path(tables, path)
    # Only a run that did not end well can have calls in flight: its headers are read again for them.
    in_flight = None if tables.ranks["finalized"].all() else inflight.read(info.run_dir, info.world_size)
    text = summary_text(info, tables, linked, list(path_lines) + _path_csv_left_out(path), in_flight)
    files = [f for f in _report_files(info, tables, linked, path, text) if f.name not in datasets]
    if in_flight is not None and len(in_flight["table"]["rank"]):
        files.insert(-1, File(inflight.CSV_NAME,
                               lambda p: write_csv(p, in_flight["table"], schema.INFLIGHT_COLUMNS)))
    try:
        os.makedirs(out_dir, exist_ok=True)
        write_at_once(out_dir, files[:-1])
        _write_one(out_dir, files[-1])
    except OSError as e:
        _remove([os.path.join(out_dir, name) for f in files for name in (f.name,) + f.also])
        raise report_error(e, out_dir, info) from None
    return text


def report_error(error, out_dir, info):
    """The ReportError of an OSError met writing the report into out_dir."""
    return ReportError("cannot write the report: %s: %s (the raw logs in %s are intact: mpigraph analyze "
                       "%s --out <another directory>)" % (error.filename or out_dir, error.strerror or error,
                                                          raw_dir_of(info), info.run_dir))


# Threads writing report files besides the calling thread.  The time goes to pyarrow's kernels and
# encoders, which let go of the GIL, and the other analysis ranks are idle meanwhile.  On a run of
# millions of calls the calls table and the critical path's CSV and Parquet each take seconds:
# written one after the other, they would add up.
REPORT_THREADS = 2


def write_at_once(out_dir, files):
    """Write `files`: those that talk MPI on this thread, the others by REPORT_THREADS threads
    meanwhile.  Once every writer has stopped, raises the error of the first file (in the
    report's order) that failed."""
    with threads.pool(REPORT_THREADS, "mpigraph-report") as pool:
        writing = {f.name: pool.submit(_write_one, out_dir, f) for f in files if not f.talks_mpi}
        writing.update((f.name, threads.done_here(_write_one, out_dir, f)) for f in files if f.talks_mpi)
    for f in files:
        writing[f.name].result()


def _write_one(out_dir, file):
    target = os.path.join(out_dir, file.name)
    try:
        file.write(target)
    except OSError as e:
        e.filename = e.filename or target     # the file it failed on, whichever thread wrote it
        raise


def raw_dir_of(info):
    return os.path.join(info.run_dir, "raw")


def _write_text(path, text):
    with atomic_write(path) as f:
        f.write(text)


def _remove(paths):
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


def print_summary(run_dir, file=None):
    """Print run_dir/summary.txt again."""
    (file or sys.stdout).write(read_summary(run_dir))
