"""The files of ``mpigraph whatif``: whatif_pieces.csv, tolerance.csv, critical_messages.csv,
whatif_bandwidth.csv (with --bandwidth), whatif_pairs.csv (with --pairs), whatif.svg and whatif.txt (the
printed paragraph).

whatif.svg follows the paper's Figs. 1 and 9: T against the latency axis with the
1/2/5% zones shaded (green, orange, red: up to the latency that slows the run by
1%, 2%, 5%) and the measured points when given; below, lambda_L and rho_L.
"""

import csv
import os

import numpy as np

from mpigraph.report.sections import add_section

ZONE_COLOURS = ("#b7e4b0", "#ffd59a", "#f4a6a6")


def write(out_dir, result, measured=None):
    os.makedirs(out_dir, exist_ok=True)
    files = []
    for name, rows in (("whatif_pieces.csv", result.pieces), ("tolerance.csv", result.tolerances),
                       ("critical_messages.csv", result.critical), ("whatif_bandwidth.csv", result.bandwidth_pieces),
                       ("whatif_pairs.csv", result.pair_rows)):
        if (name == "whatif_bandwidth.csv" and not rows) or (name == "whatif_pairs.csv" and result.pair_notes is None):
            continue
        path = os.path.join(out_dir, name)
        _write_csv(path, rows, _columns(name, rows))
        files.append(path)
    path = os.path.join(out_dir, "whatif.svg")
    with open(path, "w") as f:
        f.write(svg(result, measured))
    files.append(path)
    path = os.path.join(out_dir, "whatif.txt")
    with open(path, "w") as f:
        f.write(result.text)
    files.append(path)
    files += add_section(out_dir, SUMMARY_MARK, result.text)   # a report's summary.txt, if out_dir has one
    return files


SUMMARY_MARK = "What if the network were slower"


_DEFAULT_COLUMNS = {
    "critical_messages.csv": ["kind", "function", "src_rank", "dst_rank", "edges", "messages", "bytes"],
    "whatif_pairs.csv": ["x", "y", "latency_s", "latency_se_s", "scale", "messages", "path_messages", "dT_dl",
                         "path_latency_s"],
}


def _columns(name, rows):
    return list(rows[0]) if rows else _DEFAULT_COLUMNS.get(name, [])


def _write_csv(path, rows, columns):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("%.9g" % v if isinstance(v, float) else v) for k, v in row.items()})


# ---- the plot -----------------------------------------------------------------------------------

W, H = 760, 560
LEFT, RIGHT, TOP = 80, 70, 40
TOP_H, GAP, BOTTOM_H = 300, 50, 110


def svg(result, measured=None):
    """The SVG text of T(latency) with the tolerance zones, and lambda_L / rho_L below."""
    pieces = result.pieces
    x_lo, x_hi = pieces[0]["dL_from_s"], pieces[-1]["dL_to_s"]
    xs = sorted({p["dL_from_s"] for p in pieces} | {x_hi})
    ts = [_t_at(pieces, x) for x in xs]
    slack = 1e-9 * (x_hi - x_lo)            # 20us parsed as 1.9999999999999998e-05
    meas = [(float(a), float(b)) for a, b in (measured or []) if x_lo - slack <= float(a) <= x_hi + slack]
    y_lo = min(ts + [b for _, b in meas])
    y_hi = max(ts + [b for _, b in meas])
    y_lo, y_hi = y_lo - 0.05 * (y_hi - y_lo + 1e-12), y_hi + 0.05 * (y_hi - y_lo + 1e-12)
    px = lambda x: LEFT + (x - x_lo) / (x_hi - x_lo) * (W - LEFT - RIGHT)           # noqa: E731
    py = lambda y: TOP + TOP_H - (y - y_lo) / (y_hi - y_lo) * TOP_H                 # noqa: E731
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (W, H), '<rect width="100%" height="100%" fill="white"/>']
    axis = "added latency dL" if result.model == "delta" else "latency L"
    out.append('<text x="%d" y="22" font-size="14">Run time against %s (%s model)</text>' % (LEFT, axis,
                                                                                             result.model))
    # tolerance zones, from the reference point (the paper's green, orange, red)
    prev = result.reference_s
    for t, colour in zip(result.tolerances, ZONE_COLOURS):
        edge = t["added_latency_s"] + result.reference_s
        a, b = max(prev, x_lo), min(edge, x_hi) if np.isfinite(edge) else x_hi
        if b > a:
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.6"/>'
                       % (px(a), TOP, px(b) - px(a), TOP_H, colour))
            out.append('<text x="%.1f" y="%d" font-size="10">%g%%</text>' % (px(b) - 22, TOP + 12,
                                                                             t["degradation_pct"]))
        prev = max(prev, edge) if np.isfinite(edge) else x_hi
    out += _frame(TOP, TOP_H, x_lo, x_hi, y_lo, y_hi, px, py, "T (s)", "")
    out.append('<polyline fill="none" stroke="#1f4e9c" stroke-width="2" points="%s"/>'
               % " ".join("%.1f,%.1f" % (px(x), py(t)) for x, t in zip(xs, ts)))
    for a, b in meas:
        out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="none" stroke="black"/>' % (px(a), py(b)))
    if meas:
        out.append('<text x="%d" y="%d">o measured   &#8212; predicted</text>' % (W - RIGHT - 170, TOP + TOP_H - 8))
    # lambda_L (steps) and rho_L below
    y0 = TOP + TOP_H + GAP
    lam_hi = max(p["lambda_L"] for p in pieces) * 1.1 + 1e-9
    qy = lambda v: y0 + BOTTOM_H - v / lam_hi * BOTTOM_H                              # noqa: E731
    out += _frame(y0, BOTTOM_H, x_lo, x_hi, 0, lam_hi, px, qy, "lambda_L", "%s (us)" % axis)
    steps = []
    for p in pieces:
        steps += ["%.1f,%.1f" % (px(p["dL_from_s"]), qy(p["lambda_L"])),
                  "%.1f,%.1f" % (px(p["dL_to_s"]), qy(p["lambda_L"]))]
    out.append('<polyline fill="none" stroke="#b03a2e" stroke-width="2" points="%s"/>' % " ".join(steps))
    grid = np.linspace(x_lo, x_hi, 101)
    rho = [(result.base_latency_s + x) * _slope_at(pieces, x) / _t_at(pieces, x) for x in grid]
    ry = lambda v: y0 + BOTTOM_H - v * BOTTOM_H                                        # noqa: E731
    out.append('<polyline fill="none" stroke="#555" stroke-dasharray="4,3" points="%s"/>'
               % " ".join("%.1f,%.1f" % (px(x), ry(min(r, 1.0))) for x, r in zip(grid, rho)))
    out.append('<text x="%d" y="%d" fill="#555">rho_L (dashed, 0..100%%)</text>' % (W - RIGHT - 150, y0 + 12))
    out.append("</svg>\n")
    return "\n".join(out)


def _frame(y0, h, x_lo, x_hi, v_lo, v_hi, px, py, ylabel, xlabel):
    out = ['<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (LEFT, y0, W - LEFT - RIGHT, h)]
    for x in np.linspace(x_lo, x_hi, 6):
        out.append('<text x="%.1f" y="%d" text-anchor="middle" font-size="10">%.3g</text>' % (px(x), y0 + h + 13,
                                                                                             x * 1e6))
    for v in np.linspace(v_lo, v_hi, 5):
        out.append('<text x="%d" y="%.1f" text-anchor="end" font-size="10">%.5g</text>' % (LEFT - 4, py(v) + 3, v))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>'
               % (y0 + h // 2, y0 + h // 2, ylabel))
    if xlabel:
        out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((LEFT + W - RIGHT) // 2, y0 + h + 30,
                                                                          xlabel))
    return out


def _piece_at(pieces, x):
    for p in pieces:
        if p["dL_from_s"] <= x <= p["dL_to_s"]:
            return p
    return pieces[-1]


def _t_at(pieces, x):
    p = _piece_at(pieces, x)
    return p["lambda_L"] * x + p["C_s"]


def _slope_at(pieces, x):
    return _piece_at(pieces, x)["lambda_L"]
