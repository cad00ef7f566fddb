"""timeline.html: one self-contained page that draws the run (no network needed to open it).

The page is the template ``timeline.html`` (package data, plain canvas 2D code)
with two things filled in: a small JSON header (ranks, function names, notes,
where each column lies in the blob) and one blob of columns, base64 text in a
``<script type="application/octet-stream">`` element.

The blob packs every column as the smallest unsigned type that holds it
(u8/u16/u32/u64; signed columns zig-zag coded), times as deltas (call starts
per rank, path segment starts), then stored as byte planes (the first byte of
every value, then the second...) so deflate finds the runs of zero high bytes;
the whole blob is deflated (zlib) and the page inflates it with the browser's
DecompressionStream.  The named regions and Pcontrol phases (view.data's regions, a few per rank)
travel in the header as plain lists and are drawn as a band at the top of each rank's row.  The page rebuilds absolute times and prefix sums of time
in MPI, which let it draw a row zoomed out per pixel column in O(width log n)
instead of call by call.
"""

import base64
import json
import os
import zlib

import numpy as np

from mpigraph import __version__
from mpigraph.trace import functions as mf
from mpigraph.util.atomic import atomic_write

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "timeline.html")
HTML_NAME = "timeline.html"
KIND_CODE = {"compute": 0, "mpi": 1, "message": 2}


def _unsigned_type(values):
    top = int(values.max()) if len(values) else 0
    for name, dtype in (("u8", np.uint8), ("u16", np.uint16), ("u32", np.uint32)):
        if top <= np.iinfo(dtype).max:
            return name, dtype
    return "u64", np.uint64


def _zigzag(values):
    values = np.asarray(values, np.int64)
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


class Blob:
    """Columns appended as byte planes; `spec` tells the page where each one is."""

    def __init__(self):
        self.parts, self.size, self.spec = [], 0, {}

    def add(self, name, values, signed=False):
        values = np.asarray(values)
        if signed:
            coded = _zigzag(values)
        else:
            if len(values) and values.min() < 0:
                raise ValueError("column %s has negative values" % name)
            coded = values.astype(np.uint64, copy=False)
        type_name, dtype = _unsigned_type(coded)
        raw = np.ascontiguousarray(coded.astype("<" + np.dtype(dtype).str[1:], copy=False))
        planes = raw.view(np.uint8).reshape(len(raw), raw.itemsize).T   # byte b of every value, b = 0..
        data = np.ascontiguousarray(planes).tobytes()
        self.spec[name] = {"off": self.size, "n": int(len(values)), "type": type_name, "zz": bool(signed)}
        self.parts.append(data)
        self.size += len(data)

    def deflated(self, level):
        """The blob deflated (zlib format), fed to the compressor part by part."""
        z = zlib.compressobj(level)
        out = [z.compress(p) for p in self.parts]
        out.append(z.flush())
        return b"".join(out)


def _starts_as_deltas(start, offsets):
    """Each rank's call starts as differences to the previous call's start (the first one to 0)."""
    delta = np.diff(start, prepend=0)
    first = offsets[:-1][np.diff(offsets) > 0]
    delta[first] = start[first]
    return delta


def pack(data, level=6):
    """(meta dict, deflated blob bytes, raw size) of a view.data.RunData."""
    c = data.calls
    blob = Blob()
    blob.add("start", _starts_as_deltas(c["start"], data.rank_offsets), signed=True)
    blob.add("dur", np.maximum(c["end"] - c["start"], 0))
    used, func_index = np.unique(c["func"], return_inverse=True)
    blob.add("func", func_index)
    blob.add("peer", np.maximum(c["peer"] + 3, 0))
    blob.add("tag", np.maximum(c["tag"] + 2, 0))
    blob.add("bytes", np.maximum(c["bytes"], 0))
    if data.has_waits:
        dur = c["end"] - c["start"]
        blob.add("wait_before", c["wait_before"])
        blob.add("wait_after", c["wait_after"])
        # Execution is mostly duration - waits: store only the difference (zeros deflate to nothing).
        blob.add("exec_fix", c["execution"] - (dur - c["wait_before"] - c["wait_after"]), signed=True)
    m = data.messages
    n_msg = len(m["send"])
    if n_msg:
        rank = c["rank"]
        local_send = m["send"] - data.rank_offsets[rank[m["send"]]]
        local_recv = m["recv"] - data.rank_offsets[rank[m["recv"]]]
        blob.add("msg_send", np.diff(m["send"], prepend=0))
        blob.add("msg_dst", rank[m["recv"]])
        blob.add("msg_local", local_recv - local_send, signed=True)
    path_meta = None
    if data.path is not None and len(data.path["rank"]):
        p = data.path
        names, func_index = np.unique(np.asarray(p["function"], dtype=str), return_inverse=True)
        blob.add("path_rank", p["rank"])
        blob.add("path_kind", np.array([KIND_CODE[k] for k in p["kind"].tolist()], np.uint8))
        blob.add("path_peer", np.maximum(p["peer"] + 3, 0))
        blob.add("path_func", func_index)
        blob.add("path_start", np.diff(p["start"], prepend=0), signed=True)
        blob.add("path_dur", p["end"] - p["start"])
        path_meta = {"n": int(len(p["rank"])), "functions": names.tolist()}
    g = data.regions    # a few per rank (phase marks): plain JSON in the header, no blob column
    regions_meta = {"names": list(data.region_names), **{k: g[k].tolist() for k in ("rank", "start", "end", "depth",
                                                                                   "name", "kind")}}
    functions = [{"name": mf.name_of(int(f)), "kind": mf.BY_ID[int(f)].kind if int(f) in mf.BY_ID else "other"}
                 for f in used]
    title = "mpigraph timeline: %s (%d ranks, %d calls)" % (os.path.basename(data.run_dir.rstrip("/")),
                                                             data.world_size, data.n_calls)
    meta = {
        "version": __version__, "title": title, "ranks": data.world_size, "calls": data.n_calls,
        "rankOffsets": data.rank_offsets.tolist(), "programStart": data.program_start.tolist(),
        "programEnd": data.program_end.tolist(), "duration": data.duration, "functions": functions,
        "hasWaits": bool(data.has_waits), "messages": {"n": int(n_msg)}, "path": path_meta, "regions": regions_meta,
        "notes": list(data.notes), "sources": dict(data.sources), "columns": blob.spec, "compressed": True,
    }
    return meta, blob.deflated(level), blob.size


def render(meta, blob, out_path):
    """Write the page: the template with the header and the base64 blob put in, written in parts."""
    with open(TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    head, rest = template.split("{{META}}")
    middle, tail = rest.split("{{DATA}}")
    meta_text = json.dumps(meta, separators=(",", ":")).replace("</", "<\\/")
    with atomic_write(out_path, encoding="utf-8") as f:
        f.write(head.replace("{{TITLE}}", _escape(meta["title"])))
        f.write(meta_text)
        f.write(middle)
        f.write(base64.b64encode(blob).decode("ascii"))
        f.write(tail)


def _escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write(data, run_dir=None, level=6):
    """Write run_dir/timeline.html (default: the run's directory); returns (path, stats dict)."""
    meta, blob, raw_size = pack(data, level)
    path = os.path.join(run_dir or data.run_dir, HTML_NAME)
    render(meta, blob, path)
    return path, {"raw_bytes": raw_size, "deflated_bytes": len(blob), "file_bytes": os.path.getsize(path)}
