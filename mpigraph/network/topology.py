"""A network's terminals, links and static routes: what netprobe plans over (seed 001, section 3.2).

The model needs, for every ordered terminal pair (x, y), the links of the route x -> y.
A topology gives them as an array `routes(x, y)`: one row per pair, the link numbers of
the route padded with -1.  Two kinds exist:

- a p-port q-tree fat tree (`fattree(p, q)`, Lin, Chung and Huang's m-port n-tree, the
  trees of seed 001's Table 2) with deterministic up-routing by destination digit
  (d-mod-k): n = 2 (p/2)^q terminals, m = 2 q (p/2)^q links;
- a JSON description (`load(path)`):

    {"terminals": ["k1", "k2", ...],
     "switches":  ["r1", ...],
     "links":     [["k1", "r1"], {"name": "l3", "ends": ["r1", "r2"]}, ...],
     "routes":    {"k1>k3": ["l1", "l3", "l4", "l5"], ...},    # one-way, by link name
     "routing":   "shortest"}                                    # or a rule instead of routes

  A link without a name is called "l<i>" (i from 1, in file order).  With "routes", a
  pair missing from the table takes the reverse of its partner's route; with
  "routing": "shortest" every route is a fewest-hop path found by breadth-first search
  (ties to the node listed first), right for trees, where the path is unique; with
  {"fattree": [p, q]} as the whole file, the generator below.

Routing must be static: adaptive routing breaks the additive model (seed 001, 3.1).
docs/network.md says how to get a description on a real cluster (ibnetdiscover, OpenSM's
routing dumps, Slurm's topology.conf).
"""

import json
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from mpigraph.network import NetworkError

NO_LINK = -1


@dataclass
class Topology:
    """Terminals, link names, and `route(x, y)`: (pairs, hops) link numbers padded with NO_LINK."""

    terminals: List[str]
    links: List[str]
    route: Callable[[np.ndarray, np.ndarray], np.ndarray] = field(repr=False)
    description: str = ""

    @property
    def n(self) -> int:
        return len(self.terminals)

    @property
    def m(self) -> int:
        return len(self.links)

    def round_trip(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Links of the round trip x -> y -> x: (pairs, 2*hops), padded with NO_LINK."""
        x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
        return np.concatenate([self.route(x, y), self.route(y, x)], axis=1)


# ---------------------------------------------------------------- fat tree


def fattree(ports: int, levels: int) -> Topology:
    """The p-port q-tree with up-routing by destination digit.

    Terminals are numbered by digits (t_0, ..., t_{q-1}), t_0 in [0, 2k), the others in
    [0, k), k = p/2 (t_0 most significant).  A switch of level L (0 = the roots, q-1 = the
    leaves) has an address (w_0, ..., w_{q-2}); roots have w_0 in [0, k), the other levels
    w_0 in [0, 2k).  Level L+1 switch w and level L switch w' are linked iff they differ at
    most in position L; terminal t hangs off leaf (t_0, ..., t_{q-2}).  So there are
    k^(q-1) roots and 2 k^(q-1) switches on every other level, and 2 k^q links between
    each pair of levels and between leaves and terminals: m = 2 q k^q.

    Route x -> y: j = the first switch-address position where x and y differ (none: the
    same leaf).  Up from level L+1 to L the switch takes w_L := y_{L+1} (the destination's
    digit: d-mod-k), which reaches a level-j switch from which the way down to y is
    unique (each step down sets w_L := y_L).
    """
    if ports < 2 or ports % 2 or levels < 1:
        raise NetworkError("fattree:%s,%s: the ports must be even and >= 2, the levels >= 1 "
                           "(for example fattree:8,3)" % (ports, levels))
    k, q = ports // 2, levels
    n = 2 * k ** q
    radix = np.array([2 * k] + [k] * (q - 1))            # a terminal's digits
    per_level = 2 * k ** q                                # links between two adjacent levels

    def digits(t):
        out = np.empty((len(t), q), dtype=np.int64)
        rest = t.copy()
        for i in range(q - 1, -1, -1):
            out[:, i] = rest % radix[i]
            rest //= radix[i]
        return out

    def switch_index(w):
        """Index of a level >= 1 switch address (w_0..w_{q-2}) within its level."""
        idx = np.zeros(len(w), dtype=np.int64)
        for i in range(q - 1):
            idx = idx * radix[i] + w[:, i]
        return idx

    def uplink(level, w, port):
        """The link from level `level` (>= 1) switch w to the level-1 switch whose w_{level-1} = port."""
        return n + (level - 1) * per_level + switch_index(w) * k + port

    def route(x, y):
        x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
        dx, dy = digits(x), digits(y)
        differ = dx[:, :q - 1] != dy[:, :q - 1]
        top = np.where(differ.any(axis=1), differ.argmax(axis=1), q - 1)   # level of the turn
        hops = np.full((len(x), 2 * q), NO_LINK, dtype=np.int64)
        hops[:, 0] = x
        cur = dx[:, :q - 1].copy()
        col = 1
        for level in range(q - 1, 0, -1):                  # up: level -> level-1
            going = top < level
            port = dy[:, level]
            hops[going, col] = uplink(level, cur[going], port[going])
            cur[going, level - 1] = port[going]
            col += 1
        for level in range(1, q):                          # down: level-1 -> level
            going = top < level
            low = cur.copy()
            low[:, level - 1] = dy[:, level - 1]
            hops[going, col] = uplink(level, low[going], cur[going, level - 1])
            cur[going] = low[going]
            col += 1
        hops[:, col] = y
        return hops

    terminals = ["k%d" % i for i in range(n)]
    links = ["k%d" % i for i in range(n)] + [
        "L%d.%d^%d" % (level, s, u) for level in range(1, q) for s in range(2 * k ** (q - 1)) for u in range(k)]
    return Topology(terminals, links, route, "%d-port %d-tree" % (ports, levels))


def parse_simulate(spec: str) -> Topology:
    """`fattree:P,Q` (the --simulate argument) or a JSON topology path."""
    if spec.startswith("fattree:"):
        try:
            p, q = (int(v) for v in spec[len("fattree:"):].split(","))
        except ValueError:
            raise NetworkError("--simulate %s: write fattree:PORTS,LEVELS, for example fattree:8,3" % spec) from None
        return fattree(p, q)
    return load(spec)


# ---------------------------------------------------------------- JSON


def load(path: str) -> Topology:
    """A topology from a JSON file (module docstring)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as error:
        raise NetworkError("%s is not JSON (%s): see docs/network.md for the topology format" % (path, error)) from None
    return from_dict(doc, name=path)


def from_dict(doc: dict, name: str = "topology") -> Topology:
    """A topology from its JSON object (module docstring)."""
    if "fattree" in doc:
        p, q = doc["fattree"]
        return fattree(int(p), int(q))
    for key in ("terminals", "links"):
        if key not in doc:
            raise NetworkError("%s: no %r list: a topology names its terminals, switches and links "
                               "(see docs/network.md)" % (name, key))
    terminals = [str(t) for t in doc["terminals"]]
    nodes = terminals + [str(s) for s in doc.get("switches", [])]
    link_names, ends = _links(doc["links"], set(nodes), name)
    if "routes" in doc:
        table = _route_table(doc["routes"], terminals, link_names, name)
    elif doc.get("routing") == "shortest":
        table = _shortest_routes(terminals, nodes, ends)
    else:
        raise NetworkError('%s: give "routes" (a table) or "routing": "shortest"' % name)

    def route(x, y):
        return table[np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)]

    return Topology(terminals, link_names, route, name)


def _links(items: Sequence, nodes: set, name: str):
    names, ends = [], []
    for i, item in enumerate(items):
        link_name, pair = ("l%d" % (i + 1), item) if isinstance(item, (list, tuple)) else (item.get("name", "l%d" % (i + 1)), item["ends"])
        if len(pair) != 2 or not set(pair) <= nodes:
            raise NetworkError("%s: link %s joins %s: each link joins two listed terminals or switches" % (name, link_name, pair))
        names.append(str(link_name))
        ends.append((str(pair[0]), str(pair[1])))
    if len(set(names)) != len(names):
        raise NetworkError("%s: link names must be unique" % name)
    return names, ends


def _route_table(routes: Dict[str, List[str]], terminals, link_names, name) -> np.ndarray:
    """(n, n, hops) link numbers from {"x>y": [link names]}; a missing pair takes its reverse."""
    t_index = {t: i for i, t in enumerate(terminals)}
    l_index = {l: i for i, l in enumerate(link_names)}
    n = len(terminals)
    hops = max((len(v) for v in routes.values()), default=0)
    table = np.full((n, n, max(hops, 1)), NO_LINK, dtype=np.int64)
    given = np.zeros((n, n), dtype=bool)
    for key, path in routes.items():
        try:
            x, y = (t_index[t.strip()] for t in key.split(">"))
            table[x, y, :len(path)] = [l_index[l] for l in path]
        except (KeyError, ValueError):
            raise NetworkError("%s: route %r: write \"x>y\": [link names] with listed terminals and links" % (name, key)) from None
        given[x, y] = True
    table[~given] = table.transpose(1, 0, 2)[~given]
    missing = ~(given | given.T) & ~np.eye(n, dtype=bool)
    if missing.any():
        x, y = np.argwhere(missing)[0]
        raise NetworkError("%s: no route between %s and %s: list every pair's route (one direction is enough)"
                           % (name, terminals[x], terminals[y]))
    return table


def _shortest_routes(terminals, nodes, ends) -> np.ndarray:
    """Fewest-hop routes: a breadth-first search from every terminal (scipy's csgraph), each
    route read back from the predecessors for all targets at once, one hop per step.

    Ties between equally short routes go to the neighbour found first (the lower node
    number: terminals, then switches, as listed); of parallel links between two nodes the
    first listed carries the route.
    """
    index = {v: i for i, v in enumerate(nodes)}
    u = np.array([index[a] for a, _ in ends])
    v = np.array([index[b] for _, b in ends])
    uu, vv = np.concatenate([u, v]), np.concatenate([v, u])
    link = np.tile(np.arange(len(ends)), 2)
    _, first = np.unique(uu * len(nodes) + vv, return_index=True)   # first listed of parallel links
    graph = sp.csr_matrix((np.ones(len(first)), (uu[first], vv[first])), shape=(len(nodes),) * 2)
    link_of = sp.csr_matrix((link[first] + 1.0, (uu[first], vv[first])), shape=(len(nodes),) * 2)
    n = len(terminals)
    targets = np.arange(n)
    rows = []
    for source in range(n):
        _, pred = csgraph.breadth_first_order(graph, source, directed=False, return_predecessors=True)
        unreachable = np.nonzero((pred[:n] < 0) & (targets != source))[0]
        if len(unreachable):
            raise NetworkError("terminal %s cannot reach %s: the links do not connect them"
                               % (terminals[source], terminals[unreachable[0]]))
        backwards, cur = [], targets.copy()          # hops from each target back to the source
        while (cur != source).any():
            going = cur != source
            prev = np.where(going, pred[cur], source)
            backwards.append(np.where(going, np.asarray(link_of[prev, cur]).ravel() - 1, NO_LINK).astype(np.int64))
            cur = prev
        back = np.array(backwards).reshape(-1, n).T if backwards else np.zeros((n, 0), dtype=np.int64)
        length = (back != NO_LINK).sum(axis=1)
        # route[t, j] = back[t, length_t - 1 - j] for j < length_t: the hops source -> target
        j = np.arange(back.shape[1])
        take = np.clip(length[:, None] - 1 - j, 0, None)
        rows.append(np.where(j < length[:, None], np.take_along_axis(back, take, axis=1), NO_LINK))
    width = max(1, max(r.shape[1] for r in rows))
    return np.stack([np.pad(r, ((0, 0), (0, width - r.shape[1])), constant_values=NO_LINK) for r in rows])


def fig2_toy() -> dict:
    """Seed 001's Fig. 2 network as a JSON object: 6 terminals, 3 switches, 8 links.

    r1 holds k1, k2, k5, k6 (links l1, l2, l7, l8); r1 -l3- r2 -l4- r3; r3 holds k3, k4
    (l5, l6): the routes of the paper's equation (1) and of its matrix (C|O').
    """
    return {
        "terminals": ["k1", "k2", "k3", "k4", "k5", "k6"],
        "switches": ["r1", "r2", "r3"],
        "links": [{"name": "l1", "ends": ["k1", "r1"]}, {"name": "l2", "ends": ["k2", "r1"]},
                  {"name": "l3", "ends": ["r1", "r2"]}, {"name": "l4", "ends": ["r2", "r3"]},
                  {"name": "l5", "ends": ["k3", "r3"]}, {"name": "l6", "ends": ["k4", "r3"]},
                  {"name": "l7", "ends": ["k5", "r1"]}, {"name": "l8", "ends": ["k6", "r1"]}],
        "routing": "shortest",
    }
