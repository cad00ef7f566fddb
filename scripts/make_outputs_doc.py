"""Write docs/outputs.md from mpigraph/schema.py's Column lists.

    python scripts/make_outputs_doc.py            # rewrite docs/outputs.md
    python scripts/make_outputs_doc.py --check    # exit 1 when docs/outputs.md is out of date

Every table's columns live in mpigraph.schema (name, kind, meaning); the file names come from
the report's own constants (mpigraph.report.writer, mpigraph.paths.segments), so a table
written in a new format shows up here without an edit.  What this script adds is prose: what a
table's rows are and how its files differ.  A Column list in schema.py that TABLES below does
not know stops the script: each table needs its sentence.  tests/test_docs.py runs --check.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "docs", "outputs.md")

# schema.py list -> (the file stem, what one row is, notes)
TABLES = {
    "RANK_COLUMNS": ("ranks", "one row per rank, in rank order",
                     "How bytes are counted: `bytes_sent` when a point-to-point send starts (blocking and "
                     "nonblocking sends, the send half of Sendrecv, each Start of a persistent send); "
                     "`bytes_received` when the data arrives, with the size from the status (blocking "
                     "receives, the receive half of Sendrecv, and the Wait/Test that completed a nonblocking "
                     "or persistent receive: an Irecv's bytes count under the MPI_Wait* or MPI_Test* call); "
                     "`bytes_collective` the buffer size the rank passed to collectives. `calls` counts "
                     "MPI_Init and MPI_Finalize, `mpi_time` leaves them out."),
    "FUNCTION_COLUMNS": ("functions", "one row per MPI function called, the longest `time_total` first",
                         "Bytes are counted as in the ranks table."),
    "CALL_COLUMNS": ("calls", "one row per MPI call of every rank, in (rank, call) order",
                     "Written when the run was linked (the match stage ran)."),
    "COLLECTIVE_COLUMNS": ("collectives", "one row per collective instance, by (comm, seq)",
                           "An instance is one collective call on one communicator: the calls of its "
                           "members with the same sequence number."),
    "WAITSTATE_COLUMNS": ("waitstates", "one row per (rank, MPI function, wait-state kind) that occurred",
                          "The kinds are defined in [concepts.md](concepts.md#wait-states)."),
    "UNMATCHED_COLUMNS": ("unmatched", "one row per operation without a partner (header only when none)",
                          "Sends never received, receives never matched, completions of unknown requests, "
                          "requests never completed, collectives not every member of the communicator "
                          "took part in."),
    "INFLIGHT_COLUMNS": ("inflight", "one row per call a rank was in when the run ended (written only when "
                         "a rank did not finalise)",
                         "A blocking call's start is on disk before it blocks, so a run that hung, was "
                         "killed or aborted shows where each rank was; ranks blocked on each other share a "
                         "`deadlock` number."),
    "COMM_MATRIX_COLUMNS": ("commmatrix", "one row per (sender, receiver, kind) that exchanged data, and per rank "
                            "a row with `dst` -1 for its collective bytes without pairs",
                            "Point-to-point rows are the matched messages (bytes as received); collective rows are "
                            "apportioned by rules that assume no algorithm (Bcast: root to each member the "
                            "buffer; Gather and Reduce: each member to the root; Allgather: each member to each "
                            "other; Alltoall: each member to each other its buffer / n; Allreduce, Scan, the "
                            "v-variants: no pairs), listed in "
                            "[concepts.md](concepts.md#the-communication-matrix). `commmatrix.svg` shows the bytes "
                            "as a heatmap; `mpigraph.load(DIR).comm_matrix` is this table."),
    "SIZE_COLUMNS": ("sizes", "one row per (MPI function, communicator, size bin) that occurred",
                     "Bins are powers of two: [0, 0], [1, 1], [2, 3], [4, 7], ... A point-to-point message "
                     "counts under the function that posted it on each side (MPI_Send with the bytes sent, "
                     "MPI_Recv or MPI_Irecv with the bytes its status says arrived); a collective once per "
                     "member with the bytes the member passed (a Scatter's non-roots pass 0)."),
    "CALLSITE_SIZE_COLUMNS": ("callsite_sizes", "one row per (call site, MPI function, communicator, size bin) "
                              "that occurred, by call site",
                              "The size histograms' per-call-site twin: each send, receive or collective member "
                              "counts under the call site of the call that posted it (an Isend's, not its Wait's). "
                              "Summed over the call sites, the rows are sizes.csv's."),
    "COMMUNICATOR_COLUMNS": ("communicators", "one row per communicator: world, then each one the program created",
                             "From the records of MPI_Comm_split, _dup, _create and the other creating calls. "
                             "summary.txt names communicators by `name`. MPI_COMM_SELF (named `self`) and "
                             "communicators created where the shim did not see them are not listed."),
    "PHASE_COLUMNS": ("phases", "one row per phase (written only when a rank called MPI_Pcontrol)",
                      "Each MPI_Pcontrol call starts a new phase of its rank's calls (mpiP's levels); phases "
                      "are numbered per rank and added up across ranks by number. The phases' sums equal "
                      "the run's ([concepts.md](concepts.md#phases))."),
    "PHASE_FUNCTION_COLUMNS": ("phase_functions", "one row per (phase, MPI function) called in it",
                               "Summed over phases, each function's columns equal functions.csv's."),
    "PHASE_CALLSITE_COLUMNS": ("phase_callsites", "one row per (phase, call site, MPI function) called in it "
                               "(written with phases.csv), by phase, the longest `time` first",
                               "The per-phase function table's per-call-site twin, with callsites.csv's columns: "
                               "each call counts in the phase it was made in. Summed over the phases, each call "
                               "site's count, time, wait, bytes and path_time equal callsites.csv's; `--phase` keeps "
                               "that phase's rows."),
    "CALLSITE_COLUMNS": ("callsites", "one row per call site (a place in the program and the MPI function called "
                         "there), the longest `time` first",
                         "mpiP's call-site statistics. The shim records each call's return address "
                         "(`raw/rank-<r>.sites`) and the process's load map (`raw/rank-<r>.maps`); the analysis "
                         "reads the objects' symbols and DWARF line tables (pyelftools): file and line when the "
                         "program was built with -g, the function alone without. Fortran calls through MPICH's "
                         "Fortran library are named by the program's subroutine. An mpi4py program's calls are "
                         "made by mpi4py's extension module: `object` is that module and `caller` its function "
                         "(Comm.Barrier's, say), not the Python file and line: the shim runs while mpi4py has "
                         "let go of the GIL, when no Python API may be called (docs/design.md, The report files). Each analysis rank sums the calls it owns "
                         "per (call site, function, rank); analysis rank 0 adds the sums and makes the table (COV "
                         "from the per-rank sums): the same for every number of analysis ranks. critical_path.csv "
                         "names each segment's call site, and summary.txt's diagnosis and path section name them "
                         "too (\"MPI_Allreduce at solver.c:212\")."),
    "CALLSITE_WAITSTATE_COLUMNS": ("callsite_waitstates", "one row per (call site, MPI function, wait-state kind) "
                                   "that occurred, the longest `time` first",
                                   "The wait-state table's per-call-site twin, summed over ranks: per function and "
                                   "kind its rows add up to waitstates.csv's."),
    "SEGMENT_COLUMNS": ("critical_path", "one row per segment of the critical path, in path order "
                        "(the CSV up to 1,000,000 segments)",
                        "Written when a path was computed; the CSV only when the path has at most "
                        "1,000,000 segments (a pipelined program's path has a segment per call: its CSV "
                        "would be gigabytes), and summary.txt says when it is left out. The segments cover "
                        "the run from the first "
                        "rank's start to the end, without gaps: their durations add up to the run time."),
}

KIND_TYPES = {  # schema kind -> (CSV, Parquet)
    "time": ("seconds, 9 decimals (`_s`)", "int64 ns (`_ns`), required (never null)"),
    "int": ("integer", "int64, required"),
    "float": ("decimal; empty: missing", "float64; null: missing"),
    "str": ("text", "string (dictionary); null: missing"),
    "bool": ("`true`/`false`", "bool, required"),
}

HEADER = """<!-- Made by scripts/make_outputs_doc.py from mpigraph/schema.py: edit those, then run
     python scripts/make_outputs_doc.py   (tests/test_docs.py fails when this file is stale) -->

# Output files

A run directory (`mpigraph-<date>-<id>/`, `MPIGRAPH_OUT`, or `--out`) holds:

| file | what |
| --- | --- |
| `raw/rank-<r>.log` | the shim's log of rank r: every call, enough to analyse again (format: [design.md](design.md#formats)) |
| `raw/rank-<r>.sites`, `raw/rank-<r>.maps` | rank r's call sites (return addresses) and load map, written at MPI_Finalize: the callsites table's source |
| `summary.txt` | the run in words and short tables ([README](../README.md#reading-the-summary)) |
{table_rows}{extra_rows}| `ranks.svg` | a bar per rank: compute, MPI time (execution and wait), time on the critical path |
| `commmatrix.svg` | the communication matrix as a heatmap: bytes per (sender, receiver), log shade |
| `timeline.html` | `mpigraph view`: one self-contained page, a row per rank, every call, the messages, the critical path, the named regions and Pcontrol phases as bands |
| `trace.json` | `mpigraph view --perfetto`: Chrome trace event format (Perfetto UI, chrome://tracing); the named regions and Pcontrol phases on a thread per rank named phases |
| `OUT/traces.otf2` | `mpigraph export DIR --otf2 OUT` (extra `otf2`): the run as OTF2 for Vampir, Scalasca, pipit ([concepts.md](concepts.md#otf2-export)) |

Conventions of every table:

- The same table has the same columns in CSV and Parquet. A `time` column is seconds in CSV
  (its name ends in `_s`, nine decimals: exact to the nanosecond) and integer nanoseconds in
  Parquet (`_ns`). Times are from the run's start, the earliest end of MPI_Init of any rank
  (so MPI_Init's own start is negative), on rank 0's clock after the
  [clock correction](concepts.md#clock-correction).
- Ranks are MPI_COMM_WORLD ranks. Communicator ids are mpigraph's own, the same on every
  member; 0 is MPI_COMM_WORLD.
- Parquet files are zstd-compressed; each column carries its meaning below in the field's
  metadata (`description`), and the file the mpigraph version (`mpigraph_version`).
- The metrics (execution, waits, wait states, imbalance, the critical path) are defined in
  [concepts.md](concepts.md).
{extra_conventions}
Types by format:

| kind | CSV | Parquet |
| --- | --- | --- |
{type_rows}"""


def load():
    """(schema module, {stem: [file names]}, the report writer module) of the source tree's mpigraph."""
    sys.path.insert(0, ROOT)
    from mpigraph import schema
    from mpigraph.report import writer
    from mpigraph.paths import segments
    from mpigraph.trace import inflight

    files = {}
    for module in (writer, segments, inflight):
        for value in vars(module).values():
            if isinstance(value, str) and value.endswith((".csv", ".parquet")) and "/" not in value:
                stem = value.rsplit(".", 1)[0]
                files.setdefault(stem, set()).add(value)
    return (schema, {stem: sorted(names, key=lambda n: (not n.endswith(".csv"), n)) for stem, names in files.items()},
            writer)


def column_lists(schema):
    """Every Column list of schema.py, in the order they are defined there."""
    return [name for name, value in vars(schema).items()
            if name.endswith("_COLUMNS") and isinstance(value, list)]


def _datasets():
    """The report's Parquet datasets (a directory of a part per analysis rank), by file name."""
    try:
        from mpigraph.report import datasets
    except ImportError:
        return ()
    return datasets.NAMES


def _shown(name):
    return "`%s/`" % name if name in _datasets() else "`%s`" % name


def _extras(writer):
    """(file-table rows, convention lines) of what the writer has beyond the tables: run.json,
    the row limit of the big tables' CSV files."""
    rows, conventions = "", ""
    if hasattr(writer, "RUN_JSON"):
        rows += ("| `%s` | the facts of the run, for programs (`mpigraph.load(DIR).facts`): job id, ranks, "
                 "hosts, run time, algorithm, clock method, the critical path's length, the files written |\n"
                 % writer.RUN_JSON)
    if hasattr(writer, "MAX_CSV_ROWS"):
        conventions += ("- A big table's CSV file (calls.csv, collectives.csv) is written only when the run has "
                        "at most %s calls (a CSV of 1e8 calls is gigabytes no one reads as text); summary.txt "
                        "says when it is left out, and the Parquet file has the same columns.\n"
                        % format(writer.MAX_CSV_ROWS, ","))
    if _datasets():
        conventions += ("- %s are Parquet datasets: directories of part files, `part-0000.parquet` to "
                        "`part-<K-1>.parquet`, one written by each of the K analysis ranks (the calls and wait "
                        "states of the trace ranks it owns, the K-th share of the path's segments, in order). "
                        "The parts in name order are the table in row order; pyarrow.dataset, "
                        "`pyarrow.parquet.read_table`, pandas' `read_parquet`, DuckDB "
                        "(`read_parquet('calls.parquet/*.parquet')`) and Spark read a directory as one table, "
                        "the same for every K. Analysis rank 0 writes the other files: the small tables "
                        "(CSV and a Parquet file) and summary.txt, last; calls.csv and critical_path.csv are "
                        "the analysis ranks' CSV text of the same rows, each rank's copied into the file at "
                        "its place, all at once.\n"
                        % ", ".join("`%s/`" % n for n in _datasets()))
    return rows, conventions


def render(schema, files, writer=None):
    unknown = [name for name in column_lists(schema) if name not in TABLES]
    if unknown:
        raise SystemExit("make_outputs_doc.py: schema.%s is not in TABLES: add its file stem and a "
                         "sentence on its rows" % ", schema.".join(unknown))
    table_rows, sections = "", []
    for list_name in column_lists(schema):
        stem, rows, notes = TABLES[list_name]
        names = files.get(stem, [])
        if not names:
            raise SystemExit("make_outputs_doc.py: no report file named %s.csv or %s.parquet" % (stem, stem))
        shown = ", ".join(_shown(n) for n in names)
        table_rows += "| %s | %s |\n" % (shown, rows)
        sections.append(section(schema, list_name, shown, rows, notes))
    type_rows = "".join("| %s | %s | %s |\n" % (kind, csv, pq) for kind, (csv, pq) in KIND_TYPES.items())
    extra_rows, extra_conventions = _extras(writer)
    return HEADER.format(table_rows=table_rows, extra_rows=extra_rows, extra_conventions=extra_conventions,
                         type_rows=type_rows) + "".join(sections)


def section(schema, list_name, shown, rows, notes):
    columns = getattr(schema, list_name)
    lines = ["", "## %s" % shown, "", rows[0].upper() + rows[1:] + ".%s" % (" " + notes if notes else ""), "",
             "| column | kind | meaning |", "| --- | --- | --- |"]
    for c in columns:
        name = "%s_s / %s_ns" % (c.name, c.name) if c.kind == "time" else c.name
        lines.append("| `%s` | %s | %s |" % (name, c.kind, c.help.replace("|", "\\|")))
    if list_name == "WAITSTATE_COLUMNS":
        lines += ["", "Kinds: %s." % ", ".join("`%s`" % k for k in schema.WAIT_STATES)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/outputs.md is out of date")
    args = parser.parse_args(argv)
    text = render(*load())
    current = open(OUTPUT).read() if os.path.exists(OUTPUT) else None
    if args.check:
        if current != text:
            print("docs/outputs.md is out of date: run python scripts/make_outputs_doc.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        with open(OUTPUT, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
