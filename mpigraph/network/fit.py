"""Fitting ping-pong times: the protocol threshold S, then alpha + beta*N per protocol.

Seed 003 calibrates its network and stack parameters by Bayesian inference on ping-pong
times; specs/decompose.md takes the light substitute: weighted least squares (the maximum
likelihood of its eq. 7 under uniform priors) with bootstrap intervals.

    per size i:   the mean t_i of its one-way times (round trip / 2), the spread s_i (their
                  standard deviation) and sigma_i = s_i / sqrt(n_i), the mean's standard error;
                  samples above median + OUTLIER * 1.4826 MAD are dropped first (a
                  ping-pong preempted by another process measures the scheduler, not the
                  network; Gaussian jitter loses about 1 sample in 3000 to the cut)
    line:         t(N) = alpha + beta N by weighted least squares, weights w_i = 1/sigma_i^2:
                  beta = (W Swxy - Swx Swy) / (W Swxx - Swx^2), alpha = (Swy - beta Swx) / W
    threshold:    sizes sorted; every split k (eager = the first k sizes, rendezvous = the
                  rest, at least MIN_POINTS each) fitted by two lines, neither falling
                  (beta >= 0: a split that needs a falling line fits noise); the split with the
                  smallest total weighted residual sum(w_i r_i^2) wins, unless one line does
                  as well by BIC (chi2 + parameters * ln K: 2 parameters against 5).
                  S = the smallest size of the rendezvous side: the jump lies in
                  (largest eager size, S]
    intervals:    bootstrap: each size's samples resampled with replacement, the means and
                  sigmas recomputed, both lines refitted at the same threshold; the
                  (1-level)/2 and (1+level)/2 quantiles of alpha and beta
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

OUTLIER = 5.0         # robust standard deviations above the median: interference, dropped
MIN_POINTS = 3        # sizes on each side of a threshold: a line needs two, a check one more
SIGMA_FLOOR = 1e-12   # s: a size whose samples are all equal (synthetic) still gets a finite weight


@dataclass
class SizeStats:
    sizes: np.ndarray     # bytes, ascending
    n: np.ndarray         # samples kept per size
    mean: np.ndarray      # s
    spread: np.ndarray    # standard deviation of one sample, s
    sigma: np.ndarray     # standard error of the mean, s


@dataclass
class Line:
    protocol: str
    alpha: float          # latency, s
    beta: float           # per-byte time, s/B
    alpha_lo: float = float("nan")
    alpha_hi: float = float("nan")
    beta_lo: float = float("nan")
    beta_hi: float = float("nan")
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0))   # the sizes it was fitted on


@dataclass
class Fit:
    stats: SizeStats
    lines: List[Line]
    threshold: Optional[int]      # the first rendezvous size; None: one protocol only
    last_eager: Optional[int]

    def predict(self, sizes: np.ndarray) -> np.ndarray:
        """The fitted one-way time of each size."""
        sizes = np.asarray(sizes, dtype=float)
        eager, rendezvous = self.lines[0], self.lines[-1]
        use_rdv = sizes >= self.threshold if self.threshold is not None else np.zeros(len(sizes), dtype=bool)
        return np.where(use_rdv, rendezvous.alpha + rendezvous.beta * sizes, eager.alpha + eager.beta * sizes)


def size_stats(samples: Dict[int, np.ndarray]) -> SizeStats:
    """Per-size mean, spread and standard error after dropping the outliers."""
    sizes = np.array(sorted(samples), dtype=np.int64)
    kept = [_trim(np.asarray(samples[s], dtype=float)) for s in sizes]
    return _stats(sizes, kept)


def _trim(values: np.ndarray) -> np.ndarray:
    """The samples up to median + OUTLIER robust standard deviations (1.4826 MAD)."""
    median = np.median(values)
    scale = 1.4826 * np.median(np.abs(values - median))
    kept = values[values <= median + OUTLIER * scale]
    return kept if len(kept) >= 2 else np.sort(values)[:2]


def _stats(sizes, kept) -> SizeStats:
    n = np.array([len(k) for k in kept])
    mean = np.array([k.mean() for k in kept])
    spread = np.array([k.std(ddof=1) if len(k) > 1 else 0.0 for k in kept])
    sigma = np.maximum(spread / np.sqrt(n), SIGMA_FLOOR)
    return SizeStats(sizes, n, mean, spread, sigma)


def wls(x: np.ndarray, y: np.ndarray, sigma: np.ndarray):
    """(alpha, beta, chi2) of y = alpha + beta x, weights 1/sigma^2.  y and sigma may be
    (replicates, points): one fit per row."""
    w = 1.0 / sigma ** 2
    W, Sx, Sxx = w.sum(-1), (w * x).sum(-1), (w * x * x).sum(-1)
    Sy, Sxy = (w * y).sum(-1), (w * x * y).sum(-1)
    beta = (W * Sxy - Sx * Sy) / (W * Sxx - Sx ** 2)
    alpha = (Sy - beta * Sx) / W
    residual = y - (np.expand_dims(alpha, -1) + np.expand_dims(beta, -1) * x)
    return alpha, beta, (w * residual ** 2).sum(-1)


def find_threshold(stats: SizeStats) -> Optional[int]:
    """Index of the first rendezvous size (module docstring), or None for one protocol."""
    x, y, s = stats.sizes.astype(float), stats.mean, stats.sigma
    K = len(x)
    _, _, chi_one = wls(x, y, s)
    best, best_chi = None, np.inf
    for k in range(MIN_POINTS, K - MIN_POINTS + 1):
        _, beta_eager, chi_eager = wls(x[:k], y[:k], s[:k])
        _, beta_rdv, chi_rdv = wls(x[k:], y[k:], s[k:])
        # A byte never takes negative time: a split that needs a falling line fits noise.
        if beta_eager < 0 or beta_rdv < 0:
            continue
        if chi_eager + chi_rdv < best_chi:
            best, best_chi = k, chi_eager + chi_rdv
    if best is None or chi_one + 2 * np.log(K) <= best_chi + 5 * np.log(K):
        return None
    return best


def fit(samples: Dict[int, np.ndarray], bootstrap: int = 400, level: float = 0.95, seed: int = 1) -> Fit:
    """Threshold, lines and bootstrap intervals from {size: one-way times}."""
    stats = size_stats(samples)
    k = find_threshold(stats)
    parts = [("eager", slice(0, k if k is not None else len(stats.sizes)))]
    if k is not None:
        parts.append(("rendezvous", slice(k, len(stats.sizes))))
    boot = _bootstrap_stats(samples, stats.sizes, bootstrap, seed)
    q = [(1 - level) / 2, (1 + level) / 2]
    lines = []
    for name, part in parts:
        x = stats.sizes[part].astype(float)
        alpha, beta, _ = wls(x, stats.mean[part], stats.sigma[part])
        b_alpha, b_beta, _ = wls(x, boot[0][:, part], boot[1][:, part])
        (a_lo, a_hi), (b_lo, b_hi) = np.quantile(b_alpha, q), np.quantile(b_beta, q)
        lines.append(Line(name, float(alpha), float(beta), a_lo, a_hi, b_lo, b_hi, stats.sizes[part]))
    threshold = int(stats.sizes[k]) if k is not None else None
    last_eager = int(stats.sizes[k - 1]) if k is not None else None
    return Fit(stats, lines, threshold, last_eager)


def _bootstrap_stats(samples, sizes, replicates: int, seed: int):
    """(means, sigmas), each (replicates, sizes): every size's kept samples resampled."""
    rng = np.random.default_rng(seed)
    means = np.empty((replicates, len(sizes)))
    sigmas = np.empty((replicates, len(sizes)))
    for i, size in enumerate(sizes):
        kept = _trim(np.asarray(samples[size], dtype=float))
        draw = kept[rng.integers(0, len(kept), size=(replicates, len(kept)))]
        means[:, i] = draw.mean(axis=1)
        sigmas[:, i] = np.maximum(draw.std(axis=1, ddof=1) / np.sqrt(len(kept)), SIGMA_FLOOR)
    return means, sigmas
