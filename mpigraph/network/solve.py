"""Link latencies and every pair's RTT from the measured pairs (seed 001, step d).

    C beta = O'           C: the measured pairs' rows of S, O': their measured RTTs
    beta  = C^+ O'        the minimum-norm least-squares solution (SVD, rank by tolerance)
    RTT(x, y) = a_xy . beta   unique for every pair, because a_xy lies in C's row space
    Var(a . beta) = sum_i (a C^+)_i^2 sigma_i^2      sigma_i: a measurement's standard error

sigma_i is the larger of the residuals' RMS (when there are more measurements than
rank(C), so the residuals say how noisy a measurement is) and the measurement's own error
estimate from its repeats (when given).

Aggregated links: the reduced row echelon form of C names the link combinations the
measurements determine (seed 001's G): a row with one link is that link's latency, a row
with several (l3 + l4 in Fig. 2) is the latency of links that are always used together.
"""

from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import scipy.sparse as sp

RANK_TOLERANCE = 1e-9        # singular values below this fraction of the largest are zero
CHUNK = 4096                 # pairs predicted at a time: (CHUNK x measurements) doubles


@dataclass
class Solution:
    beta: np.ndarray             # minimum-norm link latencies
    rank: int
    residual_rms: float          # NaN when the measurements are exactly determined
    condition: float             # largest / smallest nonzero singular value of C: how much
                                 # the measurements' noise can be amplified in the predictions
    sigma: np.ndarray            # the standard error used for each measurement
    pinv: np.ndarray             # C^+ (links x measurements)

    def predict(self, A: sp.csr_matrix):
        """(RTT, standard error) of each row of A (pairs x links)."""
        rtt, se = np.empty(A.shape[0]), np.empty(A.shape[0])
        for start in range(0, A.shape[0], CHUNK):
            block = A[start:start + CHUNK]
            rtt[start:start + CHUNK] = block @ self.beta
            M = np.asarray(block @ self.pinv)
            se[start:start + CHUNK] = np.sqrt((M * M) @ (self.sigma ** 2))
        return rtt, se


def solve(C: sp.csr_matrix, O: np.ndarray, sigma: Optional[np.ndarray] = None) -> Solution:
    """Minimum-norm least squares of C beta = O, with each measurement's standard error."""
    D = C.toarray() if sp.issparse(C) else np.asarray(C, dtype=float)
    U, s, Vt = np.linalg.svd(D, full_matrices=False)
    rank = int((s > RANK_TOLERANCE * s[0]).sum()) if len(s) else 0
    pinv = (Vt[:rank].T / s[:rank]) @ U[:, :rank].T
    beta = pinv @ O
    # One step of iterative refinement: a minimal set from a random row order can have a
    # condition number near 1e5, and the step takes the rounding error from cond * eps
    # down to about eps (beta stays in the row space: the step is C^+ of a residual).
    beta += pinv @ (O - D @ beta)
    dof = len(O) - rank
    residual_rms = float(np.sqrt(np.sum((D @ beta - O) ** 2) / dof)) if dof > 0 else float("nan")
    own = np.zeros(len(O)) if sigma is None else np.nan_to_num(np.asarray(sigma, dtype=float))
    used = np.maximum(own, residual_rms if dof > 0 else 0.0)
    condition = float(s[0] / s[rank - 1]) if rank else float("nan")
    return Solution(beta, rank, residual_rms, condition, used, pinv)


@dataclass
class Aggregate:
    links: np.ndarray            # link numbers
    coefficients: np.ndarray     # their coefficients in the combination (1 for a plain sum)
    latency: float
    se: float


def aggregated_links(C: sp.csr_matrix, solution: Solution) -> List[Aggregate]:
    """The rows of rref(C): the link combinations the measurements determine, with values.

    Full column rank: every link alone.  Otherwise Gauss-Jordan on an orthonormal basis of
    C's row space (rank x links, the same RREF as C), one pivot column at a time.
    """
    m = C.shape[1]
    if solution.rank == m:
        rows = np.eye(m)
    else:
        rows = _rref(np.linalg.svd(C.toarray(), full_matrices=False)[2][:solution.rank])
    values, ses = solution.predict(sp.csr_matrix(rows))
    out = []
    for row, value, se in zip(rows, values, ses):
        links = np.nonzero(row)[0]
        out.append(Aggregate(links, row[links], float(value), float(se)))
    return out


def _rref(B: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Reduced row echelon form of a full-row-rank B, entries rounded where within tol of an integer
    (S has small integer entries, so its combinations do too)."""
    B = B.copy()
    r = 0
    for col in range(B.shape[1]):
        if r == B.shape[0]:
            break
        pivot = r + int(np.argmax(np.abs(B[r:, col])))
        if abs(B[pivot, col]) < tol:
            continue
        B[[r, pivot]] = B[[pivot, r]]
        B[r] /= B[r, col]
        others = np.arange(B.shape[0]) != r
        B[others] -= np.outer(B[others, col], B[r])
        r += 1
    nearest = np.round(B)
    B = np.where(np.abs(B - nearest) < 1e-6, nearest, B)
    B[np.abs(B) < tol] = 0.0
    return B


def describe(aggregate: Aggregate, names: List[str]) -> str:
    """'l3+l4' for a sum, '2*l3-l4' for other combinations."""
    parts = []
    for link, c in zip(aggregate.links, aggregate.coefficients):
        sign = "-" if c < 0 else "+"
        size = "" if abs(abs(c) - 1) < 1e-9 else "%g*" % abs(c)
        parts.append(sign + size + names[link])
    text = "".join(parts)
    return text[1:] if text.startswith("+") else text
