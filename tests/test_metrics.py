"""The profile tables (mpigraph.metrics.profile) and the report files (mpigraph.report.writer) of a hand-built run."""

import csv
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
from mpi4py import MPI

from mpigraph import analysis, config
from mpigraph.clock import models as clock
from mpigraph.metrics import profile as metrics
from mpigraph.comm import parallel
from mpigraph.trace import record
from mpigraph.report import writer as report
from mpigraph.trace import logs as trace
from tracebuild import part, rec, write_rank

QUIET = config.Config(quiet=True)


def rank0_rows():
    """Rank 0, finalised: Isend + Wait, a persistent send started once, Allreduce, Comm_dup."""
    wait = rec("MPI_Wait", 2000, 2600)
    start = rec("MPI_Start", 1400, 1450)
    dup = rec("MPI_Comm_dup", 4100, 4200, seq=2)
    return [
        rec("MPI_Init", 0, 100),
        rec("MPI_Isend", 1000, 1100, record.SEND, bytes=800, peer=1, request=1),        # sent: 800
        rec("MPI_Send_init", 1200, 1300, record.SEND | record.PERSISTENT, bytes=64, request=2),  # not sent yet
        start, part(start, record.SEND | record.PERSISTENT, bytes=64, request=2),           # sent: 64
        wait, part(wait, record.SEND, bytes=800, request=1),                               # completion: not again
        rec("MPI_Allreduce", 3000, 4000, bytes=8, seq=1),                                   # collective: 8
        dup, part(dup, comm=7, tag=0, bytes=2),                                             # new comm: no data
        rec("MPI_Finalize", 5000, 5000),
    ]


def rank1_rows():
    """Rank 1, killed after its Allreduce: Irecv + Waitall, Recv, Sendrecv."""
    waitall = rec("MPI_Waitall", 2000, 2500)
    sendrecv = rec("MPI_Sendrecv", 2600, 2700, record.SEND, bytes=16, peer=0)
    return [
        rec("MPI_Init", 50, 250),
        rec("MPI_Irecv", 1000, 1010, record.RECV, bytes=1024, peer=0, request=1),   # posted size: not received
        rec("MPI_Recv", 1100, 1900, record.RECV, bytes=64, peer=0),                 # received: 64
        waitall, part(waitall, record.RECV, bytes=800, peer=0, request=1),          # received: 800
        sendrecv, part(sendrecv, record.RECV, bytes=32, peer=0),                    # sent 16, received 32
        rec("MPI_Allreduce", 2900, 4000, bytes=8, seq=1),
    ]


def write_run(run_dir, tsc_rank1=False):
    write_rank(run_dir, 0, 2, rank0_rows(), host="alpha")
    rows = rank1_rows()
    fields = dict(host="beta", finalized=False)
    if tsc_rank1:
        # The same times as ticks of a 2-ticks-per-ns clock that read 7e9 at ns 1e6.
        for row in rows:
            row["t_start"] = 7_000_000_000 + 2 * (row["t_start"] - 1_000_000)
            row["t_end"] = 7_000_000_000 + 2 * (row["t_end"] - 1_000_000)
        fields.update(clock_source=record.CLOCK_TSC,
                      calib=[(record.CALIB_INIT_A, 7_000_000_000, 1_000_000),
                             (record.CALIB_LAST, 9_000_000_000, 1_001_000_000)])
    write_rank(run_dir, 1, 2, rows, **fields)


def tables_of(run_dir):
    run = trace.open_run(run_dir)
    times = {r: (clock.to_ns(log, log.records["t_start"]), clock.to_ns(log, log.records["t_end"]))
             for r, log in run.logs.items()}
    return metrics.gather_tables(MPI.COMM_WORLD, metrics.local_tables(run.logs, times))


EXPECTED_RANKS = {
    "rank": [0, 1], "host": ["alpha", "beta"], "pid": [1000, 1001],
    # The run starts at rank 0's Init end (100); rank 1's Init ends at 250.
    "program_start": [0, 150],
    # Rank 0 ends at its Finalize start (5000); rank 1, never finalised, at its last record's end (4000).
    "program_end": [4900, 3900], "program_time": [4900, 3750],
    "mpi_time": [100 + 100 + 50 + 600 + 1000 + 100, 10 + 800 + 500 + 100 + 1100],
    "calls": [8, 6], "records": [11, 8],
    "bytes_sent": [864, 16], "bytes_received": [0, 896], "bytes_collective": [8, 8],
    "finalized": [True, False], "recording_dropped": [False, False], "log_closed": [True, False],
    # Rank 0 starts its persistent send (request 2) and never waits for it.
    "incomplete_requests": [1, 0],
}

# (function, calls, ranks, total, min, max, sent, received, collective), by total time, ties by id.
EXPECTED_FUNCTIONS = [
    ("MPI_Allreduce", 2, 2, 2100, 1000, 1100, 0, 0, 16),
    ("MPI_Recv", 1, 1, 800, 800, 800, 0, 64, 0),
    ("MPI_Wait", 1, 1, 600, 600, 600, 0, 0, 0),
    ("MPI_Waitall", 1, 1, 500, 500, 500, 0, 800, 0),
    ("MPI_Init", 2, 2, 300, 100, 200, 0, 0, 0),
    ("MPI_Sendrecv", 1, 1, 100, 100, 100, 16, 32, 0),
    ("MPI_Isend", 1, 1, 100, 100, 100, 800, 0, 0),
    ("MPI_Send_init", 1, 1, 100, 100, 100, 0, 0, 0),
    ("MPI_Comm_dup", 1, 1, 100, 100, 100, 0, 0, 0),
    ("MPI_Start", 1, 1, 50, 50, 50, 64, 0, 0),
    ("MPI_Irecv", 1, 1, 10, 10, 10, 0, 0, 0),
    ("MPI_Finalize", 1, 1, 0, 0, 0, 0, 0, 0),
]


def check_rank_table(ranks):
    assert list(ranks) == [c.name for c in metrics.RANK_COLUMNS]
    for name, expected in EXPECTED_RANKS.items():
        assert ranks[name].tolist() == expected, name
    assert ranks["mpi_fraction"].tolist() == pytest.approx([1950 / 4900, 2510 / 3750])


def check_function_table(functions):
    assert list(functions) == [c.name for c in metrics.FUNCTION_COLUMNS]
    got = list(zip(*(functions[n].tolist() for n in ("function", "calls", "ranks", "time_total", "time_min",
                                                      "time_max", "bytes_sent", "bytes_received",
                                                      "bytes_collective"))))
    assert got == EXPECTED_FUNCTIONS
    assert functions["time_mean"].tolist() == [1050, 800, 600, 500, 150, 100, 100, 100, 100, 50, 10, 0]
    assert functions["kind"][0] == "n_to_n" and functions["function_id"][0] == 53


def test_tables(tmp_path):
    write_run(tmp_path)
    tables = tables_of(tmp_path)
    check_rank_table(tables.ranks)
    check_function_table(tables.functions)


def test_tables_with_a_tsc_rank(tmp_path):
    # The clock stage must turn rank 1's ticks into the same ns as above.
    write_run(tmp_path, tsc_rank1=True)
    tables = tables_of(tmp_path)
    check_rank_table(tables.ranks)
    check_function_table(tables.functions)


def test_calls_total_matches_call_records(tmp_path):
    write_run(tmp_path)
    tables = tables_of(tmp_path)
    assert tables.functions["calls"].sum() == tables.ranks["calls"].sum() == 14
    assert tables.functions["bytes_received"].sum() == tables.ranks["bytes_received"].sum()


def test_rank_without_records(tmp_path):
    write_rank(tmp_path, 0, 2, rank0_rows())
    write_rank(tmp_path, 1, 2, [], finalized=False)
    ranks = tables_of(tmp_path).ranks
    assert ranks["program_time"].tolist() == [4900, 0]
    assert ranks["program_start"].tolist() == [0, 0]     # the empty log does not move the run's start
    assert np.isnan(ranks["mpi_fraction"][1]) and ranks["calls"].tolist() == [8, 0]


def test_partials_of_split_ownership_combine_to_the_whole(tmp_path):
    # Analysis ranks owning {0} and {1} separately must add up to one owning both.
    write_run(tmp_path)
    run = trace.open_run(tmp_path)
    times = {r: (clock.to_ns(log, log.records["t_start"]), clock.to_ns(log, log.records["t_end"]))
             for r, log in run.logs.items()}
    rows0, partial0 = metrics.local_tables({0: run.logs[0]}, times)
    rows1, partial1 = metrics.local_tables({1: run.logs[1]}, times)
    _, none = metrics.local_tables({}, times)
    assert none is None
    combined = metrics.function_table(metrics.combine_partials([partial1, none, partial0]))
    check_function_table(combined)
    check_rank_table(metrics.rank_table(rows1 + rows0))


def test_times_sum_exactly_beyond_float_precision(tmp_path):
    big = 2**53 + 1           # not a float64: a float accumulator would lose the 1
    write_rank(tmp_path, 0, 1, [rec("MPI_Init", 0, 1), rec("MPI_Barrier", 10, 10 + big),
                                rec("MPI_Barrier", 20 + big, 21 + big), rec("MPI_Finalize", 30 + big, 30 + big)])
    tables = tables_of(tmp_path)
    barrier = list(tables.functions["function"]).index("MPI_Barrier")
    assert tables.functions["time_total"][barrier] == big + 1
    assert tables.ranks["mpi_time"].tolist() == [big + 1]


# ---- the report files ----------------------------------------------------------------------


@pytest.fixture
def analysed(tmp_path):
    write_run(tmp_path)
    text = analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET)
    return tmp_path, text


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_ranks_csv_in_seconds(analysed):
    run_dir, _ = analysed
    rows = read_csv(run_dir / "ranks.csv")
    assert list(rows[0]) == [report.csv_name(c) for c in metrics.RANK_COLUMNS]
    assert rows[0]["program_time_s"] == "0.000004900" and rows[1]["program_start_s"] == "0.000000150"
    assert rows[1]["mpi_time_s"] == "0.000002510"
    assert [r["finalized"] for r in rows] == ["true", "false"]
    assert [r["host"] for r in rows] == ["alpha", "beta"]
    assert [r["bytes_received"] for r in rows] == ["0", "896"]
    assert float(rows[0]["mpi_fraction"]) == pytest.approx(1950 / 4900, abs=1e-6)


def test_ranks_parquet_in_ns(analysed):
    run_dir, _ = analysed
    table = pq.read_table(run_dir / "ranks.parquet")
    assert table.column_names == [report.parquet_name(c) for c in metrics.RANK_COLUMNS]
    assert str(table.schema.field("program_time_ns").type) == "int64"
    data = table.to_pydict()
    for name, expected in EXPECTED_RANKS.items():
        column = name + "_ns" if name + "_ns" in data else name
        assert data[column] == expected, name
    assert table.schema.field("mpi_time_ns").metadata[b"description"].startswith(b"summed duration")


def test_functions_csv(analysed):
    run_dir, _ = analysed
    rows = read_csv(run_dir / "functions.csv")
    assert [r["function"] for r in rows] == [f[0] for f in EXPECTED_FUNCTIONS]
    allreduce = rows[0]
    assert (allreduce["calls"], allreduce["ranks"], allreduce["time_total_s"], allreduce["time_mean_s"],
            allreduce["time_max_s"], allreduce["bytes_collective"]) == ("2", "2", "0.000002100", "0.000001050",
                                                                        "0.000001100", "16")


def test_summary(analysed):
    run_dir, text = analysed
    assert (run_dir / "summary.txt").read_text() == text
    lines = text.splitlines()
    assert "run directory  %s" % run_dir in lines
    # The directory is not named mpigraph-job-1: the summary says why the id is not its suffix.
    assert "job id         job-1 (not the run directory's suffix: its name was given, MPIGRAPH_OUT or --out)" in lines
    assert "ranks          2 (1 finalized)" in lines
    assert "hosts          2 (alpha, beta)" in lines
    assert ("run time       0.000005 s (time 0 = end of the first MPI_Init, to the start of the last MPI_Finalize "
            "or the last record)") in lines
    assert any(line.startswith("warning: rank 1 did not reach MPI_Finalize") for line in lines)
    top = lines[lines.index(next(l for l in lines if l.startswith("Top MPI functions"))) + 2]
    assert top.split()[:4] == ["MPI_Allreduce", "2", "0.000002", "47.1%"]   # 2100 of 4460 ns of MPI time
    first = lines.index(next(l for l in lines if l.startswith("Top MPI functions"))) + 2
    last = lines.index("", first)    # the next section starts after a blank line
    assert [l.split()[0] for l in lines[first:last]] == [f[0] for f in EXPECTED_FUNCTIONS if f[0] not in
                                                     ("MPI_Init", "MPI_Finalize")]
    rank_lines = [l for l in lines if l.split()[:2] in (["0", "alpha"], ["1", "beta"])]
    assert [l.split()[-1] for l in rank_lines] == ["yes", "NO"]


def test_print_summary(analysed, capsys):
    run_dir, text = analysed
    report.print_summary(str(run_dir))
    assert capsys.readouterr().out == text


def test_schemas_are_documented():
    for column in metrics.RANK_COLUMNS + metrics.FUNCTION_COLUMNS:
        name = column.name + "_s" if column.kind == "time" else column.name
        assert name in report.__doc__, name


def test_analyze_returns_the_summary_and_prints_nothing(tmp_path, capsys):
    # The pipeline returns the text; the command (mpigraph analyze, the shim) prints it.
    write_run(tmp_path)
    text = analysis.analyze(str(tmp_path), MPI.COMM_WORLD, config.Config())
    assert capsys.readouterr().out == ""
    assert text == (tmp_path / "summary.txt").read_text()


def test_analyze_progress_when_verbose(tmp_path, capsys):
    write_run(tmp_path)
    analysis.analyze(str(tmp_path), MPI.COMM_WORLD, config.Config(verbose=True))
    err = capsys.readouterr().err
    stages = [line.split()[1] for line in err.splitlines()]
    assert stages == ["trace", "clock", "match", "metrics", "traffic", "path", "report"]
    assert "2 ranks, 19 records" in err
    # Each line carries the peak RSS so far: positive, and a peak never falls.
    peaks = [float(line.split("peak RSS")[1].split()[0]) for line in err.splitlines()]
    assert peaks[0] > 0 and peaks == sorted(peaks)


def test_analyze_bad_log_raises_trace_error(tmp_path):
    write_run(tmp_path)
    with open(tmp_path / "raw" / "rank-1.log", "r+b") as f:
        f.truncate(record.HEADER_SIZE + 3 * record.RECORD_SIZE)
    with pytest.raises(trace.TraceError, match="rank-1.log: truncated"):
        analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET)
    assert not os.path.exists(tmp_path / "summary.txt")


def test_in_job_needs_one_analysis_rank_per_trace_rank(tmp_path):
    write_run(tmp_path)
    with pytest.raises(trace.TraceError, match="the run has 2 ranks but the job analysing it has 1"):
        analysis.analyze(str(tmp_path), MPI.COMM_WORLD, QUIET, in_job=True)


def test_collectively_reraises_own_error():
    def fail():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        parallel.collectively(MPI.COMM_WORLD, fail)
    assert parallel.collectively(MPI.COMM_WORLD, lambda x: x + 1, 41) == 42


def test_incomplete_requests_counts_starts_without_completion(tmp_path):
    """Per request id: starts (nonblocking calls, Start parts) minus completions; a freed request is done."""
    start, wait, startall = rec("MPI_Start", 30, 31), rec("MPI_Waitall", 40, 50), rec("MPI_Start", 60, 61)
    rows = [
        rec("MPI_Init", 0, 1),
        rec("MPI_Irecv", 10, 11, record.RECV, request=1),                      # completed below
        rec("MPI_Isend", 12, 13, record.SEND, request=2),                      # freed: not open
        rec("MPI_Ibarrier", 14, 15, request=3),                                # never completed: open
        rec("MPI_Recv_init", 20, 21, record.RECV | record.PERSISTENT, request=4),   # an init starts nothing
        start, part(start, record.RECV | record.PERSISTENT, request=4),       # 1st start of 4
        wait, part(wait, record.RECV, request=1), part(wait, record.RECV | record.PERSISTENT, request=4),
        startall, part(startall, record.RECV | record.PERSISTENT, request=4),   # 2nd start of 4: open
        rec("MPI_Request_free", 70, 71, request=2),
    ]
    log = trace.open_log(write_rank(tmp_path, 0, 1, rows, finalized=False))
    assert metrics.incomplete_requests(log) == 2
    assert not metrics.reached_finalize(log)


@pytest.mark.parametrize("structure", ["halo", "bsp", "hand-built"])
def test_tables_are_the_same_whatever_the_batches(tmp_path, monkeypatch, structure):
    """The metrics take the owned trace ranks a batch of consecutive ranks at a time: batches of
    one rank each, of a few ranks and of every rank give the same files (a rank's values taken
    for another's within a batch would move them).  The hand-built run has part records, a
    rank killed with requests never completed and a Sendrecv; the halo run 24 ranks whose waits
    differ, the bsp run collectives only."""
    from mpigraph.testing import synth
    from mpigraph.trace import batches

    run = tmp_path / "run"
    if structure == "hand-built":
        write_run(run)
    else:
        synth.generate(str(run), 24, 40, structure)
    outputs = []
    for rows in (1, 100, 1 << 20):
        monkeypatch.setattr(batches, "BATCH_RECORDS", rows)
        outputs.append(tmp_path / ("batches-of-%d-rows" % rows))
        analysis.analyze(str(run), MPI.COMM_WORLD, QUIET, out_dir=str(outputs[-1]))
    for name in ("ranks.csv", "functions.csv", "waitstates.csv", "unmatched.csv", "calls.csv"):
        one, few, every = ((out / name).read_text() for out in outputs)
        assert one == few == every, name
    one, few, every = (pq.read_table(out / "calls.parquet") for out in outputs)
    assert one.equals(few) and one.equals(every)
