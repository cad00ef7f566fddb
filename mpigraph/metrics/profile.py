"""Profile tables: one row per MPI function (mpiP style) and one row per rank.

Each analysis rank computes partial tables from the logs it owns (vectorised
over records, consecutive logs a batch at a time: ``ProfileBatch``), then
``gather_tables`` combines them on analysis rank 0.  A table is a dict of
equal-length numpy arrays, column name -> values, in the order of its schema
below; times are int64 ns.

What the columns count (docs/outputs.md says it to users):

- calls: call records (records without the PART flag), a merged run of polls (flag REPEAT) counting
  its seq calls; Init and Finalize included;
- MPI time of a rank: the summed duration of its calls except MPI_Init* and
  MPI_Finalize (in threaded programs calls may overlap and this may exceed
  the program time);
- program time: from the end of the rank's first MPI_Init to the start of its
  last MPI_Finalize; when the rank never finalised, to the end of its last record;
- bytes_sent: point-to-point data sent, counted when the send starts: blocking
  and nonblocking sends, the send half of Sendrecv, each Start of a persistent
  send (not Send_init);
- bytes_received: point-to-point data received, counted when it arrives, with
  the size from the status: blocking receives, the receive half of Sendrecv, and
  the Wait/Test call that completed a nonblocking or persistent receive (so an
  Irecv's bytes appear under MPI_Wait*, MPI_Test*);
- bytes_collective: the buffer size a rank passed to collectives (blocking and
  nonblocking), as the shim records it.
"""

import functools
from collections import namedtuple

import numpy as np

from mpigraph.metrics import run_tables, waits as waits_module
from mpigraph.paths import segments as critical_path
from mpigraph.schema import FUNCTION_COLUMNS, RANK_COLUMNS  # noqa: F401  (the tables' schemas, re-exported)

from mpigraph.util import arrays
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.trace.batches import RecordBatch, owned_batches


# ---- which records count where, by function id ---------------------------------

N_IDS = mf.MAX_ID + 1    # dense per-function arrays are indexed by function id


def _ids_of(*kinds):
    """Boolean array over function ids: the function is of one of `kinds`."""
    table = np.zeros(N_IDS, bool)
    table[[f.id for f in mf.FUNCTIONS if f.kind in kinds]] = True
    return table


IS_INIT = _ids_of(mf.INIT)
IS_FINALIZE = _ids_of(mf.FINALIZE)
# Bytes are counted where the data moves (see the module doc), decided per function:
SENDS_IN_CALL = _ids_of(mf.SEND, mf.ISEND, mf.SENDRECV)     # not SEND_INIT: nothing moves yet
SENDS_IN_PARTS = _ids_of(mf.START)                          # each start of a persistent send
RECEIVES_IN_CALL = _ids_of(mf.RECV)                         # not IRECV: only the posted size is known
RECEIVES_IN_PARTS = _ids_of(mf.SENDRECV, mf.COMPLETION)     # the receive half; completed receives
COLLECTIVE = _ids_of(mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN)
# Requests: an operation starts in the call record of a nonblocking call (not a persistent
# init: nothing starts yet) or in a part record of Start/Startall; it ends in a part record
# of a Wait/Test call, or is given up by MPI_Request_free.
STARTS_IN_CALL = np.zeros(N_IDS, bool)
STARTS_IN_CALL[[f.id for f in mf.FUNCTIONS if f.nonblocking and f.kind not in (mf.SEND_INIT, mf.RECV_INIT)]] = True
STARTS_IN_PARTS = _ids_of(mf.START)
ENDS_IN_PARTS = _ids_of(mf.COMPLETION)
FREES = _ids_of(mf.REQUEST_FREE)
OF_REQUESTS = STARTS_IN_PARTS | STARTS_IN_CALL | ENDS_IN_PARTS | FREES
IS_INIT_OR_FINALIZE = IS_INIT | IS_FINALIZE

# A record's category: 3 bits from its flags.  Bytes are summed per (function, category).
_PART_BIT, _SEND_BIT, _RECV_BIT = 4, 2, 1
_CATEGORIES = np.arange(8)
_CALL_CATS = _CATEGORIES[(_CATEGORIES & _PART_BIT) == 0]
_SEND_CALL_CATS = _CALL_CATS[(_CALL_CATS & _SEND_BIT) != 0]
_RECV_CALL_CATS = _CALL_CATS[(_CALL_CATS & _RECV_BIT) != 0]
_SEND_PART_CATS = _SEND_CALL_CATS | _PART_BIT
_RECV_PART_CATS = _RECV_CALL_CATS | _PART_BIT

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


# ---- the owned logs, a batch at a time ------------------------------------------

def _category_table():
    """Category (PART, SEND, RECV bits) of every possible flags value: one lookup per record."""
    flags = np.arange(1 << 16, dtype=np.uint32)
    return (((flags & record.PART) != 0) * _PART_BIT | ((flags & record.SEND) != 0) * _SEND_BIT
            | ((flags & record.RECV) != 0) * _RECV_BIT).astype(np.uint32)


_CATEGORY = _category_table()
SENT, RECEIVED, COLLECTIVE_BYTES = 1, 2, 3       # byte classes (0: the bytes count nowhere)


def _byte_class_table():
    """Per key (function id << 3 | category): where a record's bytes count (the module doc), one
    class each: a function's sends, receives and collective data are of different categories."""
    sent = (SENDS_IN_CALL[:, None] & np.isin(_CATEGORIES, _SEND_CALL_CATS)
            | SENDS_IN_PARTS[:, None] & np.isin(_CATEGORIES, _SEND_PART_CATS))
    received = (RECEIVES_IN_CALL[:, None] & np.isin(_CATEGORIES, _RECV_CALL_CATS)
                | RECEIVES_IN_PARTS[:, None] & np.isin(_CATEGORIES, _RECV_PART_CATS))
    collective = COLLECTIVE[:, None] & np.isin(_CATEGORIES, _CALL_CATS)
    return (sent * SENT + received * RECEIVED + collective * COLLECTIVE_BYTES).reshape(-1).astype(np.intp)


BYTE_CLASS = _byte_class_table()


class ProfileBatch(RecordBatch):
    """The records of consecutive logs end to end (trace.batches.RecordBatch, ``local_tables``)
    with their start_ns, end_ns, and what several steps of the profile read, made once, when first
    asked for (the part records, the call records, their durations, the Init and Finalize
    records).  A batch of one log holds its columns, not copies."""

    def __init__(self, logs, times=None):
        """`logs`: RankLogs (or anything with ``records`` and ``column``); `times`: (start_ns,
        end_ns) per record of each (None: no times)."""
        self.logs = list(logs)
        super().__init__([log.records for log in self.logs], [log.column("func") for log in self.logs],
                         [log.column("flags") for log in self.logs])
        self.start_ns = arrays.end_to_end([start for start, _ in times], np.int64) if times is not None else None
        self.end_ns = arrays.end_to_end([end for _, end in times], np.int64) if times is not None else None

    @functools.cached_property
    def part(self):
        """Of every record: it is a part record (PART), not a call."""
        return (self.flags & record.PART) != 0

    @functools.cached_property
    def calls(self):
        """The call records (those without PART): a slice where every record is one."""
        return arrays.block_or_positions(~self.part)

    @functools.cached_property
    def call_bounds(self):
        """Log i's calls are calls call_bounds[i]:call_bounds[i + 1]."""
        per_log = arrays.run_sums(~self.part, self.first_record)
        return np.concatenate(([0], np.cumsum(per_log))).astype(np.int64)

    @functools.cached_property
    def call_func(self):
        """The function id of every call."""
        return self.func[self.calls].astype(np.intp)

    @functools.cached_property
    def duration(self):
        """Of every call."""
        return self.end_ns[self.calls] - self.start_ns[self.calls]

    @functools.cached_property
    def init_or_finalize(self):
        """The MPI_Init* and MPI_Finalize records (calls and parts): a few per log."""
        return np.flatnonzero(IS_INIT_OR_FINALIZE[self.func])

    @functools.cached_property
    def key(self):
        """Function id << 3 | category (PART, SEND, RECV bits) of every record."""
        return (self.func.astype(np.uint32) << 3) | _CATEGORY[self.flags]

    @functools.cached_property
    def repeated(self):
        """The records of a merged run of polls (flag REPEAT): seq calls each (trace/record.py)."""
        return np.flatnonzero(self.flags & record.REPEAT)

    @functools.cached_property
    def more(self):
        """The calls a repeated record counts beyond its one: seq - 1."""
        return self.field("seq", self.repeated).astype(np.int64) - 1

    @functools.cached_property
    def record_bytes(self):
        """The bytes of every record (one strided pass over them)."""
        return self.field("bytes")

    def call_index(self, rows):
        """The call numbers (in the batch) of call records `rows`."""
        if isinstance(self.calls, slice):
            return rows - self.calls.start
        return np.searchsorted(self.calls, rows)


def batch_partials(batch, waits=None):
    """Dense per-function sums of a batch's records, {column: int64 array indexed by function id}.

    One pass of numpy over the records, no sorting: counts and byte sums by (function id,
    category) with bincount/add.at, call durations with add.at, minimum.at and maximum.at
    (exact int64, unlike bincount's float weights); "ranks" counts the logs that called each
    function.  `waits` (owned_waits' columns of the batch's calls, in order) adds the wait
    columns.
    """
    key, repeated, more = batch.key, batch.repeated, batch.more
    count = np.bincount(key, minlength=N_IDS * 8)
    np.add.at(count, key[repeated], more)
    count = count.reshape(N_IDS, 8)
    nbytes = np.zeros(N_IDS * 8, np.int64)
    np.add.at(nbytes, key, batch.record_bytes)
    nbytes = nbytes.reshape(N_IDS, 8)

    call_func, duration = batch.call_func, batch.duration
    total = np.zeros(N_IDS, np.int64)
    shortest = np.full(N_IDS, _INT64_MAX, np.int64)
    longest = np.full(N_IDS, _INT64_MIN, np.int64)
    np.add.at(total, call_func, duration)
    np.minimum.at(shortest, call_func, duration)
    np.maximum.at(longest, call_func, duration)

    calls = count[:, _CALL_CATS].sum(axis=1)
    # Calls with a GPU device buffer (record flag DEVICE, csrc/gpu.c): a call record's own flag.
    device_calls = np.bincount(call_func[(batch.flags[batch.calls] & record.DEVICE) != 0],
                               minlength=N_IDS).astype(np.int64)
    per_call = {}
    for name in ("wait_before", "wait_after", "execution"):
        per_call[name] = np.zeros(N_IDS, np.int64)
        if waits is not None:
            np.add.at(per_call[name], call_func, waits[name])
    return {**per_call,
        "calls": calls,
        "ranks": _callers(batch),
        "device_calls": device_calls,
        "time_total": total,
        "time_min": shortest,
        "time_max": longest,
        "bytes_sent": np.where(SENDS_IN_CALL, nbytes[:, _SEND_CALL_CATS].sum(axis=1), 0)
        + np.where(SENDS_IN_PARTS, nbytes[:, _SEND_PART_CATS].sum(axis=1), 0),
        "bytes_received": np.where(RECEIVES_IN_CALL, nbytes[:, _RECV_CALL_CATS].sum(axis=1), 0)
        + np.where(RECEIVES_IN_PARTS, nbytes[:, _RECV_PART_CATS].sum(axis=1), 0),
        "bytes_collective": np.where(COLLECTIVE, nbytes[:, _CALL_CATS].sum(axis=1), 0),
    }


def log_sums(batch):
    """``batch_partials``' sums taken per log of the batch instead of per function: {calls,
    mpi_time (Init and Finalize left out), bytes_sent, bytes_received, bytes_collective}, int64."""
    repeated_call = ~batch.part[batch.repeated]
    per_log_calls = np.diff(batch.call_bounds)
    np.add.at(per_log_calls, batch.positions(batch.repeated[repeated_call]), batch.more[repeated_call])
    by_class = np.zeros(batch.n_ranks * 4, np.int64)
    np.add.at(by_class, batch.position * 4 + BYTE_CLASS[batch.key], batch.record_bytes)
    by_class = by_class.reshape(batch.n_ranks, 4)
    return {"calls": per_log_calls, "mpi_time": _without_init_finalize(batch, batch.duration),
            "bytes_sent": by_class[:, SENT], "bytes_received": by_class[:, RECEIVED],
            "bytes_collective": by_class[:, COLLECTIVE_BYTES]}


def _without_init_finalize(batch, per_call):
    """Per log of the batch: the sum of a value per call over its calls, MPI_Init* and
    MPI_Finalize left out (a sum over every call less those few)."""
    sums = arrays.run_sums(per_call, batch.call_bounds)
    rows = batch.init_or_finalize[~batch.part[batch.init_or_finalize]]
    np.subtract.at(sums, batch.positions(rows), per_call[batch.call_index(rows)])
    return sums


def _callers(batch):
    """How many logs of the batch called each function (int64 per function id): the logs with a
    call record of it, a merged run of polls of seq 0 left out (it counts no call).  A table of
    (log, function) pairs where it is small against the calls, else their sort."""
    # (A batch of one log: every call's log is 0, no array of them.)
    n_logs = batch.n_ranks
    call_owner = np.repeat(np.arange(n_logs, dtype=np.int64), np.diff(batch.call_bounds)) if n_logs > 1 else 0
    pairs = call_owner * N_IDS + batch.call_func
    uncounted = batch.repeated[~batch.part[batch.repeated] & (batch.more < 0)]
    if len(uncounted):
        pairs = np.delete(pairs, batch.call_index(uncounted))
    if n_logs * N_IDS <= 4 * len(pairs) + (1 << 16):
        called = np.zeros((n_logs, N_IDS), bool)
        called.reshape(-1)[pairs] = True
        return called.sum(axis=0, dtype=np.int64)
    return np.bincount(arrays.unique(pairs) % N_IDS, minlength=N_IDS).astype(np.int64)


def function_partials(log, start_ns, end_ns, waits=None):
    """Dense per-function sums of one log (``batch_partials``): {column: int64 array indexed by
    function id}.  `waits` (owned_waits' columns of the log's calls) adds the wait columns."""
    return batch_partials(ProfileBatch([log], [(start_ns, end_ns)]), waits)


def program_spans(batch):
    """(start, end) int64 ns per log of a batch: its program, from the end of its first MPI_Init
    to the start of its last MPI_Finalize.

    Without a Finalize record (the rank crashed or was killed) the end is the end of
    its last record; without an Init, the start is the start of its first; (0, 0) for a
    log without records.
    """
    n_logs, special = batch.n_ranks, batch.init_or_finalize
    func, owner = batch.func[special], batch.positions(special)
    inits = special[IS_INIT[func] & ((batch.flags[special] & record.PART) == 0)]
    first_init = np.full(n_logs, len(batch.func), np.int64)
    np.minimum.at(first_init, batch.positions(inits), inits)
    finals = special[IS_FINALIZE[func]]
    last_final = np.full(n_logs, -1, np.int64)
    np.maximum.at(last_final, owner[IS_FINALIZE[func]], finals)
    start, end = np.zeros(n_logs, np.int64), np.zeros(n_logs, np.int64)
    init, final = first_init < len(batch.func), last_final >= 0
    start[init] = batch.end_ns[first_init[init]]
    end[final] = batch.start_ns[last_final[final]]
    has = np.diff(batch.first_record) > 0
    if (has & ~(init & final)).any():       # a log cut short: its first start, its last end
        firsts = batch.first_record[:-1][has]
        start[has & ~init] = np.minimum.reduceat(batch.start_ns, firsts)[~init[has]]
        end[has & ~final] = np.maximum.reduceat(batch.end_ns, firsts)[~final[has]]
    return start, end


def owned_program_spans(logs, times):
    """{trace rank: (start, end) ns of its program} (``program_spans``) of the owned `logs`
    ({rank: RankLog}, `times` {rank: (start_ns, end_ns) per record}), a batch at a time."""
    owned, spans = sorted(logs), {}
    for first, stop in owned_batches([logs[rank].n_records for rank in owned]):
        ranks = owned[first:stop]
        start, end = program_spans(ProfileBatch([logs[rank] for rank in ranks], [times[rank] for rank in ranks]))
        spans.update(zip(ranks, zip(start.tolist(), end.tolist())))
    return spans


def program_span(log, start_ns, end_ns):
    """(start, end) ns of one log's program (``program_spans``)."""
    start, end = program_spans(ProfileBatch([log], [(np.asarray(start_ns), np.asarray(end_ns))]))
    return int(start[0]), int(end[0])


def compute_times(batch):
    """Per log of a batch: the summed gaps between its consecutive calls (overlapping threaded
    calls add nothing)."""
    calls = batch.calls
    start, end = batch.start_ns[calls], batch.end_ns[calls]
    gap = np.zeros(len(start), np.int64)
    np.maximum(start[1:] - end[:-1], 0, out=gap[:-1])
    bounds = batch.call_bounds
    gap[bounds[1:][np.diff(bounds) > 0] - 1] = 0       # a log's last call: the next call is another log's
    return arrays.run_sums(gap, bounds)


def wait_columns(batch, waits, by_state):
    """The rank table's wait columns per log of a batch from their calls' `waits` (Init and
    Finalize left out) and `by_state`, the logs' charged wait per wait state (``state_sums``)."""
    columns = {name: _without_init_finalize(batch, waits[name]) for name in ("execution", "wait_before", "wait_after")}
    columns["wait"] = columns["wait_before"] + columns["wait_after"]
    columns["compute"] = compute_times(batch)
    columns.update({name: by_state[:, i] for i, name in enumerate(waits_module.WAIT_STATES)})
    return columns


def state_sums(waitstates, ranks):
    """int64 charged wait per (rank of `ranks`, wait state) of a wait-state table
    (metrics.run_tables.waitstate_rows: sums per rank, function and kind); a rank without rows has
    no charged wait, a row of a rank not in `ranks` counts nowhere."""
    ranks = np.asarray(ranks, np.int64)
    sums = np.zeros((len(ranks), len(waits_module.WAIT_STATES)), np.int64)
    rank = np.asarray(waitstates["rank"], np.int64)
    order = np.argsort(ranks)
    at = np.searchsorted(ranks[order], rank)
    known = at < len(ranks)
    known[known] = ranks[order][at[known]] == rank[known]
    np.add.at(sums, (order[at[known]], np.asarray(waitstates["kind"], np.int64)[known]),
              np.asarray(waitstates["time"], np.int64)[known])
    return sums


def imbalance(wait, execution, compute):
    """The share of a rank's time spent waiting: wait / (wait + execution + compute), NaN where the
    denominator is not positive (vectorised).  Every wait is within its call (waits.py), so this is
    from 0 to 1: wait + execution is the rank's MPI time, compute the time between its calls."""
    denominator = np.asarray(wait + execution + compute, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, np.asarray(wait, np.float64) / np.where(denominator > 0, denominator, 1),
                        np.nan)


def reached_finalize(log):
    """The shim closed the log in MPI_Finalize, or the log holds the call (written on entry, before any wait).

    (A log that could not grow on a full disk is closed without its Finalize record.)
    """
    return bool(batch_reached_finalize(ProfileBatch([log]))[0])


def batch_reached_finalize(batch):
    """``reached_finalize`` of each log of a batch."""
    special = batch.init_or_finalize
    finals = batch.positions(special[IS_FINALIZE[batch.func[special]]])
    return np.array([log.finalized for log in batch.logs], bool) | (np.bincount(finals, minlength=batch.n_ranks) > 0)


def incomplete_requests(log):
    """Nonblocking operations the log starts and never completes (nor frees): cut off by a crash, or leaked.

    Counted per request id (persistent requests start many times): starts minus
    completions, 0 for a freed request.
    """
    return int(batch_incomplete_requests(ProfileBatch([log]))[0])


def batch_incomplete_requests(batch):
    """``incomplete_requests`` of each log of a batch (int64 per log): request ids are a log's own,
    so an operation is known by (log, request id)."""
    # Only the records of request functions are looked at: one strided pass for their ids.
    maybe = np.flatnonzero(OF_REQUESTS[batch.func])
    func, owner = batch.func[maybe], batch.positions(maybe)
    part = (batch.flags[maybe] & record.PART) != 0
    request = batch.field("request", maybe)
    has_request = request != 0
    started = has_request & np.where(part, STARTS_IN_PARTS[func], STARTS_IN_CALL[func])
    ended = has_request & part & ENDS_IN_PARTS[func]
    freed = has_request & ~part & FREES[func]
    kept = np.flatnonzero(started | ended | freed)
    _, request_code = arrays.unique_codes(request[kept])
    width = int(request_code.max()) + 1 if len(kept) else 1
    ids, op = arrays.unique_codes(owner[kept] * width + request_code)
    open_count = (np.bincount(op[started[kept]], minlength=len(ids))
                  - np.bincount(op[ended[kept]], minlength=len(ids))).astype(np.int64)
    # An id never started (only completed or freed) counts nothing: 0 - ends is clipped below.
    open_count[np.bincount(op[freed[kept]], minlength=len(ids)) > 0] = 0
    per_log = np.zeros(batch.n_ranks, np.int64)
    np.add.at(per_log, ids // width, np.clip(open_count, 0, None))
    return per_log


def batch_rows(batch, ranks, linked=None, by_state=None):
    """(rank rows of a batch's logs, {column: values per log}, program_start/end absolute ns:
    made relative later; the function partials of their records): `linked` (link.Linked, whose
    calls' record_times are the batch's times) adds the wait and clock columns, `by_state`
    (``state_sums`` of `ranks`) the wait states'."""
    logs = batch.logs
    ranks = np.asarray(ranks, np.int64)
    waits = linked.waits.of_ranks(ranks) if linked is not None else None
    partials, sums = batch_partials(batch, waits), log_sums(batch)
    program_start, program_end = program_spans(batch)
    rows = {
        "rank": ranks,
        "host": np.array([log.hostname for log in logs], object),
        "pid": np.array([int(log.header["pid"]) for log in logs], np.int64),
        "program_start": program_start,
        "program_end": program_end,
        **{name: sums[name] for name in ("mpi_time", "calls")},
        "records": np.diff(batch.first_record),
        **{name: sums[name] for name in ("bytes_sent", "bytes_received", "bytes_collective")},
        "finalized": batch_reached_finalize(batch),
        "log_closed": np.array([log.finalized for log in logs], bool),
        "recording_dropped": np.array([log.recording_dropped for log in logs], bool),
        "incomplete_requests": batch_incomplete_requests(batch),
    }
    if linked is not None:
        rows.update(wait_columns(batch, waits, by_state))
        rows.update(clock_columns(linked, ranks))
    return rows, partials


def local_tables(logs, times, linked=None, waitstates=None):
    """(rank rows: a {column: values per rank} block per batch of owned logs, the function
    partials summed over the owned logs) of this analysis rank.

    `logs` maps trace rank -> RankLog, `times` trace rank -> (start_ns, end_ns)
    per record; `linked` (link.Linked, whose calls' record_times are `times`) adds the wait and
    clock columns, the wait states' sums taken from `waitstates`, its
    metrics.run_tables.waitstate_rows (made from it when not given).  Consecutive owned logs
    are taken a batch at a time (trace.batches.owned_batches).
    """
    owned = sorted(logs)
    by_state = None
    if linked is not None:
        by_state = state_sums(run_tables.waitstate_rows(linked) if waitstates is None else waitstates, owned)
    blocks, partials = [], []
    for first, stop in owned_batches([logs[rank].n_records for rank in owned]):
        ranks = owned[first:stop]
        batch = ProfileBatch([logs[rank] for rank in ranks], [times[rank] for rank in ranks])
        block, partial = batch_rows(batch, ranks, linked, by_state[first:stop] if by_state is not None else None)
        blocks.append(block)
        partials.append(partial)
    return blocks, combine_partials(partials)


def clock_columns(linked, ranks):
    """The clock columns of `ranks` (ascending): the correction applied to each."""
    lines, samples = linked.clock.lines, linked.clock.samples
    shift = linked.repair.shift_ns
    shifted = np.fromiter(shift.keys(), np.int64, len(shift))
    at = np.searchsorted(ranks, shifted)
    known = at < len(ranks)
    known[known] = ranks[at[known]] == shifted[known]
    clock_shift = np.zeros(len(ranks), np.int64)
    clock_shift[at[known]] = np.fromiter(shift.values(), np.int64, len(shift))[known]
    return {"clock_offset": np.rint(lines.at(ranks, samples["init"]["local_ns"][ranks])).astype(np.int64),
            "clock_drift_ppm": lines.drift[ranks] * 1e6,
            "clock_shift": clock_shift}


# ---- combining on rank 0 --------------------------------------------------------

_PARTIAL_REDUCERS = {"calls": np.add, "ranks": np.add, "time_total": np.add, "time_min": np.minimum,
                     "time_max": np.maximum, "bytes_sent": np.add, "bytes_received": np.add,
                     "bytes_collective": np.add, "wait_before": np.add, "wait_after": np.add, "execution": np.add,
                     "device_calls": np.add}


def combine_partials(partials):
    """Dense partials of several logs (or analysis ranks) combined into one; None when there are none."""
    partials = [p for p in partials if p is not None]
    if not partials:
        return None
    return {name: ufunc.reduce(np.stack([p[name] for p in partials]), axis=0)
            for name, ufunc in _PARTIAL_REDUCERS.items()}


def function_table(partials):
    """The function table from dense partials: the functions called, longest time_total first."""
    funcs = np.flatnonzero(partials["calls"]) if partials is not None else np.zeros(0, np.int64)
    cols = {name: partials[name][funcs] if partials is not None else np.zeros(0, np.int64)
            for name in _PARTIAL_REDUCERS}
    # Every called function has calls >= 1: a part record never comes without its call record.
    cols["time_mean"] = np.rint(cols["time_total"] / np.maximum(cols["calls"], 1)).astype(np.int64)
    cols["function_id"] = funcs.astype(np.int64)
    cols["function"] = np.array([mf.name_of(f) for f in funcs], dtype=object)
    cols["kind"] = np.array([mf.BY_ID[f].kind for f in funcs], dtype=object)
    cols["time_on_path"] = np.zeros(len(funcs), np.int64)      # filled by with_path
    order = np.lexsort((funcs, -cols["time_total"]))
    return {c.name: cols[c.name][order] for c in FUNCTION_COLUMNS}


def rank_table(blocks):
    """Rank rows (``local_tables``' blocks, from any number of analysis ranks) as the rank table,
    sorted by rank."""
    table = {}
    for column in RANK_COLUMNS:
        if column.name in ("program_time", "mpi_fraction", "imbalance", "time_on_path"):
            continue
        dtype = {"str": object, "bool": bool, "float": np.float64}.get(column.kind, np.int64)
        missing = np.nan if column.kind == "float" else 0     # runs analysed without the match stage
        table[column.name] = arrays.end_to_end([np.asarray(block[column.name], dtype) if column.name in block
                                      else np.full(len(block["rank"]), missing, dtype) for block in blocks], dtype)
    order = np.argsort(table["rank"], kind="stable")
    table = {name: values[order] for name, values in table.items()}
    table["imbalance"] = imbalance(table["wait"], table["execution"], table["compute"])
    # A log with no records has no times: it gets the run's start, so it adds no bogus span.
    has_times = table["records"] > 0
    run_start = table["program_start"][has_times].min() if has_times.any() else 0
    for name in ("program_start", "program_end"):
        table[name] = np.where(has_times, table[name] - run_start, 0)
    table["program_time"] = table["program_end"] - table["program_start"]
    table["time_on_path"] = np.zeros(len(table["rank"]), np.int64)      # filled by with_path
    with np.errstate(divide="ignore", invalid="ignore"):
        table["mpi_fraction"] = np.where(table["program_time"] > 0,
                                         table["mpi_time"] / np.maximum(table["program_time"], 1), np.nan)
    return {c.name: table[c.name] for c in RANK_COLUMNS}


Tables = namedtuple("Tables", "ranks functions")


def gather_tables(comm, local):
    """Combine every analysis rank's local_tables() on rank 0: Tables there, None elsewhere."""
    gathered = comm.gather(local, root=0)
    if comm.rank != 0:
        return None
    blocks = [block for rank_blocks, _ in gathered for block in rank_blocks]
    return Tables(rank_table(blocks), function_table(combine_partials([p for _, p in gathered])))


def with_path(tables, path):
    """Tables with time_on_path filled from a critical_path table or its Totals (None: no path,
    zeros stay)."""
    if path is None:
        return tables
    ranks, functions = dict(tables.ranks), dict(tables.functions)
    # Totals hold every trace rank's time (reduce_totals of the run's world size): indexed by rank.
    n_ranks = int(ranks["rank"].max()) + 1 if len(ranks["rank"]) else 0
    whole = path if isinstance(path, critical_path.Totals) else critical_path.totals(path, n_ranks)
    ranks["time_on_path"] = whole.per_rank[ranks["rank"]]
    per_function = whole.time_per_function()
    functions["time_on_path"] = np.array([per_function.get(f, 0) for f in functions["function"].tolist()],
                                         np.int64)
    return Tables(ranks, functions)
