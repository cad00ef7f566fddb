"""trace.json: the run in the Chrome trace event format (Perfetto UI, chrome://tracing).

    {"displayTimeUnit": "ns", "otherData": {...}, "traceEvents": [...]}

- one process per rank (pid = rank, named "rank r"), one thread "MPI calls";
- a complete event (ph "X") per MPI call: ts and dur in microseconds (three
  decimals: exact to the ns), args: bytes, peer, tag, comm, and the waits and
  imbalance (the share of the call spent waiting) when calls.parquet gave them; then
  nested X events "wait before",
  "execution", "wait after" inside the call;
- a flow (ph "s" at the send's start, ph "f" with bp "e" at the start of the
  call that completed the receive) per matched point-to-point message;
- the named regions and MPI_Pcontrol phases (the phase marks: mpigraph_phase_begin/_end,
  MPI_Pcontrol; no MPI calls here) on a thread "phases" of each rank (tid 1): an X event per
  region (cat "region", or "pcontrol" for "pcontrol K (level L)"), nested as they nest;
- the critical path on its own track: process pid = P ("critical path",
  sorted first), one X event per segment ("rank r: compute", "rank r: MPI_Recv",
  "message q -> r").

Events are formatted column-wise with numpy string operations and written in
chunks, so a big run streams to disk without a Python loop per call.
"""

import json
import os

import numpy as np

from mpigraph.trace import functions as mf
from mpigraph.util.atomic import atomic_write

JSON_NAME = "trace.json"
CHUNK = 200_000


_SHIFT = [0]   # ns added to every time while writing: trace viewers want ts >= 0


def _us(ns, shift=True):
    """Microsecond strings with three decimals from int64 ns (exact, also for negative values)."""
    ns = np.asarray(ns, np.int64) + (_SHIFT[0] if shift else 0)
    sign = np.where(ns < 0, "-", "")
    a = np.abs(ns)
    return np.char.add(np.char.add(sign, (a // 1000).astype(str)),
                       np.char.add(".", np.char.zfill((a % 1000).astype(str), 3)))


def _cat(*parts):
    """Element-wise concatenation of string arrays and plain strings."""
    out = parts[0]
    for p in parts[1:]:
        out = np.char.add(out, p)
    return out


def _json_str(text):
    return json.dumps(str(text))


def _metadata(data):
    p = data.world_size
    events = []
    for r in range(p):
        events += [{"ph": "M", "pid": r, "tid": 0, "name": "process_name", "args": {"name": "rank %d" % r}},
                   {"ph": "M", "pid": r, "tid": 0, "name": "process_sort_index", "args": {"sort_index": r}},
                   {"ph": "M", "pid": r, "tid": 0, "name": "thread_name", "args": {"name": "MPI calls"}}]
    for r in np.unique(data.regions["rank"]).tolist():
        events += [{"ph": "M", "pid": r, "tid": 1, "name": "thread_name", "args": {"name": "phases"}},
                   {"ph": "M", "pid": r, "tid": 1, "name": "thread_sort_index", "args": {"sort_index": -1}}]
    if data.path is not None:
        events += [{"ph": "M", "pid": p, "tid": 0, "name": "process_name", "args": {"name": "critical path"}},
                   {"ph": "M", "pid": p, "tid": 0, "name": "process_sort_index", "args": {"sort_index": -1}},
                   {"ph": "M", "pid": p, "tid": 0, "name": "thread_name", "args": {"name": "critical path"}}]
    return [json.dumps(e, separators=(",", ":")) for e in events]


def _call_events(data, lo, hi):
    c = data.calls
    sl = slice(lo, hi)
    names = np.array([_json_str(mf.name_of(int(f))) for f in range(mf.MAX_ID + 1)])
    start, end = c["start"][sl], c["end"][sl]
    pid = c["rank"][sl].astype(str)
    args = _cat('{"bytes":', c["bytes"][sl].astype(str), ',"peer":', c["peer"][sl].astype(str),
                ',"tag":', c["tag"][sl].astype(str), ',"comm":', c["comm"][sl].astype(str))
    chunks = []
    if data.has_waits:
        wb, wa, ex = c["wait_before"][sl], c["wait_after"][sl], c["execution"][sl]
        # The share of the call spent waiting, 0 to 1 (waits are within the call: metrics.waits).
        duration = end - start
        imbalance = np.where(duration > 0, (wb + wa) / np.maximum(duration, 1), np.nan)
        args = _cat(args, ',"wait_before_us":', _us(wb, False), ',"wait_after_us":', _us(wa, False), ',"execution_us":', _us(ex, False),
                    ',"imbalance":', np.where(np.isnan(imbalance), "null", np.char.mod("%.4f", imbalance)))
        # Nested slices: wait before, execution, wait after (shown widths clipped to the call).
        dur = end - start
        wb_s = np.minimum(wb, dur)
        wa_s = np.minimum(wa, dur - wb_s)
        for name, s0, d in (("wait before", start, wb_s), ("execution", start + wb_s, dur - wb_s - wa_s),
                            ("wait after", end - wa_s, wa_s)):
            keep = d > 0
            if keep.any():
                chunks.append(_cat('{"ph":"X","cat":"wait","name":"', name, '","pid":', pid[keep], ',"tid":0,"ts":',
                                   _us(s0[keep]), ',"dur":', _us(d[keep], False), "}"))
    args = np.char.add(args, "}")
    calls = _cat('{"ph":"X","cat":"mpi","name":', names[c["func"][sl]], ',"pid":', pid, ',"tid":0,"ts":',
                 _us(start), ',"dur":', _us(end - start, False), ',"args":', args, "}")
    return [calls] + chunks


def _flow_events(data, lo, hi):
    m, c = data.messages, data.calls
    send, recv = m["send"][lo:hi], m["recv"][lo:hi]
    ident = np.arange(lo, hi).astype(str)
    s = _cat('{"ph":"s","cat":"message","name":"message","id":', ident, ',"pid":', c["rank"][send].astype(str),
             ',"tid":0,"ts":', _us(c["start"][send]), "}")
    f = _cat('{"ph":"f","bp":"e","cat":"message","name":"message","id":', ident, ',"pid":',
             c["rank"][recv].astype(str), ',"tid":0,"ts":', _us(c["start"][recv]), "}")
    return [s, f]


def _region_events(data):
    """An X event per region slice of data.regions on its rank's thread 1."""
    g = data.regions
    if not len(g["rank"]):
        return []
    names = np.array([_json_str(n) for n in data.region_names])
    cat = np.where(g["kind"] == 1, "pcontrol", "region")
    return [_cat('{"ph":"X","cat":"', cat, '","name":', names[g["name"]], ',"pid":', g["rank"].astype(str),
                 ',"tid":1,"ts":', _us(g["start"]), ',"dur":', _us(g["end"] - g["start"], False),
                 ',"args":{"depth":', g["depth"].astype(str), '}}')]


def _path_events(data):
    p = data.path
    if p is None or not len(p["rank"]):
        return []
    kind = np.asarray(p["kind"], dtype=str)
    function = np.asarray(p["function"], dtype=str)
    rank = p["rank"].astype(str)
    label = np.where(kind == "compute", _cat("rank ", rank, ": compute"),
                     np.where(kind == "message", _cat("message ", p["peer"].astype(str), " -> ", rank),
                              _cat("rank ", rank, ": ", function)))
    label = np.array([_json_str(x) for x in label.tolist()]) if len(label) else label
    return [_cat('{"ph":"X","cat":"critical_path","name":', label, ',"pid":', str(data.world_size),
                 ',"tid":0,"ts":', _us(p["start"]), ',"dur":', _us(p["end"] - p["start"], False),
                 ',"args":{"order":', p["order"].astype(str), ',"rank":', rank, ',"kind":"', kind, '"}}')]


def write(data, run_dir=None):
    """Write run_dir/trace.json (default: the run's directory); returns (path, events written)."""
    path = os.path.join(run_dir or data.run_dir, JSON_NAME)
    count = 0
    _SHIFT[0] = -min(0, int(data.calls["start"].min(initial=0)))
    other = {"producer": "mpigraph", "run_dir": data.run_dir, "job_id": data.job_id, "ranks": data.world_size,
             "times": "microseconds from the first record; the run's start (the earliest end of MPI_Init) "
                      "is at %.3f us" % (_SHIFT[0] / 1000),
             "sources": data.sources, "notes": data.notes}
    with atomic_write(path, encoding="utf-8") as f:
        f.write('{"displayTimeUnit":"ns","otherData":%s,"traceEvents":[\n' % json.dumps(other))
        first = True

        def emit(lines):
            nonlocal first, count
            if len(lines) == 0:
                return
            f.write(("" if first else ",\n") + ",\n".join(lines.tolist() if hasattr(lines, "tolist") else lines))
            first = False
            count += len(lines)

        emit(_metadata(data))
        for lo in range(0, data.n_calls, CHUNK):
            for lines in _call_events(data, lo, min(lo + CHUNK, data.n_calls)):
                emit(lines)
        n_msg = len(data.messages["send"])
        for lo in range(0, n_msg, CHUNK):
            for lines in _flow_events(data, lo, min(lo + CHUNK, n_msg)):
                emit(lines)
        for lines in _region_events(data):
            emit(lines)
        for lines in _path_events(data):
            emit(lines)
        f.write("\n]}\n")
    return path, count
