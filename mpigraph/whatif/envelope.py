"""T(L): the run time of a model graph as a function of the network latency, exactly.

The model graph (spec whatif.md, seed 000 eq. 3): a DAG whose edge e has weight
    w_e = c_e + m_e * L + b_e * G          (m_e messages, b_e bytes, both >= 0)
and t(v) = max(start_v, max over in-edges (t(u) + w_e)); T = t(sink).  Every path
is a line a * L + C in L (a = its messages), so T(L) is the upper envelope of
lines: convex, nondecreasing, piecewise linear with integer slopes.

No LP is needed (lp.py keeps one as the tests' reference):

- ``Model.forward``: one forward pass in topological order (in C, kernel.py, or
  vectorised by topological level in numpy: every level's edges in a few array
  operations; several values of the parameter at once as columns) gives T and its
  right and left slopes: the max and the min of (slope of t(u) + m_e) over the
  tight in-edges (the right derivative of a max is the max of the active ones'
  right derivatives, the left one the min of their left derivatives).
- ``Model.envelope``: Eisner-Severance breakpoint search: intersect the lines at
  an interval's ends; if T there lies on them it is the breakpoint, else split
  there.  All open intervals of a round are evaluated in one pass; a graph split
  at global synchronisation points (cuts.py) has each piece searched on its own.
- ``Model.tolerance``: L_x = max{L : T(L) <= target} by Newton steps from the
  right (convexity: the step on the left slope never passes the root and lands
  on it after at most as many steps as pieces).

The same machinery sweeps G at fixed L (``param="G"``): then the slopes are
bytes on the critical path (lambda_G), not integers.
"""

import dataclasses

import numpy as np

# Relative tolerance for "tight" (t(u) + w_e == t(v)) in float64 sums of ns-sized terms.
REL_EPS = 1e-11
# Columns (parameter values) per forward pass: more amortises the per-level numpy calls,
# fewer keeps the (edges x columns) temporaries in cache: at most MAX_COLUMNS, and at most
# CELLS edge-columns (1.5 M edges x 16 columns took 29 times one column's 0.3 s).
MAX_COLUMNS = 16
CELLS = 1 << 20
C_CELLS = 1 << 23       # the C pass: 4 tables of vertices x columns, 256 MB at most
# Rounds of the breakpoint search before it gives up: a guard against a loop on rounding, far
# above what an envelope needs (its rounds grow with the pieces of an interval, not with T).
MAX_ROUNDS = 100_000


@dataclasses.dataclass
class Edges:
    """A model graph's edges (any order) and vertices (0..n_vertices-1)."""

    n_vertices: int
    src: np.ndarray
    dst: np.ndarray
    c: np.ndarray                # constant weight
    m: np.ndarray                # messages (latency coefficient)
    b: np.ndarray                # bytes (per-byte-time coefficient)
    start: np.ndarray            # per vertex: earliest time (-inf: none)
    sink: object                 # the sink vertex, or an array of them: T = the sum of their times
                                 # (a graph split into pieces, ``cuts.split_union``)

    def __post_init__(self):
        self.src = np.ascontiguousarray(self.src, np.int64)
        self.dst = np.ascontiguousarray(self.dst, np.int64)
        self.c = np.ascontiguousarray(self.c, np.float64)
        self.m = np.ascontiguousarray(self.m, np.float64)
        self.b = np.ascontiguousarray(self.b, np.float64)
        self.start = np.ascontiguousarray(self.start, np.float64)
        if not len(self.src) == len(self.dst) == len(self.c) == len(self.m) == len(self.b):
            raise ValueError("edge columns differ in length")
        if len(self.start) != self.n_vertices:
            raise ValueError("start: one value per vertex")
        if (self.m < 0).any() or (self.b < 0).any():
            raise ValueError("message and byte counts must be >= 0")


def tight_eps(edges):
    """The absolute part of "tight": REL_EPS of the largest constant weight (at least 1 ns)."""
    return REL_EPS * max(float(np.abs(edges.c).max(initial=0)), 1.0)


def topological_levels(n, src, dst):
    """Level of each vertex: 0 without in-edges, else 1 + the largest level of its sources
    (Kahn's algorithm one whole frontier at a time).  ValueError on a cycle."""
    order = np.argsort(src, kind="stable")
    out_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=out_ptr[1:])
    out_dst = dst[order]
    indeg = np.bincount(dst, minlength=n)
    level = np.full(n, -1, np.int64)
    frontier = np.flatnonzero(indeg == 0)
    lev = 0
    while len(frontier):
        level[frontier] = lev
        lo, hi = out_ptr[frontier], out_ptr[frontier + 1]
        counts = hi - lo
        if counts.sum() == 0:
            break
        # positions of all out-edges of the frontier: lo[i], lo[i]+1, ..., hi[i]-1
        pos = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        targets = out_dst[pos]
        if len(targets) * 16 > n:          # a wide frontier: one count over all vertices
            counts = np.bincount(targets, minlength=n)
            indeg -= counts
            frontier = np.flatnonzero((counts > 0) & (indeg == 0))
        else:                               # a narrow one: sort its few targets
            hit, n_hit = np.unique(targets, return_counts=True)
            indeg[hit] -= n_hit
            frontier = hit[indeg[hit] == 0]
        lev += 1
    if (level < 0).any():
        raise ValueError("the model graph has a cycle")
    return level


@dataclasses.dataclass
class Pass:
    """What a forward pass gives for each parameter value (arrays over the values)."""

    T: np.ndarray
    right: np.ndarray            # right slope dT/dp+
    left: np.ndarray             # left slope dT/dp-
    other: np.ndarray            # the other coefficient summed along the critical path (right slope's)


@dataclasses.dataclass
class Piece:
    """T(p) = slope * p + intercept for lo <= p <= hi."""

    lo: float
    hi: float
    slope: float
    intercept: float

    def at(self, p):
        return self.slope * p + self.intercept


class Model:
    """A model graph prepared for forward passes: in C (kernel.py) where it compiles, edges
    by destination and vertices in a topological order; else in numpy, edges sorted by
    (level of dst, dst)."""

    def __init__(self, edges: Edges, edge_piece=None, use_kernel=True, eps_abs=None):
        """`edge_piece`: for a graph of pieces side by side (``cuts.split_union``), the piece of each
        edge; sink i must be piece i's.  Then ``envelope`` searches each piece's breakpoints
        on its own (all pieces in the same passes, each at its own values) and adds them up.
        use_kernel=False: the numpy pass even where the C kernel compiles.  eps_abs: the
        absolute part of "tight" (default: from these edges' largest c); a part of a larger
        graph (spread.py) takes the whole graph's, so that its answers are the whole's."""
        from mpigraph.whatif import kernel

        self.edges = edges
        self.kernel = kernel.load() if use_kernel else None
        self._levels = None
        if self.kernel is not None:
            order = np.argsort(edges.dst, kind="stable")
            self._vertex_order = self._topological_order()
            self._in_ptr = np.zeros(edges.n_vertices + 1, np.int64)
            np.cumsum(np.bincount(edges.dst, minlength=edges.n_vertices), out=self._in_ptr[1:])
        else:
            order = self._level_layout()
        self.order = order
        self.src = np.ascontiguousarray(edges.src[order])
        self.dst = edges.dst[order]
        self.c, self.m, self.b = edges.c[order], edges.m[order], edges.b[order]
        # tight: within eps_abs + REL_EPS |t| (an edge's own size, and the times' rounding)
        self.eps_abs = eps_abs if eps_abs is not None else tight_eps(edges)
        self.sinks = np.atleast_1d(np.asarray(edges.sink, np.int64))
        if edge_piece is None:
            self.epiece = None
        else:
            self.epiece = np.asarray(edge_piece, np.int64)[order]
            if self.epiece.max(initial=0) >= len(self.sinks):
                raise ValueError("edge_piece: pieces 0..n_sinks-1, sink i ends piece i")

    def _topological_order(self):
        """The vertices in a topological order (Kahn's algorithm, in C)."""
        ffi, lib = self.kernel
        e, n = self.edges, self.edges.n_vertices
        out_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(e.src, minlength=n), out=out_ptr[1:])
        out_dst = np.ascontiguousarray(e.dst[np.argsort(e.src, kind="stable")])
        indeg = np.bincount(e.dst, minlength=n).astype(np.int64)
        order = np.empty(n, np.int64)
        done = lib.wi_topo(n, _ptr(ffi, out_ptr), _ptr(ffi, out_dst), _ptr(ffi, indeg), _ptr(ffi, order))
        if done != n:
            raise ValueError("the model graph has a cycle")
        return order

    def _level_layout(self):
        """The numpy pass's layout: the edge order by (level of dst, dst) and each level's
        segments (runs of equal dst, a level's contiguous)."""
        edges = self.edges
        n = edges.n_vertices
        level = topological_levels(n, edges.src, edges.dst)
        # by (level of dst, dst): one int64 key sorts faster than lexsort's two
        order = np.argsort(level[edges.dst] * np.int64(max(n, 1)) + edges.dst, kind="stable")
        dst = edges.dst[order]
        new = np.r_[True, dst[1:] != dst[:-1]] if len(order) else np.zeros(0, bool)
        self.seg_start = np.flatnonzero(new)
        self.seg_dst = dst[self.seg_start]
        self.seg_len = np.diff(np.r_[self.seg_start, len(order)])
        n_levels = int(level.max()) + 1 if n else 0
        self.level_seg = np.searchsorted(level[self.seg_dst], np.arange(n_levels + 1))
        self.level_edge = np.r_[self.seg_start, len(order)][self.level_seg]
        self._levels = n_levels
        return order

    @property
    def n_levels(self):
        """The graph's topological levels (the numpy pass makes a step per level)."""
        if self._levels is None:
            self._levels = int(topological_levels(self.edges.n_vertices, self.edges.src, self.edges.dst).max()) + 1
        return self._levels

    @property
    def n_units(self):
        """The parts whose envelopes are searched separately: the pieces, or the whole graph."""
        return 1 if self.epiece is None else len(self.sinks)

    # ---- one forward pass --------------------------------------------------------------

    def _weights(self, param, values, fixed):
        """(w: edges x K weights, k: the swept coefficient, o: the other one) for `param`."""
        if param == "L":
            k, o = self.m, self.b
        elif param == "G":
            k, o = self.b, self.m
        else:
            raise ValueError("param: L or G")
        base = self.c + o * fixed
        per_edge = values[self.epiece] if values.ndim == 2 else values[None, :]
        return base[:, None] + k[:, None] * per_edge, k, o

    def forward(self, values, param="L", fixed=0.0, keep=False, with_other=False):
        """A Pass at each of `values` of `param` (the other parameter at `fixed`); its `other`
        (the other coefficient along the critical path) only `with_other` or `keep`.

        With keep=True also returns (t, pred) of the last column: each vertex's time and
        the sorted-edge index of its critical in-edge (-1: its start), to walk the path; the
        Pass then has no left slopes."""
        values = np.atleast_1d(np.asarray(values, np.float64))
        out = self._columns(values, param, fixed, keep, with_other)
        result = Pass(*(getattr(out[0], f).sum(axis=0) for f in ("T", "right", "left", "other")))
        return (result, out[1]) if keep else result

    def forward_pieces(self, values, param="L", fixed=0.0):
        """A Pass of (pieces x K) arrays: piece i at values[i, k] in column k (each sink's own)."""
        return self._columns(np.asarray(values, np.float64), param, fixed, False, False)[0]

    def _columns(self, values, param, fixed, keep, with_other):
        """_forward over chunks of columns (values: (K,) or (pieces, K)); per-sink Pass."""
        K = values.shape[-1]
        if self.kernel is not None:       # C: four (vertices x columns) tables
            k = int(max(1, min(MAX_COLUMNS, C_CELLS // max(self.edges.n_vertices, 1))))
        else:
            k = int(max(1, min(MAX_COLUMNS, CELLS // max(len(self.src), 1))))
        out = [self._forward(values[..., i:i + k], param, fixed, keep and i + k >= K, not keep, with_other or keep)
               for i in range(0, K, k)]
        joined = Pass(*(np.concatenate([getattr(o[0], f) for o in out], axis=1)
                        for f in ("T", "right", "left", "other")))
        return joined, out[-1][1]

    def _forward(self, values, param, fixed, keep, left_too=True, other_too=False):
        """One pass; the left slopes only when `left_too`, the other coefficient only when
        `other_too`, the critical in-edges (pred) only when `keep` (each costs a few array
        operations a level)."""
        if self.kernel is not None:
            return self._forward_c(values, param, fixed, keep)
        n, K = self.edges.n_vertices, values.shape[-1]
        w, k, o = self._weights(param, values, fixed)
        t = np.repeat(self.edges.start[:, None], K, axis=1)
        right = np.zeros((n, K))
        left = np.zeros((n, K))
        other = np.zeros((n, K))
        pred = np.full(n, -1, np.int64) if keep else None
        eps = self.eps_abs
        for lev in range(1, self.n_levels):
            e0, e1 = self.level_edge[lev], self.level_edge[lev + 1]
            s0, s1 = self.level_seg[lev], self.level_seg[lev + 1]
            if e0 == e1:
                continue
            src = self.src[e0:e1]
            cand = t[src]
            cand += w[e0:e1]
            segs = self.seg_start[s0:s1] - e0
            lens = self.seg_len[s0:s1]
            dst = self.seg_dst[s0:s1]
            best = np.maximum.reduceat(cand, segs, axis=0)
            t_start = t[dst]
            from_start = t_start >= best - (eps + REL_EPS * np.abs(best))   # the vertex's own start is active
            t_new = np.maximum(best, t_start)
            tight = cand >= np.repeat(t_new - (eps + REL_EPS * np.abs(t_new)), lens, axis=0)
            kk = k[e0:e1, None]
            r = right[src]
            r += kk
            r[~tight] = -np.inf
            r_best = np.maximum.reduceat(r, segs, axis=0)
            t[dst] = t_new
            right[dst] = np.where(from_start, np.maximum(r_best, 0), r_best)
            if left_too:
                lv = left[src]
                lv += kk
                lv[~tight] = np.inf
                l_best = np.minimum.reduceat(lv, segs, axis=0)
                left[dst] = np.where(from_start, np.minimum(l_best, 0), l_best)
            if other_too:
                # the other coefficient along a tight in-edge of the largest right slope
                on = tight & (r >= np.repeat(r_best, lens, axis=0))
                ob = np.maximum.reduceat(np.where(on, other[src] + o[e0:e1, None], -np.inf), segs, axis=0)
                other[dst] = np.where(from_start & (r_best <= 0), 0, ob)
            if keep:
                # the critical in-edge of the last column: the first such edge
                last = on[:, -1] & ~np.repeat(from_start[:, -1] & (r_best[:, -1] <= 0), lens)
                idx = np.where(last, np.arange(e0, e1), e1)
                first = np.minimum.reduceat(idx, segs)
                pred[dst] = np.where(first < e1, first, -1)
        sinks = self.sinks
        result = Pass(t[sinks], right[sinks], left[sinks], other[sinks])
        return result, ((t[:, -1].copy(), pred) if keep else None)

    def _forward_c(self, values, param, fixed, keep):
        """The pass in C (kernel.py), all columns in one sweep; pred indexes self.order's edges."""
        ffi, lib = self.kernel
        n, K = self.edges.n_vertices, values.shape[-1]
        k, o = (self.m, self.b) if param == "L" else (self.b, self.m)
        base = np.ascontiguousarray(self.c + o * fixed)
        k, o = np.ascontiguousarray(k, np.float64), np.ascontiguousarray(o, np.float64)
        vals = np.ascontiguousarray(np.atleast_2d(values), np.float64)
        piece = self.epiece if values.ndim == 2 else None
        t, right, left, other = (np.empty((n, K)) for _ in range(4))
        pred = np.empty(n, np.int64)
        lib.wi_forward(n, K, _ptr(ffi, self._vertex_order), _ptr(ffi, self._in_ptr), _ptr(ffi, self.src),
                       _ptr(ffi, base), _ptr(ffi, k), _ptr(ffi, o),
                       _ptr(ffi, piece) if piece is not None else ffi.NULL, _ptr(ffi, vals),
                       _ptr(ffi, self.edges.start), self.eps_abs, REL_EPS,
                       _ptr(ffi, t), _ptr(ffi, right), _ptr(ffi, left), _ptr(ffi, other), _ptr(ffi, pred))
        s = self.sinks
        return Pass(t[s], right[s], left[s], other[s]), ((t[:, -1].copy(), pred) if keep else None)

    def critical_edges(self, value, param="L", fixed=0.0):
        """Indices (into the Edges given) of the edges on the critical path at `value`: the
        path of tight in-edges of the largest right slope, walked back from the sink (from
        every piece's sink, for a split graph)."""
        return self.path(value, param, fixed)[1]

    def path(self, value, param="L", fixed=0.0):
        """(Pass at `value` with the other coefficient on the path, the critical edges): one pass."""
        got, on = self.path_units(value, param, fixed)
        return Pass(*(getattr(got, f).sum(axis=0) for f in ("T", "right", "left", "other"))), on

    def path_units(self, value, param="L", fixed=0.0):
        """``path`` with the Pass per sink (arrays of sinks x 1), not summed."""
        got, (t, pred) = self._columns(np.atleast_1d(np.asarray([value], np.float64)), param, fixed, True, True)
        if self.kernel is not None:
            ffi, lib = self.kernel
            on_vertex = np.zeros(self.edges.n_vertices, np.int8)
            on_vertex[self.sinks] = 1
            on_edge = np.zeros(len(self.src), np.int8)
            lib.wi_mark(self.edges.n_vertices, _ptr(ffi, self._vertex_order), _ptr(ffi, pred), _ptr(ffi, self.src),
                        ffi.from_buffer("char[]", on_vertex), ffi.from_buffer("char[]", on_edge))
            return got, np.sort(self.order[np.flatnonzero(on_edge)])
        on = np.zeros(self.edges.n_vertices, bool)
        on[self.sinks] = True
        picked = []
        # walk back level by level: a vertex is on the path when its successor's critical edge
        # comes from it (vectorised per level, not per vertex)
        for lev in range(self.n_levels - 1, 0, -1):
            s0, s1 = self.level_seg[lev], self.level_seg[lev + 1]
            dst = self.seg_dst[s0:s1]
            here = dst[on[dst]]
            e = pred[here]
            e = e[e >= 0]
            on[self.src[e]] = True
            picked.append(e)
        sorted_idx = np.concatenate(picked) if picked else np.zeros(0, np.int64)
        return got, np.sort(self.order[sorted_idx])

    # ---- the whole envelope ---------------------------------------------------------------

    def envelope(self, lo, hi, param="L", fixed=0.0):
        """The pieces of T(p) on [lo, hi], in order: Eisner-Severance search, a round per depth,
        every open interval of a round in the same pass; for a graph of pieces each piece's
        own breakpoints, then their sum (``sum_envelopes``)."""
        return combine_units(self.envelope_units(lo, hi, param, fixed), lo, hi)

    def envelope_units(self, lo, hi, param="L", fixed=0.0):
        """Each unit's pieces of T(p) on [lo, hi] (``envelope`` before the sum): a list per unit."""
        U = self.n_units
        ends = self._units(np.tile([lo, hi], (U, 1)), param, fixed)
        # open intervals: (unit, a, T(a), right slope at a, b, T(b), left slope at b)
        todo = [(u, lo, ends.T[u, 0], ends.right[u, 0], hi, ends.T[u, 1], ends.left[u, 1]) for u in range(U)]
        found = [[] for _ in range(U)]
        rounds = 0
        while todo:
            rounds += 1
            if rounds > MAX_ROUNDS:
                raise RuntimeError("breakpoint search: %d open intervals after %d rounds" % (len(todo), MAX_ROUNDS))
            queries, waiting = {}, []
            for u, a, ta, sa, b, tb, sb in todo:
                if b - a <= 0 or sa >= sb - self._slope_eps(sa, sb):
                    found[u].append(Piece(a, b, sa, ta - sa * a))
                    continue
                x = min(max(((tb - sb * b) - (ta - sa * a)) / (sa - sb), a), b)
                column = queries.setdefault(u, [])
                waiting.append((u, len(column), a, ta, sa, b, tb, sb, x))
                column.append(x)
            if not waiting:
                break
            values = np.full((U, max(len(q) for q in queries.values())), float(lo))
            for u, xs in queries.items():
                values[u, :len(xs)] = xs
            got = self._units(values, param, fixed)
            todo = []
            for u, i, a, ta, sa, b, tb, sb, x in waiting:
                on_lines = ta + sa * (x - a)
                tx = got.T[u, i]
                if tx <= on_lines + self._t_eps(on_lines):
                    found[u] += [Piece(a, x, sa, ta - sa * a), Piece(x, b, sb, tb - sb * b)]
                else:
                    todo += [(u, a, ta, sa, x, tx, got.left[u, i]), (u, x, tx, got.right[u, i], b, tb, sb)]
        return [merge_pieces(f) for f in found]

    def _units(self, values, param, fixed):
        """Pass of (units x K) arrays at values (units x K)."""
        if self.epiece is not None:
            return self.forward_pieces(values, param, fixed)
        got = self.forward(values[0], param, fixed)
        return Pass(*(getattr(got, f)[None, :] for f in ("T", "right", "left", "other")))

    def _t_eps(self, t):
        return self.eps_abs + REL_EPS * abs(t)

    @staticmethod
    def _slope_eps(a, b):
        return 1e-9 * max(abs(a), abs(b), 1.0)

    # ---- tolerance -------------------------------------------------------------------------

    def tolerance(self, p0, fractions, param="L", fixed=0.0, max_steps=10_000):
        """(p_x for each fraction x: the largest p with T(p) <= (1 + x) T(p0), T(p0)).

        Newton from the right: start where the steepest line of all (the slope at p -> inf)
        reaches the target, a little further for its rounding (T lies on or above that line,
        so there T >= target), then p -= (T(p) - target) / left slope until T(p) == target.
        inf where no path carries the parameter (T never grows)."""
        fractions = np.asarray(fractions, np.float64)
        t0 = float(self.forward([p0], param, fixed).T[0])
        target = (1 + fractions) * t0
        a, c = self.asymptote(param, fixed)
        if a <= 0:
            return np.full(len(fractions), np.inf), t0
        p = np.maximum((target - c) / a, p0)
        p = p + 1e-9 * np.abs(p) + self._t_eps(np.abs(target)) / a
        done = np.zeros(len(p), bool)
        for _ in range(max_steps):
            got = self.forward(p, param, fixed)
            over = got.T - target
            done |= np.abs(over) <= self._t_eps(target)
            if done.all():
                break
            # left of the answer (only by rounding): a step right on the right slope
            left_of = ~done & (over < 0)
            step = np.where(left_of, over / np.where(got.right > 0, got.right, 1),
                            over / np.where(got.left > 0, got.left, 1))
            p = np.maximum(np.where(done, p, p - step), p0)
        return p, t0

    def asymptote(self, param="L", fixed=0.0):
        """(a, C) of the steepest line of T (its right slope far out; C its intercept)."""
        # A value so large that every path's a*p dominates any difference of constants.
        span = float(np.abs(self.edges.c).sum()) + float(np.abs(self.edges.start[np.isfinite(self.edges.start)])
                                                          .max(initial=0)) + 1.0
        coef = self.m if param == "L" else self.b
        nz = coef[coef > 0]
        big = 4 * span / (float(nz.min()) if len(nz) else 1.0)
        got = self.forward([big], param, fixed)
        a = float(got.right[0])
        return a, float(got.T[0]) - a * big


def _ptr(ffi, array):
    """A C pointer to a contiguous numpy array's data (kept alive by the caller)."""
    assert array.flags.c_contiguous
    kind = {np.dtype(np.float64): "double *", np.dtype(np.int64): "int64_t *"}[array.dtype]
    if array.ndim == 2:
        assert array.strides[-1] == array.itemsize
    return ffi.cast(kind, array.ctypes.data)


def combine_units(units, lo, hi):
    """T's pieces from the units' (a list of piece lists, in unit order): one unit's as they
    are, several summed (``sum_envelopes``)."""
    return units[0] if len(units) == 1 else sum_envelopes(units, lo, hi)


def merge_pieces(pieces):
    """Pieces in order with equal neighbours (same slope) joined, empty ones dropped."""
    pieces = sorted((p for p in pieces if p.hi > p.lo or len(pieces) == 1), key=lambda p: p.lo)
    out = []
    for p in pieces:
        if out and abs(out[-1].slope - p.slope) <= 1e-9 * max(abs(p.slope), 1.0):
            out[-1] = Piece(out[-1].lo, p.hi, out[-1].slope, out[-1].intercept)
        else:
            out.append(p)
    return out


def sum_envelopes(envelopes, lo, hi):
    """The pieces of the sum of piecewise-linear functions on [lo, hi] (each a list of pieces
    covering it): the slopes and intercepts of all first pieces added, then at every
    breakpoint the changes of the piece it belongs to (exact sums, no integration)."""
    slope = sum(e[0].slope for e in envelopes)
    intercept = sum(e[0].intercept for e in envelopes)
    xs, ds, dc = [], [], []
    for e in envelopes:                      # a loop over pieces and their few breakpoints
        for a, b in zip(e[:-1], e[1:]):
            xs.append(a.hi)
            ds.append(b.slope - a.slope)
            dc.append(b.intercept - a.intercept)
    if not xs:
        return [Piece(lo, hi, slope, intercept)]
    xs, ds, dc = np.array(xs), np.array(ds), np.array(dc)
    order = np.argsort(xs, kind="stable")
    xs, ds, dc = xs[order], ds[order], dc[order]
    first = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    cuts = xs[first]
    slopes = slope + np.cumsum(np.add.reduceat(ds, first))
    intercepts = intercept + np.cumsum(np.add.reduceat(dc, first))
    bounds = np.r_[lo, cuts, hi]
    out = [Piece(float(bounds[0]), float(bounds[1]), slope, intercept)]
    out += [Piece(float(bounds[i + 1]), float(bounds[i + 2]), float(slopes[i]), float(intercepts[i]))
            for i in range(len(cuts))]
    return merge_pieces(out)


def tolerance_from_pieces(pieces, p0, fractions):
    """(p_x, T(p0)) read off the envelope: the largest p with T(p) <= (1 + x) T(p0); nan where
    the envelope ends before T reaches the target (then ``Model.tolerance`` finds it)."""
    t0 = float(evaluate_pieces(pieces, p0))
    out = []
    for x in fractions:
        target = (1 + x) * t0
        answer = np.nan
        for p in pieces:
            if p.hi >= p0 and p.at(p.hi) > target * (1 + 1e-15):
                answer = max((target - p.intercept) / p.slope if p.slope > 0 else p.lo, p0)
                break
        out.append(answer)
    return np.array(out), t0


def evaluate_pieces(pieces, p):
    """T at p (array) from pieces (the max of their lines: exact for a convex envelope)."""
    p = np.asarray(p, np.float64)
    return np.max([pc.slope * p + pc.intercept for pc in pieces], axis=0)


def add_pieces(a, b):
    """The pieces of the sum of two piecewise-linear functions on the same interval."""
    cuts = sorted({x for pc in a + b for x in (pc.lo, pc.hi)})
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        mid = 0.5 * (lo + hi)
        pa = next(pc for pc in a if pc.lo <= mid <= pc.hi)
        pb = next(pc for pc in b if pc.lo <= mid <= pc.hi)
        out.append(Piece(lo, hi, pa.slope + pb.slope, pa.intercept + pb.intercept))
    return merge_pieces(out)
