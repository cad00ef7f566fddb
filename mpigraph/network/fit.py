"""Fitting ping-pong times: the protocols' thresholds, then alpha + beta*N per protocol.

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
    segments:     seed 003 names three protocols: small messages eager into mailboxes, medium
                  ones eager through a pinned intermediate buffer ("eager RDMA"), large ones
                  by zero-copy rendezvous; an MPI may use two of them or all three.  The sizes
                  sorted are cut into m = 1, 2 or 3 runs of neighbouring sizes (at least
                  MIN_POINTS each), one line per run, none falling (beta >= 0: a cut that needs
                  a falling line fits noise).  For each m the cuts with the smallest total
                  weighted residual chi2 = sum(w_i r_i^2) win (every cut, or every pair of
                  cuts, is tried).  m is chosen by BIC = chi2 + k ln n: k = 3m - 1 parameters
                  (two a line, one a threshold: 2, 5, 8), n the samples kept over all sizes,
                  because chi2 of the means with w_i = 1/sigma_i^2 is, up to a constant,
                  -2 ln the likelihood of the samples themselves.  So a third line must lower
                  chi2 by 3 ln n (27 at 200 samples a size).  On two-line synthetic data
                  (tests/test_calibrate.py, 41 sizes) the best third line lowered it by at
                  most 0.72 of that in 400 calibrations at 60 samples a size, 0.96 at 200: a
                  two-protocol MPI keeps two lines.  At 20 samples a size (sigma_i itself
                  then uncertain) 7 of 400 got a third; with the number of sizes in place of
                  n, 4-13% did.  A real third protocol lowers chi2 by thousands.  The runs are
                  eager, (medium,) rendezvous; a protocol's threshold is the smallest size of
                  its run: the jump lies in (the largest size of the run before, threshold]
    intervals:    bootstrap: each size's samples resampled with replacement, the means and
                  sigmas recomputed, every line refitted on the same sizes; the
                  (1-level)/2 and (1+level)/2 quantiles of alpha and beta
    bends:        then, within each protocol, continuous hinges (hinge.py): the per-byte time
                  changes at H, the time does not jump (a cache level left behind, not a
                  protocol).  The protocols, their thresholds, names and straight lines are
                  found before and do not change; a hinge is kept only where BIC over the
                  protocol's own samples asks for it, and the protocol's time is then its
                  pieces (Line.pieces), its line staying the seed's alpha and beta
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from mpigraph.network.hinge import MAX_HINGES, Piece, fit_hinges

OUTLIER = 5.0         # robust standard deviations above the median: interference, dropped
MIN_POINTS = 3        # sizes on each side of a threshold: a line needs two, a check one more
MAX_SEGMENTS = 3      # seed 003's protocols: eager (mailbox), medium (eager RDMA), rendezvous
NAMES = {1: ("eager",), 2: ("eager", "rendezvous"), 3: ("eager", "medium", "rendezvous")}
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
    alpha: float          # latency, s: the protocol's straight line over all its sizes
    beta: float           # per-byte time, s/B
    alpha_lo: float = float("nan")
    alpha_hi: float = float("nan")
    beta_lo: float = float("nan")
    beta_hi: float = float("nan")
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0))   # the sizes it was fitted on
    pieces: List[Piece] = field(default_factory=list)   # where the protocol bends (hinge.py): its time
    #                                                      as continuous pieces, the first from its start

    def time(self, sizes) -> np.ndarray:
        """The protocol's time at each size: its pieces' where it bends, else its line."""
        sizes = np.asarray(sizes, dtype=float)
        if not self.pieces:
            return self.alpha + self.beta * sizes
        starts = np.array([-np.inf] + [p.start for p in self.pieces[1:]])
        which = np.searchsorted(starts, sizes, side="right") - 1
        return np.array([p.alpha for p in self.pieces])[which] + np.array([p.beta for p in self.pieces])[which] * sizes

    @property
    def start(self) -> int:
        """Where the protocol starts (bytes): its smallest size, 0 for eager."""
        return 0 if self.protocol == "eager" else int(self.sizes[0])


@dataclass
class Fit:
    stats: SizeStats
    lines: List[Line]             # eager, [medium,] [rendezvous], in the order of their sizes
    threshold: Optional[int]      # the first rendezvous size; None: one protocol only
    last_eager: Optional[int]     # the largest size below the threshold (the jump lies in between)
    medium: Optional[int] = None  # the first medium size; None: no medium protocol
    last_before_medium: Optional[int] = None

    def line_index(self, sizes) -> np.ndarray:
        """Index into lines of each size's protocol: the last line starting at or below it."""
        starts = np.array([line.start for line in self.lines])
        return np.searchsorted(starts, np.asarray(sizes), side="right") - 1

    def protocol_of(self, sizes) -> np.ndarray:
        """The protocol name of each size."""
        return np.array([line.protocol for line in self.lines], dtype=object)[self.line_index(sizes)]

    def predict(self, sizes: np.ndarray, lines_only: bool = False) -> np.ndarray:
        """The fitted one-way time of each size: of its protocol p's piece where p bends, else
        alpha_p + beta_p N (lines_only: the protocols' straight lines, bends or not)."""
        sizes = np.asarray(sizes, dtype=float)
        which = self.line_index(sizes)
        out = np.empty(sizes.shape)
        for k, line in enumerate(self.lines):
            here = which == k
            out[here] = line.alpha + line.beta * sizes[here] if lines_only else line.time(sizes[here])
        return out


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


def segment_chi2(stats: SizeStats) -> np.ndarray:
    """(K+1, K+1): chi2 of one line through sizes i..j-1 at [i, j]; inf where j - i < MIN_POINTS
    or the line falls (a byte never takes negative time)."""
    x, y, s = stats.sizes.astype(float), stats.mean, stats.sigma
    K = len(x)
    chi = np.full((K + 1, K + 1), np.inf)
    for i in range(K - MIN_POINTS + 1):          # per run of sizes (K^2/2 small fits), not per sample
        for j in range(i + MIN_POINTS, K + 1):
            _, beta, c = wls(x[i:j], y[i:j], s[i:j])
            if beta >= 0:
                chi[i, j] = c
    return chi


def find_cuts(stats: SizeStats, max_segments: int = MAX_SEGMENTS) -> List[int]:
    """The first index of every line after the first (module docstring): [], [k] or [k1, k2]."""
    K = len(stats.sizes)
    chi = segment_chi2(stats)
    best = {1: (chi[0, K], [])}
    if max_segments >= 2:
        two = chi[0, :] + chi[:, K]                      # cut at k: [0, k) and [k, K)
        k = int(np.argmin(two))
        best[2] = (two[k], [k])
    if max_segments >= 3:
        three = chi[0, :, None] + chi + chi[None, :, K]  # cuts k1 < k2: [0, k1), [k1, k2), [k2, K)
        k1, k2 = np.unravel_index(int(np.argmin(three)), three.shape)
        best[3] = (three[k1, k2], [int(k1), int(k2)])
    n = stats.n.sum()
    bic = {m: c + (3 * m - 1) * np.log(n) for m, (c, _) in best.items() if np.isfinite(c)}
    if not bic:
        return []
    return best[min(bic, key=bic.get)][1]


def fit(samples: Dict[int, np.ndarray], bootstrap: int = 400, level: float = 0.95, seed: int = 1,
        max_segments: int = MAX_SEGMENTS, max_hinges: int = MAX_HINGES) -> Fit:
    """Thresholds, lines and bootstrap intervals from {size: one-way times}; then each
    protocol's bends (at most max_hinges a protocol; 0: none, the fit of the protocols alone)."""
    stats = size_stats(samples)
    cuts = find_cuts(stats, max_segments)
    bounds = [0] + cuts + [len(stats.sizes)]
    names = NAMES[len(bounds) - 1]
    boot = _bootstrap_stats(samples, stats.sizes, bootstrap, seed)
    q = [(1 - level) / 2, (1 + level) / 2]
    lines = []
    for name, lo, hi in zip(names, bounds[:-1], bounds[1:]):
        part = slice(lo, hi)
        x = stats.sizes[part].astype(float)
        alpha, beta, _ = wls(x, stats.mean[part], stats.sigma[part])
        b_alpha, b_beta, _ = wls(x, boot[0][:, part], boot[1][:, part])
        (a_lo, a_hi), (b_lo, b_hi) = np.quantile(b_alpha, q), np.quantile(b_beta, q)
        lines.append(Line(name, float(alpha), float(beta), a_lo, a_hi, b_lo, b_hi, stats.sizes[part]))
    if max_hinges > 0:
        for line, lo, hi in zip(lines, bounds[:-1], bounds[1:]):
            _bend(line, slice(lo, hi), stats, boot, level, max_hinges)
    result = Fit(stats, lines, None, None)
    for line, lo in zip(lines, bounds[:-1]):
        if line.protocol == "rendezvous":
            result.threshold, result.last_eager = int(stats.sizes[lo]), int(stats.sizes[lo - 1])
        elif line.protocol == "medium":
            result.medium, result.last_before_medium = int(stats.sizes[lo]), int(stats.sizes[lo - 1])
    return result


def _bend(line: Line, part: slice, stats: SizeStats, boot, level: float, max_hinges: int) -> None:
    """A protocol's hinges (hinge.py), on its own sizes and samples: where BIC keeps some, its
    pieces go to line.pieces; its straight line (alpha, beta, the seed's parameters) stays."""
    found = fit_hinges(stats.sizes[part], stats.mean[part], stats.sigma[part], stats.n[part],
                       boot[0][:, part], boot[1][:, part], level, max_hinges)
    if found is not None:
        line.pieces = found


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
