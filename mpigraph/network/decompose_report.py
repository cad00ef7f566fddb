"""The files of `mpigraph decompose`: the tables, the summary paragraph and the bars per rank."""

import csv
import os
from xml.sax.saxutils import escape

import pyarrow.parquet as pq

from mpigraph.report import sections
from mpigraph.util.atomic import atomic_write

SUMMARY_HEADER = "MPI time decomposition (seed 003; network and stack are ESTIMATES)"
FILE_NAMES = frozenset(["decomposition_calls.parquet", "decomposition.parquet", "decomposition.csv",
                        "decomposition_callsites.parquet", "decomposition_callsites.csv", "decomposition.svg"])
PARTS = (("sync_ns", "synchronisation", "#d62728"), ("network_est_ns", "network (estimate)", "#1f77b4"),
         ("stack_ns", "MPI stack (estimate)", "#ff7f0e"), ("compute_ns", "compute", "#7f7f7f"))


def _pct(x, total):
    return 100.0 * x / total if total > 0 else 0.0


def paragraph(per_rank: dict, run_time_ns: int, compute_only_ns: int, threshold, source: str) -> str:
    """The summary section: shares of the ranks' summed program time, the compute-only bound."""
    program = float(per_rank["program_ns"].sum())
    mpi, sync, net, stack = (float(per_rank[k].sum()) for k in ("mpi_ns", "sync_ns", "network_est_ns", "stack_ns"))
    S, lo, hi = threshold
    if hi is not None:
        proto = "rendezvous seen from %d B, eager up to %s: threshold S in (%s, %d] B" % (
            hi, "%d B" % lo if lo is not None else "(none seen)", lo if lo is not None else 0, hi)
    elif lo is not None:
        proto = "every message whose protocol the trace shows was eager (up to %d B); S from the params: %s" % (
            lo, "%s B" % S if S is not None else "none")
    else:
        proto = "no message showed its protocol; S from the params: %s" % ("%s B" % S if S is not None else "none")
    saved = run_time_ns - compute_only_ns
    lines = [
        SUMMARY_HEADER,
        "MPI %.1f%% of the ranks' program time: synchronisation %.1f%%, MPI stack ~%.1f%% (estimate), "
        "network ~%.1f%% (estimate)" % (_pct(mpi, program), _pct(sync, program), _pct(stack, program),
                                         _pct(net, program)),
        "  network estimate: alpha + N beta per message and protocol, %s" % source,
        "  a perfect network would save at most ~%.1f%% of the ranks' time (the estimate's share); "
        "synchronisation is not saved by a faster network" % _pct(net, program),
        "  compute-only run time (every call and message 0 on the run's graph) %.6f s of %.6f s: a perfect "
        "network and MPI together save at most %.6f s (%.1f%%)" % (compute_only_ns * 1e-9, run_time_ns * 1e-9,
                                                                   saved * 1e-9, _pct(saved, run_time_ns)),
        "  protocols: " + proto,
        "  per call: decomposition_calls.parquet; per rank x function: decomposition.csv; per call site: "
        "decomposition_callsites.csv; bars: decomposition.svg",
    ]
    return "\n".join(lines) + "\n"


def write(result, out_dir: str, summary: bool = True) -> list:
    """decomposition_calls.parquet, decomposition.parquet/.csv, decomposition_callsites.parquet/.csv
    (when the result has its call-site table), decomposition.svg in out_dir, and the paragraph at the
    end of out_dir/summary.txt (replacing an earlier one) when there is one."""
    os.makedirs(out_dir, exist_ok=True)
    names = sorted(FILE_NAMES if result.callsites is not None else FILE_NAMES - _CALLSITE_FILES)
    paths = {name: os.path.join(out_dir, name) for name in names}
    tables = [("decomposition_calls.parquet", result.calls), ("decomposition", result.table)]
    if result.callsites is not None:
        tables.append(("decomposition_callsites", result.callsites))
    for name, table in tables:
        with atomic_write(paths[name if name.endswith(".parquet") else name + ".parquet"], "wb") as f:
            pq.write_table(table, f)
        if not name.endswith(".parquet"):
            _write_csv(paths[name + ".csv"], table)
    with atomic_write(paths["decomposition.svg"]) as f:
        f.write(bars_svg(result.ranks))
    return list(paths.values()) + (sections.add_section(out_dir, SUMMARY_HEADER, result.text) if summary else [])


_CALLSITE_FILES = frozenset(["decomposition_callsites.parquet", "decomposition_callsites.csv"])


def _write_csv(path, table):
    with atomic_write(path) as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(table.column_names)
        w.writerows(zip(*(table.column(c).to_pylist() for c in table.column_names)))


def bars_svg(per_rank: dict) -> str:
    """Stacked horizontal bars per rank (the seed's Fig. 8): sync, network, stack, compute."""
    ranks = per_rank["rank"]
    width, left, bar, gap, top = 640, 70, 18, 6, 40
    longest = max(float(per_rank["program_ns"].max(initial=0)), 1.0)
    height = top + len(ranks) * (bar + gap) + 50
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (left + width + 20, height),
           '<text x="%d" y="18">Time per rank: synchronisation, network and MPI stack (estimates), compute</text>'
           % left]
    for i, r in enumerate(ranks):
        y = top + i * (bar + gap)
        out.append('<text x="%d" y="%d" text-anchor="end">rank %d</text>' % (left - 6, y + bar - 5, r))
        x = float(left)
        for key, label, colour in PARTS:
            w = width * float(per_rank[key][i]) / longest
            out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"><title>%s %.6f s</title></rect>'
                       % (x, y, w, bar, colour, escape(label), per_rank[key][i] * 1e-9))
            x += w
    y = top + len(ranks) * (bar + gap) + 16
    x = left
    for _, label, colour in PARTS:
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
                   % (x, y, colour, x + 16, y + 11, escape(label)))
        x += 24 + 8 * len(label)
    out.append('<text x="%d" y="%d">bar length: the rank\'s program time, %.6f s at most</text>'
               % (left, y + 30, longest * 1e-9))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def print_table(per_rank: dict) -> str:
    """Per rank in seconds, for the command's output."""
    rows = ["rank   program s     MPI s    sync s  network~ s   stack~ s  compute s"]
    for i, r in enumerate(per_rank["rank"]):
        rows.append("%-4d %10.6f %9.6f %9.6f %11.6f %10.6f %10.6f" % (
            r, *(per_rank[k][i] * 1e-9 for k in ("program_ns", "mpi_ns", "sync_ns", "network_est_ns", "stack_ns",
                                                 "compute_ns"))))
    return "\n".join(rows)

