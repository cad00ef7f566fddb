"""``mpigraph whatif`` as a Python function: the run's T against added latency and bandwidth.

    from mpigraph.whatif import whatif
    result = whatif("RUN_DIR", latency=(0, 100e-6), model="delta", tolerance=(1, 2, 5))
    result.pieces, result.tolerances, result.critical, result.text

Times in the results and files are seconds; the model works in ns.
"""

import csv
import dataclasses
import os
import time
import types

import numpy as np

from mpigraph.whatif import distributed
from mpigraph.whatif import overhead as recording
from mpigraph.whatif import pairs as pair_latencies
from mpigraph.whatif.build import (COLLECTIVE_KINDS, COMPUTE, LATE_RECEIVER, MESSAGE, WhatifError, build,
                                   default_params, delivery_base, matched_run)
from mpigraph.whatif.cuts import split_union
from mpigraph.whatif.envelope import Model, tolerance_from_pieces

NS = 1e-9
BUILDS = ("ranks", "rank0")


@dataclasses.dataclass
class Result:
    model: str
    measured_s: float            # the traced run's time
    T0_s: float                  # T at the reference point (delta: dL = 0; loggps: L0)
    reference_s: float           # the reference point on the latency axis
    base_latency_s: float        # L0: the latency the axis adds to (delta) or starts from
    lambda_L: float              # right slope at the reference: messages on the critical path
    rho_L: float                 # L lambda_L / T at the reference
    lambda_G: float              # bytes on the critical path at the reference
    pieces: list                 # dicts: the pieces of T on the latency interval
    bandwidth_pieces: list       # dicts: the pieces of T on the bandwidth interval (or [])
    tolerances: list             # dicts per degradation
    critical: list               # dicts per rank pair / collective
    text: str
    params: object
    seconds: float = 0.0
    files: list = dataclasses.field(default_factory=list)
    spread: tuple = (0, 0)       # (pieces, edges) this analysis rank solved
    records_read: int = 0        # trace records this analysis rank read (build rank0: rank 0 all)
    edges_built: int = 0         # model-graph edges this analysis rank built
    edges_sent: int = 0          # of them, sent to other ranks (to solve their pieces)
    edges_received: int = 0      # edges received from other ranks
    build: str = "ranks"         # where the graph was built: "ranks", or "rank 0 (why)"
    overhead_ns: float = 0.0     # the recording's cost per call taken off every compute edge (overhead.py)
    overhead_source: str = "none"    # none, auto (estimated from the trace) or given
    T0_traced_s: float = 0.0     # T at the reference with the compute edges as traced (= T0_s when none)
    path_compute_edges: int = 0  # compute edges on the critical path at the reference
    pair_rows: list = dataclasses.field(default_factory=list)   # --pairs: per host pair (whatif_pairs.csv)
    pair_notes: dict = None      # --pairs: the file, T at one L for all, the path's other messages (summary)


def load_params(path):
    """{L0_ns, G0_ns, S_bytes, source} from a params.csv of ``mpigraph calibrate`` (columns
    protocol, latency_s, per_byte_s, ..., threshold_bytes, host_pair): the median latency of the
    eager rows (all rows when none is marked eager), the median per-byte time of the rendezvous
    rows (else of the same rows), the median threshold."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as error:
        raise WhatifError("--params %s: %s (write it with 'mpigraph calibrate')" % (path, error.strerror))
    need = {"protocol", "latency_s", "per_byte_s", "threshold_bytes"}
    if not rows or not need <= set(rows[0]):
        raise WhatifError("--params %s: need a header with %s and at least one row (as 'mpigraph calibrate' writes)"
                          % (path, ", ".join(sorted(need))))

    def median(rows, col):
        vals = [float(r[col]) for r in rows if r.get(col) not in (None, "", "nan")]
        return float(np.median(vals)) if vals else None

    # A row with from_bytes is a piece of a protocol that bends (network/params.py): LogGPS has one
    # L and one G, the protocols' own rows, their straight lines.
    rows = [r for r in rows if not (r.get("from_bytes") or "").strip()] or rows
    eager = [r for r in rows if r["protocol"].strip().lower() == "eager"] or rows
    rdv = [r for r in rows if r["protocol"].strip().lower().startswith("rendezvous")] or eager
    out = {"source": "L, G, S from %s" % path}
    for key, value in (("L0_ns", median(eager, "latency_s")), ("G0_ns", median(rdv, "per_byte_s")),
                       ("S_bytes", median(rows, "threshold_bytes"))):
        if value is not None:
            out[key] = value / NS if key != "S_bytes" else value
    return out


def whatif(run_dir, latency=(0.0, 100e-6), bandwidth=None, model="delta", tolerance=(1, 2, 5), params=None,
           loggps=None, collectives="recdoub", at=0.0, measured=None, out=None, clock="pingpong", comm=None,
           meter=None, overhead="none", pairs=None, scale_pair=(), build="ranks"):
    """The what-if analysis of the run in run_dir (see the module doc and docs/whatif.md).

    latency: (lo, hi) of the latency axis in s (delta: added latency dL; loggps: L itself);
    bandwidth: (lo, hi) per-byte time in s/B to sweep at the reference latency, or None;
    tolerance: degradations in %; params: a params.csv path; loggps: {o_ns, L0_ns, G0_ns,
    S_bytes} overrides; at: the reference point on the latency axis (delta: dL, default 0;
    loggps: default L0); measured: [(dL_s, T_s)] points for the plot; out: a directory for
    the files (None: none written); overhead: the tracing's cost per call to take off every
    compute edge (overhead.py): "none" (default: T(0) is the traced run's), "auto" (estimated
    from the trace) or a time per call in ns (a number, or a string such as "70ns").
    pairs: netprobe's pairs.csv (loggps model only): every message between ranks on hosts x != y
    costs the pair's latency_s instead of L (pairs.py); scale_pair: ("X,Y,K" or (X, Y, K), ...)
    pairs whose latency is multiplied by K.

    comm: the analysis ranks (an mpi4py communicator; default one, MPI.COMM_SELF), collective:
    build "ranks" (default): each rank reads, matches and builds the edges of the trace ranks it
    owns, and sends them straight to the rank that solves their piece (whatif.distributed);
    "rank0": analysis rank 0 reads, matches and builds the whole graph and sends the pieces
    out (spread.py), as for the runs "ranks" does not cover (Result.build says which ran and
    why).  The pieces between global synchronisation points are solved on the ranks they were
    sent to; every rank returns the same Result, rank 0 writes the files.  meter: a
    comm.meter.Meter for the steps' seconds and bytes."""
    from mpi4py import MPI

    from mpigraph.comm import meter as meters

    started = time.perf_counter()
    comm = comm if comm is not None else MPI.COMM_SELF
    meter = meter if meter is not None else meters.Meter()
    if not os.path.isdir(run_dir):
        raise WhatifError("%s is not a directory: give a run directory (with raw/ logs)" % run_dir)
    lo, hi = (float(x) for x in latency)
    overhead = recording.parse(overhead)         # a bad value fails here, before any work
    scales = _pair_options(model, pairs, scale_pair)
    if lo >= hi or (model == "delta" and lo < 0):
        raise WhatifError("--latency %g:%g s: need 0 <= lo < hi (delta adds latency to the measured run)" % (lo, hi))
    if build not in BUILDS:
        raise WhatifError("build %r: one of %s" % (build, ", ".join(BUILDS)))
    got, why = None, "asked for" if build == "rank0" else ""
    if build == "ranks" and collectives == "dissemination":
        why = "--collectives dissemination: a member's rounds need its partners' vertices"
    elif build == "ranks" and pairs:
        why = "--pairs: each host pair's sensitivity and tolerance are passes over the whole graph"
    elif build == "ranks":
        try:
            got = _on_ranks(comm, meter, run_dir, model, params, loggps, collectives, at, clock, overhead)
        except distributed.Unsupported as error:
            why = "the run has %s (sync.py's pairs)" % error
    if got is None:
        got = _on_rank0(comm, meter, run_dir, model, params, loggps, collectives, at, clock, overhead,
                        pairs, scales, tolerance)
    m, describe, net, ref_ns, base_ns, measured_ns, taken, counts = got
    with meter.stage("whatif solve"):
        G = 0.0 if model == "delta" else net.G0_ns
        result = _solve(m, comm, describe, model, (lo, hi), bandwidth, tolerance, net, ref_ns, base_ns, G)
        result.measured_s = measured_ns * NS
        result.overhead_ns, result.overhead_source = taken.ns, taken.source
        result.T0_traced_s = taken.T_traced_ns * NS if taken.ns > 0 else result.T0_s
    result.seconds = time.perf_counter() - started
    result.spread = (m.n_local, m.n_edges)
    result.records_read, result.edges_built, result.edges_sent, result.edges_received = counts
    result.build = "ranks" if not why else "rank 0 (%s)" % why
    result.text = summary(result, net)
    if out:
        from mpigraph.whatif import outputs

        result.files = comm.bcast(outputs.write(out, result, measured) if comm.Get_rank() == 0 else None)
    return result


def _given(params, loggps):
    given = load_params(params) if params else {}
    given.update(loggps or {})
    return given


def _reference(model, at):
    """(reference point, base latency) in ns of NetParams and the delivery base (api's rule)."""
    def ref_of(net, base):
        return float(at or 0.0) / NS if model == "delta" else (float(at) / NS if at else net.L0_ns)

    def base_of(net, base):
        return (net.L0_ns if net.L0_given else base) if model == "delta" else 0.0
    return ref_of, base_of


def _on_ranks(comm, meter, run_dir, model, params, loggps, collectives, at, clock, overhead):
    """The graph built, spread and modelled on the analysis ranks (whatif.distributed)."""
    ref_of, base_of = _reference(model, at)
    d = distributed.graph_on_ranks(comm, meter, run_dir, model, _given(params, loggps), collectives, clock,
                                   overhead, ref_of)

    def describe(on):
        path = distributed.path_rows(comm, d.spread, d.rows, on)
        view = types.SimpleNamespace(kind=path["kind"], src_rank=path["src_rank"], dst_rank=path["dst_rank"],
                                     func=path["func"], edges=types.SimpleNamespace(m=path["m"], b=path["b"]))
        return _critical(view, np.arange(len(path["kind"]))), int((path["kind"] == COMPUTE).sum()), [], None
    return (d.spread, describe, d.net, ref_of(d.net, d.base_ns), base_of(d.net, d.base_ns), d.measured_ns,
            d.overhead, (d.records, d.built, d.sent, d.received))


def _on_rank0(comm, meter, run_dir, model, params, loggps, collectives, at, clock, overhead, pairs=None, scales=(),
              tolerance=()):
    """Analysis rank 0 reads, matches and builds the whole graph, then spreads its pieces (spread.py).
    With `pairs` (a pairs.csv, `scales` its --scale-pair factors) rank 0 also finds each host
    pair's share of the critical path and the top pairs' tolerances at `tolerance` (%)."""
    from mpigraph.comm import parallel
    from mpigraph.whatif.spread import Spread

    with meter.stage("whatif graph"):          # trace, clock, match and the model graph: analysis rank 0
        graph, edges, edge_piece, net, ref_ns, base_ns, records = parallel.collectively(
            comm, _graph if comm.Get_rank() == 0 else _nothing, run_dir, model, params, loggps, collectives, at, clock,
            overhead, pairs, scales)
        net, ref_ns, base_ns, measured_ns = comm.bcast((net, ref_ns, base_ns, graph.measured_ns if graph else None))
        taken = comm.bcast(graph.overhead if graph else None)
    with meter.stage("whatif spread"):         # the pieces to their ranks
        n_built = len(edges.src) if edges is not None else 0
        m = Spread(comm, edges, edge_piece)
        edges = edge_piece = None

    def describe(on):
        G = 0.0 if model == "delta" else net.G0_ns
        return comm.bcast((_critical(graph, on), int((graph.kind[on] == COMPUTE).sum()),
                           *_pairs_on_path(graph, on, ref_ns, tolerance, G)) if graph is not None else None)
    sent = n_built - (m.n_edges if comm.Get_rank() == 0 else 0)
    return (m, describe, net, ref_ns, base_ns, measured_ns, taken,
            (records, n_built, sent, m.n_edges if comm.Get_rank() else 0))


def _solve(m, comm, describe, model, latency, bandwidth, tolerance, net, ref_ns, base_ns, G):
    """The Result's numbers from the spread graph m (collective; `describe(critical edges)`: the
    critical messages' rows and the compute edges on the path, the same on every rank)."""
    lo, hi = latency
    pieces = m.envelope(lo / NS, hi / NS, fixed=G)
    ref, on_path = m.path(ref_ns, fixed=G)          # T, lambda_L, lambda_G and the critical edges
    T0 = float(ref.T[0])
    lam = float(ref.right[0])
    rho = (base_ns + ref_ns) * lam / T0 if T0 > 0 else 0.0
    fractions = np.asarray(tolerance, np.float64) / 100
    tol, _ = tolerance_from_pieces(pieces, ref_ns, fractions) if lo / NS <= ref_ns <= hi / NS else (
        np.full(len(fractions), np.nan), None)
    if np.isnan(tol).any():         # beyond the latency interval: Newton steps on the graph
        tol = np.where(np.isnan(tol), m.tolerance(ref_ns, fractions, fixed=G)[0], tol)
    slope_at_tol = _slopes_at(pieces, tol, m, G)
    critical, path_compute, pair_rows, pair_notes = describe(on_path)
    if pair_notes is not None:      # the path's latency at each message's own latency, not one L
        rho = pair_notes["path_latency_s"] / (T0 * NS) if T0 > 0 else 0.0
    result = Result(model, 0.0, T0 * NS, ref_ns * NS, base_ns * NS, lam, rho, float(ref.other[0]),
                    _piece_rows(pieces, base_ns, model), [], [], critical, "", net, path_compute_edges=path_compute,
                    pair_rows=pair_rows or [], pair_notes=pair_notes)
    for x, L_x, slope in zip(tolerance, tol, slope_at_tol):
        result.tolerances.append({"degradation_pct": x, "T0_s": T0 * NS, "target_s": (1 + x / 100) * T0 * NS,
                                  "latency_s": L_x * NS + (base_ns * NS if model == "delta" else 0.0),
                                  "added_latency_s": (L_x - ref_ns) * NS, "lambda_L": slope})
    if bandwidth is not None:
        glo, ghi = sorted(float(x) / NS for x in bandwidth)     # 10GB/s:50GB/s is 0.1:0.02 ns/B
        result.bandwidth_pieces = [{"G_from_s_per_byte": p.lo * NS, "G_to_s_per_byte": p.hi * NS,
                                    "lambda_G_bytes": p.slope, "intercept_s": p.intercept * NS,
                                    "T_from_s": p.at(p.lo) * NS, "T_to_s": p.at(p.hi) * NS}
                                   for p in m.envelope(glo, ghi, param="G", fixed=ref_ns)]
    return result


def _nothing(*args):
    """What the ranks other than 0 hold before the spread: nothing."""
    return None, None, None, None, None, None, 0


def _graph(run_dir, model, params, loggps, collectives, at, clock, overhead=("none", 0.0), pairs=None, scales=()):
    """(RunGraph, its edges as pieces side by side, the piece of each edge, NetParams, the
    reference point and the base latency in ns, the records read) of the run: analysis rank
    0's part.  `overhead` (overhead.parse): the recording's cost per call to take off the
    compute edges; the RunGraph's `overhead` (an overhead.Overhead) says what was taken.
    `pairs`: a pairs.csv whose host pairs' latencies are folded into the message edges
    (pairs.py); the RunGraph's `pairs` (a pairs.PairLatencies) says which."""
    pair_file = pair_latencies.read_pairs(pairs) if pairs else None     # a bad file fails before the work
    matched = matched_run(run_dir, clock)
    net = default_params(matched, model, _given(params, loggps))
    graph = build(matched, model, net, collectives)
    if pair_file is not None:
        graph.pairs = pair_latencies.assign(graph, matched.hosts, pair_file, net.L0_ns, scales)
        graph.edges = dataclasses.replace(graph.edges, c=pair_latencies.fold(graph.edges.c, graph.edges.m,
                                                                              graph.pairs))
    # pieces between global synchronisation points side by side: one pass solves them all
    if len(graph.cuts):
        edges, _, edge_piece = split_union(graph.edges, graph.cuts, graph.piece)
    else:
        edges, edge_piece = graph.edges, np.zeros(len(graph.edges.src), np.int64)
    ref_of, base_of = _reference(model, at)
    base_ns = base_of(net, delivery_base(matched, net))
    ref_ns = ref_of(net, base_ns)
    graph.overhead, edges = _compensate(graph, edges, edge_piece, overhead, ref_ns, 0.0 if model == "delta"
                                        else net.G0_ns)
    if graph.pairs is not None:
        graph.pairs.T_ns = _pair_alternatives(graph.pairs, edges, edge_piece, ref_ns, net.G0_ns)
    return graph, edges, edge_piece, net, ref_ns, base_ns, sum(len(c.records) for c in matched.calls.values())


def _pair_options(model, pairs, scale_pair):
    """The (X, Y, K) of each --scale-pair, after checking that --pairs can be used here."""
    if pairs and model != "loggps":
        raise WhatifError("--pairs %s: per-pair latencies replace the model's L, so they need --model loggps "
                          "(delta mode keeps the measured run's own message times)" % pairs)
    if scale_pair and not pairs:
        raise WhatifError("--scale-pair scales a latency of --pairs FILE: give the pairs.csv too")
    return [pair_latencies.parse_scale(s) if isinstance(s, str) else tuple(s) for s in scale_pair or ()]


def _pair_alternatives(pl, edges, edge_piece, ref_ns, G):
    """T at the reference (ns) with one L = L0 for every message ("uniform") and, where
    --scale-pair changed some, at the file's latencies as they are ("unscaled"): one pass each,
    with the pairs' latencies taken out of (or put back into) the weights."""
    base = edges.c - edges.m * pl.delta_ns()
    variants = {"uniform": base}
    if (pl.scale != 1).any():
        variants["unscaled"] = base + edges.m * pl.delta_ns(scaled=False)
    return {name: float(Model(dataclasses.replace(edges, c=c), edge_piece).forward([ref_ns], fixed=G).T[0])
            for name, c in variants.items()}


def _pairs_on_path(graph, on, ref_ns, tolerance, G):
    """(whatif_pairs.csv's rows, the summary's notes) of the critical path `on` with --pairs, else
    (None, None).  The path's latency: each of its messages at its own latency (ref_ns + l_e - L0).
    The top pairs' tolerances (pairs.path_rows) at the degradations `tolerance` (%)."""
    pl = graph.pairs
    if pl is None:
        return None, None
    m = graph.edges.m[on]
    pe = pl.pair_of_edge[on]
    p2p = np.isin(graph.kind[on], pair_latencies.PAIR_KINDS)
    notes = {"source": pl.source, "L0_s": pl.L0_ns * NS, "hosts": len(set(pl.hosts)), "pairs": len(pl.x),
             "T_uniform_s": pl.T_ns["uniform"] * NS, "T_unscaled_s": pl.T_ns.get("unscaled", np.nan) * NS,
             "cross_host_path": float(m[pe >= 0].sum()), "same_host_path": float(m[p2p & (pe < 0)].sum()),
             "collective_path": float(m[~p2p].sum()),
             "path_latency_s": float((m * (ref_ns + pl.delta_ns()[on])).sum() * NS),
             "scaled": [(x, y, float(k)) for x, y, k in zip(pl.x, pl.y, pl.scale) if k != 1]}
    return pair_latencies.path_rows(graph, on, pl, ref_ns, tolerance, G), notes


def _compensate(graph, edges, edge_piece, overhead, ref_ns, G):
    """(overhead.Overhead, the split edges) with every compute edge shortened by the recording's
    cost per call, in graph.edges and in the split edges alike (split_union keeps the edges'
    order and index, so the same weights apply).  T at the reference as traced: one pass on the
    graph before."""
    source, ns = overhead
    if source == "none":
        return recording.Overhead(), edges
    ns = recording.of_graph(graph) if source == "auto" else ns
    taken = recording.Overhead(ns, source)
    if ns > 0:
        taken.T_traced_ns = float(Model(edges, edge_piece).forward([ref_ns], fixed=G).T[0])
        c = recording.shorten(graph.edges.c, graph.kind, ns)
        graph.edges = dataclasses.replace(graph.edges, c=c)
        edges = dataclasses.replace(edges, c=c)
    return taken, edges


def _piece_rows(pieces, base_ns, model):
    rows = []
    for p in pieces:
        rows.append({"dL_from_s": p.lo * NS, "dL_to_s": p.hi * NS,
                     "L_from_s": (p.lo + (base_ns if model == "delta" else 0)) * NS,
                     "L_to_s": (p.hi + (base_ns if model == "delta" else 0)) * NS,
                     "lambda_L": p.slope, "C_s": p.intercept * NS, "T_from_s": p.at(p.lo) * NS,
                     "T_to_s": p.at(p.hi) * NS})
    return rows


def _slopes_at(pieces, points, model, G):
    """lambda_L (right slope) at each point: from the pieces where they cover it, else a pass."""
    out = []
    for x in points:
        if not np.isfinite(x):
            out.append(0.0)
            continue
        inside = [p for p in pieces if p.lo <= x < p.hi]
        out.append(float(inside[0].slope) if inside else float(model.forward([x], fixed=G).right[0]))
    return out


def _critical(graph, on):
    """Critical messages (edges `on` the path): per rank pair (p2p) and per collective function."""
    from mpigraph.trace import functions as mpi_functions

    kind = graph.kind[on]
    rows = []
    p2p = on[(kind == MESSAGE) | (kind == LATE_RECEIVER)]
    if len(p2p):
        pair = np.stack([graph.src_rank[p2p], graph.dst_rank[p2p]], axis=1)
        pairs, inverse = np.unique(pair, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        n = np.bincount(inverse)
        msgs = np.bincount(inverse, graph.edges.m[p2p])
        nbytes = np.bincount(inverse, graph.edges.b[p2p])
        for (s, d), k, mm, bb in zip(pairs, n, msgs, nbytes):
            rows.append({"kind": "p2p", "function": "", "src_rank": int(s), "dst_rank": int(d), "edges": int(k),
                         "messages": float(mm), "bytes": float(bb)})
    coll = on[np.isin(kind, COLLECTIVE_KINDS) & (graph.edges.m[on] > 0)]
    if len(coll):
        names = mpi_functions.names_array()
        funcs, inverse = np.unique(graph.func[coll], return_inverse=True)
        inverse = inverse.reshape(-1)
        n = np.bincount(inverse)
        msgs = np.bincount(inverse, graph.edges.m[coll])
        nbytes = np.bincount(inverse, graph.edges.b[coll])
        for f, k, mm, bb in zip(funcs, n, msgs, nbytes):
            rows.append({"kind": "collective", "function": str(names[f]), "src_rank": -1, "dst_rank": -1,
                         "edges": int(k), "messages": float(mm), "bytes": float(bb)})
    rows.sort(key=lambda r: -r["messages"])
    return rows


def _us(seconds):
    return "%.3g us" % (seconds * 1e6)


def _overhead_line(r):
    """What the recording's cost per call did to T at the reference (overhead.py)."""
    at = "T at %s = %s" % ("dL" if r.model == "delta" else "L", _us(r.reference_s))
    if r.overhead_source == "none":
        return ("  Recording overhead: none taken off; %s (%.6f s) includes the tracing's cost per call "
                "(--overhead auto takes it off)." % (at, r.T0_s))
    from mpigraph.whatif.overhead import Overhead

    return ("  Recording overhead taken off every compute edge: %s; %s is %.6f s with it taken off, %.6f s "
            "without (%+.4g us; %d compute edges on the critical path)."
            % (Overhead(r.overhead_ns, r.overhead_source).describe(), at, r.T0_s, r.T0_traced_s,
               (r.T0_s - r.T0_traced_s) * 1e6, r.path_compute_edges))


def _pair_lines(r):
    """--pairs: T at the per-pair latencies against one L, and the pairs the path is most sensitive to."""
    n = r.pair_notes
    if n is None:
        return []
    at = "T at L = %s" % _us(r.reference_s)
    lines = ["  Per host pair latencies from %s (%d host%s, %d host pair%s with messages; same-host messages and "
             "collectives at L0 = %s; L on the axis adds L - L0 to every message)."
             % (n["source"], n["hosts"], "s" * (n["hosts"] != 1), n["pairs"], "s" * (n["pairs"] != 1),
                _us(n["L0_s"])),
             "  %s is %.9f s at these latencies; with one L0 for every message it would be %.9f s (%+.4g us)."
             % (at, r.T0_s, n["T_uniform_s"], (r.T0_s - n["T_uniform_s"]) * 1e6)]
    for x, y, k in n["scaled"]:
        lines.append("  Pair (%s, %s) %g times slower (--scale-pair): %s is %.9f s against %.9f s at the file's "
                     "latencies (%+.4g us)." % (x, y, k, at, r.T0_s, n["T_unscaled_s"],
                                                (r.T0_s - n["T_unscaled_s"]) * 1e6))
    top = [p for p in r.pair_rows if p["dT_dl"] > 0][:3]
    lines.append("  On the critical path: %.0f cross-host, %.0f same-host messages, %.0f collective latencies; "
                 "dT/dl per host pair: %s; all in whatif_pairs.csv."
                 % (n["cross_host_path"], n["same_host_path"], n["collective_path"],
                    ", ".join("(%s, %s) %g at %s" % (p["x"], p["y"], p["dT_dl"], _us(p["latency_s"])) for p in top)
                    or "none (no cross-host message is critical)"))
    lines += _pair_tolerance_line(r)
    return lines


def _pair_tolerance_line(r):
    """The latency the top pairs can take before the run slows by the first degradation."""
    if not r.tolerances or not r.pair_rows:
        return []
    x = r.tolerances[0]["degradation_pct"]
    key = "latency_%gpct_s" % x
    told = [p for p in r.pair_rows[:3] if not np.isnan(p.get(key, np.nan))]

    def said(p):
        if p[key] == np.inf:
            return "(%s, %s) any" % (p["x"], p["y"])
        factor = " (x%.3g)" % (p[key] / p["latency_s"]) if p["latency_s"] > 0 else ""
        return "(%s, %s) %s%s" % (p["x"], p["y"], _us(p[key]), factor)

    return (["  The latency a pair can take (the others as they are) before the run slows by %g%%: %s."
             % (x, ", ".join(said(p) for p in told))] if told else [])


def summary(r, net):
    """A short paragraph: what the run's time does as the network gets slower."""
    axis = "added latency dL" if r.model == "delta" else "latency L"
    lines = ["What if the network were slower (%s model, %s):" % (r.model, axis)]
    lines.append("  T = %.6f s at %s = %s (the traced run took %.6f s)."
                 % (r.T0_s, "dL" if r.model == "delta" else "L", _us(r.reference_s), r.measured_s))
    lines.append("  Each extra microsecond of latency costs %.0f us: %.0f messages on the critical path "
                 "(lambda_L); latency is %.2f%% of the run (rho_L, with %s)."
                 % (r.lambda_L, r.lambda_L, 100 * r.rho_L, "L = " + _us(r.base_latency_s + r.reference_s)
                    if r.pair_notes is None else "each message at its pair's latency"))
    tol = ", ".join("%g%% at +%s" % (t["degradation_pct"], _us(t["added_latency_s"]))
                    if np.isfinite(t["added_latency_s"]) else "%g%% never" % t["degradation_pct"]
                    for t in r.tolerances)
    lines.append("  It slows down by %s of added latency (tolerance)." % tol)
    if len(r.pieces) > 1:
        crit = ", ".join("%s (slope %g -> %g)" % (_us(a["dL_to_s"]), a["lambda_L"], b["lambda_L"])
                         for a, b in zip(r.pieces[:-1], r.pieces[1:]))
        lines.append("  On %s..%s T has %d pieces; the slope grows at %s." % (
            _us(r.pieces[0]["dL_from_s"]), _us(r.pieces[-1]["dL_to_s"]), len(r.pieces), crit))
    else:
        p = r.pieces[0]
        lines.append("  On %s..%s T is one line of slope %g." % (_us(p["dL_from_s"]), _us(p["dL_to_s"]),
                                                                 p["lambda_L"]))
    gain = r.lambda_G * net.G0_ns / 2 * NS
    lines.append("  Bytes on the critical path: %.0f (lambda_G); twice the bandwidth (G0 = %.3g ns/B) would save "
                 "about %s." % (r.lambda_G, net.G0_ns, _us(gain)))
    if r.critical:
        top = r.critical[0]
        where = ("rank %d -> %d" % (top["src_rank"], top["dst_rank"]) if top["kind"] == "p2p"
                 else top["function"])
        lines.append("  Most critical messages: %s (%.0f of them); all in critical_messages.csv." % (
            where, top["messages"]))
    lines += _pair_lines(r)
    lines.append(_overhead_line(r))
    lines.append("  Parameters: %s." % (net.source or "defaults"))
    return "\n".join(lines) + "\n"
