"""The model's outputs: model.csv / model.parquet, model_ranks.csv, model.txt, model.svg.

model.csv, one row per (P, run, source, component):
    source     run: the model of a measured run from its own inputs;
               loo: predicted at a measured P from the laws fitted to the other counts
               (measured: the mean over the runs at that P);
               predict: predicted at a P given with --predict (measured empty)
    component  compute, switch, service, contention, mpi (= service + contention),
               total (= compute + switch + service + contention; measured: the
               longest rank's program time)
    rel_error  (modelled - measured) / measured; empty where nothing was measured
model_ranks.csv: the four parts per rank of every run (the network solved with the
rank's own inputs).
"""

import csv
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mpigraph.util.atomic import atomic_write
from mpigraph.model.runs import COMPONENTS
from mpigraph.report import sections

TABLE_COLUMNS = ("P", "run", "source", "component", "measured", "modelled", "rel_error")
RANK_COLUMNS = ("P", "run", "rank", "compute", "switch", "service", "contention", "total", "measured_program",
                "measured_mpi", "rel_error")
SUMMARY_HEADER = "Queuing-network model (seed 002)"
BAR_GOOD, BAR_ALL = 0.10, 0.30


def run_label(run) -> str:
    return os.path.basename(os.path.normpath(run.inputs.run_dir))


def _rel(modelled, measured):
    modelled, measured = np.asarray(modelled, float), np.asarray(measured, float)
    ok = np.isfinite(measured) & (measured != 0)
    return np.divide(modelled - measured, measured, out=np.full_like(modelled, np.nan), where=ok)


def _parts(b):
    return {"compute": float(b.compute), "switch": float(b.switch), "service": float(b.service),
            "contention": float(b.contention), "mpi": float(b.mpi), "total": float(b.total)}


def _rows(p, label, source, measured, modelled):
    meas = [measured.get(c, np.nan) for c in COMPONENTS]
    mod = [modelled[c] for c in COMPONENTS]
    return [(p, label, source, c, m, d, e) for c, m, d, e in zip(COMPONENTS, meas, mod, _rel(mod, meas))]


def model_table(result) -> pa.Table:
    """The rows of model.csv (see the module docstring)."""
    rows = []
    for run in result.runs:
        rows += _rows(run.population, run_label(run), "run", run.measured(), run.modelled())
    for p, measured, prediction in result.loo:
        # Measured parts of the left-out count: the mean over its runs (its total is `measured`).
        parts = [r.measured() for r in result.runs if r.population == p]
        mean = {c: float(np.mean([m[c] for m in parts])) for c in COMPONENTS}
        rows += _rows(p, "", "loo", dict(mean, total=measured), _parts(prediction.parts))
    for prediction in result.predictions:
        rows += _rows(prediction.population, "", "predict", {}, _parts(prediction.parts))
    cols = list(zip(*rows)) if rows else [[]] * len(TABLE_COLUMNS)
    types = [pa.int64(), pa.string(), pa.string(), pa.string(), pa.float64(), pa.float64(), pa.float64()]
    # from_pandas: NaN (nothing measured) becomes null in the parquet file.
    return pa.table({name: pa.array(list(c), t, from_pandas=True) for name, c, t in zip(TABLE_COLUMNS, cols, types)})


def ranks_table(result) -> pa.Table:
    """The parts of every rank of every run."""
    blocks = []
    for run in result.runs:
        b, i = run.per_rank, run.inputs
        n = i.population
        blocks.append({"P": np.full(n, n), "run": [run_label(run)] * n, "rank": i.ranks, "compute": b.compute,
                       "switch": b.switch, "service": b.service, "contention": b.contention, "total": b.total,
                       "measured_program": i.app, "measured_mpi": i.mpi, "rel_error": _rel(b.total, i.app)})
    return pa.table({c: pa.array(np.concatenate([np.asarray(blk[c]) for blk in blocks]).tolist()
                                 if blocks else [], from_pandas=True) for c in RANK_COLUMNS})


def loo_verdict(loo) -> str:
    """'k of n within 10%, m of n within 30%' of the leave-one-out errors."""
    errors = np.abs([(pred.parts.total - measured) / measured for _, measured, pred in loo])
    return "%d of %d within 10%%, %d of %d within 30%%" % (
        (errors <= BAR_GOOD).sum(), len(errors), (errors <= BAR_ALL).sum(), len(errors))


def paragraph(result) -> str:
    """The short text: settings, each run's measured vs modelled time and parts, the laws, the errors."""
    lines = [SUMMARY_HEADER,
             "exact single-class MVA, MPI service %s, MPI centre %s; switch: %s"
             % (result.service, result.layout, result.network.describe())]
    for run in result.runs:
        mod, meas = run.modelled(), run.measured()
        lines.append("P=%d %s: measured %.6f s, modelled %.6f s (%+.1f%%) = compute %.6f + switch %.6f + service "
                     "%.6f + contention %.6f; M = %.1f messages per rank of %.1f B" % (
                         run.population, run_label(run), meas["total"], mod["total"],
                         100 * (mod["total"] - meas["total"]) / meas["total"] if meas["total"] else np.nan,
                         mod["compute"], mod["switch"], mod["service"], mod["contention"], run.messages,
                         run.mean_bytes))
    if result.laws is None:
        lines.append("scaling laws: need runs at 3 or more process counts")
    else:
        lines.append("scaling laws from P = %s: %s" % (", ".join("%d" % p for p in result.laws.counts),
                                                      result.laws.describe()))
        if result.loo:
            lines.append("leave-one-out error of the run time: %s; %s (the seed's bar: most within 10%%, all "
                         "within 30%%)" % (", ".join("P=%d %+.1f%%" % (p, 100 * (pr.parts.total - m) / m)
                                                     for p, m, pr in result.loo), loo_verdict(result.loo)))
        for pr in result.predictions:
            lines.append("predicted P=%d: %.6f s = compute %.6f + switch %.6f + service %.6f + contention %.6f"
                         % (pr.population, pr.parts.total, pr.parts.compute, pr.parts.switch, pr.parts.service,
                            pr.parts.contention))
    lines += ["warning: " + w for w in result.warnings]
    return "\n".join(lines) + "\n"


def write_model(result, out_dir: str, summary: bool = False) -> list:
    """Write model.csv, model.parquet, model_ranks.csv, model.txt and model.svg into out_dir.

    With summary, the paragraph is also the last section of out_dir/summary.txt, in place of an
    earlier model section (report.sections; so `mpigraph report` shows it).  Returns the paths written.
    """
    from mpigraph.model.svg import model_chart

    os.makedirs(out_dir, exist_ok=True)
    paths = {name: os.path.join(out_dir, name) for name in ("model.csv", "model.parquet", "model_ranks.csv",
                                                           "model.txt", "model.svg")}
    _write_csv(paths["model.csv"], result.table)
    _write_csv(paths["model_ranks.csv"], result.ranks)
    with atomic_write(paths["model.parquet"], "wb") as f:
        pq.write_table(result.table, f)
    with atomic_write(paths["model.txt"]) as f:
        f.write(result.text)
    with atomic_write(paths["model.svg"]) as f:
        f.write(model_chart(result))
    return list(paths.values()) + (sections.add_section(out_dir, SUMMARY_HEADER, result.text) if summary else [])


def _write_csv(path, table):
    with atomic_write(path) as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(table.column_names)
        columns = [table.column(c).to_pylist() for c in table.column_names]
        for row in zip(*columns):
            w.writerow(["" if v is None or (isinstance(v, float) and not np.isfinite(v)) else
                        ("%.9g" % v if isinstance(v, float) else v) for v in row])
