"""Profile tables: one row per MPI function (mpiP style) and one row per rank.

Each analysis rank computes partial tables from the logs it owns (vectorised
over records), then ``gather_tables`` combines them on analysis rank 0.  A
table is a dict of equal-length numpy arrays, column name -> values, in the
order of its schema below; times are int64 ns.

What the columns count (the README copies this):

- calls: call records (records without the PART flag); Init and Finalize included;
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

from mpigraph import mpi_functions as mf
from mpigraph import record

# kind: "time" (int64 ns; seconds in CSV), "int", "float", "str", "bool".
Column = namedtuple("Column", "name kind help")

RANK_COLUMNS = [
    Column("rank", "int", "MPI_COMM_WORLD rank"),
    Column("host", "str", "host name"),
    Column("pid", "int", "process id"),
    Column("program_start", "time", "end of the first MPI_Init, from the run's start (the earliest of all ranks)"),
    Column("program_end", "time", "start of the last MPI_Finalize (end of the last record if not finalised), "
                                  "from the run's start"),
    Column("program_time", "time", "program_end - program_start"),
    Column("mpi_time", "time", "summed duration of the rank's MPI calls, Init and Finalize excluded"),
    Column("mpi_fraction", "float", "mpi_time / program_time"),
    Column("calls", "int", "MPI calls (call records)"),
    Column("records", "int", "records in the log (calls and their parts)"),
    Column("bytes_sent", "int", "point-to-point bytes sent"),
    Column("bytes_received", "int", "point-to-point bytes received"),
    Column("bytes_collective", "int", "bytes passed to collectives"),
    Column("finalized", "bool", "the rank reached MPI_Finalize (false: it crashed or was killed)"),
    Column("recording_dropped", "bool", "the shim stopped recording early (disk full): calls are missing"),
]

FUNCTION_COLUMNS = [
    Column("function", "str", "MPI function name"),
    Column("function_id", "int", "mpigraph's function id (mpigraph.mpi_functions)"),
    Column("kind", "str", "function kind (send, recv, n_to_n, completion, ...)"),
    Column("calls", "int", "calls over all ranks"),
    Column("ranks", "int", "ranks that called it"),
    Column("time_total", "time", "summed duration of its calls"),
    Column("time_mean", "time", "time_total / calls"),
    Column("time_min", "time", "shortest call"),
    Column("time_max", "time", "longest call"),
    Column("bytes_sent", "int", "point-to-point bytes sent"),
    Column("bytes_received", "int", "point-to-point bytes received"),
    Column("bytes_collective", "int", "bytes passed to collectives"),
]

# ---- vectorised lookups by function id ------------------------------------------

_KINDS = sorted({f.kind for f in mf.FUNCTIONS})
_KIND_CODE = {k: i for i, k in enumerate(_KINDS)}


def _kind_table():
    table = np.full(1 << 16, -1, np.int16)
    for f in mf.FUNCTIONS:
        table[f.id] = _KIND_CODE[f.kind]
    return table


KIND_OF = _kind_table()   # function id -> kind code (-1: unknown id)


def _kind_mask(kind_codes, *kinds):
    return np.isin(kind_codes, [_KIND_CODE[k] for k in kinds])


# ---- grouping --------------------------------------------------------------

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def group_reduce(keys, columns):
    """Group rows by key and reduce each column with its ufunc.

    `columns` maps name -> (values, ufunc) with ufunc one of np.add, np.minimum,
    np.maximum.  Returns (sorted unique keys, {name: reduced values}).
    """
    keys = np.asarray(keys)
    if len(keys) == 0:
        return keys[:0], {name: np.asarray(values)[:0] for name, (values, _) in columns.items()}
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    reduced = {name: ufunc.reduceat(np.asarray(values)[order], starts) for name, (values, ufunc) in columns.items()}
    return sorted_keys[starts], reduced


# ---- one rank's log -----------------------------------------------------------

def record_masks(records):
    """Boolean masks over the records: call, init, finalize, sent, received, collective."""
    flags = records["flags"]
    kind = KIND_OF[records["func"]]
    part = (flags & record.PART) != 0
    call = ~part
    sends = (flags & record.SEND) != 0
    recvs = (flags & record.RECV) != 0
    persistent = (flags & record.PERSISTENT) != 0
    return {
        "call": call,
        "init": call & _kind_mask(kind, mf.INIT),
        "finalize": call & _kind_mask(kind, mf.FINALIZE),
        # A persistent send moves data at each Start (a part per request), not at Send_init.
        "sent": sends & ((call & ~persistent) | (part & _kind_mask(kind, mf.START))),
        # Received sizes are known from the status: at the receive, or at the completion of a request.
        "received": recvs & ((call & _kind_mask(kind, mf.RECV))
                             | (part & _kind_mask(kind, mf.SENDRECV, mf.COMPLETION))),
        "collective": call & _kind_mask(kind, mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN),
    }


def rank_row(log, start_ns, end_ns, masks):
    """The per-rank values of one log (program_start/end absolute ns; made relative later)."""
    nbytes = log.records["bytes"]
    call, init, finalize = masks["call"], masks["init"], masks["finalize"]
    if len(start_ns) == 0:
        program_start = program_end = 0
    else:
        inits = np.flatnonzero(init)
        program_start = end_ns[inits[0]] if len(inits) else start_ns.min()
        finals = np.flatnonzero(finalize)
        program_end = start_ns[finals[-1]] if (log.finalized and len(finals)) else end_ns.max()
    mpi_calls = call & ~init & ~finalize
    return {
        "rank": log.rank,
        "host": log.hostname,
        "pid": int(log.header["pid"]),
        "program_start": int(program_start),
        "program_end": int(program_end),
        "mpi_time": int((end_ns[mpi_calls] - start_ns[mpi_calls]).sum()),
        "calls": int(call.sum()),
        "records": log.n_records,
        "bytes_sent": int(nbytes[masks["sent"]].sum()),
        "bytes_received": int(nbytes[masks["received"]].sum()),
        "bytes_collective": int(nbytes[masks["collective"]].sum()),
        "finalized": log.finalized,
        "recording_dropped": log.recording_dropped,
    }


def function_partials(log, start_ns, end_ns, masks):
    """Per-function partial sums of one log: func, calls, ranks, time sums/min/max, bytes."""
    call = masks["call"]
    duration = end_ns - start_ns
    nbytes = log.records["bytes"]
    zero = np.int64(0)
    funcs, cols = group_reduce(log.records["func"], {
        "calls": (call.astype(np.int64), np.add),
        "time_total": (np.where(call, duration, zero), np.add),
        "time_min": (np.where(call, duration, _INT64_MAX), np.minimum),
        "time_max": (np.where(call, duration, _INT64_MIN), np.maximum),
        "bytes_sent": (np.where(masks["sent"], nbytes, zero), np.add),
        "bytes_received": (np.where(masks["received"], nbytes, zero), np.add),
        "bytes_collective": (np.where(masks["collective"], nbytes, zero), np.add),
    })
    cols["function_id"] = funcs.astype(np.int64)
    cols["ranks"] = np.ones(len(funcs), np.int64)
    return cols


def local_tables(logs, times):
    """(rank rows, function partials) of the logs this analysis rank owns.

    `logs` maps trace rank -> RankLog, `times` trace rank -> (start_ns, end_ns).
    """
    rows, partials = [], []
    for rank, log in logs.items():
        start_ns, end_ns = times[rank]
        masks = record_masks(log.records)
        rows.append(rank_row(log, start_ns, end_ns, masks))
        partials.append(function_partials(log, start_ns, end_ns, masks))
    return rows, partials


# ---- combining on rank 0 --------------------------------------------------------

_PARTIAL_REDUCERS = {"calls": np.add, "ranks": np.add, "time_total": np.add, "time_min": np.minimum,
                     "time_max": np.maximum, "bytes_sent": np.add, "bytes_received": np.add,
                     "bytes_collective": np.add}


def function_table(partials):
    """Combine per-log partials into the function table, sorted by time_total, longest first."""
    merged = {name: np.concatenate([p[name] for p in partials]) if partials else np.zeros(0, np.int64)
              for name in list(_PARTIAL_REDUCERS) + ["function_id"]}
    funcs, cols = group_reduce(merged["function_id"], {n: (merged[n], u) for n, u in _PARTIAL_REDUCERS.items()})
    # Every row has calls >= 1: a part record never comes without its call record.
    cols["time_mean"] = np.rint(cols["time_total"] / np.maximum(cols["calls"], 1)).astype(np.int64)
    cols["function_id"] = funcs
    cols["function"] = np.array([mf.name_of(f) for f in funcs], dtype=object)
    cols["kind"] = np.array([mf.BY_ID[f].kind for f in funcs], dtype=object)
    order = np.lexsort((funcs, -cols["time_total"]))
    return {c.name: cols[c.name][order] for c in FUNCTION_COLUMNS}


def rank_table(rows):
    """Rank rows (from any number of analysis ranks) as the rank table, sorted by rank."""
    rows = sorted(rows, key=lambda row: row["rank"])
    table = {}
    for column in RANK_COLUMNS:
        if column.name in ("program_time", "mpi_fraction"):
            continue
        dtype = {"str": object, "bool": bool, "float": np.float64}.get(column.kind, np.int64)
        table[column.name] = np.array([row[column.name] for row in rows], dtype=dtype)
    # A log with no records has no times: it gets the run's start, so it adds no bogus span.
    has_times = table["records"] > 0
    run_start = table["program_start"][has_times].min() if has_times.any() else 0
    for name in ("program_start", "program_end"):
        table[name] = np.where(has_times, table[name] - run_start, 0)
    table["program_time"] = table["program_end"] - table["program_start"]
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
    partials = [p for _, rank_partials in gathered for p in rank_partials]
    return Tables(rank_table(rows), function_table(partials))
