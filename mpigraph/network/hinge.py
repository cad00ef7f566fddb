"""Continuous bends within one protocol: where the per-byte time changes and the time does not jump.

A protocol change is a jump: at S the time steps up (a handshake, a pinned buffer).  A cache
bend is continuous: past some size the copies leave a cache level and the per-byte time rises,
but a message one byte longer takes no longer than one byte's worth.  fit.py finds the
protocols first (their thresholds and names as before); this module then describes the last
protocol's bends, if any, as hinges:

    t(N) = alpha + beta N + sum_j gamma_j max(0, N - H_j)          (N in the protocol)

    candidates  H_j on a grid: GRID points per gap between neighbouring sizes of the protocol
                (evenly spaced in the gap, its smaller size included), GRID_TWO per gap when
                two hinges are searched at once (the pairs grow as the square); every piece
                (the protocol's start .. H_1, H_1 .. H_2, .. its end) holds at least MIN_PIECE
                sizes, so that a hinge has several sizes past it: one slow size cannot bend
                the line
    fit         per candidate the weighted least squares of the model, linear in (alpha, beta,
                gamma_j) once the H_j are fixed, w_i = 1/sigma_i^2 as for the protocols' lines;
                a candidate whose piece falls (a slope beta + gamma_1 + ... < 0) is out, as a
                falling protocol line is
    how many    h = 0, 1 .. max_hinges by BIC over the protocol's own samples:
                chi2_h + PER_HINGE h ln n_p, n_p the samples kept at the protocol's sizes.  A
                hinge has two parameters, its location and its slope change, but its location
                is searched over a continuum (the best of many places), which lowers chi2 more
                than one parameter does: PER_HINGE = 3.  The decision weighs each size with
                decision_sigma (a floor under a spread that came out far below its
                neighbours').  On truths without a bend (tests/test_calibrate.py's, n per size
                as calibrate takes them, 10 from 1.3 MiB on) 2 of 1020 calibrations got a
                hinge, both at 20-60 repeats, none of 340 at the default 200; 2 ln n a hinge
                gave 22 of 1020.  h = 0 is the protocol's plain line, exactly the fit without
                hinges.
    intervals   on each bootstrap replicate (the means and sigmas fit.py resampled) the same
                number of hinges is searched again: the (1-level)/2 and (1+level)/2 quantiles of
                each H_j and of each piece's own line (alpha, beta of the first piece; the
                intercept a_j = alpha - sum gamma_i H_i and slope b_j = beta + sum gamma_i of
                the piece from H_j on, i <= j)
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

MAX_HINGES = 2       # one bend per cache level past the protocol's start is plenty on 45 sizes
MIN_PIECE = 3        # sizes in every piece: two for a line, one more to check it
GRID = 16            # candidate locations per gap between two sizes (one hinge)
GRID_TWO = 6         # the same with two hinges searched together
PER_HINGE = 3.0      # BIC parameters a hinge costs (module doc)
FLOOR_SHARE = 0.5    # a size's spread counts as at least half the protocol's typical one (decision_sigma)
TIME_UNIT = 1e-6     # s: the fit works in us and in sizes / the largest size (well-conditioned sums)
CHUNK = 32           # bootstrap replicates solved at once (memory: CHUNK x candidates x sizes)


@dataclass
class Piece:
    """One piece of a protocol's line: alpha + beta N from `start` bytes on (the intercept is
    that of the piece's own line at 0 B, so the piece needs no other row to be read)."""
    start: float
    alpha: float
    beta: float
    start_lo: float = float("nan")
    start_hi: float = float("nan")
    alpha_lo: float = float("nan")
    alpha_hi: float = float("nan")
    beta_lo: float = float("nan")
    beta_hi: float = float("nan")


def candidates(sizes: np.ndarray, count: int, grid: int) -> np.ndarray:
    """(T, count) hinge locations, ascending in a row, every piece at least MIN_PIECE sizes."""
    sizes = sizes.astype(float)
    K = len(sizes)
    points = (sizes[:-1, None] + np.diff(sizes)[:, None] * np.arange(grid) / grid).ravel()
    below = np.repeat(np.arange(1, K), grid)          # sizes at or below each point (N <= H)
    ok = (below >= MIN_PIECE) & (K - below >= MIN_PIECE)
    points, below = points[ok], below[ok]
    if count == 1:
        return points[:, None]
    i, j = np.triu_indices(len(points), k=1)
    keep = below[j] - below[i] >= MIN_PIECE
    return np.stack([points[i[keep]], points[j[keep]]], axis=1)


def _solve(x: np.ndarray, y: np.ndarray, sigma: np.ndarray, hinges: np.ndarray):
    """(chi2, theta) per replicate and candidate: y (R, K), sigma (R, K), hinges (T, h) in x's
    units.  chi2 is inf where a piece's slope is negative."""
    X = [np.broadcast_to(np.ones_like(x), (len(hinges), len(x))), np.broadcast_to(x, (len(hinges), len(x)))]
    X += [np.maximum(0.0, x[None, :] - hinges[:, j:j + 1]) for j in range(hinges.shape[1])]
    X = np.stack(X, axis=-1)                                      # (T, K, p)
    w = 1.0 / sigma ** 2                                          # (R, K)
    A = np.einsum("rk,tkp,tkq->rtpq", w, X, X)
    b = np.einsum("rk,rk,tkp->rtp", w, y, X)
    theta = np.linalg.solve(A, b[..., None])[..., 0]              # (R, T, p)
    residual = y[:, None, :] - np.einsum("tkp,rtp->rtk", X, theta)
    chi2 = (w[:, None, :] * residual ** 2).sum(-1)
    slopes = np.cumsum(theta[..., 1:], axis=-1)
    chi2[(slopes < 0).any(-1)] = np.inf
    return chi2, theta


def _best(x, y, sigma, count: int, grid: int):
    """(chi2, hinges (R, count), theta (R, p)) of the best candidate per replicate."""
    options = candidates(x, count, grid)
    if not len(options):
        return np.full(len(y), np.inf), None, None
    chi = np.empty(len(y))
    where = np.empty((len(y), count))
    theta = np.empty((len(y), count + 2))
    for lo in range(0, len(y), CHUNK):
        part = slice(lo, lo + CHUNK)
        c, t = _solve(x, y[part], sigma[part], options)
        k = np.argmin(c, axis=1)
        rows = np.arange(len(k))
        chi[part], where[part], theta[part] = c[rows, k], options[k], t[rows, k]
    return chi, where, theta


def decision_sigma(mean: np.ndarray, sigma: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """sigma_i, but at least FLOOR_SHARE of the protocol's median relative spread at size i:
    sigma_i >= FLOOR_SHARE * median_j(s_j / t_j) * t_i / sqrt(n_i).  A size of ten samples
    now and then shows a spread several times below its neighbours' (two samples trimmed, the
    rest close by chance); its weight would then pin the line, and a hinge bent to pass through
    it lowers chi2 by more than any penalty.  The floor only enters the decision; the lines
    keep the weights 1/sigma_i^2 of the protocols' fit."""
    relative = np.median(sigma * np.sqrt(counts) / np.maximum(np.abs(mean), 1e-30))
    return np.maximum(sigma, FLOOR_SHARE * relative * np.abs(mean) / np.sqrt(counts))


def choose(x: np.ndarray, mean: np.ndarray, sigma: np.ndarray, samples: int, max_hinges: int) -> int:
    """h: the number of hinges with the smallest BIC over the protocol's samples (module doc)."""
    bic = {}
    for count in range(max_hinges + 1):
        if count == 0:      # the plain line: the model without hinge columns
            chi = _solve(x, mean[None, :], sigma[None, :], np.zeros((1, 0)))[0][0, 0]
        else:
            chi = _best(x, mean[None, :], sigma[None, :], count, _grid(count))[0][0]
        if np.isfinite(chi):
            bic[count] = chi + PER_HINGE * count * np.log(samples)
    return min(bic, key=bic.get) if bic else 0


def _grid(count: int) -> int:
    return GRID if count == 1 else GRID_TWO


def pieces(where: np.ndarray, theta: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(intercepts, slopes), each (R, count + 1): every piece's own line from the hinge model."""
    gamma = theta[:, 2:]
    slopes = theta[:, 1:2] + np.concatenate([np.zeros((len(theta), 1)), np.cumsum(gamma, axis=1)], axis=1)
    shift = np.concatenate([np.zeros((len(theta), 1)), np.cumsum(gamma * where, axis=1)], axis=1)
    return theta[:, :1] - shift, slopes


def fit_hinges(sizes: np.ndarray, mean: np.ndarray, sigma: np.ndarray, counts: np.ndarray,
               boot_means: np.ndarray, boot_sigmas: np.ndarray, level: float = 0.95,
               max_hinges: int = MAX_HINGES) -> Optional[List[Piece]]:
    """The protocol's pieces [first, after H_1, ...] with intervals, or None when BIC keeps the
    plain line.  sizes, mean, sigma, counts (K,): bytes, s, s, samples kept; boot_* (replicates, K)."""
    scale = float(max(sizes.max(), 1))
    x = sizes.astype(float) / scale
    y, s = mean / TIME_UNIT, sigma / TIME_UNIT
    count = choose(x, y, decision_sigma(y, s, counts), int(counts.sum()), max_hinges)
    if count == 0:
        return None
    grid = _grid(count)
    _, where, theta = _best(x, y[None, :], s[None, :], count, grid)
    _, b_where, b_theta = _best(x, boot_means / TIME_UNIT, boot_sigmas / TIME_UNIT, count, grid)
    return _to_pieces(where, theta, b_where, b_theta, scale, sizes[0], level)


def _to_pieces(where, theta, b_where, b_theta, scale, start, level) -> List[Piece]:
    """Back to bytes and seconds, with the bootstrap quantiles."""
    q = [(1 - level) / 2, (1 + level) / 2]
    alpha, beta = pieces(where, theta)
    b_alpha, b_beta = pieces(b_where, b_theta)
    out = []
    for j in range(alpha.shape[1]):
        at = (float(start), np.nan, np.nan) if j == 0 else (
            where[0, j - 1] * scale, *(np.quantile(b_where[:, j - 1], q) * scale))
        (a_lo, a_hi), (s_lo, s_hi) = np.quantile(b_alpha[:, j], q), np.quantile(b_beta[:, j], q)
        out.append(Piece(at[0], alpha[0, j] * TIME_UNIT, beta[0, j] * TIME_UNIT / scale, at[1], at[2],
                         a_lo * TIME_UNIT, a_hi * TIME_UNIT, s_lo * TIME_UNIT / scale, s_hi * TIME_UNIT / scale))
    return out
