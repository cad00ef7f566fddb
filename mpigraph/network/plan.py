"""The measurement plan: which pairs to ping-pong, in which parallel round (seed 001, steps a-c).

    S        the pairs x links matrix, S[(x,y), z] = times link z is on the round trip
             x -> y -> x (0, 1 or 2): RTT(x, y) = S[(x,y)] . beta, beta the link latencies
    MMSet    a maximal linearly independent subset of S's rows, |MMSet| = rank(S) <= m:
             the rows taken in a given order, each kept when it raises the rank
    rounds   the conflict graph of the MMSet's paths (an edge where two paths share a link)
             coloured by Welsh-Powell: each colour is a round of concurrent ping-pongs
    bound    a lower bound on the rounds: the most MMSet paths through one link
    orders   the MMSet depends on the row order; several orders (lexicographic, random,
             round-robin tournament) are tried and the one with the fewest rounds kept
             (each one's condition number is reported too: the fewest rounds often come
             from a random order whose set is ill-conditioned, which amplifies noise)
    oversampling  about f * rank(S) pairs measured, the MMSet plus random other pairs,
             so noise averages out in the least-squares solve
"""

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from mpigraph.network.topology import NO_LINK, Topology

# A row is dependent when its residual against the rows kept so far is below this fraction
# of its own squared norm.  S has entries 0, 1, 2 and at most a dozen per row, so an
# independent row keeps a residual many orders of magnitude above the rounding (about
# 1e-13 of the norm after a few thousand Gram-Schmidt steps).
DEPENDENT = 1e-8
BLOCK = 256          # rows tested together: the block's Gram matrix is BLOCK x BLOCK
# The condition number of each order's minimal set is reported up to this many links (a
# dense SVD of rank x links: a second at 1,296 links, a minute at 3,072 on a busy machine).
CONDITION_UP_TO = 2000


def all_pairs(n: int) -> Tuple[np.ndarray, np.ndarray]:
    """Every pair x < y of n terminals, lexicographic: (x, y) arrays of n(n-1)/2."""
    x, y = np.triu_indices(n, k=1)
    return x.astype(np.int64), y.astype(np.int64)


def path_matrix(topology: Topology, x: np.ndarray, y: np.ndarray) -> sp.csr_matrix:
    """S restricted to the pairs (x, y): rows = pairs, columns = links, entries = link counts."""
    hops = topology.round_trip(x, y)
    rows = np.repeat(np.arange(len(x)), hops.shape[1])
    cols = hops.ravel()
    used = cols != NO_LINK
    S = sp.csr_matrix((np.ones(int(used.sum())), (rows[used], cols[used])), shape=(len(x), topology.m))
    S.sum_duplicates()
    return S


def mmset(S: sp.csr_matrix, order: np.ndarray) -> np.ndarray:
    """The rows of S kept, in `order`, when each raises the rank: a maximal independent set.

    Block Gram-Schmidt.  Q (r x m) is an orthonormal basis of the rows kept so far.  For a
    block B of the next rows, P = B Q^T, and the Gram matrix of B's residuals against Q is
    G = B B^T - P P^T (no dense residuals needed).  In-order pivoted Cholesky of G keeps a
    row when its residual against Q and the earlier kept rows of the block is not zero; the
    kept rows' residuals B_k - P_k Q are projected off Q once more and orthonormalised by
    Cholesky QR (twice) into Q (_Basis.add).
    Stops early once the rank equals the number of links.  Cost O(m^2 rank), like the paper's.
    """
    m = S.shape[1]
    basis = _Basis(m)
    kept: List[np.ndarray] = []
    for start in range(0, len(order), BLOCK):
        if basis.rank == m:
            break
        rows = order[start:start + BLOCK]
        B = S[rows]
        P = basis.project(B)
        norms = np.asarray(B.multiply(B).sum(axis=1)).ravel()
        # Rows already in the span (most of them once the rank is near m) leave here, at
        # the price of one sparse product: residual^2 = |b|^2 - |b Q^T|^2.
        candidate = norms - np.einsum("ij,ij->i", P, P) > DEPENDENT * norms
        if not candidate.any():
            continue
        rows, B, P, norms = rows[candidate], B[candidate], P[candidate], norms[candidate]
        G = (B @ B.T).toarray() - P @ P.T
        chosen = _in_order_pivots(G, norms)
        if len(chosen) == 0:
            continue
        basis.add(B[chosen].toarray(), P[chosen])
        kept.append(rows[chosen])
    return np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)


class _Basis:
    """An orthonormal basis Q of the rows kept, stored as column blocks of Q^T.

    Blocks, because a sparse @ dense product needs a C-contiguous dense operand (scipy
    copies any other), and growing one big Q^T would copy it on every block; the blocks
    are merged once there are MERGE of them, so the copies stay O(m * rank * log).
    """

    MERGE = 16

    def __init__(self, m: int):
        self.m, self.parts = m, []

    @property
    def rank(self) -> int:
        return sum(p.shape[1] for p in self.parts)

    def project(self, B: sp.csr_matrix) -> np.ndarray:
        """B Q^T: the coordinates of B's rows along the basis."""
        if not self.parts:
            return np.zeros((B.shape[0], 0))
        return np.hstack([B @ part for part in self.parts])

    def add(self, dense_rows: np.ndarray, coords: np.ndarray) -> None:
        """Append the rows' residuals, orthonormalised: R = rows - coords Q, a second
        Gram-Schmidt pass, then Cholesky QR twice (R R^T = L L^T, Q_new = L^-1 R)."""
        R = dense_rows - self._combine(coords)
        R -= self._combine(np.hstack([R @ part for part in self.parts]) if self.parts else coords[:, :0])
        for _ in range(2):
            L = np.linalg.cholesky(R @ R.T)
            R = scipy.linalg.solve_triangular(L, R, lower=True)
        self.parts.append(np.ascontiguousarray(R.T))
        if len(self.parts) >= self.MERGE:
            self.parts = [np.ascontiguousarray(np.hstack(self.parts))]

    def _combine(self, coords: np.ndarray) -> np.ndarray:
        """coords Q (rows x m), a block of Q at a time."""
        out = np.zeros((coords.shape[0], self.m))
        start = 0
        for part in self.parts:
            out += coords[:, start:start + part.shape[1]] @ part.T
            start += part.shape[1]
        return out


def _in_order_pivots(G: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Rows of the Gram matrix G kept in order by a Cholesky that skips (near) zero pivots."""
    G = G.copy()
    chosen = []
    for i in range(len(G)):
        pivot = G[i, i]
        if pivot <= DEPENDENT * norms[i]:
            continue
        chosen.append(i)
        # Schur complement: the later rows' residuals lose their component along row i.
        g = G[i, i + 1:] / pivot
        G[i + 1:, i + 1:] -= np.outer(G[i + 1:, i], g)
    return np.array(chosen, dtype=np.int64)


def with_endpoints(C: sp.csr_matrix, x: np.ndarray, y: np.ndarray, n: int) -> sp.csr_matrix:
    """C's link columns and n more, one per terminal, marking each path's two ends.

    A terminal answers one ping-pong at a time: two paths from the same node conflict even
    where the topology gives no link of their own to the terminals (a hand-written route
    table may leave the host's link out).
    """
    rows = np.repeat(np.arange(len(x)), 2)
    ends = sp.csr_matrix((np.ones(2 * len(x)), (rows, np.stack([x, y], axis=1).ravel())), shape=(len(x), n))
    return sp.hstack([C != 0, ends], format="csr")


def conflict_graph(C: sp.csr_matrix) -> sp.csr_matrix:
    """Adjacency of the paths (rows of C) that share a column (a link, or an end when C
    comes from with_endpoints): (C C^T > 0) without the diagonal."""
    used = (C != 0).astype(np.int32)
    A = (used @ used.T).tocsr()
    A.setdiag(0)
    A.eliminate_zeros()
    return A


def welsh_powell(A: sp.csr_matrix) -> np.ndarray:
    """Colours 0.. of the graph A: vertices by degree, descending, each the smallest colour
    no coloured neighbour has (Welsh and Powell 1967).  Loop per vertex, numpy per neighbour list."""
    n = A.shape[0]
    degree = np.diff(A.indptr)
    colour = np.full(n, -1, dtype=np.int64)
    for v in np.argsort(-degree, kind="stable"):
        taken = colour[A.indices[A.indptr[v]:A.indptr[v + 1]]]
        taken = np.unique(taken[taken >= 0])
        # the smallest colour not taken: the first gap in the sorted taken colours
        gaps = np.nonzero(taken != np.arange(len(taken)))[0]
        colour[v] = gaps[0] if len(gaps) else len(taken)
    return colour


def lower_bound(C: sp.csr_matrix) -> int:
    """The most paths (rows of C) through one link (or end): no plan has fewer rounds."""
    return int(np.asarray((C != 0).sum(axis=0)).max()) if C.shape[0] else 0


def round_robin_order(n: int) -> np.ndarray:
    """Pair indices (into all_pairs(n)) ordered by the circle method's tournament rounds:
    each round n/2 disjoint pairs, so consecutive rows share no terminal."""
    players = n + (n % 2)
    fixed, ring = players - 1, np.arange(players - 1)
    rounds = []
    for r in range(players - 1):
        turned = np.roll(ring, r)
        a = np.concatenate([[fixed], turned[1:players // 2]])
        b = np.concatenate([[turned[0]], turned[players // 2:][::-1]])
        rounds.append(np.stack([a, b], axis=1))
    pairs = np.concatenate(rounds)
    pairs = pairs[(pairs < n).all(axis=1)]
    x, y = pairs.min(axis=1), pairs.max(axis=1)
    # the index of pair (x, y) in all_pairs' lexicographic order
    return x * n - x * (x + 1) // 2 + (y - x - 1)


@dataclass
class OrderTried:
    name: str
    rank: int
    rounds: int
    bound: int
    condition: float = float("nan")   # of the minimal set; NaN above CONDITION_UP_TO links


@dataclass
class Plan:
    """The pairs to measure (indices into all_pairs of the terminals), their rounds, and how they were chosen."""

    n: int                       # terminals planned over
    rank: int                    # rank(S) = |MMSet|
    mmset: np.ndarray            # pair indices of the MMSet, in the order that found it
    measured: np.ndarray         # pair indices measured: the MMSet then the oversampled extras
    rounds: np.ndarray           # round of each measured pair
    bound: int                   # lower bound on the MMSet's rounds
    mmset_rounds: int            # rounds of the MMSet alone
    order: str                   # the row order kept
    tried: List[OrderTried] = field(default_factory=list)

    @property
    def n_rounds(self) -> int:
        return int(self.rounds.max()) + 1 if len(self.rounds) else 0


def make_plan(topology: Topology, terminals: Optional[np.ndarray] = None, orders: int = 4,
              oversample: float = 1.0, seed: int = 0, S: Optional[sp.csr_matrix] = None) -> Plan:
    """Plan over `terminals` (default all): try the lexicographic order, the round-robin order
    and `orders`-2 random orders (at least the lexicographic one), keep the MMSet with the
    fewest rounds (ties: the earlier order), then add (oversample-1)*rank random other pairs
    and colour every measured pair into rounds.
    """
    rng = np.random.default_rng(seed)
    terminals = np.arange(topology.n) if terminals is None else np.asarray(terminals)
    n = len(terminals)
    x, y = all_pairs(n)
    if S is None:
        S = path_matrix(topology, terminals[x], terminals[y])
    candidates = [("lexicographic", np.arange(len(x)))]
    if orders >= 2:
        candidates.append(("round-robin", round_robin_order(n)))
    candidates += [("random %d" % i, rng.permutation(len(x))) for i in range(1, orders - 1)]
    best, tried = None, []
    for name, order in candidates:
        rows = mmset(S, order)
        C = S[rows]
        E = with_endpoints(C, x[rows], y[rows], n)
        colours = welsh_powell(conflict_graph(E))
        entry = OrderTried(name, len(rows), int(colours.max()) + 1 if len(rows) else 0, lower_bound(E),
                           _condition(C) if 0 < C.shape[1] <= CONDITION_UP_TO else float("nan"))
        tried.append(entry)
        if best is None or entry.rounds < best[0].rounds:
            best = (entry, rows)
    entry, rows = best
    extra = _oversample(len(x), rows, oversample, rng)
    measured = np.concatenate([rows, extra])
    colours = welsh_powell(conflict_graph(with_endpoints(S[measured], x[measured], y[measured], n)))
    return Plan(n, entry.rank, rows, measured, colours, entry.bound, entry.rounds, entry.name, tried)


def _condition(C: sp.csr_matrix) -> float:
    """Largest over smallest singular value of C (full row rank: the set is independent)."""
    s = np.linalg.svd(C.toarray(), compute_uv=False)
    return float(s[0] / s[-1]) if len(s) else float("nan")


def _oversample(pairs: int, rows: np.ndarray, factor: float, rng) -> np.ndarray:
    """round((factor-1) * |rows|) random pairs not in rows (all of them if fewer remain)."""
    want = int(round((factor - 1.0) * len(rows)))
    if want <= 0:
        return np.zeros(0, dtype=np.int64)
    others = np.setdiff1d(np.arange(pairs), rows)
    return rng.choice(others, size=min(want, len(others)), replace=False).astype(np.int64)
