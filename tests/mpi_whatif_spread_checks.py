"""Checks of whatif's spread over analysis ranks (mpigraph/whatif/spread.py) and of the model graph
built on them (mpigraph/whatif/distributed.py): run under mpiexec.

Not collected by a plain ``pytest tests`` (the name does not start with test_):
tests/test_whatif_spread.py runs it with 1, 2 and 3 ranks::

    MPIGRAPH_TEST_OUT=dir mpiexec -n 3 python -m pytest -q -p no:cacheprovider tests/mpi_whatif_spread_checks.py

The graph: random DAGs joined sink to source (test_whatif.chain_of_pieces), every joint a cut.
The known answers are the whole graph's, unsplit, on one rank (Model: tests/test_whatif.py
checks it against HiGHS).  Rank 0 writes what it got, as exact hex floats, into
MPIGRAPH_TEST_OUT/spread-K.json, for the test to compare between K.  Every check compares on
analysis rank 0 and broadcasts the verdict, so all ranks pass or fail together.
"""

import json
import os

import numpy as np
from mpi4py import MPI

from mpigraph.whatif.cuts import split_union
from mpigraph.whatif.envelope import Model
from mpigraph.whatif.spread import Spread
from test_whatif import chain_of_pieces

WORLD = MPI.COMM_WORLD
SEEDS = [5, 6, 7, 8, 9, 10, 11, 12]
FRACTIONS = (0.01, 0.5, 3.0)


def agree(verdict):
    """Rank 0's verdict (None = fine, else a message) on every rank."""
    verdict = WORLD.bcast(verdict, root=0)
    assert verdict is None, verdict


def test_spread_equals_the_whole_graph():
    check(SEEDS, "spread")


def test_few_pieces_share_the_columns():
    """Two pieces: on 3 ranks every rank holds both and the passes' columns are shared."""
    check(SEEDS[:2], "columns", replicate=WORLD.size > 2)


def test_ranks_without_pieces():
    """One piece of 200 vertices among four of 25: on 3 ranks the blocks of about a third of the
    edges leave a rank with none, which still takes part in every collective step."""
    check(SEEDS[:5], "uneven", sizes=[25, 200, 25, 25, 25], idle=WORLD.size == 3)


def check(seeds, name, replicate=False, sizes=None, idle=False):
    whole, joints = chain_of_pieces(seeds, sizes)
    reference = Model(whole)
    edges, kept, edge_piece = split_union(whole, joints)
    spread = Spread(WORLD, edges if WORLD.rank == 0 else None, edge_piece if WORLD.rank == 0 else None)
    pieces = spread.envelope(0.0, 300.0, fixed=0.02)
    got, on = spread.path(40.0, fixed=0.02)
    tol, t0 = spread.tolerance(10.0, FRACTIONS, fixed=0.02)
    at = spread.forward([0.0, 17.5, 250.0], fixed=0.02)
    g_pieces = spread.envelope(0.0, 0.5, param="G", fixed=40.0)
    held = WORLD.gather((spread.n_local, spread.n_edges))
    verdict = None
    if WORLD.rank == 0:
        want = reference.envelope(0.0, 300.0, fixed=0.02)
        want_got, want_on = reference.path(40.0, fixed=0.02)
        want_tol, want_t0 = reference.tolerance(10.0, FRACTIONS, fixed=0.02)
        want_at = reference.forward([0.0, 17.5, 250.0], fixed=0.02)
        want_g = reference.envelope(0.0, 0.5, param="G", fixed=40.0)
        checks = [
            ("cuts kept", list(kept) == joints),
            ("the mode", spread.plan.replicate == replicate),
            ("every rank holds pieces" if not idle else "a rank holds none",
             all(u > 0 for u, _ in held) != idle
             and sum(u for u, _ in held) == len(seeds) * (WORLD.size if replicate else 1)),
            ("every edge held once", sum(e for _, e in held) == len(whole.src) * (WORLD.size if replicate else 1)),
            ("slopes", [p.slope for p in pieces] == [p.slope for p in want]),
            ("breakpoints", np.allclose([p.hi for p in pieces], [p.hi for p in want], rtol=1e-12)),
            ("intercepts", np.allclose([p.intercept for p in pieces], [p.intercept for p in want], rtol=1e-12)),
            ("T at 40", np.isclose(got.T[0], want_got.T[0], rtol=1e-12)),
            ("lambda_L at 40", got.right[0] == want_got.right[0]),
            ("lambda_G at 40", np.isclose(got.other[0], want_got.other[0], rtol=1e-12)),
            ("critical edges", np.array_equal(on, want_on)),
            ("tolerances", np.allclose(tol, want_tol, rtol=1e-9) and np.isclose(t0, want_t0, rtol=1e-12)),
            ("forward T", np.allclose(at.T, want_at.T, rtol=1e-12)),
            ("forward slopes", np.array_equal(at.right, want_at.right) and np.array_equal(at.left, want_at.left)),
            ("G slopes", np.allclose([p.slope for p in g_pieces], [p.slope for p in want_g], rtol=1e-12)),
        ]
        failed = [name for name, ok in checks if not ok]
        verdict = "K=%d: %s differ from the whole graph's" % (WORLD.size, ", ".join(failed)) if failed else None
        out = os.environ.get("MPIGRAPH_TEST_OUT")
        if out and not failed:
            hexes = lambda xs: [float(x).hex() for x in xs]  # noqa: E731
            record = {"pieces": [hexes((p.lo, p.hi, p.slope, p.intercept)) for p in pieces],
                      "path": hexes((got.T[0], got.right[0], got.left[0], got.other[0])), "on": on.tolist(),
                      "tolerance": hexes(tol) + hexes([t0]), "forward": [hexes(getattr(at, f)) for f in
                                                                         ("T", "right", "left", "other")],
                      "G": [hexes((p.lo, p.hi, p.slope, p.intercept)) for p in g_pieces]}
            with open(os.path.join(out, "%s-%d.json" % (name, WORLD.size)), "w") as f:
                json.dump(record, f)
    agree(verdict)


# ---- the model graph built on the analysis ranks (whatif/distributed.py) ------------------------

def _edge_table(kind, c, m, b, src_rank, dst_rank, func, piece):
    """The edges as rows sorted by every column: a multiset, whatever the vertex numbers."""
    cols = [np.asarray(x, np.float64) for x in (kind, c, m, b, src_rank, dst_rank, func, piece)]
    order = np.lexsort(cols[::-1])
    return np.stack([col[order] for col in cols])


def test_distributed_build_is_rank0s_graph(tmp_path_factory):
    """Every analysis rank builds the edges whose sink call its trace ranks hold (a hub's in-edges:
    the member's owner); together they are rank 0's whole graph, edge for edge with the same
    weights and the same piece, and each rank read only its own trace ranks' records."""
    from mpigraph.comm.parallel import Ownership
    from mpigraph.testing import synth
    from mpigraph.whatif import build, distributed
    from mpigraph.whatif.build import END, HUB_IN

    run = WORLD.bcast(str(tmp_path_factory.mktemp("built") / "run") if WORLD.rank == 0 else None)
    if WORLD.rank == 0:
        synth.generate(run, 5, 62, "halo")        # 5 trace ranks: uneven blocks on 2 and 3 ranks
    WORLD.Barrier()
    local = distributed.matched_here(WORLD, run)
    net, base = distributed.params(WORLD, local, "delta")
    cols, keys, kept, measured = distributed.built(WORLD, local, net, base, "delta", "recdoub")
    first, held, replicate, per_unit = distributed.spread_plan(WORLD, cols["unit"], len(kept) + 1)
    own = Ownership(5, WORLD.size)
    sink_rank = np.where(np.isin(cols["kind"], [HUB_IN, END]), cols["src_rank"], cols["dst_rank"])
    mine = bool((own.owner_of(sink_rank) == WORLD.rank).all())
    records = WORLD.gather(local.records)
    got = WORLD.gather({k: cols[k] for k in ("kind", "c", "m", "b", "src_rank", "dst_rank", "func", "unit")})
    verdict = None
    if WORLD.rank == 0:
        matched = build.matched_run(run)
        want_net = build.default_params(matched, "delta")
        whole = build.build(matched, "delta", want_net)
        from mpigraph.whatif.cuts import split_union
        _, want_kept, want_piece = split_union(whole.edges, whole.cuts, whole.piece)
        got = {k: np.concatenate([g[k] for g in got]) for k in got[0]}
        names = ("kind", "c", "m", "b", "src_rank", "dst_rank", "func", "unit")
        checks = [
            ("each rank's edges end at its own trace ranks", all(WORLD.gather(mine, root=0) or [mine])),
            ("edges", np.array_equal(_edge_table(*(got[k] for k in names)),
                                     _edge_table(whole.kind, whole.edges.c, whole.edges.m, whole.edges.b,
                                                 whole.src_rank, whole.dst_rank, whole.func, want_piece))),
            ("cuts kept", len(kept) == len(want_kept) and len(kept) > 0),
            ("edges per piece", list(per_unit) == list(np.bincount(want_piece, minlength=len(want_kept) + 1))),
            ("measured end", measured == whole.measured_ns),
            ("o, the median of the sending calls", net.o_ns == want_net.o_ns),
            ("the delivery base, a 10th percentile", base == build.delivery_base(matched, want_net)),
            ("records read once", sum(records) == sum(len(c.records) for c in matched.calls.values())),
        ]
        failed = [name for name, ok in checks if not ok]
        verdict = "K=%d: %s" % (WORLD.size, ", ".join(failed)) if failed else None
    else:
        WORLD.gather(mine, root=0)
    agree(verdict)
