"""Continuous bends within one protocol: where the per-byte time changes and the time does not jump.

A protocol change is a jump: at S the time steps up (a handshake, a pinned buffer).  A cache
bend is continuous: past some size the copies leave a cache level and the per-byte time
changes, but a message one byte longer takes no longer than one byte's worth.  fit.py finds
the protocols first (their thresholds and names as before); this module then describes each
protocol's bends, if any, as hinges:

    t(N) = alpha + beta N + sum_j gamma_j max(0, N - H_j)          (N in the protocol)

    candidates  H_j on a grid: GRID points per gap between neighbouring sizes of the protocol
                (evenly spaced in the gap, its smaller size included); every piece (the
                protocol's start .. H_1, H_1 .. H_2, .. its end) holds at least MIN_PIECE sizes,
                the first at least FIRST_PIECE
    fit         per candidate the weighted least squares of the model, linear in (alpha, beta,
                gamma_j) once the H_j are fixed, w_i = 1/sigma_i^2 as for the protocols' lines;
                a candidate whose piece falls (a slope beta + gamma_1 + ... < 0) is out, as a
                falling protocol line is
    search      forward selection (forward()): each step adds the hinge that lowers chi2 most
                with the others where they are, then moves each hinge once to its best place
                with the others fixed (refine()).  One hinge is the exhaustive search; more
                are searched one at a time (all pairs of places grow as the square, all
                triples as the cube).  A copy's time curves smoothly over many sizes (the
                caches, the copy loop's chunks) and each size's mean is known to a fraction
                of a percent (docs/network.md shows such curves): so a protocol may bend up
                to MAX_HINGES times, and a piece after a bend may hold a single size; the
                first piece holds FIRST_PIECE (two sizes fix its line, and from it each later
                piece's line follows from one size and continuity)
    how many    h = 0, 1 .. by BIC over the protocol's own samples: chi2_h + PER_HINGE h ln
                n_p, n_p the samples kept at the protocol's sizes.  A hinge has two
                parameters, its location and its slope change, but its location is searched
                over a continuum (the best of many places), which lowers chi2 more than one
                parameter does: PER_HINGE = 3.  The decision weighs each size with
                decision_sigma (a floor under a spread that came out far below its
                neighbours').  The search stops after PATIENCE steps that did not pay.  h = 0
                is the protocol's plain line, exactly the fit without hinges.  On truths
                without a bend see docs/network.md for how often a hinge is found anyway
    intervals   on each bootstrap replicate (the means and sigmas fit.py resampled) the
                hinges are moved once more, each to its best place with the others fixed,
                starting from the fit's: the (1-level)/2 and (1+level)/2 quantiles of each H_j
                and of each piece's own line (alpha, beta of the first piece; the intercept
                a_j = alpha - sum gamma_i H_i and slope b_j = beta + sum gamma_i of the piece
                from H_j on, i <= j).  With one hinge this is the exhaustive search again
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

MAX_HINGES = 8       # bends a protocol may get (BIC decides how many)
PATIENCE = 2         # forward() steps in a row that may fail to pay before it stops
MIN_PIECE = 1        # sizes in every other piece: one size may stand apart (BIC pays for its two bends)
FIRST_PIECE = 2      # sizes in the first piece: two fix its line, and the pieces after it follow
GRID = 16            # candidate locations per gap between two sizes
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


def grid_points(sizes: np.ndarray, grid: int = GRID) -> np.ndarray:
    """GRID candidate locations per gap between neighbouring sizes, the gap's smaller size
    included."""
    sizes = sizes.astype(float)
    return (sizes[:-1, None] + np.diff(sizes)[:, None] * np.arange(grid) / grid).ravel()


def valid(hinges: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """(...,) True where the hinges (..., h) ascend and every piece (the protocol's start .. H_1,
    H_1 .. H_2, .., H_h .. its end) holds at least MIN_PIECE sizes, the first FIRST_PIECE."""
    below = np.searchsorted(sizes.astype(float), hinges, side="right")     # sizes at or below H_j
    edges = np.concatenate([np.zeros(hinges.shape[:-1] + (1,)), below,
                            np.full(hinges.shape[:-1] + (1,), len(sizes))], axis=-1)
    pieces = np.diff(edges, axis=-1)
    return (pieces >= MIN_PIECE).all(-1) & (pieces[..., 0] >= FIRST_PIECE)


def _solve(x: np.ndarray, y: np.ndarray, sigma: np.ndarray, hinges: np.ndarray):
    """(chi2, theta) per replicate and candidate: y (R, K), sigma (R, K), hinges (R, T, h),
    each replicate's own candidates, in x's units.  chi2 is inf where a piece's slope is
    negative."""
    X = [np.broadcast_to(np.ones_like(x), hinges.shape[:-1] + x.shape), np.broadcast_to(x, hinges.shape[:-1] + x.shape)]
    X += [np.maximum(0.0, x - hinges[..., j:j + 1]) for j in range(hinges.shape[-1])]
    X = np.stack(X, axis=-1)                                      # (R, T, K, p)
    w = 1.0 / sigma ** 2                                          # (R, K)
    Xw = X * w[:, None, :, None]
    A = np.swapaxes(Xw, -1, -2) @ X                               # (R, T, p, p): X' W X
    b = np.swapaxes(Xw, -1, -2) @ np.broadcast_to(y[:, None, :, None], X.shape[:-1] + (1,))
    theta = np.linalg.solve(A, b)[..., 0]                         # (R, T, p)
    fitted = (X @ theta[..., None])[..., 0]
    chi2 = (w[:, None, :] * (y[:, None, :] - fitted) ** 2).sum(-1)
    slopes = np.cumsum(theta[..., 1:], axis=-1)
    chi2[(slopes < 0).any(-1)] = np.inf
    return chi2, theta


def forward(x: np.ndarray, y: np.ndarray, sigma: np.ndarray, samples: int,
            max_hinges: int) -> List[Tuple[float, np.ndarray]]:
    """[(chi2, hinges)] for h = 0, 1, ..: each step adds the hinge that lowers chi2 most (the
    others where they are), then moves each hinge once to its best place with the others fixed
    (refine).  Stops at max_hinges, where no place is left, or after PATIENCE steps in a row
    that did not pay for themselves (BIC, choose())."""
    points = grid_points(x)
    hinges = np.zeros(0)
    path = [(_solve(x, y[None, :], sigma[None, :], hinges[None, None, :])[0][0, 0], hinges)]
    while len(path) <= max_hinges and len(path) - 1 - choose(path, samples) < PATIENCE:
        options = np.sort(np.concatenate([np.tile(hinges, (len(points), 1)), points[:, None]], axis=1), axis=1)
        options = options[valid(options, x)]
        if not len(options):
            break
        chi = _solve(x, y[None, :], sigma[None, :], options[None])[0][0]
        if not np.isfinite(chi.min()):
            break
        chi2, hinges = refine(x, y[None, :], sigma[None, :], options[int(np.argmin(chi))][None, :])
        hinges = hinges[0]
        path.append((float(chi2[0]), hinges))
    return path


def refine(x: np.ndarray, y: np.ndarray, sigma: np.ndarray, hinges: np.ndarray):
    """(chi2 (R,), hinges (R, h)): per replicate, each hinge in turn moved to its best grid
    point with the others where they are (one sweep, every replicate at once)."""
    points = grid_points(x)
    hinges = hinges.copy()
    chi2 = np.full(len(y), np.inf)
    for lo in range(0, len(y), CHUNK):
        part = slice(lo, lo + CHUNK)
        for j in range(hinges.shape[1]):
            # Only the places between its neighbours (in some replicate) can be valid.
            left = hinges[part, j - 1].min() if j > 0 else -np.inf
            right = hinges[part, j + 1].max() if j + 1 < hinges.shape[1] else np.inf
            near = points[(points > left) & (points < right)]
            current = np.repeat(hinges[part, None, :], len(near), axis=1)           # (R, T, h)
            options = current.copy()
            options[:, :, j] = near
            ok = valid(options, x)
            # An invalid place (two hinges in one gap, a piece of too few sizes) can make the
            # normal equations singular: it is solved at the hinges already there, then ruled out.
            options[~ok] = current[~ok]
            chi = _solve(x, y[part], sigma[part], options)[0]
            chi[~ok] = np.inf
            pick = np.argmin(chi, axis=1)
            rows = np.arange(len(pick))
            found = np.isfinite(chi[rows, pick])
            hinges[part][found] = options[rows[found], pick[found]]
            chi2[part][found] = chi[rows[found], pick[found]]
    return chi2, hinges


def decision_sigma(mean: np.ndarray, sigma: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """sigma_i, but at least FLOOR_SHARE of the protocol's median relative spread at size i:
    sigma_i >= FLOOR_SHARE * median_j(s_j / t_j) * t_i / sqrt(n_i).  A size of ten samples
    now and then shows a spread several times below its neighbours' (two samples trimmed, the
    rest close by chance); its weight would then pin the line, and a hinge bent to pass through
    it lowers chi2 by more than any penalty.  The floor only enters the decision; the lines
    keep the weights 1/sigma_i^2 of the protocols' fit."""
    relative = np.median(sigma * np.sqrt(counts) / np.maximum(np.abs(mean), 1e-30))
    return np.maximum(sigma, FLOOR_SHARE * relative * np.abs(mean) / np.sqrt(counts))


def choose(path: List[Tuple[float, np.ndarray]], samples: int) -> int:
    """h: the step of forward()'s path with the smallest BIC over the protocol's samples,
    chi2_h + PER_HINGE h ln n_p (module doc)."""
    bic = [chi + PER_HINGE * h * np.log(samples) for h, (chi, _) in enumerate(path)]
    return int(np.argmin(bic)) if np.isfinite(bic).any() else 0


def _theta(x: np.ndarray, y: np.ndarray, sigma: np.ndarray, hinges: np.ndarray) -> np.ndarray:
    """(R, p): each replicate's least squares with its own hinges (R, h)."""
    return _solve(x, y, sigma, hinges[:, None, :])[1][:, 0]


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
    path = forward(x, y, decision_sigma(y, s, counts), int(counts.sum()), max_hinges)
    count = choose(path, int(counts.sum()))
    if count == 0:
        return None
    # The places found with the decision's floor, moved once more with the fit's own weights.
    _, where = refine(x, y[None, :], s[None, :], path[count][1][None, :])
    b_y, b_s = boot_means / TIME_UNIT, boot_sigmas / TIME_UNIT
    _, b_where = refine(x, b_y, b_s, np.repeat(where, len(b_y), axis=0))
    return _to_pieces(where, _theta(x, y[None, :], s[None, :], where), b_where, _theta(x, b_y, b_s, b_where),
                      scale, sizes[0], level)


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
