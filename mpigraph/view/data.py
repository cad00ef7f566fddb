"""What the views show, gathered from a run directory: calls, messages, the critical path.

The raw logs alone are enough: every call record becomes an interval (times
from ``clock.to_ns``, from the run's start), and point-to-point messages are
paired by a simple vectorised match (per communicator, source, destination
and tag, in order: MPI's non-overtaking rule; a receive is the record that
carries the RECV flag: a blocking receive, the receive half of a Sendrecv, or
the Wait/Test part that completed a nonblocking receive).

When the analysis wrote more, the views take it from its files:

- ``calls.parquet`` (aligned clocks, wait before / wait after / execution per
  call): its start/end replace the raw times and its waits colour the calls;
- ``critical_path.parquet``: the segments that are highlighted.

The phase marks (MPI_Pcontrol, mpigraph_phase_begin/_end) are no calls here: they become
``regions``, a slice per named region and Pcontrol phase per rank (export.regions nests them), and
leave ``calls``.

A missing file is not an error: ``RunData.notes`` says what could not be shown
and why, and the views print those notes.
"""

import os

import numpy as np

from mpigraph.clock import models as clock
from mpigraph.metrics import profile as metrics
from mpigraph.trace import record
from mpigraph.trace import logs as trace
from mpigraph.paths import segments as critical_path
from mpigraph.match.core import group_key, pair_occurrences
from mpigraph.trace import functions as mf
from mpigraph.export import regions
from mpigraph.phases import regions as phase_regions

CALLS_PARQUET = "calls.parquet"
PATH_PARQUET = "critical_path.parquet"

# Kinds whose call record carries the SEND flag for data it sends, or whose parts
# carry RECV for data received; the matcher takes any record with the flag.
_P2P_KINDS = {mf.SEND, mf.ISEND, mf.SENDRECV, mf.START, mf.RECV, mf.COMPLETION}


class RunData:
    """Columns of one run, ready to draw (all times int64 ns from the run's start).

    calls: dict of equal-length arrays, sorted by (rank, start):
        rank, start, end, func (function id), peer, tag, comm, bytes;
        wait_before, wait_after, execution (int64) only when ``has_waits``.
    rank_offsets: int64[P+1], the calls of rank r are calls[off[r]:off[r+1]].
    program_start, program_end: int64[P], each rank's program (metrics.program_span).
    messages: dict send, recv (indices into calls), sorted by send.
    path: the critical path segments (critical_path.segments columns) or None.
    regions: dict rank, start, end, depth (0 outermost), name (index into region_names), kind
        (0 a named region, 1 a Pcontrol phase): the phase marks' regions, sorted by (rank, start, depth).
    notes: what could not be shown and why, for the page.
    """

    def __init__(self, run_dir, world_size, job_id, calls, rank_offsets, program_start, program_end, messages,
                 path, has_waits, sources, notes, regions=None, region_names=()):
        self.run_dir = run_dir
        self.world_size = world_size
        self.job_id = job_id
        self.calls = calls
        self.rank_offsets = rank_offsets
        self.program_start = program_start
        self.program_end = program_end
        self.messages = messages
        self.path = path
        self.has_waits = has_waits
        self.sources = sources
        self.notes = notes
        self.regions = regions if regions is not None else _no_regions()
        self.region_names = list(region_names)

    @property
    def n_calls(self):
        return len(self.calls["rank"])

    @property
    def duration(self):
        """From the run's start to the last event shown."""
        ends = [self.program_end.max(initial=0), self.calls["end"].max(initial=0)]
        if self.path is not None and len(self.path["end"]):
            ends.append(self.path["end"].max())
        return int(max(ends))

    def per_rank(self):
        """{column: int64[P]}: program_time, mpi_time, execution, wait, critical_path (None when unknown)."""
        p, c = self.world_size, self.calls
        user = ~(metrics.IS_INIT[c["func"]] | metrics.IS_FINALIZE[c["func"]])
        rank = c["rank"][user]
        mpi = np.bincount(rank, weights=(c["end"] - c["start"])[user], minlength=p)
        out = {"rank": np.arange(p), "program_time": self.program_end - self.program_start,
               "mpi_time": mpi.astype(np.int64), "execution": None, "wait": None, "critical_path": None}
        if self.has_waits:
            wait = (c["wait_before"] + c["wait_after"])[user]
            out["wait"] = np.bincount(rank, weights=wait, minlength=p).astype(np.int64)
            out["execution"] = out["mpi_time"] - out["wait"]
        if self.path is not None:
            out["critical_path"] = critical_path.time_per_rank(self.path, p)
        return out


# ---- calls from the raw logs ---------------------------------------------------

def _raw_calls(run):
    """(calls, offsets, program_start, program_end, endpoints) from the logs; times absolute ns.

    endpoints: (is_send, call index, comm, src, dst, tag, record order) of every
    point-to-point record, for the message matcher.
    """
    cols = {k: [] for k in ("rank", "start", "end", "func", "peer", "tag", "comm", "bytes", "log_call",
                            "log_record")}
    prog_start, prog_end, ends = [], [], []
    offset = 0
    for rank, log in run.logs.items():
        recs = np.asarray(log.records)   # a plain view of the memmap: faster indexing
        start_ns = clock.to_ns(log, recs["t_start"])
        end_ns = clock.to_ns(log, recs["t_end"])
        ps, pe = metrics.program_span(log, start_ns, end_ns)
        prog_start.append(ps)
        prog_end.append(pe)
        is_call = (recs["flags"] & record.PART) == 0
        calls = np.flatnonzero(is_call)
        # Calls sorted by start (threads may interleave); the index of each record's call in that order.
        order = np.argsort(start_ns[calls], kind="stable")
        calls = calls[order]
        position = np.empty(len(calls), np.int64)
        position[order] = np.arange(len(calls))
        call_of_record = trace.call_index(recs)
        rank_of_call = np.cumsum(is_call) - 1   # call record -> its index among call records (record order)
        for name, values in (("start", start_ns[calls]), ("end", end_ns[calls]), ("func", recs["func"][calls]),
                             ("peer", recs["peer"][calls]), ("tag", recs["tag"][calls]),
                             ("comm", recs["comm"][calls]), ("bytes", recs["bytes"][calls])):
            cols[name].append(np.asarray(values))
        cols["rank"].append(np.full(len(calls), rank, np.int32))
        cols["log_call"].append(order)       # index among the rank's call records, in log order
        cols["log_record"].append(calls)     # index among the rank's records
        # Point-to-point endpoints: any record flagged SEND or RECV with a real peer.
        flags = recs["flags"]
        p2p = (((flags & (record.SEND | record.RECV)) != 0) & (recs["peer"] >= 0)
               & (call_of_record >= 0))
        idx = np.flatnonzero(p2p)
        is_send = (flags[idx] & record.SEND) != 0
        call = offset + position[rank_of_call[call_of_record[idx]]]
        src = np.where(is_send, rank, recs["peer"][idx])
        dst = np.where(is_send, recs["peer"][idx], rank)
        ends.append((is_send, call, recs["comm"][idx].astype(np.int64), src.astype(np.int64),
                     dst.astype(np.int64), recs["tag"][idx].astype(np.int64), idx))
        offset += len(calls)
    calls = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in cols.items()}
    for k in ("start", "end", "peer", "tag", "comm", "bytes", "log_call", "log_record"):
        calls[k] = calls[k].astype(np.int64)
    calls["func"] = calls["func"].astype(np.int64)
    calls["rank"] = calls["rank"].astype(np.int64)
    counts = np.bincount(calls["rank"], minlength=run.world_size)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    endpoints = tuple(np.concatenate([e[i] for e in ends]) if ends else np.zeros(0, np.int64) for i in range(7))
    records = np.array([log.n_records for log in run.logs.values()], np.int64)
    return calls, offsets, records, np.array(prog_start, np.int64), np.array(prog_end, np.int64), endpoints


def match_messages(endpoints):
    """{send, recv}: call indices of matched point-to-point messages, sorted by send.

    The k-th send from src to dst with (comm, tag) pairs with the k-th receive
    there (records in log order on each side). Unpaired endpoints are left out.
    The endpoints come rank by rank in log order, and every send of a key is on
    the key's src rank (every receive on its dst rank), so a stable sort by key
    keeps log order within a key.
    """
    is_send, call, comm, src, dst, tag, order = endpoints
    key = group_key((comm, src, dst, tag))
    sends, recvs = np.flatnonzero(is_send), np.flatnonzero(~is_send)
    s, r = pair_occurrences(key[sends], key[recvs])
    send, recv = call[sends[s]], call[recvs[r]]
    o = np.argsort(send, kind="stable")
    return {"send": send[o], "recv": recv[o]}


def _read_parquet(path):
    """{column name without _ns: numpy array} of a Parquet file."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    out = {}
    for name in table.column_names:
        key = name[:-3] if name.endswith("_ns") else name
        out[key] = table.column(name).to_numpy(zero_copy_only=False)
    return out


def _merge_calls_parquet(path, calls, offsets, records_per_rank, notes):
    """Take times and waits from calls.parquet into `calls`; returns True when the waits were taken.

    Its rows are aligned with the raw calls per rank in seq order: one row per
    call record, or one row per record (then the part records' rows are skipped).
    """
    try:
        table = _read_parquet(path)
    except Exception as e:   # noqa: BLE001 -- a damaged optional file: say so, draw without it
        notes.append("%s could not be read (%s): calls are shown with raw times, without waits" % (CALLS_PARQUET, e))
        return False
    # "call" is a row's call index on its rank (calls.parquet's order); "seq" is the collective
    # sequence number (0 for other calls), no order at all: sorting by it scrambled the times.
    order_by = "call" if "call" in table else "seq"
    need = {"rank", order_by, "start", "end"}
    if not need <= set(table):
        notes.append("%s has no %s column: calls are shown with raw times"
                     % (CALLS_PARQUET, ", ".join(sorted(need - set(table)))))
        return False
    rank = np.asarray(table["rank"], np.int64)
    n_ranks = len(offsets) - 1
    if rank.size and (rank.min() < 0 or rank.max() >= n_ranks):
        notes.append("%s names ranks outside 0..%d: not used" % (CALLS_PARQUET, n_ranks - 1))
        return False
    o = np.lexsort((np.asarray(table[order_by], np.int64), rank))
    counts = np.bincount(rank, minlength=n_ranks)
    row_offsets = np.concatenate([[0], np.cumsum(counts)])
    if np.array_equal(counts, np.diff(offsets)):
        local = calls["log_call"]
    elif np.array_equal(counts, records_per_rank):
        local = calls["log_record"]
    else:
        notes.append("%s does not match the raw logs (%d rows, %d calls, %d records): calls are shown with raw "
                     "times" % (CALLS_PARQUET, len(rank), len(calls["rank"]), records_per_rank.sum()))
        return False
    take = o[row_offsets[calls["rank"]] + local]
    calls["start"] = np.asarray(table["start"], np.int64)[take]
    calls["end"] = np.asarray(table["end"], np.int64)[take]
    if not {"wait_before", "wait_after"} <= set(table):
        notes.append("%s has no wait_before/wait_after columns: calls are not coloured by wait" % CALLS_PARQUET)
        return False

    def column(name):
        return np.nan_to_num(np.asarray(table[name], np.float64)[take]).astype(np.int64)

    calls["wait_before"] = np.maximum(column("wait_before"), 0)
    calls["wait_after"] = np.maximum(column("wait_after"), 0)
    if "execution" in table:
        calls["execution"] = column("execution")
    else:
        calls["execution"] = calls["end"] - calls["start"] - calls["wait_before"] - calls["wait_after"]
    return True


def _no_regions():
    return {k: np.zeros(0, np.int64) for k in ("rank", "start", "end", "depth", "name", "kind")}


def _rank_slices(func, tag, start, end, names):
    """[(kind, name, start, end, depth)] of one rank's regions (its calls sorted by start): each enter
    paired with its leave through a stack (a Python step per region event: marks are rare)."""
    events, kinds = regions.rank_region_events(func, tag, names)
    stack, out = [], []
    last = int(end[-1]) if len(end) else 0
    for code, call, region in zip(events["code"].tolist(), events["call"].tolist(), events["region"].tolist()):
        t = last if call < 0 else int(start[call])
        if code == regions.ENTER_CODE:
            stack.append((region, t))
        else:
            r, t0 = stack.pop()
            out.append((kinds[r][0], kinds[r][1], t0, t, len(stack)))
    return out


def _split_marks(run, calls, offsets, endpoints):
    """(calls without the phase marks, their offsets, endpoints re-indexed, regions, region names)."""
    is_mark = phase_regions.IS_MARK[calls["func"]]
    slices = []
    for rank, log in run.logs.items():
        lo, hi = offsets[rank], offsets[rank + 1]
        if is_mark[lo:hi].any():
            names = phase_regions.read_names(log.path)
            slices += [(rank,) + s for s in _rank_slices(calls["func"][lo:hi], calls["tag"][lo:hi],
                                                        calls["start"][lo:hi], calls["end"][lo:hi], names)]
    names = sorted({s[2] for s in slices})
    index = {n: i for i, n in enumerate(names)}
    slices.sort(key=lambda s: (s[0], s[3], s[5]))
    regions_out = {"rank": np.array([s[0] for s in slices], np.int64),
                   "kind": np.array([s[1] == regions.PCONTROL for s in slices], np.int64),
                   "name": np.array([index[s[2]] for s in slices], np.int64),
                   "start": np.array([s[3] for s in slices], np.int64),
                   "end": np.array([s[4] for s in slices], np.int64),
                   "depth": np.array([s[5] for s in slices], np.int64)}
    if not is_mark.any():
        return calls, offsets, endpoints, regions_out, names
    keep = ~is_mark
    new_index = np.cumsum(keep) - 1          # marks are no message endpoints: every endpoint is kept
    calls = {k: v[keep] for k, v in calls.items()}
    e = list(endpoints)
    e[1] = new_index[e[1]]
    offsets = np.searchsorted(calls["rank"], np.arange(len(offsets))).astype(np.int64)
    return calls, offsets, tuple(e), regions_out, names


def load(run_dir):
    """RunData of run_dir: the raw logs, plus calls.parquet and critical_path.parquet when present."""
    run = trace.open_run(run_dir)
    calls, offsets, records_per_rank, prog_start, prog_end, endpoints = _raw_calls(run)
    notes, sources = [], {"calls": "raw logs (times on each rank's own clock, not aligned)"}
    # The run's start, as metrics defines it: the earliest end of MPI_Init.
    origin = int(prog_start.min()) if len(prog_start) else 0
    for k in ("start", "end"):
        calls[k] = calls[k] - origin
    prog_start, prog_end = prog_start - origin, prog_end - origin

    has_waits = False
    calls_path = os.path.join(run.run_dir, CALLS_PARQUET)
    if os.path.exists(calls_path):
        raw_start = calls["start"]
        has_waits = _merge_calls_parquet(calls_path, calls, offsets, records_per_rank, notes)
        if calls["start"] is not raw_start:
            sources["calls"] = CALLS_PARQUET + " (times from the run's start, as the analysis aligned them)"
        # Times may have moved (clock alignment): keep each rank sorted by start.
        o = np.lexsort((calls["start"], calls["rank"]))
        if not np.array_equal(o, np.arange(len(o))):
            inverse = np.empty_like(o)
            inverse[o] = np.arange(len(o))
            calls = {k: v[o] for k, v in calls.items()}
            e = list(endpoints)
            e[1] = inverse[e[1]]
            endpoints = tuple(e)
    else:
        notes.append("no %s (wait before / wait after per call come from the analysis): calls are coloured "
                     "by function, not by wait" % CALLS_PARQUET)

    calls, offsets, endpoints, region_slices, region_names = _split_marks(run, calls, offsets, endpoints)
    messages = match_messages(endpoints)
    sources["messages"] = "matched by the view from the raw logs"

    path = None
    path_file = os.path.join(run.run_dir, PATH_PARQUET)
    if os.path.exists(path_file):
        try:
            t = _read_parquet(path_file)
            o = np.argsort(np.asarray(t["order"]), kind="stable") if "order" in t else slice(None)
            path = critical_path.segments(t["rank"][o], t["kind"][o], t["function"][o], t["start"][o],
                                          t["end"][o], t["peer"][o] if "peer" in t else None)
            sources["path"] = PATH_PARQUET
        except Exception as e:   # noqa: BLE001 -- optional file: say so, draw without it
            notes.append("%s could not be read (%s): no critical path highlighted" % (PATH_PARQUET, e))
    else:
        notes.append("no %s (the critical path comes from the analysis' path step): no path highlighted"
                     % PATH_PARQUET)
    return RunData(run.run_dir, run.world_size, run.job_id, calls, offsets, prog_start, prog_end, messages,
                   path, has_waits, sources, notes, region_slices, region_names)
