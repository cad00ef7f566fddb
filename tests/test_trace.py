"""Reading and validating raw logs (mpigraph.trace.logs), ticks to ns (mpigraph.clock.models), ownership."""

import mmap
import os

import numpy as np
import pytest

from mpigraph.clock import models as clock
from mpigraph.trace import record
from mpigraph.trace import logs as trace
from mpigraph.comm.parallel import Ownership
from tracebuild import part, rec, records, write_rank, write_simple_run

# ---- a good log ----------------------------------------------------------------


def test_open_log_maps_exactly_n_records(tmp_path):
    rows = [rec("MPI_Init", 0, 100), rec("MPI_Send", 200, 300, record.SEND, bytes=8, peer=1, tag=5),
            rec("MPI_Finalize", 900, 900)]
    path = write_rank(tmp_path, 1, 2, rows, job_id="j42", host="nodeA")
    log = trace.open_log(path)
    # Mapped, not read into memory: a plain ndarray over the file's map.
    assert type(log.records) is np.ndarray and isinstance(log.records.base.obj, mmap.mmap)
    assert not log.records.flags.writeable
    assert log.n_records == 3 and len(log.records) == 3
    assert log.records["t_start"].tolist() == [0, 200, 900]
    assert log.records["peer"][1] == 1 and log.records["tag"][1] == 5 and log.records["bytes"][1] == 8
    assert (log.rank, log.world_size, log.job_id, log.hostname) == (1, 2, "j42", "nodeA")
    assert log.finalized and not log.recording_dropped
    assert log.header["pid"] == 1001
    assert log.clock == clock.IDENTITY


def test_bytes_after_n_records_are_ignored(tmp_path):
    # The shim's file is over-sized while it records: only n_records count.
    path = write_rank(tmp_path, 0, 1, [rec("MPI_Init", 0, 1)] + [rec("MPI_Barrier", 5, 6)] * 4)
    with open(path, "r+b") as f:
        f.seek(record.HEADER_DTYPE.fields["n_records"][1])
        f.write(np.int64(2).tobytes())
        f.seek(0, os.SEEK_END)
        f.write(b"\xff" * 1000)            # garbage past the records: never read
    log = trace.open_log(path)
    assert log.n_records == 2
    assert log.records["func"].tolist() == [1, 50]


def test_empty_log_is_valid(tmp_path):
    path = write_rank(tmp_path, 0, 1, [], finalized=False)
    log = trace.open_log(path)
    assert log.n_records == 0 and not log.finalized


def test_header_flags(tmp_path):
    path = write_rank(tmp_path, 0, 1, [rec("MPI_Init", 0, 1)], finalized=False)
    with open(path, "r+b") as f:
        f.seek(record.HEADER_DTYPE.fields["flags"][1])
        f.write(np.uint32(record.HEADER_RECORDING_DROPPED).tobytes())
    log = trace.open_log(path)
    assert log.recording_dropped and not log.finalized


# ---- bad files: every message names the file ------------------------------------------


def _patch(path, field, value, dtype):
    with open(path, "r+b") as f:
        f.seek(record.HEADER_DTYPE.fields[field][1])
        f.write(np.array(value, dtype).tobytes())


def _error(path):
    with pytest.raises(trace.TraceError) as info:
        trace.open_log(path)
    message = str(info.value)
    assert message.startswith(str(path) + ": "), message
    return message


def test_zero_length_file(tmp_path):
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"")
    assert "empty file (0 bytes)" in _error(path)


def test_truncated_header(tmp_path):
    path = write_rank(tmp_path, 0, 1, [])
    with open(path, "r+b") as f:
        f.truncate(100)
    assert "truncated header: the file has 100 bytes, a log header has 4096" in _error(path)


def test_not_an_mpigraph_log(tmp_path):
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"#!/bin/sh\necho hello\n" + b"\0" * 5000)
    assert "not an mpigraph log" in _error(path)


def test_wrong_version(tmp_path):
    path = write_rank(tmp_path, 0, 1, [])
    _patch(path, "version", 7, "<u4")
    assert "log format version 7; this mpigraph reads version %d" % record.VERSION in _error(path)


def test_wrong_record_size(tmp_path):
    path = write_rank(tmp_path, 0, 1, [])
    _patch(path, "record_size", 48, "<u4")
    assert "record size 48; this mpigraph reads 64-byte records" in _error(path)


def test_wrong_header_size(tmp_path):
    path = write_rank(tmp_path, 0, 1, [])
    _patch(path, "header_size", 8192, "<u4")
    assert "header size 8192" in _error(path)


def test_truncated_records(tmp_path):
    path = write_rank(tmp_path, 0, 1, [rec("MPI_Init", 0, 1)] + [rec("MPI_Barrier", 2, 3)] * 9)
    with open(path, "r+b") as f:
        f.truncate(record.HEADER_SIZE + 6 * record.RECORD_SIZE + 10)   # 6 whole records and a piece
    message = _error(path)
    assert "the header counts 10 records but the file holds only 6 complete records (4 missing" in message


def test_rank_in_header_must_match_file_name(tmp_path):
    path = write_rank(tmp_path, 3, 4, [])
    os.rename(path, tmp_path / "raw" / "rank-2.log")
    assert "the header says rank 3" in _error(tmp_path / "raw" / "rank-2.log")


def test_rank_outside_world(tmp_path):
    path = write_rank(tmp_path, 0, 1, [])
    _patch(path, "world_rank", 5, "<i4")
    assert "bad header: rank 5 of world size 1" in _error(path)


# ---- bad records: the first bad record is named ----------------------------------------


def _good_rows():
    wait = rec("MPI_Waitall", 500, 600)
    return [rec("MPI_Init", 0, 100), rec("MPI_Isend", 200, 210, record.SEND, request=1),
            rec("MPI_Irecv", 220, 230, record.RECV, request=2), wait,
            part(wait, record.SEND, request=1), part(wait, record.RECV, request=2),
            rec("MPI_Finalize", 900, 900)]


def test_good_rows_pass(tmp_path):
    log = trace.open_log(write_rank(tmp_path, 0, 1, _good_rows()))
    assert log.n_records == 7


def test_unknown_function_id(tmp_path):
    rows = _good_rows()
    rows[2]["func"] = 999
    message = _error(write_rank(tmp_path, 0, 1, rows))
    assert message.endswith("rank-0.log: record 2: unknown function id 999")


def test_end_before_start(tmp_path):
    rows = _good_rows()
    rows[1]["t_end"] = 150
    message = _error(write_rank(tmp_path, 0, 1, rows))
    assert message.endswith("record 1: ends before it starts (t_start 200, t_end 150 ticks)")


def test_part_record_first(tmp_path):
    rows = [part(rec("MPI_Wait", 0, 5))] + _good_rows()
    assert _error(write_rank(tmp_path, 0, 1, rows)).endswith(
        "record 0: a part record (flag PART) with no call record before it")


def test_part_record_of_another_function(tmp_path):
    rows = _good_rows()
    rows[5]["func"] = rec("MPI_Wait", 0, 0)["func"]
    assert _error(write_rank(tmp_path, 0, 1, rows)).endswith(
        "record 5: part record of MPI_Wait does not share the function and times of its call record 3 "
        "(MPI_Waitall)")


def test_part_record_with_other_times(tmp_path):
    rows = _good_rows()
    rows[4]["t_end"] = 601
    assert "record 4: part record of MPI_Waitall does not share" in _error(write_rank(tmp_path, 0, 1, rows))


def test_call_index():
    wait = rec("MPI_Waitall", 500, 600)
    rows = [part(wait), rec("MPI_Init", 0, 1), wait, part(wait), part(wait), rec("MPI_Finalize", 9, 9)]
    assert trace.call_index(records(rows)).tolist() == [-1, 1, 2, 2, 2, 5]
    assert trace.call_index(records([])).tolist() == []


def test_first_bad_record_wins(tmp_path):
    rows = _good_rows()
    rows[5]["func"] = 999          # a later problem of an earlier-checked kind
    rows[4]["t_start"] = 700       # the first bad record: ends before it starts, and times differ
    assert "record 4: ends before it starts" in _error(write_rank(tmp_path, 0, 1, rows))


# Logs of a run checked together (open_logs: a batch of small logs at a time) give each bad
# log's own message, for the first bad log in rank order, and a bad log is found whatever
# the logs beside it hold.

def _run_of(tmp_path, rows_of_rank):
    for rank, rows in enumerate(rows_of_rank):
        write_rank(tmp_path, rank, len(rows_of_rank), rows, job_id="job-1")
    return trace.find_run(str(tmp_path))


def _batch_error(tmp_path, rows_of_rank):
    info = _run_of(tmp_path, rows_of_rank)
    with pytest.raises(trace.TraceError) as error:
        trace.open_logs(info, range(info.world_size))
    return str(error.value)


@pytest.mark.parametrize("bad_rank", [0, 2, 4])
def test_batched_logs_name_the_first_bad_log(tmp_path, bad_rank):
    ranks = [_good_rows() for _ in range(5)]
    ranks[bad_rank][2]["func"] = 999
    ranks[4][1]["t_end"] = 150                   # a later log's problem: not the one named
    message = _batch_error(tmp_path, ranks)
    expected = ("record 2: unknown function id 999" if bad_rank < 4
                else "record 1: ends before it starts (t_start 200, t_end 150 ticks)")
    assert message == "%s: %s" % (trace.log_path(str(tmp_path), bad_rank), expected)


def test_batched_part_record_first_in_its_log(tmp_path):
    # Rank 1's first record is a part of the same call as rank 0's last record: still a part
    # with no call record before it in its own log.
    wait = rec("MPI_Waitall", 500, 600)
    ranks = [[rec("MPI_Init", 0, 100), wait], [part(wait)] + _good_rows(), _good_rows(), []]
    assert _batch_error(tmp_path, ranks) == "%s: record 0: a part record (flag PART) with no call record before it" % (
        trace.log_path(str(tmp_path), 1))


def test_batched_part_records_checked_within_their_log(tmp_path):
    ranks = [_good_rows(), [], _good_rows(), _good_rows()]
    ranks[2][5]["t_end"] = 601
    assert "rank-2.log: record 5: part record of MPI_Waitall does not share" in _batch_error(tmp_path, ranks)


def test_batched_good_logs_open(tmp_path):
    info = _run_of(tmp_path, [_good_rows(), [], _good_rows()])
    opened = trace.open_logs(info, range(3))
    assert [log.n_records for log in opened.values()] == [7, 0, 7]


# ---- the run directory ----------------------------------------------------------------


def _run_error(run_dir):
    with pytest.raises(trace.TraceError) as info:
        trace.open_run(run_dir)
    return str(info.value)


def test_open_run(tmp_path):
    write_simple_run(tmp_path, 3)
    run = trace.open_run(tmp_path)
    assert (run.world_size, run.job_id, run.run_dir) == (3, "job-1", str(tmp_path))
    assert list(run.logs) == [0, 1, 2]
    assert [log.rank for log in run.logs.values()] == [0, 1, 2]


def test_open_run_some_ranks(tmp_path):
    write_simple_run(tmp_path, 4)
    run = trace.open_run(tmp_path, ranks=range(2, 4))
    assert list(run.logs) == [2, 3] and run.world_size == 4


def test_missing_ranks_are_named(tmp_path):
    paths = write_simple_run(tmp_path, 8)
    for r in (1, 2, 3, 6):
        os.remove(paths[r])
    message = _run_error(tmp_path)
    assert message == "%s: missing the logs of ranks 1-3, 6 (world size 8, from rank-0.log)" % (tmp_path / "raw")


def test_missing_rank_zero(tmp_path):
    paths = write_simple_run(tmp_path, 2)
    os.remove(paths[0])
    assert "missing the logs of rank 0 (world size 2, from rank-1.log)" in _run_error(tmp_path)


def test_extra_ranks(tmp_path):
    write_simple_run(tmp_path, 2)
    write_rank(tmp_path, 2, 3, [])
    assert "logs of ranks 2 beyond the world size 2" in _run_error(tmp_path)


def test_mixed_job_ids(tmp_path):
    write_simple_run(tmp_path, 2)
    write_rank(tmp_path, 1, 2, [], job_id="other-job")
    message = _run_error(tmp_path)
    assert message.startswith(str(tmp_path / "raw" / "rank-1.log"))
    assert "job id 'other-job', but rank-0.log says 'job-1'" in message


def test_mixed_world_sizes(tmp_path):
    write_simple_run(tmp_path, 2)
    write_rank(tmp_path, 1, 5, [])
    message = _run_error(tmp_path)
    assert "rank-1.log: world size 5, but rank-0.log says 2" in message


def test_bad_log_inside_run(tmp_path):
    paths = write_simple_run(tmp_path, 3)
    with open(paths[2], "r+b") as f:
        f.truncate(0)
    assert _run_error(tmp_path) == "%s: empty file (0 bytes): the rank never wrote its log header" % paths[2]


def test_not_a_run_directory(tmp_path):
    assert "is not a directory" in _run_error(tmp_path / "nowhere")
    assert "has no raw/ directory" in _run_error(tmp_path)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "notes.txt").write_text("x")
    assert "no rank-<r>.log files" in _run_error(tmp_path)


# ---- clock --------------------------------------------------------------------------


def test_monotonic_ticks_are_ns(tmp_path):
    log = trace.open_log(write_rank(tmp_path, 0, 1, [rec("MPI_Init", 123, 456)]))
    ns = clock.to_ns(log, log.records["t_end"])
    assert ns.dtype == np.int64 and ns.tolist() == [456]


def test_tsc_line_through_earliest_and_latest_pairs(tmp_path):
    # 2 ticks per ns: ns = 1_000_000 + (ticks - 10_000) / 2.  The middle pair is
    # off the line and slot CALIB_LAST is unset: neither may change the fit.
    calib = [(record.CALIB_INIT_A, 10_000, 1_000_000), (record.CALIB_INIT_B, 12_000, 1_000_999),
             (record.CALIB_FINAL, 2_010_000, 2_000_000)]
    path = write_rank(tmp_path, 0, 1, [rec("MPI_Init", 10_000, 10_200)], clock_source=record.CLOCK_TSC,
                      calib=calib)
    log = trace.open_log(path)
    assert log.clock == clock.Conversion(10_000, 1_000_000, 0.5)
    ticks = np.array([10_000, 10_001, 10_200, 2_010_000, 4_010_000], np.int64)
    assert clock.to_ns(log, ticks).tolist() == [1_000_000, 1_000_000, 1_000_100, 2_000_000, 3_000_000]


def test_tsc_needs_two_pairs(tmp_path):
    path = write_rank(tmp_path, 0, 1, [], clock_source=record.CLOCK_TSC,
                      calib=[(record.CALIB_INIT_A, 10, 1000)])
    assert "TSC clock with 1 calibration pair(s) set: at least 2 are needed" in _error(path)


def test_unknown_clock_source(tmp_path):
    path = write_rank(tmp_path, 0, 1, [], clock_source=9)
    assert "unknown clock source 9" in _error(path)


def test_tsc_conversion_is_exact_over_a_long_run():
    # 3 GHz over 10^4 s: 3e13 ticks from the first pair; ns must stay exact to within 1.
    conv = clock.Conversion(7 * 10**15, 5 * 10**14, 1 / 3)
    ticks = np.array([7 * 10**15 + 3 * 10**13 + 3], np.int64)
    assert abs(int(clock.convert(conv, ticks)[0]) - (5 * 10**14 + 10**13 + 1)) <= 1


# ---- ownership ----------------------------------------------------------------------


@pytest.mark.parametrize("n_trace,n_analysis", [(10, 3), (4, 4), (4, 1), (3, 5), (1, 1), (100, 7), (0, 2)])
def test_ownership_blocks(n_trace, n_analysis):
    own = Ownership(n_trace, n_analysis)
    blocks = [list(own.ranks_of(a)) for a in range(n_analysis)]
    assert sum(blocks, []) == list(range(n_trace))            # every trace rank once, in order
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    expected_owner = [a for a, block in enumerate(blocks) for _ in block]
    assert own.owner_of(np.arange(n_trace)).tolist() == expected_owner


def test_ownership_in_job_is_identity():
    own = Ownership(6, 6)
    assert [list(own.ranks_of(r)) for r in range(6)] == [[r] for r in range(6)]


def test_ownership_example():
    own = Ownership(10, 3)
    assert [list(own.ranks_of(a)) for a in range(3)] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
