"""Read and validate the shim's raw logs (``<run>/raw/rank-<r>.log``).

The records are never copied: ``RankLog.records`` is a read-only numpy
array over a map of the file, exactly ``n_records`` records of ``record.RECORD_DTYPE``.  Every
problem a damaged, foreign or incomplete log can have becomes a TraceError
whose message names the file and, for a bad record, its index; validation is
vectorised (one pass of numpy over the records, no Python loop per record).

``find_run`` looks at the directory (which ranks, which job), ``open_logs``
opens the logs of some ranks, ``open_run`` does both for all ranks.  The
analysis splits them so each analysis rank opens only the logs it owns.
"""

import mmap
import os
import re
from collections import namedtuple

import numpy as np

from mpigraph.clock import models as clock
from mpigraph.trace import functions as mpi_functions
from mpigraph.trace import batches, record


class TraceError(Exception):
    """A run directory or a log cannot be analysed; the message names the file (and record)."""


LOG_NAME = re.compile(r"^rank-(\d+)\.log$")

RunInfo = namedtuple("RunInfo", "run_dir world_size job_id")


def raw_dir(run_dir):
    return os.path.join(run_dir, "raw")


def log_path(run_dir, rank):
    return os.path.join(raw_dir(run_dir), "rank-%d.log" % rank)


class RankLog:
    """One rank's log: its header and its records (a map of the file).

    Attributes: path, header (a numpy record of HEADER_DTYPE: ``header["pid"]``),
    records (read-only array of RECORD_DTYPE over the map, length n_records), rank, world_size,
    job_id, hostname, finalized (reached MPI_Finalize and closed the log),
    recording_dropped (the shim stopped recording early: disk full), log_helper
    (a helper thread prepared the log's pages: MPIGRAPH_LOG_HELPER), clock (a
    clock.Conversion from ticks to ns).
    """

    def __init__(self, path, header, records):
        self.path = path
        self.header = header
        self.records = records
        self.rank = int(header["world_rank"])
        self.world_size = int(header["world_size"])
        self.job_id = _text(header["job_id"])
        self.hostname = _text(header["hostname"])
        self.finalized = bool(header["flags"] & record.HEADER_FINALIZED)
        self.recording_dropped = bool(header["flags"] & record.HEADER_RECORDING_DROPPED)
        self.log_helper = bool(header["flags"] & record.HEADER_LOG_HELPER)
        try:
            self.clock = clock.conversion_from_header(header)
        except clock.ClockError as e:
            raise TraceError("%s: %s" % (path, e)) from None

    @property
    def n_records(self):
        return len(self.records)

    def column(self, name):
        """A contiguous copy of one small field ("func", "flags"), made once and kept.

        Each pass over a field of the mapped records reads whole 64-byte
        records; the fields every stage reads again are copied out once.
        """
        cache = self.__dict__.setdefault("_columns", {})
        if name not in cache:
            cache[name] = np.ascontiguousarray(self.records[name])
        return cache[name]

    def __repr__(self):
        return "RankLog(%r, rank=%d, records=%d)" % (self.path, self.rank, self.n_records)


class Run:
    """The logs of one run that this process opened (all of them, or the ranks asked for)."""

    def __init__(self, info, logs):
        self.run_dir = info.run_dir
        self.world_size = info.world_size
        self.job_id = info.job_id
        self.logs = logs   # trace rank -> RankLog, in rank order

    def __repr__(self):
        return "Run(%r, world_size=%d, opened=%d)" % (self.run_dir, self.world_size, len(self.logs))


def _text(value):
    return bytes(value).rstrip(b"\0").decode("utf-8", "replace")


# ---- the header ------------------------------------------------------------

def read_header(path):
    """(header, file size) of a log, the header checked for magic, version and sizes."""
    fd = _open(path)
    try:
        return _header(path, fd)
    finally:
        os.close(fd)


def _open(path):
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as e:
        raise TraceError("%s: cannot read: %s" % (path, e.strerror or e)) from None


def _header(path, fd):
    """(header, file size) of the log open as `fd`."""
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, record.HEADER_DTYPE.itemsize, 0)
    except OSError as e:
        raise TraceError("%s: cannot read: %s" % (path, e.strerror or e)) from None
    if size == 0:
        raise TraceError("%s: empty file (0 bytes): the rank never wrote its log header" % path)
    if len(head) >= len(record.MAGIC) and head[: len(record.MAGIC)] != record.MAGIC:
        raise TraceError("%s: not an mpigraph log (the file does not start with %r)"
                         % (path, record.MAGIC.decode()))
    if size < record.HEADER_SIZE:
        raise TraceError("%s: truncated header: the file has %d bytes, a log header has %d"
                         % (path, size, record.HEADER_SIZE))
    header = np.frombuffer(head, record.HEADER_DTYPE, count=1)[0]
    _check_header(path, header)
    return header, size


def _check_header(path, header):
    if header["version"] != record.VERSION and header["version"] not in record.OLD_VERSIONS:
        raise TraceError("%s: log format version %d; this mpigraph reads version %d"
                         % (path, header["version"], record.VERSION))
    if header["header_size"] != record.HEADER_SIZE:
        raise TraceError("%s: header size %d; this mpigraph reads %d-byte headers"
                         % (path, header["header_size"], record.HEADER_SIZE))
    if header["record_size"] != record.RECORD_SIZE:
        raise TraceError("%s: record size %d; this mpigraph reads %d-byte records"
                         % (path, header["record_size"], record.RECORD_SIZE))
    if header["world_size"] < 1 or not 0 <= header["world_rank"] < header["world_size"]:
        raise TraceError("%s: bad header: rank %d of world size %d"
                         % (path, header["world_rank"], header["world_size"]))
    if header["n_records"] < 0:
        raise TraceError("%s: bad header: %d records" % (path, header["n_records"]))


# ---- the records -----------------------------------------------------------

def _map_records(path, fd, size, n_records):
    """The log's records, a read-only array over a map of the file open as `fd`."""
    complete = (size - record.HEADER_SIZE) // record.RECORD_SIZE
    if complete < n_records:
        raise TraceError(
            "%s: truncated: the header counts %d records but the file holds only %d complete records "
            "(%d missing: the file has %d bytes, %d are needed)"
            % (path, n_records, complete, n_records - complete, size,
               record.HEADER_SIZE + n_records * record.RECORD_SIZE))
    if n_records == 0:
        return np.zeros(0, record.RECORD_DTYPE)
    # The map's own buffer as a plain ndarray (which keeps the map alive): np.memmap costs a
    # second open of the file and, as a subclass, a Python-level __getitem__ at every indexing;
    # at thousands of small logs both count.
    try:
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise TraceError("%s: cannot map: %s" % (path, e.strerror or e)) from None
    return np.frombuffer(mapped, record.RECORD_DTYPE, count=n_records, offset=record.HEADER_SIZE)


def _known_functions():
    known = np.zeros(1 << 16, bool)
    known[list(mpi_functions.BY_ID)] = True
    return known


_KNOWN = _known_functions()


def call_index(records):
    """For each record, the index of its call record (itself for a call, the call before it for a part).

    -1 for a part record with no call record before it.
    """
    index = np.arange(len(records), dtype=np.int64)
    is_part = (records["flags"] & record.PART) != 0
    return np.maximum.accumulate(np.where(is_part, -1, index)) if len(records) else index


def _broken_rules(func, flags, t_start, t_end, starts):
    """The records (indices, in order) that break each rule of the format: an unknown function;
    an end before the start; a part record first in its log (`starts`: the logs' first records),
    with no call record before it; a part record whose function or times differ from the record
    just before it (its call record or an earlier part of the same call, which shares them in
    turn: neighbours only are compared)."""
    parts = np.flatnonzero((flags & record.PART) != 0)
    first = np.zeros(len(func), bool)
    first[starts] = True
    after = parts[~first[parts]]
    before = after - 1
    unlike = (func[after] != func[before]) | (t_start[after] != t_start[before]) | (t_end[after] != t_end[before])
    return np.flatnonzero(~_KNOWN[func]), np.flatnonzero(t_end < t_start), parts[first[parts]], after[unlike]


def validate_records(path, records, func=None, flags=None):
    """Raise TraceError for the first record that breaks the format's rules (``_broken_rules``).

    `func` and `flags` may be contiguous copies of those fields (RankLog.column).
    """
    if len(records) == 0:
        return
    func = records["func"] if func is None else func
    flags = records["flags"] if flags is None else flags
    t_start, t_end = records["t_start"], records["t_end"]

    def describe_part(i):
        call = int(call_index(records[: i + 1])[i])
        return ("part record of %s does not share the function and times of its call record %d (%s)"
                % (mpi_functions.name_of(func[i]), call, mpi_functions.name_of(func[call])))

    describe = (lambda i: "unknown function id %d" % func[i],
                lambda i: "ends before it starts (t_start %d, t_end %d ticks)" % (t_start[i], t_end[i]),
                lambda i: "a part record (flag PART) with no call record before it",
                describe_part)
    # (first bad index, message for it) of each rule broken
    problems = [(int(bad[0]), say) for bad, say in zip(_broken_rules(func, flags, t_start, t_end, [0]), describe)
                if len(bad)]
    if problems:
        index, say = min(problems, key=lambda p: p[0])
        raise TraceError("%s: record %d: %s" % (path, index, say(index)))


# Logs of fewer records than this are checked a batch at a time (``validate_logs``), a larger
# log alone: a batch's records are copied end to end, which for logs of thousands of records costs
# more than the dozen numpy calls per log it saves.
SMALL_LOG_RECORDS = 1 << 12


def validate_logs(logs):
    """validate_records of each of `logs` (RankLogs), raising its TraceError for the first bad
    log in their order.  Small logs are checked a batch at a time (``batches.owned_batches`` of
    at most SMALL_LOG_RECORDS records), the same rules over their records end to end: thousands
    of logs of a few hundred records cost a few numpy calls per batch, not a dozen per log.  Only
    a log found bad there, and a log that is a batch by itself, goes through validate_records,
    which names the record."""
    for first, stop in batches.owned_batches([log.n_records for log in logs], SMALL_LOG_RECORDS):
        batch = logs[first:stop]
        for log in batch if len(batch) == 1 else _breaking(batch):
            validate_records(log.path, log.records, log.column("func"), log.column("flags"))


def _breaking(logs):
    """The logs among `logs` with a record that breaks a rule of ``_broken_rules``, in order."""
    n = np.array([log.n_records for log in logs], np.int64)
    columns = [np.concatenate([log.column(name) for log in logs]) for name in ("func", "flags")] + \
        [np.concatenate([log.records[name] for log in logs]) for name in ("t_start", "t_end")]
    holding = np.flatnonzero(n)              # the logs with records, and where each one starts
    starts = (np.cumsum(n) - n)[holding]
    bad = np.concatenate(_broken_rules(*columns, starts))
    return [logs[i] for i in holding[np.unique(np.searchsorted(starts, bad, "right") - 1)]]


def open_log(path, validate=True):
    """Open one log: header checked, records mapped (not copied) and validated."""
    fd = _open(path)       # one open for the header and the map
    try:
        header, size = _header(path, fd)
        match = LOG_NAME.match(os.path.basename(path))
        if match and int(match.group(1)) != header["world_rank"]:
            raise TraceError("%s: the header says rank %d, the file name another rank"
                             % (path, header["world_rank"]))
        records = _map_records(path, fd, size, int(header["n_records"]))
    finally:
        os.close(fd)
    log = RankLog(path, header, records)
    if validate:
        validate_records(path, log.records, log.column("func"), log.column("flags"))
    return log


# ---- the run directory -------------------------------------------------------

def list_logs(run_dir):
    """{trace rank: path} of the logs in run_dir/raw."""
    raw = raw_dir(run_dir)
    try:
        names = os.listdir(raw)
    except FileNotFoundError:
        what = "is not a directory" if not os.path.isdir(run_dir) else "has no raw/ directory"
        raise TraceError("%s %s: not an mpigraph run directory" % (run_dir, what)) from None
    except OSError as e:
        raise TraceError("%s: cannot list: %s" % (raw, e.strerror or e)) from None
    logs = {int(m.group(1)): os.path.join(raw, name) for name in names for m in [LOG_NAME.match(name)] if m}
    if not logs:
        raise TraceError("%s: no rank-<r>.log files: not an mpigraph run directory" % raw)
    return dict(sorted(logs.items()))


def _ranges(ranks):
    """'0-3, 7' for [0, 1, 2, 3, 7]."""
    ranks = sorted(ranks)
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else "%d-%d" % (start, r))
            start = None
    return ", ".join(parts)


def find_run(run_dir):
    """RunInfo of run_dir: checks that the logs of ranks 0..P-1 are all there, and no others.

    P (the world size) and the job id come from the lowest rank's header.
    """
    run_dir = os.path.abspath(run_dir)
    paths = list_logs(run_dir)
    # The lowest rank's header decides; if rank 0 is missing the error below says so.
    reference = paths[min(paths)]
    header, _ = read_header(reference)
    world_size = int(header["world_size"])
    missing = sorted(set(range(world_size)) - set(paths))
    extra = sorted(r for r in paths if r >= world_size)
    name = os.path.basename(reference)
    if missing:
        raise TraceError("%s: missing the logs of rank%s %s (world size %d, from %s)"
                         % (raw_dir(run_dir), "s" if len(missing) > 1 else "", _ranges(missing),
                            world_size, name))
    if extra:
        raise TraceError("%s: logs of ranks %s beyond the world size %d (from %s): logs of two runs are mixed"
                         % (raw_dir(run_dir), _ranges(extra), world_size, name))
    return RunInfo(run_dir, world_size, _text(header["job_id"]))


def open_logs(info, ranks):
    """{rank: RankLog} for `ranks` of the run `info`, each validated and checked to belong to the run.

    Every log's header is checked before any log's records (``validate_logs``)."""
    logs = {}
    for rank in ranks:
        log = open_log(log_path(info.run_dir, rank), validate=False)
        if log.world_size != info.world_size:
            raise TraceError("%s: world size %d, but rank-0.log says %d: logs of two runs are mixed"
                             % (log.path, log.world_size, info.world_size))
        if log.job_id != info.job_id:
            raise TraceError("%s: job id %r, but rank-0.log says %r: logs of two runs are mixed"
                             % (log.path, log.job_id, info.job_id))
        logs[rank] = log
    validate_logs(list(logs.values()))
    return logs


def open_run(run_dir, ranks=None):
    """Open the run in run_dir: the logs of `ranks` (default all), validated."""
    info = find_run(run_dir)
    return Run(info, open_logs(info, range(info.world_size) if ranks is None else ranks))
