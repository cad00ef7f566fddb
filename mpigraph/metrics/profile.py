"""Profile tables: one row per MPI function (mpiP style) and one row per rank.

Each analysis rank computes partial tables from the logs it owns (vectorised
over records), then ``gather_tables`` combines them on analysis rank 0.  A
table is a dict of equal-length numpy arrays, column name -> values, in the
order of its schema below; times are int64 ns.

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

from collections import namedtuple

import numpy as np

from mpigraph.metrics import run_tables, waits as waits_module
from mpigraph.paths import segments as critical_path
from mpigraph.schema import FUNCTION_COLUMNS, RANK_COLUMNS  # noqa: F401  (the tables' schemas, re-exported)

from mpigraph.util import arrays
from mpigraph.trace import functions as mf
from mpigraph.trace import record


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


# ---- one rank's log -----------------------------------------------------------

def _category_table():
    """Category (PART, SEND, RECV bits) of every possible flags value: one lookup per record."""
    flags = np.arange(1 << 16, dtype=np.uint32)
    return (((flags & record.PART) != 0) * _PART_BIT | ((flags & record.SEND) != 0) * _SEND_BIT
            | ((flags & record.RECV) != 0) * _RECV_BIT).astype(np.uint32)


_CATEGORY = _category_table()


def function_partials(log, start_ns, end_ns, waits=None):
    """Dense per-function sums of one log: {column: int64 array indexed by function id}.

    One pass of numpy over the records, no sorting: counts and byte sums by
    (function id, category) with bincount/add.at, call durations with add.at,
    minimum.at and maximum.at (exact int64, unlike bincount's float weights).
    `waits` (waits.call_waits of the log, per call) adds the wait columns.
    """
    records = log.records
    func = log.column("func")
    flags = log.column("flags")
    part = (flags & record.PART) != 0
    key = (func.astype(np.uint32) << 3) | _CATEGORY[flags]
    count = np.bincount(key, minlength=N_IDS * 8)
    repeated = np.flatnonzero(flags & record.REPEAT)     # a merged run of polls: seq calls (trace/record.py)
    np.add.at(count, key[repeated], records["seq"][repeated].astype(np.int64) - 1)
    count = count.reshape(N_IDS, 8)
    nbytes = np.zeros(N_IDS * 8, np.int64)
    np.add.at(nbytes, key, records["bytes"])
    nbytes = nbytes.reshape(N_IDS, 8)

    call = ~part
    call_func = func[call].astype(np.intp)
    duration = (end_ns - start_ns)[call]
    total = np.zeros(N_IDS, np.int64)
    shortest = np.full(N_IDS, _INT64_MAX, np.int64)
    longest = np.full(N_IDS, _INT64_MIN, np.int64)
    np.add.at(total, call_func, duration)
    np.minimum.at(shortest, call_func, duration)
    np.maximum.at(longest, call_func, duration)

    calls = count[:, _CALL_CATS].sum(axis=1)
    # Calls with a GPU device buffer (record flag DEVICE, csrc/gpu.c): a call record's own flag.
    device_calls = np.bincount(call_func[(flags[call] & record.DEVICE) != 0], minlength=N_IDS).astype(np.int64)
    per_call = {}
    for name in ("wait_before", "wait_after", "execution"):
        per_call[name] = np.zeros(N_IDS, np.int64)
        if waits is not None:
            np.add.at(per_call[name], call_func, waits[name])
    return {**per_call,
        "calls": calls,
        "ranks": (calls > 0).astype(np.int64),
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


def program_span(log, start_ns, end_ns):
    """(start, end) ns of the rank's program: first MPI_Init end to last MPI_Finalize start.

    Without a Finalize record (the rank crashed or was killed) the end is the end of
    its last record; without an Init, the start is the start of its first.
    """
    if log.n_records == 0:
        return 0, 0
    func = log.column("func")
    inits = np.flatnonzero(IS_INIT[func] & ((log.column("flags") & record.PART) == 0))
    start = end_ns[inits[0]] if len(inits) else start_ns.min()
    finals = np.flatnonzero(IS_FINALIZE[func])
    end = start_ns[finals[-1]] if len(finals) else end_ns.max()
    return int(start), int(end)


def compute_time(call_start, call_end):
    """Summed gaps between consecutive calls (overlapping threaded calls add nothing)."""
    return int(np.maximum(call_start[1:] - call_end[:-1], 0).sum()) if len(call_start) else 0


def wait_row(call_start, call_end, func, waits, by_state):
    """The rank table's wait columns of one rank from its per-call waits (Init and Finalize left
    out) and `by_state`, its charged wait per wait state (``state_sums``)."""
    # The sums over all calls less the few Init and Finalize calls: no masked copy of every column.
    init_final = np.flatnonzero(IS_INIT[func] | IS_FINALIZE[func])
    row = {name: int(waits[name].sum()) - int(waits[name][init_final].sum())
           for name in ("execution", "wait_before", "wait_after")}
    row["wait"] = row["wait_before"] + row["wait_after"]
    row["compute"] = compute_time(call_start, call_end)
    row.update({name: int(by_state[i]) for i, name in enumerate(waits_module.WAIT_STATES)})
    return row


def state_sums(waitstates):
    """{trace rank: int64 charged wait per wait state} of a wait-state table
    (metrics.run_tables.waitstate_rows: sums per rank, function and kind); a rank without rows has
    no charged wait."""
    ranks, at = np.unique(np.asarray(waitstates["rank"], np.int64), return_inverse=True)
    sums = np.zeros((len(ranks), len(waits_module.WAIT_STATES)), np.int64)
    np.add.at(sums, (at.reshape(-1), np.asarray(waitstates["kind"], np.int64)), waitstates["time"])
    return dict(zip(ranks.tolist(), sums))


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
    return log.finalized or (bool(IS_FINALIZE[log.column("func")].any()) if log.n_records else False)


def incomplete_requests(log):
    """Nonblocking operations the log starts and never completes (nor frees): cut off by a crash, or leaked.

    Counted per request id (persistent requests start many times): starts minus
    completions, 0 for a freed request.
    """
    func = log.column("func")
    part = (log.column("flags") & record.PART) != 0
    # Only the records of request functions are looked at: one strided pass for their ids.
    maybe = np.flatnonzero(STARTS_IN_PARTS[func] | STARTS_IN_CALL[func] | ENDS_IN_PARTS[func] | FREES[func])
    func, part, request = func[maybe], part[maybe], log.records["request"][maybe]
    has_request = request != 0
    started = request[has_request & np.where(part, STARTS_IN_PARTS[func], STARTS_IN_CALL[func])]
    ended = request[has_request & part & ENDS_IN_PARTS[func]]
    freed = request[has_request & ~part & FREES[func]]
    ids = arrays.unique(started)
    if len(ids) == 0:
        return 0
    open_count = np.bincount(np.searchsorted(ids, started), minlength=len(ids)).astype(np.int64)
    ended = ended[np.isin(ended, ids)]
    open_count -= np.bincount(np.searchsorted(ids, ended), minlength=len(ids))
    open_count[np.isin(ids, freed)] = 0
    return int(np.clip(open_count, 0, None).sum())


def rank_row(log, start_ns, end_ns, partials):
    """The per-rank values of one log (program_start/end absolute ns; made relative later)."""
    program_start, program_end = program_span(log, start_ns, end_ns)
    user_calls = ~IS_INIT & ~IS_FINALIZE
    return {
        "rank": log.rank,
        "host": log.hostname,
        "pid": int(log.header["pid"]),
        "program_start": program_start,
        "program_end": program_end,
        "mpi_time": int(partials["time_total"][user_calls].sum()),
        "calls": int(partials["calls"].sum()),
        "records": log.n_records,
        "bytes_sent": int(partials["bytes_sent"].sum()),
        "bytes_received": int(partials["bytes_received"].sum()),
        "bytes_collective": int(partials["bytes_collective"].sum()),
        "finalized": reached_finalize(log),
        "log_closed": log.finalized,
        "recording_dropped": log.recording_dropped,
        "incomplete_requests": incomplete_requests(log),
    }


def local_tables(logs, times, linked=None, waitstates=None):
    """(rank rows, function partials summed over the owned logs) of this analysis rank.

    `logs` maps trace rank -> RankLog, `times` trace rank -> (start_ns, end_ns)
    per record; `linked` (link.Linked) adds the wait and clock columns, the wait states' sums
    taken from `waitstates`, its metrics.run_tables.waitstate_rows (made from it when not given).
    """
    rows, partials = [], []
    if linked is not None:
        by_state = state_sums(run_tables.waitstate_rows(linked) if waitstates is None else waitstates)
        no_state = np.zeros(len(waits_module.WAIT_STATES), np.int64)
    for rank, log in logs.items():
        start_ns, end_ns = times[rank]
        waits = linked.waits[rank] if linked is not None else None
        partial = function_partials(log, start_ns, end_ns, waits)
        row = rank_row(log, start_ns, end_ns, partial)
        if linked is not None:
            calls = linked.calls[rank]
            row.update(wait_row(calls.start_ns, calls.end_ns, calls.func, waits, by_state.get(rank, no_state)))
            row.update(clock_row(linked, rank))
        rows.append(row)
        partials.append(partial)
    return rows, combine_partials(partials)


def clock_row(linked, rank):
    """The clock columns of one rank: the correction applied to it."""
    lines, samples = linked.clock.lines, linked.clock.samples
    return {"clock_offset": int(round(float(lines.at(rank, samples["init"]["local_ns"][rank])))),
            "clock_drift_ppm": float(lines.drift[rank]) * 1e6,
            "clock_shift": int(linked.repair.shift_ns.get(rank, 0))}


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


def rank_table(rows):
    """Rank rows (from any number of analysis ranks) as the rank table, sorted by rank."""
    rows = sorted(rows, key=lambda row: row["rank"])
    table = {}
    for column in RANK_COLUMNS:
        if column.name in ("program_time", "mpi_fraction", "imbalance", "time_on_path"):
            continue
        dtype = {"str": object, "bool": bool, "float": np.float64}.get(column.kind, np.int64)
        missing = np.nan if column.kind == "float" else 0     # runs analysed without the match stage
        table[column.name] = np.array([row.get(column.name, missing) for row in rows], dtype=dtype)
    table["imbalance"] = imbalance(table["wait"], table["execution"], table["compute"])
    # A log with no records has no times: it gets the run's start, so it adds no bogus span.
    has_times = table["records"] > 0
    run_start = table["program_start"][has_times].min() if has_times.any() else 0
    for name in ("program_start", "program_end"):
        table[name] = np.where(has_times, table[name] - run_start, 0)
    table["program_time"] = table["program_end"] - table["program_start"]
    table["time_on_path"] = np.zeros(len(rows), np.int64)      # filled by with_path
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
    rows = [row for rank_rows, _ in gathered for row in rank_rows]
    return Tables(rank_table(rows), function_table(combine_partials([p for _, p in gathered])))


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
