"""The report's Parquet encoding of a big table: seconds per table, per column and per row.

    python benchmarks/bench_parquet.py REPORT_DIR [--table calls] [--rounds 3]

Reads a table of an analysed run (calls.parquet, critical_path.parquet, waitstates.parquet: the
datasets mpigraph writes, whatever the K) and writes it again to a temporary file the way the
report writes it (report.writer's options: zstd level 1, DELTA_BINARY_PACKED integers, dictionary
strings, min/max statistics of a few columns, only float and str columns nullable), then with one
option changed at a time, and each column alone with the report's options.  Printed: the least wall seconds of the rounds, the file's
size and nanoseconds per row, as markdown tables.

What it answers: how much of the report stage is pyarrow's encoder, which the analysis cannot
make faster, against a budget per record (5 M records/s on one analysis rank is 200 ns a record
for every stage together).
"""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402


def least_seconds(write, rounds):
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        write()
        best = min(best, time.perf_counter() - started)
    return best


def variants(options, table):
    """(name, writer options, table): the report's, then one change each."""
    plain = {k: "PLAIN" for k in options["column_encoding"]}
    yield "the report's (zstd 1, delta integers)", options, table
    yield "no compression", dict(options, compression="none", compression_level=None), table
    yield "lz4", dict(options, compression="lz4", compression_level=None), table
    yield "byte stream split integers", dict(options, column_encoding={k: "BYTE_STREAM_SPLIT" for k in plain}), table
    yield "plain integers", dict(options, column_encoding=plain), table
    yield "every column nullable", options, with_nullable(table, lambda field: True)


def with_nullable(table, nullable):
    """`table` with each field nullable where nullable(field)."""
    import pyarrow as pa

    return table.cast(pa.schema([f.with_nullable(nullable(f)) for f in table.schema], metadata=table.schema.metadata))


def report_table(doc):
    """(arguments, the table's columns (schema), the table as pyarrow read it) of a benchmark of one
    big table of a report: REPORT_DIR, --table, --rounds."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("report", help="an analysed run's directory (its report files)")
    parser.add_argument("--table", default="calls", choices=["calls", "critical_path", "waitstates"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from mpigraph import schema
    from mpigraph.report import datasets

    columns = {"calls": schema.CALL_COLUMNS, "critical_path": schema.SEGMENT_COLUMNS,
               "waitstates": schema.WAITSTATE_COLUMNS}[args.table]
    return args, columns, datasets.read(os.path.join(args.report, args.table + ".parquet"))


def main():
    args, columns, table = report_table(__doc__)

    import pyarrow.parquet as pq

    from mpigraph.report import writer

    options = writer._parquet_options(columns)
    # As the report writes it, whichever mpigraph wrote the file.
    kinds = {writer.parquet_name(c): c.kind for c in columns}
    table = with_nullable(table, lambda field: kinds[field.name] in writer.NULLABLE_KINDS)
    rows = max(table.num_rows, 1)
    print(describe_machine())
    print("%s.parquet of %s: %d rows, %d columns, %.0f MB in memory; least of %d rounds"
          % (args.table, args.report, table.num_rows, table.num_columns, table.nbytes / 1e6, args.rounds))
    with tempfile.TemporaryDirectory(prefix="mpigraph-bench-parquet-") as tmp:
        path = os.path.join(tmp, "table.parquet")
        print("\n| writer options | seconds | ns per row | file MB |\n| --- | --- | --- | --- |")
        for name, opts, written in variants(options, table):
            opts = {k: v for k, v in opts.items() if v is not None}
            seconds = least_seconds(lambda: pq.write_table(written, path, **opts), args.rounds)
            print("| %s | %.3f | %.0f | %.1f |" % (name, seconds, seconds / rows * 1e9, os.path.getsize(path) / 1e6))
        print("\n| column | type | encoding | seconds | ns per row |\n| --- | --- | --- | --- | --- |")
        for name in table.schema.names:
            alone = {"compression": options["compression"], "compression_level": options["compression_level"],
                     "use_dictionary": [n for n in options["use_dictionary"] if n == name],
                     "column_encoding": {k: v for k, v in options["column_encoding"].items() if k == name},
                     "write_statistics": [n for n in options["write_statistics"] if n == name]}
            encoding = alone["column_encoding"].get(name, "dictionary" if alone["use_dictionary"] else "plain")
            one = table.select([name])
            seconds = least_seconds(lambda: pq.write_table(one, path, **alone), args.rounds)
            print("| %s | %s | %s | %.4f | %.1f |" % (name, table.schema.field(name).type, encoding, seconds,
                                                      seconds / rows * 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main())
