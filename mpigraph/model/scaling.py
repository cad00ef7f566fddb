"""Seed 002's scaling laws across runs of one program at several process counts.

The laws [paper, section 4.4, fitted forms from specs/model.md]:
    aggregate messages   P M(P)     = a P + b P^2
    mean message size    L(P)       = c / P^2
    aggregate service    P T_svc(P) = d P + e P^2
    aggregate compute    P T_comp(P): "irregular, U-shaped": interpolated piecewise
                         linearly between measured P, never extrapolated silently:
                         outside the measured range it is held at the nearest
                         measured value (compute scales perfectly from there) and
                         a warning says so.
Fits are least squares of the relative residual (each point weighted by
1/measured): the values span orders of magnitude over P, and a plain fit would
serve the largest one only.  With two points a two-parameter law is exact.

Prediction at P': M = a + b P', L = c / P'^2, S = (d + e P') / M,
T_comp = interp / P', D_sw = Lat + L / BW, then the MVA (mva.py).

Leave-one-out: for each measured P, the laws are fitted to the runs at the
other counts and the run time predicted at P is compared with the measured one:
rel_error = (modelled - measured) / measured.  The paper's bar: most within 10%,
all within 30%.
"""

from dataclasses import dataclass, field

import numpy as np

from mpigraph.model import mva
from mpigraph.model.network import Network
from mpigraph.model.runs import RunModel

MIN_COUNTS = 3


@dataclass(frozen=True)
class Point:
    """One run's aggregates over its ranks, what the laws are fitted to."""

    population: int
    messages: float      # P M
    mean_bytes: float    # L
    service: float       # P T_svc
    compute: float       # P T_comp
    wall_clock: float    # measured

    @classmethod
    def of(cls, run: RunModel) -> "Point":
        p = run.population
        return cls(p, p * run.messages, run.mean_bytes, p * run.service_time, p * float(run.run.compute),
                   run.inputs.wall_clock)


@dataclass(frozen=True)
class Laws:
    """The fitted coefficients and the compute points they interpolate."""

    a: float
    b: float
    c: float
    d: float
    e: float
    counts: np.ndarray     # distinct measured P, sorted
    compute: np.ndarray    # mean aggregate T_comp at each

    def describe(self) -> str:
        return ("aggregate messages = %.4g P + %.4g P^2; L = %.4g / P^2 bytes; aggregate T_svc = %.4g P + %.4g P^2 s"
                % (self.a, self.b, self.c, self.d, self.e))


@dataclass
class Prediction:
    """The modelled parts at one P from the laws, and what had to be assumed on the way."""

    population: int
    messages: float
    mean_bytes: float
    parts: mva.Breakdown
    warnings: list = field(default_factory=list)


def _relative_fit(x, y, powers):
    """Coefficients k of sum_j k_j x^powers[j], least squares of (fit - y) / y."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    design = x[:, None] ** np.asarray(powers, float)[None, :]
    weight = 1.0 / np.where(np.abs(y) > 0, np.abs(y), 1.0)
    coef, *_ = np.linalg.lstsq(design * weight[:, None], y * weight, rcond=None)
    return coef


def fit(points) -> Laws:
    """The laws from runs at >= 2 distinct P (prediction needs 3: see model_runs)."""
    p = np.array([q.population for q in points], float)
    if len(np.unique(p)) < 2:
        raise mva.ModelError("the scaling laws need runs at 2 or more process counts")
    a, b = _relative_fit(p, [q.messages for q in points], [1, 2])
    (c,) = _relative_fit(p, [q.mean_bytes for q in points], [-2])
    d, e = _relative_fit(p, [q.service for q in points], [1, 2])
    counts, index = np.unique(p, return_inverse=True)
    compute = np.bincount(index, [q.compute for q in points]) / np.bincount(index)
    return Laws(float(a), float(b), float(c), float(d), float(e), counts, compute)


def predict(laws: Laws, population: int, net: Network, layout: str = mva.SHARED) -> Prediction:
    """The modelled parts at P' = population (see the module docstring)."""
    warnings = []
    p = float(population)
    messages = laws.a + laws.b * p
    service = laws.d + laws.e * p
    if messages <= 0 or service < 0:
        warnings.append("P=%d: the fitted laws give %.3g messages and %.3g s service per rank; clipped at 0"
                        % (population, messages, service))
        messages, service = max(messages, 0.0), max(service, 0.0)
    length = max(laws.c / p ** 2, 0.0)
    lo, hi = laws.counts[0], laws.counts[-1]
    if not lo <= p <= hi:
        warnings.append("P=%d is outside the measured %d..%d: compute time extrapolated as the aggregate at P=%d "
                        "(perfect strong scaling of compute), not interpolated"
                        % (population, lo, hi, lo if p < lo else hi))
    compute = float(np.interp(p, laws.counts, laws.compute)) / p
    s = service / messages if messages > 0 else 0.0
    parts = mva.breakdown(population, messages, compute, net.delay(length), s, layout)
    return Prediction(population, messages, length, parts, warnings)


def leave_one_out(points, net: Network, layout: str = mva.SHARED) -> list:
    """[(P, measured wall clock (mean over its runs), Prediction)] for each measured P."""
    counts = sorted({q.population for q in points})
    out = []
    for p in counts:
        rest = [q for q in points if q.population != p]
        if len({q.population for q in rest}) < 2:
            continue
        measured = float(np.mean([q.wall_clock for q in points if q.population == p]))
        out.append((p, measured, predict(fit(rest), p, net, layout)))
    return out
