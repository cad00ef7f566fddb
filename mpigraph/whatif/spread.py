"""The pieces of a split model graph spread over the analysis ranks, and combined.

A run's model graph splits at its global synchronisation points (cuts.py): T(L) is the sum
of the pieces' T_j(L) for every L, and each piece is a graph of its own.  ``Spread`` gives
every analysis rank of `comm` a contiguous block of pieces (about the same number of edges
each, cut where the running sum of edges crosses a K-th of the total), sent once from
analysis rank 0 in columnar batches (comm.shuffle.exchange: the codec, the bytes counted by
comm.meter).  Then each rank

- searches its own pieces' breakpoints (``Model.envelope_units``: every piece on its own, in
  passes over its block only), and rank 0 adds the pieces' envelopes up in piece order
  (``envelope.combine_units``);
- evaluates its pieces at given values (``forward``: a Pass per piece, gathered in piece
  order and summed there), for the tolerance's Newton steps and the slopes at a point;
- walks its pieces' critical paths (``path``: per piece; the edges as the whole graph's ids).

Every number is computed per piece by the same pass whatever K is, and the sums over pieces
are taken on the gathered per-piece values in piece order, as one rank takes them: the
answers are identical for every K (tests/test_whatif_spread.py).  The tolerance "tight"
(``Model.eps_abs``) and the asymptote's far point are the whole graph's, computed on rank 0.

Fewer pieces than ranks (a graph without cuts: a ping-pong, --collectives dissemination, a
program without collectives over all ranks) cannot be shared out that way: then every rank
gets the whole graph and the ranks share the *values* instead.  The breakpoint search
evaluates all open intervals of a round as columns of one pass, and every column is a pass of
its own (the same numbers however the columns are chunked): each rank computes a contiguous
K-th of a round's columns, and the rounds' answers are put together in column order on every
rank (``_ColumnSplit``).  All ranks then run the same search in lockstep.  A round with fewer
columns than ranks leaves some idle: a search of many pieces (1034 on the 1e6-record halo with
dissemination rounds) has hundreds of columns in its late rounds.
"""

import dataclasses

import numpy as np

from mpigraph.comm import parallel
from mpigraph.comm import shuffle
from mpigraph.util import arrays
from mpigraph.whatif.envelope import Edges, Model, Pass, combine_units, tight_eps


@dataclasses.dataclass
class Plan:
    """What every rank knows of the spread (computed on rank 0, broadcast)."""

    first_unit: np.ndarray       # K + 1 bounds: rank a holds units first_unit[a]:first_unit[a+1]
    edges_per_rank: np.ndarray   # edges each rank holds
    eps_abs: float               # the whole graph's "tight" tolerance
    span: float                  # the asymptote's scale: sum |c| + max |start| + 1 (whole graph)
    min_coef: dict               # param -> the smallest positive coefficient of the whole graph
    replicate: bool = False      # fewer units than ranks: every rank holds them all, columns shared


def plan(edges: Edges, edge_piece, n_ranks):
    """Blocks of units per rank: unit u goes to rank floor(K * edges before u / all edges)."""
    n_units = len(np.atleast_1d(edges.sink))
    per_unit = np.bincount(np.asarray(edge_piece, np.int64), minlength=n_units)
    first, held, replicate = blocks_of(per_unit, n_ranks)
    start = edges.start[np.isfinite(edges.start)]
    min_coef = {p: float(c[c > 0].min()) if (c > 0).any() else 1.0 for p, c in (("L", edges.m), ("G", edges.b))}
    span = float(np.abs(edges.c).sum()) + float(np.abs(start).max(initial=0)) + 1.0
    return Plan(first, held, tight_eps(edges), span, min_coef, replicate)


def blocks_of(per_unit, n_ranks):
    """(K + 1 bounds of each rank's units, edges each rank holds, replicate) of units of
    `per_unit` edges each (see plan)."""
    n_units = len(per_unit)
    replicate = n_units < n_ranks
    if replicate:            # every rank all units (see the module doc)
        return np.r_[0, np.full(n_ranks, n_units)], np.full(n_ranks, int(per_unit.sum())), True
    before = np.r_[0, np.cumsum(per_unit)[:-1]]
    owner = np.minimum(before * n_ranks // max(int(per_unit.sum()), 1), n_ranks - 1)
    first = np.searchsorted(owner, np.arange(n_ranks + 1), "left")
    first[-1] = n_units
    cum = np.r_[0, np.cumsum(per_unit)]
    return first, cum[first[1:]] - cum[first[:-1]], False


def _units_of(p: Plan, rank):
    """The units rank `rank` holds: (first, end)."""
    return (0, int(p.first_unit[-1])) if p.replicate else (int(p.first_unit[rank]), int(p.first_unit[rank + 1]))


def _blocks(edges: Edges, edge_piece, p: Plan):
    """Per rank: (edge batch, vertex batch, sink batch) of its units.

    Every vertex of a split graph lies in one unit (an edge's source and destination are in
    its unit; a cut is split into the sink of one piece and the source of the next), so one
    stable sort of the vertices and one of the edges by owner make every rank's block in a
    few passes over the graph: each block's vertices in their global order, renumbered from
    0 (so each vertex keeps its in-edges' order: the same critical edges), its edges in their
    order.  A rank that holds every unit gets the graph as it is."""
    edge_piece = np.asarray(edge_piece, np.int64)
    sinks = np.atleast_1d(np.asarray(edges.sink, np.int64))
    K = len(p.first_unit) - 1
    if p.replicate or K == 1:
        whole = ({"src": edges.src, "dst": edges.dst, "c": edges.c, "m": edges.m, "b": edges.b, "unit": edge_piece,
                  "edge": np.arange(len(edge_piece), dtype=np.int64)}, {"start": edges.start}, {"sink": sinks})
        return [whole] * K
    unit_owner = np.repeat(np.arange(K), np.diff(p.first_unit))
    e_owner = unit_owner[edge_piece]
    v_owner = np.zeros(edges.n_vertices, np.int64)        # a vertex on no edge (none in a run's graph): rank 0
    v_owner[edges.dst] = e_owner
    v_owner[edges.src] = e_owner
    v_owner[sinks] = unit_owner
    v_order, v_bounds = _by_owner(v_owner, K)
    local = np.empty(edges.n_vertices, np.int64)
    local[v_order] = np.arange(len(v_order)) - np.repeat(v_bounds[:-1], np.diff(v_bounds))
    e_order, e_bounds = _by_owner(e_owner, K)
    cols = {"src": local[edges.src[e_order]], "dst": local[edges.dst[e_order]], "c": edges.c[e_order],
            "m": edges.m[e_order], "b": edges.b[e_order], "unit": edge_piece[e_order], "edge": e_order}
    start = edges.start[v_order]
    out = []
    for a in range(K):                                     # a loop over analysis ranks
        e0, e1, u0, u1 = e_bounds[a], e_bounds[a + 1], p.first_unit[a], p.first_unit[a + 1]
        batch = {name: col[e0:e1] for name, col in cols.items()}
        batch["unit"] = batch["unit"] - u0
        out.append((batch, {"start": start[v_bounds[a]:v_bounds[a + 1]]}, {"sink": local[sinks[u0:u1]]}))
    return out


def _by_owner(owner, K):
    """(the indices sorted by owner, stably, and each owner's bounds in them)."""
    order, counts = arrays.grouped(owner, K)
    return (np.arange(len(owner)) if order is None else order), np.r_[0, np.cumsum(counts)]


class Spread:
    """A split graph's units spread over comm's ranks (see the module doc).  Collective: every
    rank constructs it and calls the same methods in the same order; `edges` and
    `edge_piece` (``cuts.split_union``'s, or a graph of one unit with edge_piece zeros) are
    read on rank 0 only."""

    def __init__(self, comm, edges=None, edge_piece=None):
        self.comm = comm
        rank, size = comm.Get_rank(), comm.Get_size()
        the_plan = plan(edges, edge_piece, size) if rank == 0 else None
        blocks = _blocks(edges, edge_piece, the_plan) if rank == 0 else None
        parallel.barrier_idly(comm)            # the others wait for rank 0's blocks without spinning
        self.plan = comm.bcast(the_plan)
        mine = []
        for part in range(3):                 # edges, vertices, sinks: three batches of their own lengths
            got, _ = shuffle.exchange(comm, [b[part] for b in blocks] if rank == 0 else [None] * size)
            mine.append(got.get(0))
        e, v, s = mine
        local = Edges(len(v["start"]), e["src"], e["dst"], e["c"], e["m"], e["b"], v["start"], s["sink"]) \
            if e is not None else None
        self._hold(local, e["unit"] if e is not None else None, e["edge"] if e is not None else None)

    @classmethod
    def of_block(cls, comm, the_plan: Plan, local: Edges, unit, edge_ids):
        """A Spread of the units this rank holds, built there (whatif.distributed): `local` its
        units' edges renumbered from 0, `unit` their local unit, `edge_ids` their ids in the whole
        graph; the Plan every rank's.  Collective only in the passes that follow."""
        self = cls.__new__(cls)
        self.comm, self.plan = comm, the_plan
        self._hold(local, unit, edge_ids)
        return self

    def _hold(self, local, unit, edge_ids):
        """The Model of this rank's units (None when it holds none)."""
        u0, u1 = _units_of(self.plan, self.comm.Get_rank())
        self.n_units = int(self.plan.first_unit[-1])
        self.n_local = int(u1 - u0)
        self.model = None
        self.edge_ids = np.zeros(0, np.int64)
        if self.n_local:
            if self.plan.replicate and self.comm.Get_size() > 1:
                self.model = _ColumnSplit(self.comm, local, unit, eps_abs=self.plan.eps_abs)
            else:
                self.model = Model(local, unit, eps_abs=self.plan.eps_abs)
            self.edge_ids = np.asarray(edge_ids, np.int64)
        self.eps_abs = self.plan.eps_abs

    @property
    def n_edges(self):
        """Edges this rank solves."""
        return len(self.edge_ids)

    # ---- the whole envelope -------------------------------------------------------------

    def envelope(self, lo, hi, param="L", fixed=0.0):
        """T's pieces on [lo, hi], the same on every rank: each rank's units searched there,
        added up on rank 0 in unit order."""
        mine = self.model.envelope_units(lo, hi, param, fixed) if self.model is not None else []
        if self.plan.replicate:             # every rank searched every unit, in lockstep
            return combine_units(mine, lo, hi)
        parallel.barrier_idly(self.comm)    # ranks done first wait for the others without spinning
        units = self.comm.gather(mine, root=0)
        pieces = combine_units([u for block in units for u in block], lo, hi) if self.comm.Get_rank() == 0 else None
        return self.comm.bcast(pieces, root=0)

    # ---- passes at given values ------------------------------------------------------------

    def forward(self, values, param="L", fixed=0.0):
        """A Pass at each of `values` (the same on every rank): the units' values gathered in
        unit order and summed."""
        values = np.atleast_1d(np.asarray(values, np.float64))
        if self.model is not None:
            got = self.model.forward_pieces(np.tile(values, (self.n_local, 1)), param, fixed)
            mine = np.stack([got.T, got.right, got.left, got.other])
        else:
            mine = np.zeros((4, 0, len(values)))
        every = mine if self.plan.replicate else np.concatenate(self.comm.allgather(mine), axis=1)
        return Pass(*(every[i].sum(axis=0) for i in range(4)))

    def path(self, value, param="L", fixed=0.0):
        """(Pass at `value` with the other coefficient on the path, the critical edges as the
        whole graph's edge ids, sorted), the same on every rank."""
        if self.model is not None:
            got, on = self.model.path_units(value, param, fixed)
            mine, on = np.stack([got.T, got.right, got.left, got.other]), self.edge_ids[on]
        else:
            mine, on = np.zeros((4, 0, 1)), np.zeros(0, np.int64)
        if self.plan.replicate:
            every, edges = mine, np.sort(on)
        else:
            parallel.barrier_idly(self.comm)
            every = np.concatenate(self.comm.allgather(mine), axis=1)
            edges = np.sort(np.concatenate(self.comm.allgather(on)))
        return Pass(*(every[i].sum(axis=0) for i in range(4))), edges

    # ---- tolerance (Model's Newton steps on the spread passes) --------------------------------

    tolerance = Model.tolerance

    def _t_eps(self, t):
        return Model._t_eps(self, t)

    def asymptote(self, param="L", fixed=0.0):
        """(a, C) of the steepest line of T (Model.asymptote, with the whole graph's scale)."""
        big = 4 * self.plan.span / self.plan.min_coef[param]
        got = self.forward([big], param, fixed)
        a = float(got.right[0])
        return a, float(got.T[0]) - a * big


class _ColumnSplit(Model):
    """A Model whose passes share their columns among comm's ranks (every rank holds the whole
    graph and calls the same passes): rank r computes the r-th of K contiguous chunks of the
    columns, and every rank gets all of them back in column order.  A pass that keeps the
    critical in-edges (one column: the path) runs whole on every rank."""

    def __init__(self, comm, edges, edge_piece, eps_abs):
        super().__init__(edges, edge_piece, eps_abs=eps_abs)
        self.comm = comm

    def _columns(self, values, param, fixed, keep, with_other):
        if keep:
            return super()._columns(values, param, fixed, keep, with_other)
        chunks = np.array_split(np.arange(values.shape[-1]), self.comm.Get_size())
        cols = chunks[self.comm.Get_rank()]
        if len(cols):
            # a copy with the strides of its own shape (a view's may not be, whatever its flags say)
            mine_values = values[..., cols[0]:cols[-1] + 1].copy(order="C")
            got = super()._columns(mine_values, param, fixed, False, with_other)[0]
            mine = np.stack([got.T, got.right, got.left, got.other])
        else:
            mine = np.zeros((4, len(self.sinks), 0))
        every = np.concatenate(self.comm.allgather(mine), axis=2)
        return Pass(*every), None
