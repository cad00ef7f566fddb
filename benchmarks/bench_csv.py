"""The report's CSV text of a big table: seconds, CPU and nanoseconds per row, each way of making it.

    python benchmarks/bench_csv.py REPORT_DIR [--table calls] [--rounds 3]

Reads a table of an analysed run (calls.parquet, critical_path.parquet, waitstates.parquet: the
datasets mpigraph writes, whatever the K) into the columns the report holds (int64 columns,
names.Labels for the names), then writes it as CSV to a temporary file with report.write_csv,
three ways: the C kernel (report.csv_kernel), pyarrow's string kernels (MPIGRAPH_CSV_KERNEL=off,
what runs without a C compiler), and the C kernel on one thread (CSV_THREADS = 1).  Printed: the
least wall seconds and CPU seconds (all threads) of the rounds, ns of CPU per row and MB of text,
as a markdown table; the ways' files are checked to be the same bytes.
"""

import filecmp
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import describe_machine  # noqa: E402
from bench_parquet import report_table  # noqa: E402


def report_columns(table, columns):
    """The table's columns as the report holds them: numpy arrays, names.Labels of str columns."""
    import numpy as np
    import pyarrow as pa

    from mpigraph.report import writer
    from mpigraph.util.names import Labels

    held = {}
    for c in columns:
        column = table.column(writer.parquet_name(c)).combine_chunks()
        if c.kind == "str":
            encoded = column.dictionary_encode()
            held[c.name] = Labels(np.asarray(encoded.indices, np.int64), encoded.dictionary.to_pylist())
        elif c.kind == "bool":
            held[c.name] = np.asarray(column.to_numpy(zero_copy_only=False), bool)
        else:
            held[c.name] = np.asarray(column.cast(pa.int64()))
    return held


def least(write, rounds):
    """(least wall seconds, least CPU seconds of the process) of `rounds` calls of write()."""
    wall = cpu = float("inf")
    for _ in range(rounds):
        started, started_cpu = time.perf_counter(), time.process_time()
        write()
        wall, cpu = min(wall, time.perf_counter() - started), min(cpu, time.process_time() - started_cpu)
    return wall, cpu


def main():
    args, columns, table = report_table(__doc__)

    from mpigraph.report import writer

    table = report_columns(table, columns)
    rows = len(table[columns[0].name])
    print(describe_machine())
    print("%s.csv of %s: %d rows, %d columns; least of %d rounds\n" % (args.table, args.report, rows, len(columns),
                                                                      args.rounds))
    print("| made by | wall s | CPU s | CPU ns per row | MB |\n| --- | --- | --- | --- | --- |")
    ways = (("the C kernel, %d threads" % writer.CSV_THREADS, "on", writer.CSV_THREADS),
            ("pyarrow's string kernels, %d threads" % writer.CSV_THREADS, "off", writer.CSV_THREADS),
            ("the C kernel, 1 thread", "on", 1))
    with tempfile.TemporaryDirectory(prefix="mpigraph-bench-csv-") as tmp:
        paths = []
        for i, (name, kernel, n_threads) in enumerate(ways):
            path = os.path.join(tmp, "%d.csv" % i)
            os.environ["MPIGRAPH_CSV_KERNEL"], writer.CSV_THREADS = kernel, n_threads
            wall, cpu = least(lambda: writer.write_csv(path, table, columns), args.rounds)
            print("| %s | %.3f | %.3f | %.0f | %.1f |" % (name, wall, cpu, cpu / max(rows, 1) * 1e9,
                                                          os.path.getsize(path) / 1e6), flush=True)
            paths.append(path)
        same = all(filecmp.cmp(paths[0], p, shallow=False) for p in paths[1:])
        print("\nthe same bytes every way: %s" % ("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
