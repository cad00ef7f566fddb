"""Splitting a model graph at global synchronisation points (spec whatif.md, "Solver").

A cut is a vertex every source-to-sink path crosses (the hub of a collective over all ranks
with no message outstanding across it).  Then t(cut j+1) = t(cut j) + T_j with T_j the
longest path from cut j to cut j+1 alone, and T = the sum of the pieces' T_j for every L
and G: the pieces can be solved independently.  ``split_union`` keeps them in one graph,
each piece from its own source (the cut's copy, start 0) to its own sink: one forward pass
does all pieces at once, the numpy pass's levels are the deepest piece's, not the whole
run's (a bulk-synchronous run: a dozen, not tens of thousands), and envelope.Model searches
each piece's breakpoints on its own.
"""

import numpy as np

from mpigraph.whatif.envelope import Edges, Model

def valid_cuts(edges, cuts, piece):
    """(kept cuts, piece of each vertex renumbered over them) from candidates in order and a
    claimed piece per vertex (how many candidates come before it; candidate j itself ends
    piece j).  A candidate that an edge passes around, from a piece before it to one after it
    (an outstanding nonblocking message, say), is dropped, and so is any that the claimed
    pieces do not bear out: what is kept is exact."""
    cuts = np.asarray(cuts, np.int64)
    piece = np.minimum(np.asarray(piece, np.int64), len(cuts))
    while len(cuts):
        is_cut = np.zeros(edges.n_vertices, bool)
        is_cut[cuts] = True
        a, b = piece[edges.src], piece[edges.dst]
        expected = a + is_cut[edges.src]          # an edge out of cut j lands in piece j + 1
        bad = b != expected
        if not bad.any():
            break
        # the candidates between the two pieces cannot separate them: drop them
        lo = np.minimum(expected[bad], b[bad])
        hi = np.maximum(expected[bad], b[bad])
        cover = np.zeros(len(cuts) + 2, np.int64)
        np.add.at(cover, lo, 1)
        np.add.at(cover, hi, -1)
        drop = np.cumsum(cover)[:len(cuts)] > 0
        kept = ~drop
        renumber = np.r_[0, np.cumsum(kept)]          # pieces before kept cut j -> its new index
        piece = renumber[piece]
        cuts = cuts[kept]
    return cuts, piece


def split_union(edges, cuts, piece=None):
    """(Edges of the pieces side by side, kept cuts, piece of each edge): every kept cut split
    into its in-copy
    (the sink of the piece it ends) and a new out-copy (the source, start 0, of the next
    piece); edges keep their order and index.  T, the slopes and the critical edges of the
    result are the whole graph's.  `piece`: the claimed piece of each vertex (see
    ``valid_cuts``); None computes it with a pass over the whole graph's levels."""
    if piece is None:
        piece = _piece_of(Model(edges, use_kernel=False), np.asarray(cuts, np.int64))
    cuts, piece = valid_cuts(edges, cuts, piece)
    n = edges.n_vertices
    out_copy = np.full(n, -1, np.int64)
    out_copy[cuts] = n + np.arange(len(cuts))
    src = edges.src.copy()
    moved = out_copy[src] >= 0
    src[moved] = out_copy[src[moved]]
    start = np.r_[edges.start, np.zeros(len(cuts))]
    sinks = np.r_[cuts, np.atleast_1d(edges.sink)]
    # an edge belongs to the piece of its destination: into cut j, piece j; out of it, j + 1
    return Edges(n + len(cuts), src, edges.dst, edges.c, edges.m, edges.b, start, sinks), cuts, piece[edges.dst]


def split(edges, cuts):
    """The pieces as separate Edges (see above; piece i from cut i-1 to cut i, the last to the
    sink), and the kept cuts."""
    cuts, piece = valid_cuts(edges, cuts, _piece_of(Model(edges, use_kernel=False), np.asarray(cuts, np.int64)))
    return _pieces(edges, cuts, piece), cuts


def _piece_of(model, cuts):
    """Per vertex: how many of `cuts` come before it (a cut itself: the piece it ends)."""
    if model.kernel is not None:                # a pass by levels: the numpy layout
        model = Model(model.edges, use_kernel=False)
    n = model.edges.n_vertices
    mark = np.zeros(n, np.int64)
    mark[cuts] = np.arange(1, len(cuts) + 1)
    after = np.zeros(n, np.int64)             # the largest cut index that reaches the vertex
    for lev in range(1, model.n_levels):
        e0, e1 = model.level_edge[lev], model.level_edge[lev + 1]
        s0, s1 = model.level_seg[lev], model.level_seg[lev + 1]
        if e0 == e1:
            continue
        src = model.src[e0:e1]
        best = np.maximum.reduceat(np.maximum(after[src], mark[src]), model.seg_start[s0:s1] - e0)
        after[model.seg_dst[s0:s1]] = best
    return after


def _pieces(edges, cuts, piece):
    """Edges of each piece (see split)."""
    n_pieces = len(cuts) + 1
    edge_piece = piece[edges.dst]
    out = []
    for i in range(n_pieces):
        vertices = np.flatnonzero(piece == i)
        if i > 0:
            vertices = np.union1d(vertices, [cuts[i - 1]])
        keep = np.flatnonzero(edge_piece == i)
        ids = np.union1d(vertices, np.union1d(edges.src[keep], edges.dst[keep]))
        local = np.searchsorted(ids, [edges.src[keep], edges.dst[keep]])
        start = edges.start[ids].copy()
        if i > 0:
            start[np.searchsorted(ids, cuts[i - 1])] = 0.0
        sink = cuts[i] if i < n_pieces - 1 else edges.sink
        out.append(Edges(len(ids), local[0], local[1], edges.c[keep], edges.m[keep], edges.b[keep], start,
                         int(np.searchsorted(ids, sink))))
    return out
