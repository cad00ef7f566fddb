"""report.write_parquet_blocks: a row group per block, in order, written by a thread while the next
block is pulled; an error on either side reaches the caller and leaves no thread behind."""

import os
import subprocess
import sys
import threading

import numpy as np
import pyarrow.parquet as pq
import pytest

from mpigraph.report import writer as report
from mpigraph.schema import Column

COLUMNS = [Column("t", "time", ""), Column("n", "int", ""), Column("name", "str", "")]


def blocks(n_blocks, rows, seed=0):
    rng = np.random.default_rng(seed)
    for b in range(n_blocks):
        yield {"t": rng.integers(0, 2**40, rows), "n": np.full(rows, b, np.int64),
               "name": np.array(["MPI_Send", "MPI_Recv"], dtype=object)[rng.integers(0, 2, rows)]}


def test_blocks_are_row_groups_in_order(tmp_path):
    report.write_parquet_blocks(tmp_path / "t.parquet", blocks(7, 1000), COLUMNS)
    expected = list(blocks(7, 1000))
    f = pq.ParquetFile(tmp_path / "t.parquet")
    assert f.metadata.num_row_groups == 7
    for b, block in enumerate(expected):
        group = f.read_row_group(b)
        assert group.column("n").to_pylist() == [b] * 1000
        assert group.column("t_ns").to_numpy().tolist() == block["t"].tolist()
        assert group.column("name").to_pylist() == block["name"].tolist()


@pytest.mark.parametrize("n_rows", [0, 1, 999, 1000, 2500])
def test_a_table_written_a_row_group_at_a_time_is_the_file_written_whole(monkeypatch, tmp_path, n_rows):
    """write_parquet makes the row groups' Arrow arrays one group at a time (a str column given as
    names.Labels too), and the file is the one pyarrow writes from the whole table."""
    from mpigraph.util.names import Labels

    rng = np.random.default_rng(n_rows)
    table = {"t": rng.integers(0, 2**40, n_rows), "n": np.arange(n_rows),
             "name": Labels(rng.integers(0, 2, n_rows).astype(np.int8), ["MPI_Send", "MPI_Recv"])}
    monkeypatch.setattr(report, "PARQUET_BLOCK_ROWS", 1000)
    report.write_parquet(tmp_path / "groups.parquet", table, COLUMNS)
    pq.write_table(report.arrow_table(table, COLUMNS), tmp_path / "whole.parquet", row_group_size=1000,
                   **report._parquet_options(COLUMNS))
    assert (tmp_path / "groups.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert pq.ParquetFile(tmp_path / "groups.parquet").metadata.num_row_groups == max(1, -(-n_rows // 1000))


def test_only_fractions_and_names_may_be_missing(tmp_path):
    """Integer, time and bool columns are required in the file (no definition level per value to
    encode); a float column's NaN and a str column's None read back as nulls, and a missing value
    in a required column stops the writer with an error naming it."""
    columns = COLUMNS + [Column("share", "float", ""), Column("done", "bool", "")]
    table = {"t": np.array([5, 7]), "n": np.array([1, 2]), "name": np.array(["MPI_Send", None], dtype=object),
             "share": np.array([0.5, np.nan]), "done": np.array([True, False])}
    report.write_parquet(tmp_path / "t.parquet", table, columns)
    schema = pq.ParquetFile(tmp_path / "t.parquet").schema
    levels = {schema.column(i).name: schema.column(i).max_definition_level for i in range(len(schema))}
    assert levels == {"t_ns": 0, "n": 0, "name": 1, "share": 1, "done": 0}
    read = pq.read_table(tmp_path / "t.parquet")
    assert read.column("name").to_pylist() == ["MPI_Send", None]
    assert read.column("share").to_pylist() == [0.5, None]
    assert read.column("t_ns").to_pylist() == [5, 7] and read.column("done").to_pylist() == [True, False]
    with pytest.raises(Exception, match="'n'"):
        report.write_parquet(tmp_path / "u.parquet", dict(table, n=np.array([1, None], dtype=object)), columns)


def test_no_blocks_is_the_schema_alone(tmp_path):
    report.write_parquet_blocks(tmp_path / "t.parquet", iter(()), COLUMNS)
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.num_rows == 0 and table.column_names == ["t_ns", "n", "name"]


def failing_after(n_blocks):
    yield from blocks(n_blocks, 100)
    raise RuntimeError("the pull failed")


@pytest.mark.parametrize("n_blocks", [0, 1, 3])
def test_an_error_pulling_blocks_reaches_the_caller(tmp_path, n_blocks):
    before = threading.active_count()
    with pytest.raises(RuntimeError, match="the pull failed"):
        report.write_parquet_blocks(tmp_path / "t.parquet", failing_after(n_blocks), COLUMNS)
    assert threading.active_count() == before


# Writes a calls-like table of 5 blocks where the file may not grow past `room` bytes (RLIMIT_FSIZE,
# SIGXFSZ ignored: a write past it fails with EFBIG, as a full disk fails with ENOSPC), in a process
# of its own so the limit binds no other file; prints the blocks pulled and the error.
FILE_SIZE_LIMIT = """
import resource, signal, sys
sys.path.insert(0, {tests!r})
from test_report_parquet import COLUMNS, blocks, report
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
pulled = []
def counted():
    for block in blocks(5, 20_000):
        pulled.append(1)
        yield block
resource.setrlimit(resource.RLIMIT_FSIZE, ({room}, {room}))
try:
    report.write_parquet_blocks({path!r}, counted(), COLUMNS)
except OSError as error:
    print(len(pulled), error)
"""


def test_an_error_writing_a_block_reaches_the_caller(tmp_path):
    """The file cannot grow past the third block's row group: the writer thread's error is raised
    to the caller, which stops pulling blocks."""
    report.write_parquet_blocks(tmp_path / "whole.parquet", blocks(5, 20_000), COLUMNS)
    room = pq.ParquetFile(tmp_path / "whole.parquet").metadata.row_group(2).column(0).data_page_offset
    script = FILE_SIZE_LIMIT.format(tests=os.path.dirname(__file__), room=room, path=str(tmp_path / "t.parquet"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    pulled, _, error = result.stdout.partition(" ")
    assert "File too large" in error
    assert int(pulled) <= 4, "it stops pulling at the block after the one that failed"
