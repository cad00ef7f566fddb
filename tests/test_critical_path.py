"""The critical-path table shared by every path algorithm."""

import csv

import numpy as np
import pyarrow.parquet as pq
import pytest

from mpigraph.paths import segments as cp
from mpigraph.report.writer import write_path
from mpigraph.util.names import Labels


def example():
    # rank 1 computes, waits in an Allreduce released by rank 0's late arrival, computes again
    return cp.segments(rank=[1, 1, 1, 1], kind=["compute", "mpi", "message", "compute"],
                       function=["", "MPI_Allreduce", "MPI_Allreduce", ""],
                       start=[0, 100, 150, 200], end=[100, 150, 200, 500], peer=[-1, -1, 0, -1])


def test_segments_columns_and_totals():
    path = example()
    assert path["order"].tolist() == [0, 1, 2, 3]
    assert path["duration"].tolist() == [100, 50, 50, 300]
    assert cp.time_per_rank(path, 3).tolist() == [0, 500, 0]
    assert cp.time_per_function(path) == {"MPI_Allreduce": 100}
    assert cp.time_per_kind(path) == {"compute": 400, "mpi": 50, "message": 50}


def test_bad_segments_are_refused():
    with pytest.raises(ValueError, match="unknown segment kinds"):
        cp.segments([0], ["work"], [""], [0], [1])
    with pytest.raises(ValueError, match="unknown segment kinds"):
        cp.segments([0], Labels(np.array([0], np.int8), ["compute", "work"]), [""], [0], [1])


def test_a_path_as_codes_sums_and_writes_as_its_strings(tmp_path):
    """kind and function as names.Labels, as the path's makers give them: the same sums and files
    as object arrays."""
    plain = example()
    kinds, functions = np.array(cp.KINDS, object), np.array(["", "MPI_Allreduce"], object)
    coded = cp.segments(plain["rank"], Labels(np.array([cp.KIND_CODE[k] for k in plain["kind"]], np.int8), kinds),
                        Labels(np.array([1 if f else 0 for f in plain["function"]]), functions),
                        plain["start"], plain["end"], plain["peer"])
    assert cp.time_per_function(coded) == cp.time_per_function(plain)
    assert cp.time_per_kind(coded) == cp.time_per_kind(plain)
    assert cp.summary_lines(coded, 3) == cp.summary_lines(plain, 3)
    for where, table in (("a", plain), ("b", coded)):
        (tmp_path / where).mkdir()
        write_path(str(tmp_path / where), table)
    for name in (cp.CSV_NAME, cp.PARQUET_NAME):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    with pytest.raises(ValueError, match="segment 1"):
        cp.segments([0, 0], ["compute", "mpi"], ["", "MPI_Send"], [0, 5], [5, 4])


def test_written_files_agree(tmp_path):
    path = example()
    write_path(str(tmp_path), path)
    rows = list(csv.DictReader(open(tmp_path / cp.CSV_NAME)))
    assert [r["kind"] for r in rows] == ["compute", "mpi", "message", "compute"]
    assert rows[2]["peer"] == "0" and rows[3]["duration_s"] == "0.000000300"
    table = pq.read_table(tmp_path / cp.PARQUET_NAME)
    assert table.column("duration_ns").to_pylist() == [100, 50, 50, 300]


def test_summary_names_the_ranks_and_functions():
    text = "\n".join(cp.summary_lines(example(), 3))
    assert "compute 80.0%" in text and "rank 1 100.0%" in text and "MPI_Allreduce 20.0%" in text
