"""Per host pair latencies for ``whatif --model loggps --pairs pairs.csv`` (netprobe's file).

``mpigraph netprobe`` predicts every node pair's one-way latency (pairs.csv: x, y, latency_s =
the predicted RTT / 2, rtt_se_s).  Here each point-to-point message edge of the model graph
between ranks on hosts x != y costs that pair's latency l_xy instead of the one L:

    w_e = c_e + m_e * l_xy + b_e * G

Same-host messages and the collectives' hub and release edges (whose messages go through
members the trace does not name) keep the parameters' L0.  So that the latency axis of the
sweep still works, the pair's latency is folded into the constant part,

    c_e' = c_e + m_e * (l_xy - L0),   w_e = c_e' + m_e * L + b_e * G,

and at L = L0 every message costs what the file says; at L = L0 + dL every message's latency
has grown by dL (the sweep: "what if every pair got dL slower").

Sensitivity per host pair: T is the longest path, so dT/dl_xy = the messages of pair (x, y)
on the critical path (on the right-slope path the forward pass marks).  Where paths of equal
length cross different pairs the split is not unique (any optimal dual of the LP is one);
``lp_reference`` solves LLAMP's LP with a latency variable per host pair for the tests.
Tolerance per host pair (``pair_tolerances``): the latency one pair can take, the others as
they are, before T grows by x%: LLAMP's tolerance with that pair's latency the one parameter.

Host names: a rank's host is the host name its log's header carries (the ranks table's
``host`` column is that same name).  netprobe names terminals by MPI_Get_processor_name (the
topology file's names); a trace host matches a file name that is equal, else the one whose
short name (up to the first '.') is equal, when exactly one is.
"""

import csv
import dataclasses

import numpy as np

from mpigraph.whatif.build import (LATE_RECEIVER, MESSAGE, NEIGHBOR, RMA_EARLY_WAIT, RMA_LATE_POST, ROUND_MESSAGE,
                                   WhatifError)

# Edge kinds that are one message from a known rank to a known rank: they get their hosts' latency.
# (Hub and release edges carry d latencies of a collective's schedule through other members.)
PAIR_KINDS = (MESSAGE, LATE_RECEIVER, ROUND_MESSAGE, NEIGHBOR, RMA_LATE_POST, RMA_EARLY_WAIT)
NS = 1e-9


@dataclasses.dataclass
class PairFile:
    """The pairs of a pairs.csv: names[x[i]], names[y[i]] at latency_ns[i] (se_ns[i])."""

    path: str
    names: list
    x: np.ndarray
    y: np.ndarray
    latency_ns: np.ndarray
    se_ns: np.ndarray


@dataclasses.dataclass
class PairLatencies:
    """Which host pair each edge's messages cross, and each pair's latency (ns)."""

    source: str                  # the file
    L0_ns: float                 # same-host messages and collectives
    hosts: list                  # per rank: its host as the file names it
    x: list                      # per pair: the file's names (as in the file's row)
    y: list
    latency_ns: np.ndarray       # per pair, scaled
    se_ns: np.ndarray            # per pair: netprobe's rtt_se_s / 2 (nan: none given)
    scale: np.ndarray            # per pair: the factor --scale-pair applied (1: none)
    pair_of_edge: np.ndarray     # per edge: its pair, -1 (no message, same host, a collective's hub)
    T_ns: dict = dataclasses.field(default_factory=dict)   # T at the reference: "uniform" (one L0), "unscaled"

    def delta_ns(self, scaled: bool = True) -> np.ndarray:
        """Per edge: the latency its messages get on top of L0 (l_xy - L0; 0 off the pairs)."""
        lat = self.latency_ns if scaled else self.latency_ns / self.scale
        out = np.zeros(len(self.pair_of_edge))
        on = self.pair_of_edge >= 0
        out[on] = lat[self.pair_of_edge[on]] - self.L0_ns
        return out


def read_pairs(path: str) -> PairFile:
    """The pairs of a pairs.csv (columns x, y, latency_s; rtt_se_s optional), parsed by pyarrow's
    CSV reader (a fat tree's file has a row per node pair: 523,776 on 1,024 nodes).  A missing or
    unreadable file, a missing column, a latency that is not a number >= 0, a row without a
    host, or a pair given twice with different latencies is a WhatifError that says which."""
    columns = _header(path)
    table = _table(path, columns)
    n = table.num_rows
    # to_pylist, not to_numpy: pyarrow's to_numpy and compute functions import pandas (seconds)
    both = np.char.strip(np.array(table.column("x").to_pylist() + table.column("y").to_pylist(), dtype=str))
    names, index = np.unique(both, return_inverse=True)
    index = index.reshape(-1).astype(np.int64)
    xi, yi = index[:n], index[n:]
    names = [str(h) for h in names]
    lat = np.array(table.column("latency_s").to_pylist(), dtype=np.float64)      # empty: None -> nan
    se = (np.array(table.column("rtt_se_s").to_pylist(), dtype=np.float64) / 2 if "rtt_se_s" in columns
          else np.full(n, np.nan))
    bad = np.flatnonzero(~(lat >= 0))
    if len(bad):
        i = int(bad[0])
        raise WhatifError("--pairs %s: row %d (%s, %s): latency_s %s is not a time >= 0 in seconds"
                          % (path, i + 2, names[xi[i]], names[yi[i]], "empty" if np.isnan(lat[i]) else lat[i]))
    empty = np.flatnonzero((both[:n] == "") | (both[n:] == ""))
    if len(empty):
        raise WhatifError("--pairs %s: row %d has no host name in x or y" % (path, empty[0] + 2))
    _check_repeats(path, names, xi, yi, lat)
    return PairFile(path, names, xi, yi, lat / NS, se / NS)


def _header(path):
    """The column names of the file's first line (a WhatifError where it cannot be read or lacks
    x, y or latency_s)."""
    try:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise WhatifError("--pairs %s: %s (write it with 'mpigraph netprobe')"
                          % (path, getattr(error, "strerror", None) or error)) from None
    header = [h.strip() for h in header]
    if not {"x", "y", "latency_s"} <= set(header):
        raise WhatifError("--pairs %s: need a header with x, y, latency_s and a row per host pair (netprobe's "
                          "pairs.csv)" % path)
    return header


def _table(path, header):
    """x, y (text), latency_s and rtt_se_s (numbers; empty: null) of the file, by pyarrow."""
    import pyarrow as pa
    from pyarrow import csv as pacsv

    types = {"x": pa.string(), "y": pa.string(), "latency_s": pa.float64(), "rtt_se_s": pa.float64()}
    want = [c for c in types if c in header]
    try:
        table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
                               convert_options=pacsv.ConvertOptions(column_types=types, include_columns=want))
    except (pa.ArrowInvalid, UnicodeDecodeError) as error:
        _name_the_bad_number(path)
        raise WhatifError("--pairs %s: not netprobe's pairs.csv: %s" % (path, error)) from None
    if not table.num_rows:
        raise WhatifError("--pairs %s: no rows: need a row per host pair (netprobe's pairs.csv)" % path)
    return table


def _name_the_bad_number(path):
    """After pyarrow refused the file: a WhatifError naming the first row whose latency_s or
    rtt_se_s is not a number, if that is what it refused (a loop over rows, on this error only)."""
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            for column in ("latency_s", "rtt_se_s"):
                text = (row.get(column) or "").strip()
                try:
                    float(text or "nan")
                except ValueError:
                    raise WhatifError("--pairs %s: row %d (%s, %s): %s %r is not a number"
                                      % (path, i + 2, row.get("x"), row.get("y"), column, text)) from None


def _check_repeats(path, names, x, y, lat):
    """A pair (either way round) listed twice must say the same latency."""
    key = np.minimum(x, y) * len(names) + np.maximum(x, y)
    order = np.argsort(key, kind="stable")
    same = np.flatnonzero(key[order][1:] == key[order][:-1])
    differ = same[lat[order][same] != lat[order][same + 1]]
    if len(differ):
        i = order[differ[0]]
        raise WhatifError("--pairs %s: the pair (%s, %s) is listed twice with different latencies"
                          % (path, names[x[i]], names[y[i]]))


def map_hosts(run_hosts, pf: PairFile) -> list:
    """Per rank: the file's name of its host (the mapping rule in the module doc).  Hosts of
    the run that match no name of the file are a WhatifError naming them."""
    names = pf.names
    exact = set(names)
    short = {}
    for n in names:
        short.setdefault(n.split(".", 1)[0], []).append(n)
    out, missing = [], []
    for h in run_hosts:                 # a loop over ranks
        if h in exact:
            out.append(h)
            continue
        match = short.get(h.split(".", 1)[0], [])
        if len(match) == 1:
            out.append(match[0])
        else:
            out.append(None)
            missing.append(h)
    if missing:
        unique = sorted(set(missing))
        raise WhatifError("--pairs %s: the run's host%s %s %s not in the file (it names %s): measure them with "
                          "'mpigraph netprobe' on these hosts, or name the topology's terminals by host name"
                          % (pf.path, "s" if len(unique) > 1 else "", ", ".join(unique),
                             "are" if len(unique) > 1 else "is", ", ".join(names[:8]) + (", ..." if len(names) > 8
                                                                                       else "")))
    return out


def parse_scale(text: str) -> tuple:
    """'X,Y,K' (--scale-pair) -> (X, Y, K): pair (X, Y) K times slower (K > 0)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        k = float(parts[2]) if len(parts) == 3 else np.nan
    except ValueError:
        k = np.nan
    if len(parts) != 3 or not parts[0] or not parts[1] or not (k > 0 and np.isfinite(k)):
        raise WhatifError("--scale-pair %s: give X,Y,K: hosts X and Y (as pairs.csv names them) and a factor "
                          "K > 0, e.g. n001,n002,2" % text)
    return parts[0], parts[1], k


def assign(graph, run_hosts, pf: PairFile, L0_ns: float, scales=()) -> PairLatencies:
    """The PairLatencies of a RunGraph whose ranks are on run_hosts (per rank), from the pairs
    of pf; scales: (X, Y, K) to multiply pair (X, Y)'s latency by.  A host pair that the run's
    messages cross and the file lacks is a WhatifError naming it."""
    hosts = map_hosts(run_hosts, pf)
    where = {name: i for i, name in enumerate(pf.names)}
    host_id = np.array([where[h] for h in hosts], np.int64)
    s, d = graph.src_rank.astype(np.int64), graph.dst_rank.astype(np.int64)
    on = np.isin(graph.kind, PAIR_KINDS) & (graph.edges.m > 0) & (s >= 0) & (d >= 0)
    on[on] = host_id[s[on]] != host_id[d[on]]
    hx, hy = host_id[s[on]], host_id[d[on]]
    row = _rows(pf, hx, hy)
    if (row < 0).any():
        i = int(np.flatnonzero(row < 0)[0])
        raise WhatifError("--pairs %s: no latency for the host pair (%s, %s), which the run's messages cross "
                          "(ranks %d -> %d): give every pair of the run's hosts (netprobe's pairs.csv has them all)"
                          % (pf.path, pf.names[hx[i]], pf.names[hy[i]], s[on][i], d[on][i]))
    used, pair = np.unique(row, return_inverse=True)
    pair_of_edge = np.full(len(s), -1, np.int64)
    pair_of_edge[on] = pair.reshape(-1)
    scale = np.ones(len(used))
    for X, Y, k in scales:              # a loop over options
        scale[_scaled_pair(pf, used, X, Y)] *= k
    return PairLatencies(pf.path, float(L0_ns), hosts, [pf.names[pf.x[r]] for r in used],
                         [pf.names[pf.y[r]] for r in used], pf.latency_ns[used] * scale, pf.se_ns[used], scale,
                         pair_of_edge)


def _rows(pf: PairFile, a, b) -> np.ndarray:
    """The file's row of each unordered host pair (a[i], b[i]) (indices into pf.names), -1 where
    the file has none: a search in the rows' sorted keys (no table of names x names)."""
    n = len(pf.names)
    keys = np.minimum(pf.x, pf.y) * n + np.maximum(pf.x, pf.y)
    order = np.argsort(keys, kind="stable")
    want = np.minimum(a, b) * n + np.maximum(a, b)
    at = np.minimum(np.searchsorted(keys[order], want), len(keys) - 1)
    return np.where(keys[order][at] == want, order[at], -1)


def _scaled_pair(pf, used, X, Y):
    """The index among `used` of the pair (X, Y) of --scale-pair (names as in the file, or the
    run's host names through the mapping rule)."""
    ids = []
    for h in (X, Y):
        if h in pf.names:
            ids.append(pf.names.index(h))
            continue
        match = [m for m in pf.names if m.split(".", 1)[0] == h.split(".", 1)[0]]
        if len(match) != 1:
            raise WhatifError("--scale-pair %s,%s: %s is not a host of %s" % (X, Y, h, pf.path))
        ids.append(pf.names.index(match[0]))
    r = int(_rows(pf, np.array([ids[0]]), np.array([ids[1]]))[0])
    at = np.flatnonzero(used == r) if r >= 0 else []
    if not len(at):
        raise WhatifError("--scale-pair %s,%s: the run sends no message between these hosts (or %s lacks the pair): "
                          "nothing to scale" % (X, Y, pf.path))
    return int(at[0])


def fold(c, m, pl: PairLatencies, scaled: bool = True) -> np.ndarray:
    """The edges' constant weights with each pair's latency folded in: c + m (l_xy - L0)."""
    return np.asarray(c, np.float64) + np.asarray(m, np.float64) * pl.delta_ns(scaled)


def path_rows(graph, on_path, pl: PairLatencies, ref_ns: float = None, tolerance=(), G: float = 0.0) -> list:
    """Per host pair (those the run's messages cross): its latency, the messages of the run,
    and the messages on the critical path (edges `on_path`) = dT/dl_xy (the module doc); with
    `tolerance` (degradations in %), for the first TOLERANCE_PAIRS rows (the largest dT/dl)
    latency_<x>pct_s: the latency the pair can take before T (at ref_ns) grows by x%
    (``pair_tolerances``; nan for the others)."""
    m = graph.edges.m
    k = len(pl.latency_ns)
    pe = pl.pair_of_edge
    every = np.bincount(pe[pe >= 0], m[pe >= 0], minlength=k)
    p = pe[on_path]
    onp = np.bincount(p[p >= 0], m[on_path][p >= 0], minlength=k)
    order = sorted(range(k), key=lambda i: (-onp[i], -every[i], pl.x[i], pl.y[i]))     # a loop over pairs
    told = np.full((k, len(tolerance)), np.nan)
    if len(tolerance) and k:
        top = order[:TOLERANCE_PAIRS]
        told[top] = pair_tolerances(graph, pl, top, ref_ns, np.asarray(tolerance, np.float64) / 100, G)
    rows = []
    for i in order:
        row = {"x": pl.x[i], "y": pl.y[i], "latency_s": float(pl.latency_ns[i] * NS),
               "latency_se_s": float(pl.se_ns[i] * NS), "scale": float(pl.scale[i]), "messages": float(every[i]),
               "path_messages": float(onp[i]), "dT_dl": float(onp[i]),
               "path_latency_s": float(onp[i] * pl.latency_ns[i] * NS)}
        row.update({"latency_%gpct_s" % x: float(v * NS) for x, v in zip(tolerance, told[i])})
        rows.append(row)
    return rows


# Pairs whose tolerance path_rows computes, the top of the table (where the critical messages
# are): each is a Newton search of about 6-8 forward passes of the whole graph.
TOLERANCE_PAIRS = 3


def pair_tolerances(graph, pl: PairLatencies, pairs, ref_ns: float, fractions, G: float = 0.0) -> np.ndarray:
    """(pairs x fractions): the largest latency of each pair with T <= (1 + x) T(ref), every other
    message at its latency at the reference (ns; inf where T does not grow with it).  The pair's
    latency is the one parameter: its edges keep m, the others get m = 0 and their latency at
    ref_ns in c; envelope.Model.tolerance's Newton steps (T is convex in it).  One Model (the
    topological order) serves every pair: only its sorted weights change."""
    from mpigraph.whatif.envelope import Model

    model = Model(graph.edges)
    m = graph.edges.m
    at_ref = graph.edges.c + m * ref_ns          # every message at its latency at the reference
    out = np.full((len(pairs), len(fractions)), np.nan)
    for row, i in enumerate(pairs):              # a loop over a few pairs
        mine = pl.pair_of_edge == i
        now = pl.latency_ns[i] + ref_ns - pl.L0_ns        # the pair's latency at the reference
        model.c = (at_ref - np.where(mine, m * now, 0.0))[model.order]
        model.m = np.where(mine, m, 0.0)[model.order]
        out[row] = model.tolerance(now, fractions, fixed=G)[0]
    return out


def lp_reference(graph, pl: PairLatencies, G: float = None, L_ns: float = None):
    """(T, {(x, y): dT/dl_xy}) from LLAMP's LP (lp.solve) with a latency variable per host
    pair and one for everything else at L0 (or L_ns), on the graph's weights with the pairs'
    latencies taken out of c again: the independent reference for small runs.  G: the
    per-byte time (default the graph's G0)."""
    from mpigraph.whatif import lp

    G = graph.params.G0_ns if G is None else G
    L = pl.L0_ns if L_ns is None else L_ns
    c = graph.edges.c - graph.edges.m * pl.delta_ns()
    edges = dataclasses.replace(graph.edges, c=c)
    groups = pl.pair_of_edge + 1                  # 0: same host, collectives, no message
    T, rc = lp.solve(edges, np.r_[L, pl.latency_ns + (L - pl.L0_ns)], G, groups=groups)
    return T, {(pl.x[i], pl.y[i]): float(rc[i + 1]) for i in range(len(pl.latency_ns))}
