"""ranks.svg: one horizontal bar per rank: compute, MPI execution, wait; and time on the critical path.

Written by hand (no plotting library).  ``rank_chart(per_rank)`` takes int64 ns
columns: program_time and mpi_time (required), execution and wait (when the
analysis measured waits; otherwise the MPI part is one colour and the chart
says so), compute (when given, the report's compute column, the time between
the rank's MPI calls; otherwise program_time - mpi_time, which also counts a
late rank's time in MPI_Init after the run's start), critical_path (time of
the rank on the critical path, drawn as a thin bar under the rank's bar, when
the path is known).  From a ranks table the bars are the summary's numbers.
"""

import os

import numpy as np

from mpigraph.paths import segments as critical_path
from mpigraph.util.atomic import atomic_write

SVG_NAME = "ranks.svg"
COLORS = {"compute": "#bdbdbd", "execution": "#2e6fb0", "wait": "#e4572e", "mpi": "#3c78b4",
          "critical_path": "#ff1fa6"}


def _esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _nice_step(top, ticks=6):
    raw = top / ticks if top > 0 else 1.0
    p = 10 ** np.floor(np.log10(raw))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= raw)


def chart_start(width, height, left, title):
    """The first elements of a chart: the svg element, a white background, the title at (left, 18)."""
    return ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
            'font-size="11">' % (width, height),
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>' % (left, _esc(title))]


def legend(items, colors, left):
    """A row of swatches under the title (y 28 to 38), from x = left: items are (key, label),
    each swatch colors[key]."""
    out, x = [], left
    for key, label in items:
        out.append('<rect x="%d" y="28" width="10" height="10" fill="%s"/><text x="%d" y="37">%s</text>'
                   % (x, colors[key], x + 14, _esc(label)))
        x += 24 + 6 * len(label)
    return out


def _parts(per_rank, r, program, mpi):
    """[(colour key, ns)] of rank index r's bar."""
    wait, given_compute, given_execution = (per_rank.get(k) for k in ("wait", "compute", "execution"))
    compute = int(given_compute[r]) if given_compute is not None else int(program[r] - mpi[r])
    if wait is not None and given_execution is not None:      # the summary's columns, as they are
        return [("compute", compute), ("execution", max(int(given_execution[r]), 0)), ("wait", int(wait[r]))]
    if wait is not None:
        w = min(int(wait[r]), int(mpi[r]))
        return [("compute", compute), ("execution", int(mpi[r]) - w), ("wait", w)]
    return [("compute", compute), ("mpi", int(mpi[r]))]


def rank_chart(per_rank, title="Time per rank"):
    """The SVG text of the chart."""
    program = np.asarray(per_rank["program_time"], np.int64)
    mpi = np.minimum(np.asarray(per_rank["mpi_time"], np.int64), program)
    n = len(program)
    wait = per_rank.get("wait")
    path = per_rank.get("critical_path")
    has_wait = wait is not None
    has_path = path is not None
    bar = 14 if n <= 32 else 8 if n <= 128 else 4
    gap = 10 if has_path else 4
    left, top, width = 70, 54, 640
    height = top + n * (bar + gap) + 40
    bars = [_parts(per_rank, r, program, mpi) for r in range(n)]
    longest = max((sum(ns for _, ns in parts) for parts in bars), default=0)
    scale_max = max(int(program.max(initial=0)), int(longest), int(np.max(path)) if has_path and n else 0, 1)
    px = width / scale_max
    out = chart_start(left + width + 30, height, left, title)
    items = [("compute", "compute")]
    items += [("execution", "MPI execution"), ("wait", "MPI wait (before + after)")] if has_wait \
        else [("mpi", "MPI (wait not measured)")]
    if has_path:
        items.append(("critical_path", "on the critical path"))
    out += legend(items, COLORS, left)
    # Axis.
    step = _nice_step(scale_max / 1e9)
    t = 0.0
    axis_y = top + n * (bar + gap)
    while t * 1e9 <= scale_max * 1.0001:
        gx = left + t * 1e9 * px
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e6e6e6"/>' % (gx, top - 4, gx, axis_y))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g s</text>' % (gx, axis_y + 14, round(t, 9)))
        t += step
    for r in range(n):
        y = top + r * (bar + gap)
        parts = bars[r]
        label = int(per_rank["rank"][r]) if "rank" in per_rank else r
        out.append('<text x="%d" y="%d" text-anchor="end">rank %d</text>' % (left - 6, y + bar - 2, label))
        x = left
        for key, ns in parts:
            w = max(0.0, ns * px)
            out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"><title>rank %d %s: %.6f s</title>'
                       '</rect>' % (x, y, w, bar, COLORS[key], label, key.replace("_", " "), ns / 1e9))
            x += w
        if has_path:
            out.append('<rect x="%d" y="%d" width="%.2f" height="4" fill="%s"><title>rank %d on the critical path: '
                       '%.6f s</title></rect>' % (left, y + bar + 1, path[r] * px, COLORS["critical_path"], label,
                                                  path[r] / 1e9))
    out.append('<text x="%d" y="%d" fill="#666">program time from the end of MPI_Init to the start of '
               'MPI_Finalize%s</text>' % (left, height - 8, "" if has_path else "; critical path not known"))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_rank_chart(run_dir, per_rank, title="Time per rank"):
    """Write run_dir/ranks.svg; returns its path."""
    path = os.path.join(run_dir, SVG_NAME)
    with atomic_write(path) as f:
        f.write(rank_chart(per_rank, title))
    return path


def per_rank_from_table(ranks, path=None):
    """The chart's columns from a metrics ranks table (the report's), picking up wait columns if present."""
    out = {"rank": ranks["rank"], "program_time": ranks["program_time"], "mpi_time": ranks["mpi_time"]}
    # The summary's compute and execution columns, so the chart shows the summary's numbers.
    for name in ("compute", "execution"):
        if name in ranks:
            out[name] = ranks[name]
    for name in ("wait", "wait_time", "total_wait_time"):
        if name in ranks:
            out["wait"] = ranks[name]
            break
    for name in ("critical_path", "critical_path_time", "time_on_path", "path_time"):
        if name in ranks:
            out["critical_path"] = ranks[name]
            break
    if "critical_path" not in out and path is not None:
        out["critical_path"] = critical_path.time_per_rank(path, len(ranks["rank"]))
    return out
