"""model.svg: measured and modelled run time against P, written by hand (no plotting library).

P on a log2 axis (strong-scaling counts double), time on a linear axis from 0.
Marks: measured wall clock of each run (black dots), the model of each run from
its own inputs (blue squares, joined), the leave-one-out prediction at each
measured P (orange diamonds) and predictions at other P (green rings), with the
seed's 30% band around each measured point (grey bar).
"""

import numpy as np

from mpigraph.view.svg import _nice_step, chart_start, legend

COLORS = {"measured": "#000000", "run": "#2e6fb0", "loo": "#e4872e", "predict": "#2a9d4b", "band": "#dddddd"}
LEGEND = [("measured", "measured"), ("run", "modelled from the run"), ("loo", "leave-one-out prediction"),
          ("predict", "predicted"), ("band", "measured +-30%")]
LEFT, TOP, WIDTH, HEIGHT = 70, 54, 560, 300


def _series(result):
    measured = [(r.population, r.inputs.wall_clock) for r in result.runs]
    run = sorted({r.population: float(r.run.total) for r in result.runs}.items())
    loo = [(p, float(pr.parts.total)) for p, _, pr in result.loo]
    predict = [(pr.population, float(pr.parts.total)) for pr in result.predictions]
    return {"measured": measured, "run": run, "loo": loo, "predict": predict}


def model_chart(result, title="Run time against P: measured and modelled (seed 002)") -> str:
    """The SVG text of the chart."""
    series = _series(result)
    everything = [pt for s in series.values() for pt in s]
    counts = np.array([p for p, _ in everything], float)
    times = np.array([t for _, t in everything], float)
    lo, hi = np.log2(counts.min()), np.log2(counts.max())
    span = max(hi - lo, 1.0)
    top_t = max(float(np.nanmax(times)) * 1.3, 1e-9)   # room for the 30% band above the highest point
    step = _nice_step(top_t)
    top_t = step * np.ceil(top_t / step)

    def x(p):
        return LEFT + 20 + (np.log2(p) - lo) / span * (WIDTH - 40)

    def y(t):
        return TOP + HEIGHT - t / top_t * HEIGHT

    out = chart_start(LEFT + WIDTH + 30, TOP + HEIGHT + 50, LEFT, title)
    out += legend(LEGEND, COLORS, LEFT)
    out += _axes(sorted({int(p) for p in counts}), x, y, top_t, step)
    for p, t in series["measured"]:     # the seed's 30% tolerance around each measurement
        out.append('<rect x="%.1f" y="%.1f" width="8" height="%.1f" fill="%s"/>'
                   % (x(p) - 4, y(1.3 * t), y(0.7 * t) - y(1.3 * t), COLORS["band"]))
    if len(series["run"]) > 1:
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                   % (COLORS["run"], " ".join("%.1f,%.1f" % (x(p), y(t)) for p, t in series["run"])))
    out += ['<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>' % (x(p) - 3.5, y(t) - 3.5, COLORS["run"])
            for p, t in series["run"]]
    out += ['<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (x(p), y(t), COLORS["measured"])
            for p, t in series["measured"]]
    out += ['<path d="M%.1f %.1f l5 5 l-5 5 l-5 -5 z" fill="%s"/>' % (x(p), y(t) - 5, COLORS["loo"])
            for p, t in series["loo"]]
    out += ['<circle cx="%.1f" cy="%.1f" r="4.5" fill="none" stroke="%s" stroke-width="2"/>'
            % (x(p), y(t), COLORS["predict"]) for p, t in series["predict"]]
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _axes(counts, x, y, top_t, step):
    out = ['<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>' % (LEFT, TOP + HEIGHT, LEFT + WIDTH, TOP + HEIGHT),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>' % (LEFT, TOP, LEFT, TOP + HEIGHT)]
    for t in np.arange(0.0, top_t + step / 2, step):
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" '
                   'text-anchor="end">%g s</text>' % (LEFT, y(t), LEFT + WIDTH, y(t), LEFT - 6, y(t) + 4,
                                                       round(float(t), 9)))
    for p in counts:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x(p), TOP + HEIGHT + 16, p))
    out.append('<text x="%d" y="%d" text-anchor="middle">processes P (log scale)</text>'
               % (LEFT + WIDTH // 2, TOP + HEIGHT + 36))
    return out
