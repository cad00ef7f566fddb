"""The LLAMP linear programs (seed 000, section II-C/D) with scipy's HiGHS: the reference.

    min y_sink  s.t.  y_v >= y_u + c_e + m_e * l + b_e * G   (every edge u -> v)
                      y_v >= start_v,  l >= L
Only precedence constraints: the optimum is the longest path, T(L).  The reduced
cost of l (the marginal of its lower bound) is dT/dL, the messages on the
critical path (ambiguous at a breakpoint, where any value between the left and
the right slope is a valid dual).  The tolerance LP maximises l subject to
y_sink <= (1 + x) T(L0).

envelope.py answers the same questions without an LP; this module is what the
tests compare it with, and the tool for joint questions an envelope of one
parameter cannot answer: ``solve`` takes a latency per edge group (a per rank
pair l_ij, say) through `groups`.
"""

import numpy as np
from scipy import optimize, sparse


def _constraints(edges, n_l, groups):
    """A_ub, b_ub of y_u - y_v + m_e * l_{g(e)} <= -(c_e + b_e * G) with the G term left to the caller."""
    n, ne = edges.n_vertices, len(edges.src)
    rows = np.arange(ne)
    g = np.zeros(ne, np.int64) if groups is None else np.asarray(groups, np.int64)
    data = np.concatenate([np.ones(ne), -np.ones(ne), edges.m])
    cols = np.concatenate([edges.src, edges.dst, n + g])
    A = sparse.csr_matrix((data, (np.tile(rows, 3), cols)), shape=(ne, n + n_l))
    return A


def solve(edges, L, G=0.0, groups=None):
    """(T, reduced cost of each l) at l_g >= L[g] (L a scalar or one value per group).

    `groups`: per edge, which latency variable its messages use (default: one for all)."""
    L = np.atleast_1d(np.asarray(L, np.float64))
    n = edges.n_vertices
    A = _constraints(edges, len(L), groups)
    b = -(edges.c + edges.b * G)
    cost = np.zeros(n + len(L))
    cost[edges.sink] = 1.0
    bounds = [(s if np.isfinite(s) else None, None) for s in edges.start] + [(x, None) for x in L]
    res = optimize.linprog(cost, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError("HiGHS: %s" % res.message)
    return float(res.fun), np.asarray(res.lower.marginals[n:])


def max_latency(edges, t_max, L_min, G=0.0):
    """The largest l >= L_min with T(l) <= t_max (the tolerance LP); None when infeasible,
    inf when unbounded (no path carries a message)."""
    n = edges.n_vertices
    A = _constraints(edges, 1, None)
    b = -(edges.c + edges.b * G)
    cap = sparse.csr_matrix(([1.0], ([0], [edges.sink])), shape=(1, n + 1))
    cost = np.zeros(n + 1)
    cost[n] = -1.0
    bounds = [(s if np.isfinite(s) else None, None) for s in edges.start] + [(L_min, None)]
    res = optimize.linprog(cost, A_ub=sparse.vstack([A, cap]), b_ub=np.r_[b, t_max], bounds=bounds, method="highs")
    if res.status == 3:
        return np.inf
    if res.status != 0:
        return None
    return float(res.x[n])


def pair_groups(src_rank, dst_rank, m):
    """Per edge, a latency group per (sending rank, receiving rank) of its messages (-1 ranks:
    collectives, one group of their own); edges without messages in group 0 (any: m = 0).
    Returns (groups, pairs): pairs[g] = (src, dst) of group g."""
    hub = (src_rank < 0) | (dst_rank < 0)         # a hub's edges: both ranks are not known
    key = np.stack([np.where(m > 0, np.where(hub, -1, src_rank), -2),
                    np.where(m > 0, np.where(hub, -1, dst_rank), -2)], axis=1)
    pairs, groups = np.unique(key, axis=0, return_inverse=True)
    return groups.reshape(-1), [tuple(int(x) for x in p) for p in pairs]


def pairwise_sensitivity(graph, L, G=0.0):
    """{(src rank, dst rank): dT/dl of that pair's latency} at l = L for every pair, by the LP
    with a latency variable per rank pair ((-1, -1): the collectives' hubs).  A reference for
    small runs (HiGHS on the whole graph), the joint question the envelope cannot answer."""
    groups, pairs = pair_groups(graph.src_rank, graph.dst_rank, graph.edges.m)
    _, rc = solve(graph.edges, np.full(len(pairs), float(L)), G, groups=groups)
    return {p: float(r) for p, r in zip(pairs, rc) if p != (-2, -2)}
