"""The model graph built on the analysis ranks, each from the trace ranks it owns (build.py's
graph, edge for edge, with no rank holding the whole of it).

Data flow on K analysis ranks (analysis rank a owns the trace ranks Ownership.ranks_of(a), as in
``mpigraph analyze``):

1. read + clock: rank a opens its trace ranks' logs only (trace.open_logs) and puts their
   times on rank 0's clock (match.link.aligned_calls: one small row per trace rank shared).
2. match: the pipeline's own distributed match (match.link's repair loop): a message lands on
   the owner of its receiver, a collective member's results (max_start, the releasing call) on
   the owner of the member; the matched messages go back to their senders' owners too
   (``_to_senders``) for the late-receiver edges.
3. build (``_Builder``): every edge is built by the owner of the trace rank of its SINK call
   (E(r, k), or S(r, k) of a compute edge), where the data it needs already is: a message's
   edge on the receiver's owner, a late receiver's on the sender's, a hub's edges on each
   member's owner, the release of a 1-to-N collective on the released member's.  So the delta
   model's call edge, whose weight leaves out the latest dependency into its call, finds every
   such dependency on its own rank.  Edges into a hub (a vertex of no trace rank) are built by
   the member they come from.  The few numbers of the whole run (T's measured end, o's median,
   the delivery time's 10th percentile) are reduced over the ranks, the last two to the bit
   without moving the values (``stand_ins``).
4. pieces (``_pieces``): vertices are numbered without any exchange (S(g) = 2g, E(g) = 2g + 1
   for the global call number g = first call of its rank + k; a hub by its collective's
   (communicator, sequence number); the sink last), so the numbering is the same for every K.
   Each edge is labelled with its piece: every rank knows the global synchronisation points
   (the N-to-N collectives over all ranks: trace rank 0's owner has a member of each and
   broadcasts their (max start, communicator, sequence number)), an E vertex counts the ones
   its rank passed, an S vertex or another hub the ones whose last arrival was before it.
   cuts.valid_cuts's check runs on every rank's edges with the bad spans summed by an
   allreduce, until no edge crosses a kept cut: the pieces are exact.
5. spread: the plan (a contiguous block of pieces per solving rank, of about equal edges) comes
   from an allreduce of the edges per piece, and every edge goes straight from the rank that
   built it to the rank that solves its piece (comm.shuffle.exchange, bytes counted by
   comm.meter).  A graph of fewer pieces than ranks is gathered whole on every rank, as
   spread.py shares such a graph's columns.
6. solve: each rank puts its edges in one canonical order (piece, destination, source, kind,
   weights) whatever rank built them and numbers its vertices in the order of their global
   numbers, so every piece is the same graph for every K and spread.Spread's answers are
   identical to the bit for every K.  The critical messages are described from the critical
   path's edges (``path_rows``: a path, not the graph, allgathered).

Not covered (api.py falls back to rank 0's build, and says so; for the sync pairs after the
ranks' match has found them, so the logs are read twice): --collectives dissemination (a
member's rounds need its partners' vertices) and neighbourhood or one-sided epochs (sync.py's
pairs).  An incomplete collective instance (a member missing from the trace) is modelled as if
complete (its communicator's size, its root's presence), where rank 0's build counts the members.
"""

import dataclasses

import numpy as np

from mpigraph.comm import parallel, shuffle
from mpigraph.match import collectives as match_collectives
from mpigraph.match import core as match_core
from mpigraph.match import link
from mpigraph.match.core import COLLECTIVE_N_TO_N, COLLECTIVE_N_TO_ONE, COLLECTIVE_ONE_TO_N, SCAN
from mpigraph.metrics import profile as metrics
from mpigraph.trace import logs as trace
from mpigraph.util import arrays
from mpigraph.whatif import build as model
from mpigraph.whatif.build import (CALL, COMPUTE, END, HUB_IN, HUB_OUT, LATE_RECEIVER, MESSAGE, RELEASE)
from mpigraph.whatif.envelope import REL_EPS, Edges

# the columns of an edge row as it travels to the rank that solves its piece
EDGE_DTYPES = {"src": np.int64, "dst": np.int64, "c": np.float64, "c_traced": np.float64, "m": np.float64,
               "b": np.float64, "kind": np.int8, "src_rank": np.int32, "dst_rank": np.int32, "func": np.int32,
               "src_start": np.float64, "unit": np.int64}


class Unsupported(Exception):
    """The run needs something only rank 0's build models (see the module doc)."""


@dataclasses.dataclass
class Local:
    """One analysis rank's part of the matched run."""

    world_size: int
    calls: dict                  # owned trace rank -> RankCalls (corrected times)
    off: np.ndarray              # every trace rank's first global call number, and the total
    messages: dict               # the messages whose receiver this rank owns (p2p.MESSAGE_COLUMNS)
    to_senders: dict             # the messages whose sender this rank owns (``_to_senders``)
    groups: object               # collectives.LocalGroups of the owned members
    members: dict                # their MEMBER_RESULTS, row for row
    records: int                 # trace records read here


def matched_here(comm, run_dir, clock="pingpong"):
    """Local: trace, clock and match of the trace ranks this analysis rank owns (collective).
    Raises Unsupported (on every rank) where the run has neighbourhood or epoch synchronisations."""
    info = comm.bcast(parallel.collectively(comm, lambda: trace.find_run(run_dir) if comm.rank == 0 else None))
    ownership = parallel.Ownership(info.world_size, comm.size)
    logs = parallel.collectively(comm, trace.open_logs, info, ownership.ranks_of(comm.rank))
    calls, _ = parallel.collectively(comm, link.aligned_calls, comm, logs, clock)
    owned = link.Owned.of(calls, info.world_size)
    messages, _, _, members, _, groups, releases = parallel.collectively(
        comm, link._repair_loop, comm, ownership, calls, owned, None)
    if releases.any_neighbours or releases.any_epochs:
        raise Unsupported("neighbourhood collectives or one-sided epochs")
    n = len(groups.group)         # the instances' own members (rma's epoch rows would follow)
    members = {name: col[:n] for name, col in members.items()}
    counts = np.zeros(info.world_size, np.int64)
    for r, c in calls.items():             # a loop over owned ranks
        counts[r] = c.n_calls
    counts = comm.allreduce(counts)
    off = np.r_[0, np.cumsum(counts)].astype(np.int64)
    return Local(info.world_size, calls, off, messages, _to_senders(comm, ownership, messages, calls), groups,
                 members, sum(len(c.records) for c in calls.values()))


def _to_senders(comm, ownership, messages, calls):
    """The matched messages on their senders' owners: who sent and received, the receive's post
    and the bytes, with the send's completion (s_done_start, s_done_end: -1 without) and the
    sending call's duration (s_post_ns) from the owned calls (as p2p.to_senders, with bytes)."""
    names = ("s_rank", "s_post_call", "s_done_call", "r_rank", "r_post_call", "r_post_start", "bytes")
    back = match_core.route(comm, {name: messages[name] for name in names}, ownership.owner_of(messages["s_rank"]))
    index = match_core.CallIndex(calls)
    start, end = index.column(calls, "start_ns"), index.column(calls, "end_ns")
    has = back["s_done_call"] >= 0
    done = index.of(back["s_rank"], np.maximum(back["s_done_call"], 0))
    back = dict(back, s_done_start=np.where(has, start[done], -1), s_done_end=np.where(has, end[done], -1))
    post = index.of(back["s_rank"], back["s_post_call"])
    back["s_post_ns"] = end[post] - start[post]
    return back


# ---- the run's few global numbers ------------------------------------------------------------

def params(comm, local, model_name, given=None):
    """build.NetParams and the delta mode's delivery base, as build.default_params and
    build.delivery_base compute them on the whole run: o is the median duration of every
    message's sending call, the base the 10th percentile of the late senders' delivery times,
    both the whole run's to the bit with no value gathered (``stand_ins``)."""
    G0 = dict(given or {}).get("G0_ns", model.PAPER_G_NS)        # what default_params will take
    m = local.messages
    late = (m["r_done_call"] >= 0) & (m["s_post_start"] > m["r_done_start"])
    took = (m["r_done_end"][late] - m["s_post_start"][late]) - m["bytes"][late] * G0
    durations, took = stand_ins(comm, [(local.to_senders["s_post_ns"].astype(np.float64), _median_positions),
                                       (took, _tenth_positions)])
    net = model.default_params(None, model_name, given, send_overhead=float(np.median(durations))
                               if len(durations) else 0.0)
    return net, model.delivery_from(took, net)


def _median_positions(n):
    return [(n - 1) // 2, n // 2]


def _tenth_positions(n):
    """Where np.percentile(x, 10) reads the sorted x: floor(0.1 (n - 1)) and the next, with one
    more on either side in case numpy's rounding of the index differs from this one's."""
    at = int(np.floor(0.1 * (n - 1)))
    return [at - 1, at, at + 1, at + 2]


SPLITS = 256          # a search step cuts each bracket into this many: 8 bits of 64 per allreduce


def stand_ins(comm, requests):
    """Per (values, positions_of) of `requests`: a sorted array as long as every rank's values
    together, equal to their sorted concatenation at positions_of(n) (and between those values
    elsewhere), on every rank.  What np.median or np.percentile read of it is the whole run's,
    to the bit, and no value moves.  Each position's value is searched on the values' bits
    (float64 as an order-preserving int64): every step counts, on every rank, the values at or
    below SPLITS - 1 points of each position's bracket and sums the counts by one allreduce,
    and the bracket shrinks to the part holding the position: 8 steps or so."""
    sizes = comm.allreduce(np.array([len(v) for v, _ in requests], np.int64))
    keys = [np.sort(_order_keys(v)) for v, _ in requests]
    targets = [(a, int(p)) for a, ((_, where), n) in enumerate(zip(requests, sizes)) if n
               for p in np.unique(np.clip(where(int(n)), 0, n - 1))]
    low = _elementwise(comm, [k[0] if len(k) else _INT64_MAX for k in keys], _min())
    high = _elementwise(comm, [k[-1] if len(k) else -_INT64_MAX for k in keys], _max())
    bracket = [[int(low[a]), int(high[a])] for a, _ in targets]           # Python ints: no overflow
    while any(lo < hi for lo, hi in bracket):
        points = [[lo + (hi - lo) * j // SPLITS for j in range(1, SPLITS)] for lo, hi in bracket]
        counts = comm.allreduce(np.array([np.searchsorted(keys[a], np.array(x, np.int64), "right")
                                          for (a, _), x in zip(targets, points)], np.int64).reshape(-1, SPLITS - 1))
        for (a, p), x, c, b in zip(targets, points, counts, bracket):      # a loop over positions
            j = int(np.searchsorted(c, p + 1, "left"))                     # the first point with p + 1 at or below
            b[0] = x[j - 1] + 1 if j > 0 else b[0]
            b[1] = x[j] if j < len(x) else b[1]
    found = _from_order_keys(np.array([lo for lo, _ in bracket], np.int64))
    out = []
    for a, n in enumerate(sizes):               # a loop over the requests
        mine = [i for i, (t, _) in enumerate(targets) if t == a]
        pos = np.array([targets[i][1] for i in mine], np.int64)
        out.append(np.repeat(found[mine], np.diff(np.r_[0, pos[:-1] + 1, n])) if n else np.zeros(0))
    return out


def _elementwise(comm, values, op):
    """An int64 array reduced element by element over the ranks (a buffer Allreduce)."""
    mine = np.array(values, np.int64)
    out = np.empty_like(mine)
    comm.Allreduce(mine, out, op=op)
    return out


_INT64_MAX = int(np.iinfo(np.int64).max)
_LOW_BITS = np.int64(0x7FFFFFFFFFFFFFFF)


def _order_keys(x):
    """float64 -> int64 in the same order: a negative float's bits but the sign flipped."""
    bits = np.ascontiguousarray(x, np.float64).view(np.int64)
    return np.where(bits < 0, bits ^ _LOW_BITS, bits)


def _from_order_keys(k):
    return np.where(k < 0, k ^ _LOW_BITS, k).view(np.float64)


def cut_candidates(comm, local):
    """(max start, communicator, sequence number) of the N-to-N collectives over all ranks, in the
    order of their last arrival: trace rank 0's owner (rank 0) holds a member of each."""
    got = None
    if comm.rank == 0:
        g, mem = local.groups, local.members
        inst = g.instance
        pattern = match_collectives.pattern_of(inst["func"].astype(np.int64))
        world = (pattern == COLLECTIVE_N_TO_N) & (inst["comm_size"] == local.world_size)
        first = g.start_idx[world]
        max_start, comm_id, seq = mem["max_start"][first], inst["comm"][world], inst["seq"][world]
        order = np.lexsort((seq, comm_id, max_start))
        got = (max_start[order].astype(np.int64), comm_id[order].astype(np.int64), seq[order].astype(np.int64))
    return comm.bcast(got)


@dataclasses.dataclass
class Keys:
    """Vertex numbers shared by every rank (see the module doc, 4.)."""

    n_calls: int
    comms: np.ndarray            # every communicator of a collective instance, sorted
    span: int                    # sequence numbers per communicator

    @classmethod
    def of(cls, comm, local):
        comms = np.unique(np.concatenate(comm.allgather(np.unique(local.groups.instance["comm"].astype(np.int64)))))
        seq = local.groups.instance["seq"]
        return cls(int(local.off[-1]), comms, comm.allreduce(int(seq.max()) + 1 if len(seq) else 1, op=_max()))

    def hub(self, comm_id, seq):
        return 2 * self.n_calls + np.searchsorted(self.comms, comm_id) * self.span + np.asarray(seq, np.int64)

    @property
    def sink(self):
        return 2 * self.n_calls + len(self.comms) * self.span

    def out_copy(self, j):
        """The source of the piece after kept cut j (cuts.split_union's out-copy)."""
        return self.sink + 1 + np.asarray(j, np.int64)


def index_in(table, values):
    """Per value: its index in `table` (distinct, any order), -1 where absent."""
    values = np.asarray(values, np.int64)
    if not len(table):
        return np.full(len(values), -1, np.int64)
    order = np.argsort(table, kind="stable")
    at = np.minimum(np.searchsorted(table[order], values), len(table) - 1)
    return np.where(table[order][at] == values, order[at], -1)


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _min():
    from mpi4py import MPI

    return MPI.MIN


# ---- the edges of the owned calls --------------------------------------------------------------

class _Builder:
    """The edges this analysis rank builds (module doc, 3.), with each end's claimed piece."""

    def __init__(self, local, net, base, delta, algorithm, keys, cuts):
        self.L, self.net, self.base, self.delta, self.algorithm, self.keys = local, net, base, delta, algorithm, keys
        self.cut_start = cuts[0]                     # the candidates' last arrivals, in order
        self.cut_hub = keys.hub(cuts[1], cuts[2])
        ranks = sorted(local.calls)
        self.first = int(local.off[ranks[0]]) if ranks else 0        # owned global calls: first .. first + n
        self.start = np.concatenate([local.calls[r].start_ns for r in ranks]).astype(np.float64) if ranks else \
            np.zeros(0)
        self.end = np.concatenate([local.calls[r].end_ns for r in ranks]).astype(np.float64) if ranks else np.zeros(0)
        self.rank_of = np.repeat(np.array(ranks, np.int32), [local.calls[r].n_calls for r in ranks])
        n = len(self.start)
        self.release = np.full(n, -np.inf)      # delta: the latest dependency's source time per owned call
        self.has_call_edge = np.ones(n, bool)
        self.passed = np.zeros(n, np.int64)      # per owned call: cut member calls of its rank at or before it
        self.parts = []

    def add(self, kind, src, dst, c, m=0.0, b=0.0, src_rank=-1, dst_rank=-1, func=-1, src_piece=None,
            dst_piece=None):
        n = len(src)
        col = lambda v, dt: np.broadcast_to(np.asarray(v, dt), (n,))   # noqa: E731
        self.parts.append({"kind": col(kind, np.int8), "src": col(src, np.int64), "dst": col(dst, np.int64),
                           "c": col(c, np.float64), "m": col(m, np.float64), "b": col(b, np.float64),
                           "src_rank": col(src_rank, np.int32), "dst_rank": col(dst_rank, np.int32),
                           "func": col(func, np.int32), "src_piece": col(src_piece, np.int64),
                           "dst_piece": col(dst_piece, np.int64)})

    def s_piece(self, t):
        """Claimed piece of an S vertex or a hub at time t: the cuts whose last arrival came before."""
        return np.searchsorted(self.cut_start, np.asarray(t, np.float64), "left")

    def e_piece(self, g):
        """Claimed piece of E(g) (an owned call): the cuts its rank passed up to and including g."""
        return self.passed[np.asarray(g, np.int64) - self.first]

    def edges(self):
        """Every edge of the owned calls, as columns (``add``'s)."""
        self._cut_members()
        self._compute()
        self._messages()
        self._late_receivers()
        self._collectives()
        self._calls()
        self._ends()
        if not self.parts:
            self.add(COMPUTE, np.zeros(0), np.zeros(0), 0.0, src_piece=0, dst_piece=0)
        return {name: np.concatenate([p[name] for p in self.parts]) for name in self.parts[0]}

    def _cut_members(self):
        """passed: per owned call, how many cut candidates its rank has taken part in up to it."""
        g, mem = self.L.groups, self.L.members
        hub = self.keys.hub(g.instance["comm"][g.group].astype(np.int64), g.instance["seq"][g.group])
        is_cut = np.isin(hub, self.cut_hub)
        member = np.zeros(len(self.start), np.int64)
        if not len(member):
            return
        member[self._owned(mem["rank"][is_cut], mem["call"][is_cut])] = 1
        counted = np.cumsum(member)
        rank_first = np.r_[0, np.flatnonzero(np.diff(self.rank_of)) + 1]       # each owned rank's first call
        before = np.repeat(counted[rank_first] - member[rank_first], np.diff(np.r_[rank_first, len(member)]))
        self.passed = counted - before

    def _owned(self, rank, call):
        """Owned call index of (trace rank, call)."""
        return self.L.off[np.asarray(rank, np.int64)] + np.asarray(call, np.int64) - self.first

    def _compute(self):
        """E(r, k) -> S(r, k + 1) within each owned rank: the measured gap."""
        i = np.flatnonzero(self.rank_of[1:] == self.rank_of[:-1])        # every call but its rank's last
        g = self.first + i
        self.add(COMPUTE, 2 * g + 1, 2 * (g + 1), np.maximum(self.start[i + 1] - self.end[i], 0),
                 src_rank=self.rank_of[i], dst_rank=self.rank_of[i], src_piece=self.e_piece(g),
                 dst_piece=self.s_piece(self.start[i + 1]))

    def _messages(self):
        """Every matched message whose receiver is owned: S(send post) -> E(receive's completion)."""
        m = self.L.messages
        done = m["r_done_call"] >= 0
        s_call = self.L.off[m["s_rank"][done]] + m["s_post_call"][done]
        r_call = self.L.off[m["r_rank"][done]] + m["r_done_call"][done]
        s_start = m["s_post_start"][done].astype(np.float64)
        nbytes = m["bytes"][done].astype(np.float64)
        if self.delta:
            took = m["r_done_end"][done] - s_start
            late = s_start > m["r_done_start"][done]
            c = np.where(late, took, np.minimum(took, self.base + nbytes * self.net.G0_ns))
            np.maximum.at(self.release, r_call - self.first, s_start)
        else:
            c = np.full(len(s_call), 2 * self.net.o_ns)
        self.add(MESSAGE, 2 * s_call, 2 * r_call + 1, np.maximum(c, 0), 1.0, nbytes, m["s_rank"][done],
                 m["r_rank"][done], src_piece=self.s_piece(s_start), dst_piece=self.e_piece(r_call))

    def _late_receivers(self):
        """Sends owned here that waited for their receive's post: S(recv post) -> E(send's completion)."""
        m = self.L.to_senders
        s_done = m["s_done_call"] >= 0
        if self.delta:
            waited = s_done & (m["r_post_start"] > m["s_done_start"]) & (m["r_post_start"] <= m["s_done_end"])
        else:
            waited = s_done & (m["bytes"] > self.net.S_bytes)
        sd_call = self.L.off[m["s_rank"][waited]] + m["s_done_call"][waited]
        rp_call = self.L.off[m["r_rank"][waited]] + m["r_post_call"][waited]
        rp_start = m["r_post_start"][waited].astype(np.float64)
        if self.delta:
            c = m["s_done_end"][waited] - rp_start
            np.maximum.at(self.release, sd_call - self.first, rp_start)
        else:
            c = np.full(len(sd_call), 2 * self.net.o_ns)
        self.add(LATE_RECEIVER, 2 * rp_call, 2 * sd_call + 1, np.maximum(c, 0), 1.0,
                 m["bytes"][waited].astype(np.float64), m["r_rank"][waited], m["s_rank"][waited],
                 src_piece=self.s_piece(rp_start), dst_piece=self.e_piece(sd_call))

    def _collectives(self):
        """Each owned member's hub and release edges (build._collectives, per member)."""
        g, mem = self.L.groups, self.L.members
        if not len(mem["rank"]):
            return
        inst = {name: col[g.group] for name, col in g.instance.items()}       # per member row
        func = inst["func"].astype(np.int64)
        pattern = match_collectives.pattern_of(func)
        d, bfac = model.depth(func, inst["comm_size"], self.algorithm)
        gcall = self.L.off[mem["rank"].astype(np.int64)] + mem["call"]
        i = gcall - self.first
        is_root = mem["rank"] == mem["root"]
        has_root = inst["root"] >= 0
        one_to_n = (pattern == COLLECTIVE_ONE_TO_N) & has_root
        n_to_one = (pattern == COLLECTIVE_N_TO_ONE) & has_root
        hubbed = (pattern == COLLECTIVE_N_TO_N) | (pattern == SCAN) | n_to_one | ((pattern == COLLECTIVE_ONE_TO_N)
                                                                                  & ~has_root)
        hub = self.keys.hub(inst["comm"].astype(np.int64), inst["seq"])
        max_start = mem["max_start"].astype(np.float64)
        cut = index_in(self.cut_hub, hub)
        hub_piece = np.where(cut >= 0, cut, self.s_piece(max_start))
        mb = self._member_bytes().astype(np.float64)

        r = np.flatnonzero(hubbed)
        self.add(HUB_IN, 2 * gcall[r], hub[r], 0.0, src_rank=mem["rank"][r], func=func[r],
                 src_piece=self.s_piece(self.start[i[r]]), dst_piece=hub_piece[r])
        r = np.flatnonzero(hubbed & (~n_to_one | is_root))
        c = np.maximum(self.end[i[r]] - max_start[r], 0) if self.delta else 2 * self.net.o_ns * d[r]
        self.add(HUB_OUT, hub[r], 2 * gcall[r] + 1, c, d[r], bfac[r] * mb[r], dst_rank=mem["rank"][r], func=func[r],
                 src_piece=hub_piece[r], dst_piece=self.e_piece(gcall[r]))
        self.has_call_edge[i[r]] = False

        r = np.flatnonzero(one_to_n & ~is_root & (mem["release_rank"] >= 0))       # the root's start releases
        root_call = self.L.off[mem["release_rank"][r].astype(np.int64)] + mem["release_call"][r]
        root_start = mem["release_start"][r].astype(np.float64)
        if self.delta:
            c = np.maximum(self.end[i[r]] - root_start, 0)
            np.maximum.at(self.release, i[r], root_start)
        else:
            c = 2 * self.net.o_ns * d[r]
        self.add(RELEASE, 2 * root_call, 2 * gcall[r] + 1, c, d[r], bfac[r] * mb[r], mem["release_rank"][r],
                 mem["rank"][r], func[r], src_piece=self.s_piece(root_start), dst_piece=self.e_piece(gcall[r]))

    def _member_bytes(self):
        """The bytes field of each owned member's call record (build._member_bytes)."""
        return model._member_bytes(self.L.calls, self.L.members)

    def _calls(self):
        """S(g) -> E(g) of the owned calls without a hub: what no dependency explains (delta) or o."""
        i = np.flatnonzero(self.has_call_edge)
        if self.delta:
            c = self.end[i] - np.maximum(self.start[i], np.minimum(self.release[i], self.end[i]))
        else:
            c = np.full(len(i), self.net.o_ns)
        g = self.first + i
        self.add(CALL, 2 * g, 2 * g + 1, np.maximum(c, 0), src_rank=self.rank_of[i], dst_rank=self.rank_of[i],
                 src_piece=self.s_piece(self.start[i]), dst_piece=self.e_piece(g))

    def _ends(self):
        """S(last Finalize) (or E(last call)) -> sink per owned rank; every rank's source and its start."""
        src, start, finals, final_t, final_rank, piece = [], [], [], [], [], []
        for r in sorted(self.L.calls):           # a loop over owned ranks
            a = int(self.L.off[r]) - self.first
            f = self.L.calls[r].func.astype(np.int64)
            if not len(f):
                continue
            inits, fins = np.flatnonzero(metrics.IS_INIT[f]), np.flatnonzero(metrics.IS_FINALIZE[f])
            src.append(2 * (self.first + a + inits[0]) + 1 if len(inits) else 2 * (self.first + a))
            start.append(self.end[a + inits[0]] if len(inits) else self.start[a])
            k = a + (fins[-1] if len(fins) else len(f) - 1)
            finals.append(2 * (self.first + k) + (0 if len(fins) else 1))
            final_t.append(self.start[k] if len(fins) else self.end[k])
            final_rank.append(r)
            piece.append(self.s_piece(self.start[k]) if len(fins) else self.passed[k])
        self.sources = (np.array(src, np.int64), np.array(start, np.float64))
        self.final_time = max(final_t, default=-np.inf)
        finals = np.array(finals, np.int64)
        self.add(END, finals, np.full(len(finals), self.keys.sink), 0.0, src_rank=np.array(final_rank, np.int32),
                 src_piece=np.array(piece, np.int64), dst_piece=len(self.cut_hub))


def built(comm, local, net, base, model_name, algorithm):
    """(edge columns with their piece `unit`, Keys, the hubs of the kept cuts, the run's measured end):
    this rank's edges, labelled and split at the kept cuts (collective)."""
    keys = Keys.of(comm, local)
    cuts = cut_candidates(comm, local)
    b = _Builder(local, net, base, model_name == "delta", algorithm, keys, cuts)
    cols = b.edges()
    kept = _valid_cuts(comm, cols, b.cut_hub)
    renumber = np.r_[0, np.cumsum(kept)]
    unit = renumber[cols.pop("dst_piece")]
    cols.pop("src_piece")
    # every edge out of a kept cut leaves from its out-copy, the next piece's source (start 0)
    at = index_in(b.cut_hub, cols["src"])
    out = at >= 0
    out[out] = kept[at[out]]
    src_start = np.full(len(unit), -np.inf)
    sources, starts = b.sources
    s = index_in(sources, cols["src"])
    src_start[s >= 0] = starts[s[s >= 0]]
    src_start[out] = 0.0
    cols["src"] = np.where(out, keys.out_copy(renumber[np.maximum(at, 0)]), cols["src"])
    cols.update(unit=unit, src_start=src_start, c_traced=cols["c"])
    measured = comm.allreduce(b.final_time, op=_max())
    return cols, keys, b.cut_hub[kept], measured


def _valid_cuts(comm, cols, cut_hub):
    """cuts.valid_cuts on every rank's edges at once: a candidate some edge passes around (its
    claimed pieces do not bear the cut out) is dropped everywhere, until no edge anywhere is bad.
    Returns the kept mask over the candidates."""
    n = len(cut_hub)
    kept = np.ones(n, bool)
    src_cut = index_in(cut_hub, cols["src"])
    while n:
        renumber = np.r_[0, np.cumsum(kept)]
        a, b = renumber[cols["src_piece"]], renumber[cols["dst_piece"]]
        expected = a + ((src_cut >= 0) & kept[np.maximum(src_cut, 0)])
        bad = b != expected
        n_kept = int(kept.sum())
        cover = np.zeros(n_kept + 2, np.int64)
        np.add.at(cover, np.minimum(expected[bad], b[bad]), 1)
        np.add.at(cover, np.maximum(expected[bad], b[bad]), -1)
        cover = comm.allreduce(cover)
        if not cover.any() and comm.allreduce(int(bad.sum())) == 0:
            break
        drop = np.cumsum(cover)[:n_kept] > 0
        kept[np.flatnonzero(kept)[drop]] = False
    return kept


# ---- to the solving ranks ---------------------------------------------------------------------

def spread_plan(comm, unit, n_units):
    """(first unit per rank (K + 1 bounds), edges per rank, replicate, edges per unit): from an
    allreduce of every rank's edges per piece (spread.plan's blocks)."""
    from mpigraph.whatif.spread import blocks_of

    per_unit = comm.allreduce(np.bincount(unit, minlength=n_units).astype(np.int64))
    first, held, replicate = blocks_of(per_unit, comm.size)
    return first, held, replicate, per_unit


def send_to_solvers(comm, cols, first, replicate):
    """The edges to the ranks that solve their pieces (all ranks when replicate): this rank's
    received rows in one table (columns EDGE_DTYPES), in no particular order."""
    if replicate:
        batches = [cols] * comm.size
    else:
        owner = np.searchsorted(first, cols["unit"], "right") - 1
        batches = shuffle.split_by_dest(cols, owner, comm.size)
    got, _ = shuffle.exchange(comm, batches)
    parts = [got[s] for s in sorted(got)]
    return {name: np.concatenate([p[name] for p in parts]) if parts else np.zeros(0, EDGE_DTYPES[name])
            for name in cols}


SOLVE_COLUMNS = ("src", "dst", "c", "c_traced", "m", "b", "unit", "src_start")


def canonical(rows):
    """The rows in one order whatever rank built them: by piece, destination, source, then kind
    and weights.  Those the solver reads (SOLVE_COLUMNS) are put in that order; the others are
    read for the critical path's few edges only, through rows["order"]."""
    order = np.lexsort((rows["src"], rows["dst"], rows["unit"]))
    u, d, s = rows["unit"][order], rows["dst"][order], rows["src"][order]
    if ((u[1:] == u[:-1]) & (d[1:] == d[:-1]) & (s[1:] == s[:-1])).any():    # two edges u -> v: rare
        order = np.lexsort((rows["b"], rows["m"], rows["c"], rows["kind"], rows["src"], rows["dst"], rows["unit"]))
    out = {name: col[order] if name in SOLVE_COLUMNS else col for name, col in rows.items()}
    out["order"] = order
    return out


def _renumbered(keys):
    """(distinct keys sorted, each key's index in them): np.unique's, by one argsort (a stable
    one: the keys come in long sorted runs, the destinations of each piece, which it merges)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]] if len(keys) else np.zeros(0, bool)
    inverse = np.empty(len(keys), np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


def local_graph(rows, u0, u1, sink_keys, c):
    """(Edges of units u0..u1 renumbered from 0 in key order, the edges' local unit)."""
    sinks = sink_keys[u0:u1]
    keys, inverse = _renumbered(np.concatenate([rows["src"], rows["dst"], sinks]))
    n = len(rows["src"])
    start = np.full(len(keys), -np.inf)
    np.maximum.at(start, inverse[:n], rows["src_start"])
    edges = Edges(len(keys), inverse[:n], inverse[n:2 * n], c, rows["m"], rows["b"], start, inverse[2 * n:])
    return edges, rows["unit"] - u0


def scales(comm, rows, per_unit):
    """(eps_abs, span, min_coef) of the whole graph as spread.plan computes them on one rank, the
    same for every K: maxima and minima reduced, the sum of |c| per piece (in canonical order)
    summed in piece order."""
    c = np.abs(rows["c"])
    eps = REL_EPS * max(comm.allreduce(float(c.max(initial=0)), op=_max()), 1.0)
    sums = np.bincount(rows["unit"], c, minlength=len(per_unit))
    first_of = comm.allgather(sums)
    total = np.zeros(len(per_unit))
    for s in first_of:             # a loop over ranks: a piece's sum from the rank that holds it
        total = np.where(s != 0, s, total)
    start = rows["src_start"][np.isfinite(rows["src_start"])]
    span = float(total.sum()) + comm.allreduce(float(np.abs(start).max(initial=0)), op=_max()) + 1.0
    min_coef = {}
    for p, col in (("L", rows["m"]), ("G", rows["b"])):
        low = comm.allreduce(float(col[col > 0].min()) if (col > 0).any() else np.inf, op=_min())
        min_coef[p] = low if np.isfinite(low) else 1.0
    return eps, span, min_coef


# ---- the solving rank's Spread ---------------------------------------------------------------

def spread_of(comm, rows, first, held, replicate, per_unit, sink_keys, c):
    """spread.Spread of this rank's units from its received rows in canonical order, with weights
    c (the rows' "c" or "c_traced"): the Plan's scales reduced over the ranks (``scales``), each
    edge's id its place in the whole graph's canonical order (the same for every K)."""
    from mpigraph.whatif.spread import Plan, Spread, _units_of

    eps, span, min_coef = scales(comm, dict(rows, c=c), per_unit)
    plan = Plan(np.asarray(first), np.asarray(held), eps, span, min_coef, replicate)
    u0, u1 = _units_of(plan, comm.rank)
    local, unit = local_graph(rows, u0, u1, sink_keys, c)
    before = np.r_[0, np.cumsum(per_unit)]
    ids = before[rows["unit"]] + np.arange(len(unit)) - np.searchsorted(rows["unit"], rows["unit"], "left")
    return Spread.of_block(comm, plan, local, unit, ids)


PATH_COLUMNS = ("kind", "src_rank", "dst_rank", "func", "m", "b")


def path_rows(comm, spread, rows, on):
    """The columns PATH_COLUMNS of the critical edges `on` (whole-graph ids, sorted, the same on
    every rank), in that order on every rank: a path's edges, not the graph, are gathered."""
    mine = np.isin(spread.edge_ids, on)
    picked = {name: rows[name][rows["order"][mine]] if name not in SOLVE_COLUMNS else rows[name][mine]
              for name in PATH_COLUMNS}
    picked["id"] = spread.edge_ids[mine]
    if not spread.plan.replicate:
        parts = comm.allgather(picked)
        picked = {name: np.concatenate([p[name] for p in parts]) for name in picked}
    order = np.argsort(picked["id"], kind="stable")
    return {name: col[order] for name, col in picked.items()}


def recording_cost(comm, rows_built, spec):
    """overhead.recording_cost of the whole run's compute edges: each rank's percentile per owned
    trace rank, the minimum over the analysis ranks; `spec` overhead.parse's."""
    from mpigraph.whatif import overhead as recording

    source, ns = spec
    if source != "auto":
        return ns
    compute = rows_built["kind"] == COMPUTE
    gap, rank = rows_built["c"][compute], rows_built["src_rank"][compute]
    least = min((np.percentile(gap[rows], recording.QUANTILE) for _, rows in arrays.groups(rank)), default=np.inf)
    least = comm.allreduce(float(least), op=_min())           # a loop over owned ranks above (one sort)
    if not np.isfinite(least):
        return 0.0
    cost = max(least, 0.0)
    return float(cost) if cost <= recording.MAX_COST_NS else 0.0


# ---- the whole of it --------------------------------------------------------------------------

@dataclasses.dataclass
class OnRanks:
    """What api.whatif needs of the distributed graph (every rank its own figures)."""

    spread: object               # spread.Spread of this rank's pieces
    rows: dict                   # its edges' columns, in the Spread's order
    net: object                  # build.NetParams
    base_ns: float               # delta: the delivery base (api's base latency unless L0 given)
    measured_ns: float
    overhead: object             # overhead.Overhead taken off the compute edges
    records: int                 # trace records read here
    built: int                   # edges built here
    sent: int                    # of them, sent to another rank
    received: int                # edges received from other ranks


def graph_on_ranks(comm, meter, run_dir, model_name, given, algorithm, clock, overhead_spec, ref_of):
    """OnRanks of the run (collective; module doc).  `ref_of(net, base)`: the reference point in ns
    (api's), for T at the reference as traced when the recording's cost is taken off."""
    from mpigraph.whatif import overhead as recording

    with meter.stage("whatif read+match"):
        local = matched_here(comm, run_dir, clock)
    with meter.stage("whatif build"):
        net, base = params(comm, local, model_name, given)
        cols, keys, kept, measured = parallel.collectively(comm, built, comm, local, net, base, model_name,
                                                           algorithm)
        records, local = local.records, None
        taken = recording.Overhead()
        ns = recording_cost(comm, cols, overhead_spec)
        if overhead_spec[0] != "none":
            taken = recording.Overhead(ns, overhead_spec[0])
        if ns > 0:
            cols["c"] = recording.shorten(cols["c"], cols["kind"], ns)
        else:
            cols.pop("c_traced")          # the same as c: not sent
        n_units = len(kept) + 1
        first, held, replicate, per_unit = spread_plan(comm, cols["unit"], n_units)
    with meter.stage("whatif spread"):
        n_built = len(cols["unit"])
        owner = np.searchsorted(first, cols["unit"], "right") - 1
        n_sent = n_built * (comm.size - 1) if replicate else int((owner != comm.rank).sum())
        rows = canonical(send_to_solvers(comm, cols, first, replicate))
        cols = None
        n_received = len(rows["unit"]) - (n_built if replicate else n_built - n_sent)
    with meter.stage("whatif model"):
        sink_keys = np.r_[kept, keys.sink]
        G = 0.0 if model_name == "delta" else net.G0_ns
        if taken.ns > 0:         # T at the reference with the weights as traced: one pass
            traced = spread_of(comm, rows, first, held, replicate, per_unit, sink_keys, rows["c_traced"])
            taken.T_traced_ns = float(traced.forward([ref_of(net, base)], fixed=G).T[0])
            traced = None
        m = spread_of(comm, rows, first, held, replicate, per_unit, sink_keys, rows["c"])
    return OnRanks(m, rows, net, base, measured, taken, records, n_built, n_sent, n_received)
