"""netprobe's files and printed summary.

    plan.csv    round, x, y, mmset            the ping-pongs, round by round (mmset 1: in the
                                              minimal set, 0: an oversampled extra)
    pairs.csv   x, y, measured, rtt_measured_s, rtt_predicted_s, rtt_se_s, latency_s[, rtt_true_s]
                every pair: measured is "plan" (in the solve), "held_out" (measured
                directly afterwards, not used: a check) or "no"; latency_s = the
                predicted one-way latency RTT/2, seed 000's per-pair L for what-if
    links.csv   links, latency_s, se_s        the link combinations the measurements determine
                (seed 001's aggregated links: "l3+l4" where only the sum is determined)
"""

import csv
import os
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from mpigraph.network.plan import Plan
from mpigraph.network.solve import Aggregate, describe

# A held-out pair agrees when |predicted - measured| <= max(3 se, 10% of measured):
# the spec's acceptance rule for --emulate runs.
AGREE_SIGMAS, AGREE_FRACTION = 3.0, 0.10


@dataclass
class PairTable:
    names: List[str]              # terminal (or rank's terminal) names, indexed by x and y
    x: np.ndarray
    y: np.ndarray
    status: np.ndarray            # "plan", "held_out" or "no"
    measured: np.ndarray          # NaN where not measured
    predicted: np.ndarray
    se: np.ndarray
    true: Optional[np.ndarray] = None

    def agreement(self):
        """(held-out mask, deviation, allowed, within) of the pairs measured but not solved for."""
        held = self.status == "held_out"
        deviation = np.abs(self.predicted - self.measured)
        allowed = np.maximum(AGREE_SIGMAS * self.se, AGREE_FRACTION * self.measured)
        return held, deviation, allowed, deviation <= allowed


def write(out_dir: str, plan: Plan, table: PairTable, aggregates: List[Aggregate], link_names: List[str]) -> List[str]:
    """Write plan.csv, pairs.csv and links.csv into out_dir; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    names = np.asarray(table.names, dtype=object)
    in_mmset = np.zeros(len(plan.measured), dtype=int)
    in_mmset[:len(plan.mmset)] = 1
    order = np.argsort(plan.rounds, kind="stable")
    pair = plan.measured[order]
    paths = [os.path.join(out_dir, f) for f in ("plan.csv", "pairs.csv", "links.csv")]
    _write_csv(paths[0], ["round", "x", "y", "mmset"],
               zip(plan.rounds[order], names[table.x[pair]], names[table.y[pair]], in_mmset[order]))
    header = ["x", "y", "measured", "rtt_measured_s", "rtt_predicted_s", "rtt_se_s", "latency_s"]
    columns = [names[table.x], names[table.y], table.status, _g(table.measured), _g(table.predicted),
               _g(table.se), _g(table.predicted / 2)]
    if table.true is not None:
        header.append("rtt_true_s")
        columns.append(_g(table.true))
    _write_csv(paths[1], header, zip(*columns))
    _write_csv(paths[2], ["links", "latency_s", "se_s"],
               ((describe(a, link_names), "%.6g" % a.latency, "%.3g" % a.se) for a in aggregates))
    return paths


def _g(values: np.ndarray) -> np.ndarray:
    """Numbers as short text, NaN as an empty field."""
    text = np.char.mod("%.6g", np.nan_to_num(values))
    return np.where(np.isnan(values), "", text)


def _write_csv(path, header, rows) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def summary(description: str, n: int, m: int, plan: Plan, residual_rms: float, condition: float) -> str:
    """The plan's figures: pairs, rank(S), rounds against the bound, the orders tried."""
    pairs = n * (n - 1) // 2
    lines = [
        "netprobe: %s, %d terminals, %d links" % (description, n, m),
        "  pairs %d, rank(S) = %d minimal measurements (%.1fx fewer), measured %d (oversampled)"
        % (pairs, plan.rank, pairs / max(plan.rank, 1), len(plan.measured)),
        "  rounds: minimal set %d (lower bound %d, order: %s), with the oversampled pairs %d"
        % (plan.mmset_rounds, plan.bound, plan.order, plan.n_rounds),
        "  orders tried (rounds, their bound, condition number of the minimal set): "
        + ", ".join("%s %d (%d, %.3g)" % (t.name, t.rounds, t.bound, t.condition) for t in plan.tried),
    ]
    lines.append("  condition number of the measured set: %.3g (noise in a measurement can reach the "
                 "predictions amplified up to this much; oversampling lowers it)" % condition)
    if np.isfinite(residual_rms):
        lines.append("  residual RMS of the measurements: %.3g us" % (residual_rms * 1e6))
    return "\n".join(lines)


def held_out_lines(table: PairTable) -> List[str]:
    """One line per held-out pair: measured, predicted +- se, and whether it agrees."""
    held, deviation, allowed, within = table.agreement()
    if not held.any():
        return ["  no held-out pairs: every pair was in the plan"]
    lines = ["  held-out pairs (measured directly, not used in the solve), RTT in us:",
             "    %-10s %-10s %10s %18s %9s %9s" % ("x", "y", "measured", "predicted +- se", "|diff|", "allowed")]
    for i in np.nonzero(held)[0]:
        lines.append("    %-10s %-10s %10.2f %10.2f +- %5.2f %9.2f %9.2f %s" % (
            table.names[table.x[i]], table.names[table.y[i]], table.measured[i] * 1e6, table.predicted[i] * 1e6,
            table.se[i] * 1e6, deviation[i] * 1e6, allowed[i] * 1e6, "ok" if within[i] else "OUTSIDE"))
    lines.append("  %d of %d held-out pairs within max(3 se, 10%%)" % (int(within[held].sum()), int(held.sum())))
    return lines
