"""Bad input: damaged logs, foreign files, missing ranks, an unwritable or full output directory,
a run too big for the node's memory.

Each case is run through the real `mpigraph analyze` command and must give one
line `mpigraph: error: <file>: ...` (naming the record where one is at fault),
exit status 2 and no traceback.  The fuzz test feeds mutated logs to the
reader: it must accept them or raise TraceError, nothing else.  Full disks are
real: a small tmpfs mounted for the test (the tests run as root).
"""

import errno
import os
import subprocess
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mpi_env
from mpigraph.testing import synth
from mpigraph.clock import models as clock
from mpigraph.metrics import profile as metrics
from mpigraph.trace import functions as mpi_functions
from mpigraph.comm import node_memory
from mpigraph.trace import record
from mpigraph.trace import logs as trace
from tracebuild import part, rec, write_rank

NPROCS = 3


def rows_of(rank):
    wait = rec("MPI_Waitall", 3000, 3500)
    return [rec("MPI_Init", 0, 200), rec("MPI_Isend", 1000, 1100, record.SEND, bytes=8, peer=1, request=1),
            rec("MPI_Irecv", 1200, 1250, record.RECV, bytes=8, request=2),
            wait, part(wait, record.SEND, request=1), part(wait, record.RECV, request=2, bytes=8, peer=2),
            rec("MPI_Allreduce", 4000, 9000, bytes=8, seq=1), rec("MPI_Finalize", 9500 + rank, 9500 + rank)]


def write_run(run_dir):
    for r in range(NPROCS):
        write_rank(run_dir, r, NPROCS, rows_of(r))
    return run_dir


def one_error(result):
    """The single `mpigraph: error:` line of a failed command (asserting there is exactly one, no traceback)."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("mpigraph: error: ")]
    assert len(errors) == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    return errors[0][len("mpigraph: error: "):]


def analyze(run_dir, *args):
    return mpi_env.mpigraph(["analyze", run_dir, "--quiet", *args])


def log1(run_dir):
    return run_dir / "raw" / "rank-1.log"


def _truncate_mid_record(path):
    with open(path, "r+b") as f:
        f.truncate(record.HEADER_SIZE + 5 * record.RECORD_SIZE + 7)


def _zero_length(path):
    open(path, "wb").close()


def _corrupt_record(path):
    with open(path, "r+b") as f:   # record 3's function id: garbage
        f.seek(record.HEADER_SIZE + 3 * record.RECORD_SIZE + record.RECORD_DTYPE.fields["func"][1])
        f.write(np.uint16(4321).tobytes())


def _wrong_version(path):
    with open(path, "r+b") as f:
        f.seek(record.HEADER_DTYPE.fields["version"][1])
        f.write(np.uint32(record.VERSION + 1).tobytes())     # a version no mpigraph reads yet


def _foreign(path):
    path.write_bytes(b"PK\x03\x04 a zip archive, not a log" + b"\0" * 5000)


BAD_FILES = {
    "truncated": (_truncate_mid_record, "{log}: truncated: the header counts 8 records but the file holds only 5 "
                                        "complete records (3 missing: the file has 4423 bytes, 4608 are needed)"),
    "zero-length": (_zero_length, "{log}: empty file (0 bytes): the rank never wrote its log header"),
    "corrupt": (_corrupt_record, "{log}: record 3: unknown function id 4321"),
    "wrong-version": (_wrong_version, "{log}: log format version %d; this mpigraph reads version %d"
                      % (record.VERSION + 1, record.VERSION)),
    "foreign": (_foreign, "{log}: not an mpigraph log (the file does not start with 'MPIGRAPH')"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
@pytest.mark.parametrize("nprocs", [None, 2])
def test_bad_log_gives_one_message_naming_file_and_record(tmp_path, case, nprocs):
    damage, expected = BAD_FILES[case]
    run_dir = write_run(tmp_path / "run")
    damage(log1(run_dir))
    result = mpi_env.mpigraph(["analyze", run_dir, "--quiet"], nprocs=nprocs)
    assert one_error(result) == expected.format(log=log1(run_dir))
    assert not (run_dir / "summary.txt").exists()


def test_missing_ranks(tmp_path):
    run_dir = write_run(tmp_path / "run")
    os.remove(log1(run_dir))
    assert one_error(analyze(run_dir)) == "%s: missing the logs of rank 1 (world size 3, from rank-0.log)" % (
        run_dir / "raw")


def test_other_files_in_raw_are_left_alone(tmp_path):
    run_dir = write_run(tmp_path / "run")
    (run_dir / "raw" / "notes.txt").write_text("my notes")
    (run_dir / "raw" / "rank-1.log.bak").write_bytes(b"old")
    result = analyze(run_dir)
    assert result.returncode == 0 and result.stderr == "", result.stderr


# ---- where the report goes ------------------------------------------------------------------


@pytest.fixture
def mount_point(tmp_path):
    """A directory to mount a file system on; unmounted after the test."""
    point = tmp_path / "mnt"
    point.mkdir()
    yield point
    subprocess.run(["umount", str(point)], capture_output=True)


def mount(point, options):
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], check=True)


def test_read_only_run_directory(tmp_path, mount_point):
    """Logs on a read-only file system: the report cannot go next to them; --out puts it elsewhere."""
    source = write_run(tmp_path / "run")
    subprocess.run(["mount", "--bind", str(source), str(mount_point)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(mount_point)], check=True)
    message = one_error(analyze(mount_point))
    assert message == ("cannot write the report: %s: Read-only file system (the raw logs in %s are intact: "
                       "mpigraph analyze %s --out <another directory>)"
                       % (mount_point / "calls.parquet", mount_point / "raw", mount_point))
    elsewhere = tmp_path / "report"
    result = analyze(mount_point, "--out", elsewhere)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(elsewhere)) == [
        "calls.csv", "calls.parquet", "callsite_sizes.csv", "callsite_sizes.parquet", "callsite_waitstates.csv",
        "callsite_waitstates.parquet", "callsites.csv",
        "callsites.parquet", "collectives.csv", "collectives.parquet", "commmatrix.csv",
        "commmatrix.parquet", "commmatrix.svg", "communicators.csv", "communicators.parquet", "critical_path.csv",
        "critical_path.parquet", "functions.csv", "functions.parquet", "ranks.csv", "ranks.parquet", "ranks.svg",
        "run.json", "sizes.csv", "sizes.parquet", "summary.txt", "unmatched.csv", "unmatched.parquet",
        "waitstates.csv", "waitstates.parquet"]


def test_full_disk_for_the_report(tmp_path, mount_point):
    mount(mount_point, "size=64k")
    fd = os.open(mount_point / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):   # fill it up: ends with ENOSPC
            pass
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)
    run_dir = write_run(tmp_path / "run")
    # A directory of its own on the full disk: one holding "filler" is not mpigraph's to write into.
    out = mount_point / "report"
    message = one_error(analyze(run_dir, "--out", out))
    assert message.startswith("cannot write the report: %s" % out)
    assert "No space left on device (the raw logs in %s are intact" % (run_dir / "raw") in message
    assert sorted(os.listdir(mount_point)) in (["filler"], ["filler", "report"])
    assert not out.exists() or os.listdir(out) == [], "no half-written report is left behind"


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    """8 ranks x 50,000 calls: a calls.parquet of ~3.9 MB (a part of ~1.96 MB from each of 2
    analysis ranks), besides ~6.76 MB of other files (critical_path.csv and .parquet)."""
    run_dir = tmp_path_factory.mktemp("big") / "run"
    synth.generate(str(run_dir), 8, 50_000)
    return run_dir


@pytest.mark.parametrize("size", ["64k", "7m", "9500k"])
def test_full_disk_for_the_report_of_two_analysis_ranks(big_run, mount_point, size):
    """The disk fills at once (64k) or part of the way through the report, while the two analysis
    ranks write their parts of the datasets or rank 0 its small files (7m, 9500k): one clean
    error, no rank left waiting, nothing half-written left behind."""
    mount(mount_point, "size=" + size)
    result = mpi_env.mpigraph(["analyze", big_run, "--quiet", "--out", mount_point], nprocs=2)
    message = one_error(result)
    assert message.startswith("cannot write the report: %s/" % mount_point)
    assert os.listdir(mount_point) == []


def test_a_graph_too_big_for_rank_0_names_the_parallel_algorithms(big_run, tmp_path):
    """dijkstra would gather the whole graph on analysis rank 0: with less memory available than
    that takes, one clean error names the way out, and the parallel algorithm does the run."""
    # Above the node's floor for the run's 400,000 records (64 MB: node_memory), below what its
    # gathered graph takes (over 100 MB: paths.gather.gathered_bytes).
    tiny = {"MPIGRAPH_TEST_AVAILABLE_BYTES": "80000000"}
    result = mpi_env.mpigraph(["analyze", big_run, "--quiet", "--out", tmp_path / "a"], nprocs=2, env_extra=tiny)
    message = one_error(result)
    assert message.startswith("dijkstra gathers the whole graph (") and "MPIGRAPH_ALGORITHM=parallel-dijkstra" in message
    assert not (tmp_path / "a" / "summary.txt").exists()
    result = mpi_env.mpigraph(["analyze", big_run, "--quiet", "--out", tmp_path / "b", "--algorithm",
                               "parallel-dijkstra"], nprocs=2, env_extra=tiny)
    assert result.returncode == 0 and (tmp_path / "b" / "summary.txt").exists(), result.stderr
    # With one analysis rank the graph is built there whole anyway: nothing to refuse.
    result = mpi_env.mpigraph(["analyze", big_run, "--quiet", "--out", tmp_path / "c"], env_extra=tiny)
    assert result.returncode == 0, result.stderr


def test_a_node_short_of_memory_stops_the_analysis_before_it_starts(big_run, tmp_path):
    """The node's analysis ranks together need at least 160 bytes per record they own (64 MB for
    the run's 400,000): with less available one clean error names the need, the memory and the
    way out, before anything is written; with the floor available the analysis runs."""
    floor = node_memory.BYTES_PER_RECORD_AT_LEAST * 400_000
    short = {"MPIGRAPH_TEST_AVAILABLE_BYTES": str(floor * 3 // 4)}   # more than either of 2 ranks needs alone
    for nprocs in (1, 2):
        out = tmp_path / ("short%d" % nprocs)
        message = one_error(mpi_env.mpigraph(["analyze", big_run, "--quiet", "--out", out], nprocs=nprocs,
                                             env_extra=short))
        assert message.startswith("%s: analysing the 400,000 records that node " % big_run), message
        assert ("%d analysis rank%s own needs at least 0.06 GB (160 bytes a record), and the node has 0.05 GB "
                "available" % (nprocs, "s" if nprocs > 1 else "")) in message, message
        assert message.endswith("mpigraph analyze %s)" % big_run), message
        assert not out.exists()
    enough = {"MPIGRAPH_TEST_AVAILABLE_BYTES": str(floor)}
    result = mpi_env.mpigraph(["analyze", big_run, "--quiet", "--out", tmp_path / "enough", "--algorithm",
                               "parallel-toposort"], nprocs=2, env_extra=enough)
    assert result.returncode == 0 and (tmp_path / "enough" / "summary.txt").exists(), result.stderr


def test_in_the_job_a_node_short_of_memory_keeps_the_logs_for_later(builder, wheel, tmp_path):
    """In the job the program still ends well: the error line, the logs intact, and `mpigraph
    analyze` of them later (with the memory) writes the report."""
    exe = builder.build(os.path.join(mpi_env.REPO, "mpigraph", "shim", "demo.c"), wheel.mpicc)
    out = tmp_path / "run"
    result = mpi_env.mpirun(wheel, NPROCS, [exe, "2", "5", "1"], out=out,
                            rank_env={"MPIGRAPH_TEST_AVAILABLE_BYTES": "1000"})
    assert result.returncode == 0, result.stderr
    # Every line whole (the shim writes each of its lines at once: in pieces, the ranks' lines came
    # out mixed), one of them the error.
    lines = result.stderr.splitlines()
    assert all(line.startswith("mpigraph: ") for line in lines if line), result.stderr
    errors = [line for line in lines if line.startswith("mpigraph: error: ")]
    assert len(errors) == 1 and "needs at least" in errors[0] and "the node has 0.00 GB available" in errors[0], \
        result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert not (out / "summary.txt").exists()
    assert len(trace.open_run(str(out)).logs) == NPROCS
    result = mpi_env.mpigraph(["analyze", out, "--quiet"], nprocs=2)
    assert result.returncode == 0 and (out / "summary.txt").exists(), result.stderr


# ---- the fuzz test ---------------------------------------------------------------------------


def _template():
    """A valid TSC log: header with calibration pairs, calls and parts."""
    calib = [(record.CALIB_INIT_A, 10_000, 1_000_000), (record.CALIB_INIT_B, 12_000, 1_001_000),
             (record.CALIB_FINAL, 2_010_000, 2_000_000)]
    with tempfile.TemporaryDirectory() as d:
        path = write_rank(d, 0, 1, [dict(r, t_start=r["t_start"] + 10_000, t_end=r["t_end"] + 10_000)
                                    for r in rows_of(0)], clock_source=record.CLOCK_TSC, calib=calib)
        return open(path, "rb").read()


TEMPLATE = _template()
N_HEADER_BYTES = record.HEADER_DTYPE.itemsize

mutation = st.tuples(st.integers(0, len(TEMPLATE) - 1), st.integers(0, 255))
header_mutation = st.tuples(st.integers(0, N_HEADER_BYTES - 1), st.integers(0, 255))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(changes=st.lists(st.one_of(mutation, header_mutation), max_size=8),
       cut=st.one_of(st.none(), st.integers(0, len(TEMPLATE))))
def test_fuzz_reader_accepts_or_names_the_problem(changes, cut):
    data = bytearray(TEMPLATE)
    for offset, value in changes:
        data[offset] = value
    if cut is not None:
        del data[cut:]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rank-0.log")
        with open(path, "wb") as f:
            f.write(data)
        try:
            log = trace.open_log(path)
        except trace.TraceError as error:
            assert str(error).startswith(path + ": ")
            return
        # Accepted: everything downstream of the reader must work on it too.
        start, end = clock.to_ns(log, log.records["t_start"]), clock.to_ns(log, log.records["t_end"])
        assert start.dtype == np.int64 and len(start) == log.n_records
        metrics.local_tables({log.rank: log}, {log.rank: (start, end)})
        del log


# ---- a full disk while recording ----------------------------------------------------------


@pytest.fixture(scope="module")
def many_calls(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    return mpi, builder.build(os.path.join(os.path.dirname(__file__), "shim_programs", "many_calls.c"), mpi.mpicc)


@pytest.mark.parametrize("log_helper", ["off", "on"])
def test_disk_full_while_recording(many_calls, mount_point, tmp_path, log_helper):
    """With and without the helper thread that prepares the log's pages: the log's first 4 MiB fit, its growth (to 8 MiB) does not: recording stops and the program
    runs on unchanged.  The report (its critical path alone is ~8 MB for 65536 calls) cannot be
    written on the full disk either: the message names the file, the raw logs are intact, and
    the offline analysis to another directory reports the run and the dropped records."""
    mpi, exe = many_calls
    mount(mount_point, "size=6m")
    out = mount_point / "run"
    result = mpi_env.mpirun(mpi, 1, [exe, "100000"], out=out, rank_env={"MPIGRAPH_LOG_HELPER": log_helper})
    assert result.returncode == 0 and result.stdout == "done 100000\n", result.stderr
    messages = [line for line in result.stderr.splitlines() if line.startswith("mpigraph:")]
    assert messages[0] == ("mpigraph: rank 0: cannot grow its log (No space left on device); recording stopped "
                           "after 65536 records")
    assert messages[1].startswith("mpigraph: error: cannot write the report: %s/" % out)
    assert messages[1].endswith("No space left on device (the raw logs in %s/raw are intact: mpigraph analyze "
                                "%s --out <another directory>)" % (out, out))
    assert not (out / "summary.txt").exists()
    log = trace.open_log(out / "raw" / "rank-0.log")
    assert log.n_records == 65536 and log.recording_dropped and log.finalized
    elsewhere = tmp_path / "report"
    offline = mpi_env.mpigraph(["analyze", out, "--out", elsewhere])
    assert offline.returncode == 0, offline.stderr
    summary = (elsewhere / "summary.txt").read_text()
    assert ("warning: the shim stopped recording early on rank 0 (the log could not grow: disk full?): calls "
            "after that are missing") in summary
    assert "ranks          1 (all finalized)" in summary and "did not reach" not in summary


def test_disk_full_at_the_start(many_calls, mount_point):
    mpi, exe = many_calls
    mount(mount_point, "size=1m")
    result = mpi_env.mpirun(mpi, 1, [exe, "10"], out=mount_point / "run")
    assert result.returncode == 0 and result.stdout == "done 10\n"
    assert result.stderr == ("mpigraph: rank 0: cannot write %s: No space left on device; the program runs on "
                             "without profiling\n" % (mount_point / "run" / "raw" / "rank-0.log"))


@pytest.mark.parametrize("log_helper", ["off", "on"])
@pytest.mark.parametrize("ranks, calls", [(2, 300_000), (1, 3_500_000)])
def test_a_log_of_many_growth_steps_keeps_every_record(many_calls, tmp_path, log_helper, ranks, calls):
    """Logs grow in 4 MiB steps, then half again, at most 64 MiB a step: 300,000 barriers on 2
    ranks take five steps, 3.5 million on one rank ten, the last one capped.  Every call is in
    the log, in order, with or without the helper thread preparing the pages."""
    mpi, exe = many_calls
    out = tmp_path / "run"
    result = mpi_env.mpirun(mpi, ranks, [exe, str(calls)], out=out,
                            rank_env={"MPIGRAPH_LOG_HELPER": log_helper, "MPIGRAPH_ANALYZE": "off"})
    assert result.returncode == 0 and result.stdout == "done %d\n" % calls, result.stderr
    barrier = mpi_functions.BY_NAME["MPI_Barrier"].id
    for rank in range(ranks):
        log = trace.open_log(out / "raw" / ("rank-%d.log" % rank))
        assert log.finalized and not log.recording_dropped
        records = log.records
        is_barrier = records["func"] == barrier
        assert is_barrier.sum() == calls
        world = records["comm"][is_barrier][0]
        assert (np.diff(records["seq"][is_barrier & (records["comm"] == world)].astype(np.int64)) == 1).all()
        assert (np.diff(records["t_start"].astype(np.int64)) >= 0).all()
        del log
