"""report.write_csv: the text Python's csv module writes, made a block at a time by the C kernel
(report.csv_kernel: int, time, bool and names.Labels columns), else by pyarrow's kernels, else by
Python's formatting for a block of at most PYTHON_CSV_ROWS rows: the same text."""

import csv
import os

import numpy as np
from hypothesis import given, settings, strategies as st

from mpigraph.report import csv_kernel, writer as report
from mpigraph.util.names import Labels
from mpigraph.schema import Column

COLUMNS = [Column("t", "time", ""), Column("n", "int", ""), Column("x", "float", ""), Column("ok", "bool", ""),
           Column("name", "str", ""), Column("label", "str", "")]
NAMES = np.array(["MPI_Send", "", 'say "hi"', "a,b", "line\nbreak", "MPI_Recv"], dtype=object)
# The columns the C kernel takes (a float column or a str column of objects leaves a block to the others).
KERNEL_COLUMNS = [c for c in COLUMNS if c.name in ("t", "n", "ok", "label")]


def python_csv(path, table, columns):
    """The CSV the csv module writes: the format write_csv keeps."""
    def cells(c, values):
        if c.kind == "time":
            return ["%.9f" % (v / 1e9) for v in values.tolist()]
        if c.kind == "float":
            return ["" if np.isnan(v) else "%.6f" % v for v in values.tolist()]
        if c.kind == "bool":
            return ["true" if v else "false" for v in values.tolist()]
        return [str(v) for v in values.tolist()]

    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow([report.csv_name(c) for c in columns])
        writer.writerows(zip(*[cells(c, np.asarray(table[c.name])) for c in columns]))


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), block=st.sampled_from([1, 3, 1 << 20]),
       python_rows=st.sampled_from([0, 2, 1 << 12]), columns=st.sampled_from([COLUMNS, KERNEL_COLUMNS]),
       c_kernel=st.booleans())
def test_write_csv_writes_what_the_csv_module_writes(tmp_path_factory, seed, n, block, python_rows, columns,
                                                     c_kernel):
    """Blocks of 1, 3 or all rows, made by the C kernel (c_kernel, and only the columns it takes), by
    the string kernels (python_rows 0), by Python's formatting (4096), or some each way (2: blocks
    of 1 row by Python, of 3 by the string kernels)."""
    rng = np.random.default_rng(seed)
    tmp = tmp_path_factory.mktemp("csv")
    codes = rng.integers(0, len(NAMES), n)
    # Times up to 10**15 ns (11 days; the csv module's float is exact there), negative ones too.
    scale = 10 ** rng.integers(0, 16, n)
    table = {"t": rng.integers(-scale, scale, dtype=np.int64), "n": rng.integers(-2**62, 2**62, n),
             "x": np.where(rng.random(n) < 0.2, np.nan, rng.normal(0, 1e3, n)), "ok": rng.random(n) < 0.5,
             "name": NAMES[codes], "label": Labels(codes, NAMES)}
    original = report.CSV_BLOCK_ROWS, report.PYTHON_CSV_ROWS, os.environ.get("MPIGRAPH_CSV_KERNEL")
    report.CSV_BLOCK_ROWS, report.PYTHON_CSV_ROWS = block, python_rows
    os.environ["MPIGRAPH_CSV_KERNEL"] = "on" if c_kernel else "off"
    try:
        report.write_csv(tmp / "fast.csv", table, columns)
    finally:
        report.CSV_BLOCK_ROWS, report.PYTHON_CSV_ROWS, kernel_setting = original
        os.environ.pop("MPIGRAPH_CSV_KERNEL")
        if kernel_setting is not None:
            os.environ["MPIGRAPH_CSV_KERNEL"] = kernel_setting
    python_csv(tmp / "python.csv", table, columns)
    assert (tmp / "fast.csv").read_bytes() == (tmp / "python.csv").read_bytes()
    with open(tmp / "fast.csv", newline="") as f:
        assert len(list(csv.reader(f))) == n + 1


def test_python_fields_of_int64s_ends_and_awkward_names():
    """The Python way's text of what the random table above rarely draws: int64's ends as times
    and ints, names with quotes, commas and line ends, a missing name (None), as the kernels make it."""
    ns = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, np.iinfo(np.int64).min + 1, -1, 0], np.int64)
    names = np.array(['a "b"', "c,d", "e\r\nf", None, ""], dtype=object)
    for column, values in ((Column("t", "time", ""), ns), (Column("n", "int", ""), ns),
                           (Column("s", "str", ""), names)):
        assert report._python_fields(column, values) == report._csv_text(column, values, slice(None)).to_pylist()
    assert report._python_fields(Column("s", "str", ""), names)[:3] == ['"a ""b"""', '"c,d"', '"e\r\nf"']


def test_the_c_kernel_runs_and_writes_int64s_ends_and_awkward_names_as_the_others():
    """The C kernel compiles here (the random test above then checks its text), and writes what
    the random table rarely draws as Python's formatting does: int64's ends and the digits'
    counts' edges (10**k - 1, 10**k, 2**63 - 1) as times and ints, quoted names, a missing one."""
    edges = [v for k in range(19) for v in (10**k - 1, 10**k, -10**k)] + [2**63 - 1, -2**63, -2**63 + 1]
    ns = np.array(edges, np.int64)
    names = np.array(['a "b"', "c,d", "e\r\nf", None, "", "MPI_Send"], dtype=object)
    table = {"t": ns, "n": ns, "ok": np.arange(len(ns)) % 3 == 0, "label": Labels(np.arange(len(ns)) % len(names), names)}
    text = report._kernel_lines(table, KERNEL_COLUMNS, slice(0, len(ns)))
    assert text is not None, "the CSV kernel did not compile: is there a C compiler (cc)?"
    assert bytes(text) == report._python_lines(table, KERNEL_COLUMNS, slice(0, len(ns)))
    assert csv_kernel.lines([("str", np.array([0, 2]), [b"x", b"y"])]) is None      # a code that is no name's
