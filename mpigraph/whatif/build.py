"""The model graph of a real run (spec whatif.md, "Model"), from the pipeline's match stage.

Vertices: S(r,k) and E(r,k), the start and the end of call k of rank r, a hub H per
collective instance that needs one, and a sink.  Times t come from the trace (on
rank 0's clock, after the receive-before-send repair).  Edges, weight c + m L + b G:

    compute   E(r,k) -> S(r,k+1)   c = the measured gap (both modes)
    call      S(r,k) -> E(r,k)     delta: the call's time not explained by a dependency,
                                   t(E) - max(t(S), min(t(release), t(E)));  loggps: o
    message   S(send post) -> E(call completing the receive), EVERY matched message,
              m = 1, b = bytes;    delta: t(E) - t(S_send) for a late sender, else
                                   min(that, base + bytes G0);  loggps: 2o
    late receiver  S(recv post) -> E(call completing the send), only where that call
              was waiting for the receive (it started before the post and ended after):
              m = 1 (the clear-to-send), b = bytes;  delta: t(E) - t(S_recv);  loggps: 2o
    hub       N-to-N (and Scan): S(member) -> H, c = 0;  H -> E(member), m = d, b = d
              bytes (recursive doubling; ring: d bytes / P);  delta: t(E) - t(H),
              t(H) = the last arrival;  loggps: 2 o d.  The members' call edges go.
              N-to-1: the same hub, out to the root only.  1-to-N: S(root) -> E(member).
    neighbor, rma_late_post, rma_early_wait   (sync.py) from every partner of a neighbourhood
              member (its in-neighbours), of an access epoch (its targets' posts) and of an
              exposure epoch (its origins' completes): S(partner) -> E(the call that waited),
              m = 1, c as a message's (the latest partner's is the tight one at dL = 0)
    end       S(r, last MPI_Finalize) -> sink, c = 0

Every rank starts at the end of its MPI_Init (its measured time).  In delta mode every
edge's c is at most t(v) - t(u) and each vertex has one edge where it is equal, so the
forward pass at dL = 0 gives every measured time back: T(0) is the measured run time
(from the earliest end of MPI_Init to the start of the last MPI_Finalize), and the
parameter is the *added* latency dL.  In loggps mode the parameter is L itself.

Depth d of a collective over P ranks (LLAMP expands collectives into point-to-point
schedules; this is the latency count of the critical chain of such a schedule):
ceil(log2 P) (recursive doubling, dissemination, binomial trees), 2 (P - 1) for a ring
Allreduce, P - 1 for a ring Allgather / Reduce_scatter and for every Alltoall.
"""

import dataclasses

import numpy as np

# The pipeline's stages this module reads (trace, clock and match), where they are now.
from mpigraph.match import collectives
from mpigraph.match import link
from mpigraph.metrics import profile as metrics
from mpigraph.trace import functions as mpi_functions
from mpigraph.comm import parallel
from mpigraph.trace import record
from mpigraph.trace import logs as trace
from mpigraph.util import arrays
from mpigraph.match.core import COLLECTIVE_N_TO_N, COLLECTIVE_N_TO_ONE, COLLECTIVE_ONE_TO_N, SCAN

from mpigraph.whatif import sync
from mpigraph.whatif.options import COLLECTIVE_ALGORITHMS, MODELS, WhatifError  # noqa: F401
from mpigraph.whatif.envelope import Edges

(COMPUTE, CALL, MESSAGE, LATE_RECEIVER, HUB_IN, HUB_OUT, RELEASE, END, ROUND, ROUND_MESSAGE, NEIGHBOR, RMA_LATE_POST,
 RMA_EARLY_WAIT) = range(13)
KIND_NAMES = ("compute", "call", "message", "late_receiver", "hub_in", "hub_out", "release", "end", "round",
              "round_message", "neighbor", "rma_late_post", "rma_early_wait")
# the edges that carry a collective's (or a synchronisation's) latency, reported per function
COLLECTIVE_KINDS = (HUB_OUT, RELEASE, ROUND_MESSAGE, NEIGHBOR, RMA_LATE_POST, RMA_EARLY_WAIT)
_SYNC_KIND = np.array([NEIGHBOR, RMA_LATE_POST, RMA_EARLY_WAIT], np.int8)      # by sync.NEIGHBOR, ...

@dataclasses.dataclass
class NetParams:
    """LogGPS parameters (ns, ns per byte, bytes) and where they came from."""

    o_ns: float
    L0_ns: float
    G0_ns: float
    S_bytes: float
    source: str
    L0_given: bool = False       # L0 measured (--params, --loggps), not the paper's default


# The paper's Netgauge measurement on its ConnectX-3 cluster (seed 000, section III-B):
# L = 3.0 us, G = 0.018 ns/B, S = 256 KB.  o is application-specific there (matched to the
# mean message size); without a measurement mpigraph takes the run's own median execution
# time of sending calls (``default_params``).
PAPER_L_NS, PAPER_G_NS, PAPER_S_BYTES = 3000.0, 0.018, 256 * 1024


@dataclasses.dataclass
class RunGraph:
    """A run's model graph and what the reports need of its edges."""

    edges: Edges
    kind: np.ndarray             # per edge, KIND_NAMES
    src_rank: np.ndarray         # per edge: the rank of its source (-1: a hub)
    dst_rank: np.ndarray         # per edge: the rank of its destination (-1: a hub or the sink)
    func: np.ndarray             # per edge: function id of the collective (hub and release edges), else -1
    world_size: int
    measured_ns: float           # the run time in the trace: the latest Finalize start
    model: str
    params: NetParams
    cuts: np.ndarray             # hubs of collectives over all ranks, in time order (split candidates)
    piece: np.ndarray            # per vertex: how many of `cuts` come before it (cuts.valid_cuts)
    vertex_time: np.ndarray      # the measured time of each S and E vertex (ns; nan: hubs, the sink)
    overhead: object = None      # overhead.Overhead: the recording's cost taken off the compute edges (api)
    pairs: object = None         # pairs.PairLatencies: per host pair latencies folded into c (api, --pairs)


# ---- the match stage on one analysis rank --------------------------------------------------

@dataclasses.dataclass
class Matched:
    world_size: int
    calls: dict                  # rank -> match.RankCalls (corrected times)
    messages: dict               # p2p.MESSAGE_COLUMNS, every matched message
    groups: object               # collectives.LocalGroups (retimed): members by instance
    member_bytes: np.ndarray     # bytes of each member row of groups
    # neighbourhood and post/start/complete/wait synchronisations, every partner (sync.PAIR_COLUMNS)
    sync: dict = None
    hosts: list = None           # per rank: the host name in its log's header (pairs.py maps them)


def matched_run(run_dir, clock="pingpong"):
    """The pipeline's trace, clock and match stages on the logs of run_dir, on one analysis rank."""
    from mpi4py import MPI

    comm = MPI.COMM_SELF
    info = trace.find_run(run_dir)
    logs = trace.open_logs(info, range(info.world_size))
    calls, _ = link.aligned_calls(comm, logs, clock)
    ownership = parallel.Ownership(info.world_size, 1)
    owned = link.Owned.of(calls, info.world_size)
    # The loop's groups: the members by instance, timed by the calls as the loop left them.
    messages, _, _, members, _, groups, _ = link._repair_loop(comm, ownership, calls, owned, None)
    member_bytes = _member_bytes(calls, groups.members)
    return Matched(info.world_size, calls, messages, groups, member_bytes,
                   _sync_pairs(calls, members, groups, member_bytes),
                   [logs[r].hostname for r in range(info.world_size)])


def _sync_pairs(calls, members, groups, member_bytes):
    """sync's pairs of the run: neighbourhood members (the first rows of `members`, one per
    member of `groups`, whose rows `member_bytes` follows) and one-sided epochs."""
    n = len(groups.group)       # match.rma's epoch rows come after the instances' members
    own = {name: col[:n] for name, col in members.items()}
    nb = sync.neighbour_pairs(calls, own, groups.instance["comm"][groups.group], groups.instance["seq"][groups.group],
                              member_bytes)
    ep = sync.epoch_pairs(calls)
    return {name: np.concatenate([nb[name], ep[name]]) for name in sync.PAIR_COLUMNS}


def _member_bytes(calls, members):
    """The bytes field of each member's call record."""
    out = np.zeros(len(members["rank"]), np.int64)
    # Grouped by one sort: a pass over every member per rank was quadratic in the ranks.
    for r, rows in arrays.groups(members["rank"]):
        c = calls.get(int(r))
        if c is None:
            continue
        call_record = np.flatnonzero((c.field("flags") & record.PART) == 0)
        out[rows] = np.asarray(c.records["bytes"])[call_record[members["call"][rows]]]
    return out


# ---- parameters ------------------------------------------------------------------------------

def default_params(matched, model, given=None, send_overhead=None):
    """NetParams: `given` where set (a dict of o_ns, L0_ns, G0_ns, S_bytes, from --params or
    flags), else the paper's L, G, S; o and the delta mode's delivery time from the trace
    (`send_overhead`: o as the analysis ranks found it together, whatif.distributed)."""
    given = dict(given or {})
    source = given.pop("source", "")
    L0 = given.get("L0_ns", PAPER_L_NS)
    G0 = given.get("G0_ns", PAPER_G_NS)
    S = given.get("S_bytes", PAPER_S_BYTES)
    notes = [source] if source else []
    if "o_ns" in given:
        o = given["o_ns"]
    else:
        o = _send_overhead(matched) if send_overhead is None else send_overhead
        notes.append("o = %.0f ns: median time of the run's sending calls" % o)
    if "L0_ns" not in given and model == "loggps":
        notes.append("L, G, S: the paper's Netgauge values (L = 3 us, G = 0.018 ns/B, S = 256 KiB)")
    return NetParams(float(o), float(L0), float(G0), float(S), "; ".join(notes), "L0_ns" in given)


def _send_overhead(matched):
    """Median duration of the calls that posted a message (Send, Isend: about o for eager sizes)."""
    m = matched.messages
    if not len(m["s_rank"]):
        return 0.0
    start, end = _call_times(matched)
    g = _global_call(matched, m["s_rank"], m["s_post_call"])
    return float(np.median(end[g] - start[g]))


def delivery_base(matched, params):
    """delta mode: the time a message takes when nobody waits, without its bytes: 2o + L0 when
    L0 was measured (given), else the 10th percentile of (t(E) - t(S_send) - bytes G0) over
    the late-sender messages (the receiver was there first, so that time is the delivery),
    else (no late sender) 2o + the paper's L0."""
    m = matched.messages
    late = (m["r_done_call"] >= 0) & (m["s_post_start"] > m["r_done_start"])
    return delivery_from(m["r_done_end"][late] - m["s_post_start"][late] - m["bytes"][late] * params.G0_ns, params)


def delivery_from(took, params):
    """delivery_base from the late senders' t(E) - t(S_send) - bytes G0 (`took`, any order)."""
    if params.L0_given or len(took) < 1:
        return 2 * params.o_ns + params.L0_ns
    return float(max(np.percentile(took, 10), 0.0))


# ---- the graph --------------------------------------------------------------------------------

def _call_times(matched):
    ranks = range(matched.world_size)
    start = np.concatenate([matched.calls[r].start_ns for r in ranks]).astype(np.float64)
    end = np.concatenate([matched.calls[r].end_ns for r in ranks]).astype(np.float64)
    return start, end


def _offsets(matched):
    counts = [matched.calls[r].n_calls for r in range(matched.world_size)]
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _global_call(matched, rank, call):
    return _offsets(matched)[np.asarray(rank, np.int64)] + np.asarray(call, np.int64)


def depth(func_ids, P, algorithm="recdoub"):
    """Latency count d and byte factor of a collective of each function over P ranks."""
    names = mpi_functions.names_array()[np.asarray(func_ids)]
    P = np.maximum(np.asarray(P, np.int64), 1)
    log2 = np.ceil(np.log2(P)).astype(np.int64)
    d = log2.copy()
    bytes_factor = log2.astype(np.float64)               # recursive doubling: the whole buffer each step
    alltoall = np.char.startswith(names.astype(str), "MPI_Alltoall")
    d[alltoall] = P[alltoall] - 1
    bytes_factor[alltoall] = (P[alltoall] - 1) / P[alltoall]
    if algorithm == "ring":
        allreduce = names.astype(str) == "MPI_Allreduce"
        half = np.isin(names.astype(str), ["MPI_Allgather", "MPI_Allgatherv", "MPI_Reduce_scatter",
                                           "MPI_Reduce_scatter_block"])
        d[allreduce] = 2 * (P[allreduce] - 1)
        d[half] = P[half] - 1
        ring = allreduce | half
        bytes_factor[ring] = d[ring] / P[ring]
    elif algorithm not in ("recdoub", "dissemination"):
        raise WhatifError("collective algorithm %r: one of %s" % (algorithm, ", ".join(COLLECTIVE_ALGORITHMS)))
    return d, bytes_factor


class _EdgeList:
    """Edge groups gathered, then concatenated once."""

    def __init__(self):
        self.parts = []

    def add(self, kind, src, dst, c, m=0.0, b=0.0, src_rank=-1, dst_rank=-1, func=-1):
        n = len(src)
        col = lambda v, dt: np.broadcast_to(np.asarray(v, dt), (n,))   # noqa: E731
        self.parts.append((col(kind, np.int8), col(src, np.int64), col(dst, np.int64), col(c, np.float64),
                           col(m, np.float64), col(b, np.float64), col(src_rank, np.int32), col(dst_rank, np.int32),
                           col(func, np.int32)))

    def columns(self):
        return [np.concatenate([p[i] for p in self.parts]) for i in range(9)]


def build(matched, model="delta", params=None, collective_algorithm="recdoub"):
    """The RunGraph of a matched run (see the module doc)."""
    if model not in MODELS:
        raise WhatifError("model %r: one of %s" % (model, ", ".join(MODELS)))
    params = params or default_params(matched, model)
    start, end = _call_times(matched)
    off = _offsets(matched)
    n_calls = int(off[-1])
    if n_calls == 0:
        raise WhatifError("the run has no MPI calls: nothing to model")
    rank_of = np.repeat(np.arange(matched.world_size, dtype=np.int32), np.diff(off))
    func = np.concatenate([matched.calls[r].func for r in range(matched.world_size)]).astype(np.int64)
    S, E = 2 * np.arange(n_calls), 2 * np.arange(n_calls) + 1
    release = np.full(n_calls, -np.inf)          # delta: the latest dependency's source time per call
    has_call_edge = np.ones(n_calls, bool)
    out = _EdgeList()
    delta = model == "delta"

    # compute edges: within each rank, call k's end -> call k+1's start
    not_last = np.ones(n_calls, bool)
    not_last[off[1:] - 1] = False
    g = np.flatnonzero(not_last)
    out.add(COMPUTE, E[g], S[g + 1], np.maximum(start[g + 1] - end[g], 0), src_rank=rank_of[g], dst_rank=rank_of[g])

    _messages(out, matched, params, delta, off, start, end, release, S, E)
    _synchronisations(out, matched, params, delta, off, start, end, release, S, E)
    n_hubs, cuts, cut_members = _collectives(out, matched, params, delta, off, start, end, release, has_call_edge,
                                             S, E, 2 * n_calls, collective_algorithm)
    n_hubs += _disseminations(out, matched, params, delta, off, start, end, has_call_edge, S, E, 2 * n_calls + n_hubs,
                              collective_algorithm)

    # call edges (after the dependencies: their weight leaves out the explained wait)
    g = np.flatnonzero(has_call_edge)
    if delta:
        c = end[g] - np.maximum(start[g], np.minimum(release[g], end[g]))
    else:
        c = np.full(len(g), params.o_ns)
    out.add(CALL, S[g], E[g], np.maximum(c, 0), src_rank=rank_of[g], dst_rank=rank_of[g])

    # sources (the end of each rank's MPI_Init) and the sink (the start of its last Finalize)
    n_vertices = 2 * n_calls + n_hubs + 1
    sink = n_vertices - 1
    vstart = np.full(n_vertices, -np.inf)
    finals = []
    for r in range(matched.world_size):       # a loop over ranks
        a, b = off[r], off[r + 1]
        if a == b:
            continue
        f = func[a:b]
        inits = np.flatnonzero(metrics.IS_INIT[f])
        src = E[a + inits[0]] if len(inits) else S[a]
        vstart[src] = end[a + inits[0]] if len(inits) else start[a]
        fins = np.flatnonzero(metrics.IS_FINALIZE[f])
        finals.append(S[a + fins[-1]] if len(fins) else E[b - 1])
    finals = np.array(finals, np.int64)
    times = np.empty(2 * n_calls)
    times[0::2], times[1::2] = start, end
    out.add(END, finals, np.full(len(finals), sink), 0.0, src_rank=rank_of[finals // 2])
    kind, src, dst, c, m, b, src_rank, dst_rank, fn = out.columns()
    edges = Edges(n_vertices, src, dst, c, m, b, vstart, sink)
    piece = _claimed_pieces(n_vertices, off, cuts, cut_members, kind, src, dst)
    vertex_time = np.r_[times, np.full(n_vertices - len(times), np.nan)]
    return RunGraph(edges, kind, src_rank, dst_rank, fn, matched.world_size, float(times[finals].max()), model,
                    params, cuts, piece, vertex_time)


def _claimed_pieces(n_vertices, off, cuts, cut_members, kind, src, dst):
    """How many cuts come before each vertex, by each rank's own order of its calls: S(r,k)
    after the cuts whose member call on r is before k, E(r,k) after those at or before k;
    other hubs with their members' starts; the sink after all.  cuts.valid_cuts checks
    the claim against every edge."""
    piece = np.zeros(n_vertices, np.int64)
    n_calls = int(off[-1])
    rank_of_call = np.repeat(np.arange(len(off) - 1), np.diff(off))
    k = np.arange(n_calls)
    # one sorted key per (rank, call): the cut members' calls and every call, compared as global call ids
    member_g = np.sort(cut_members)                      # global call ids of the cut members
    before = np.searchsorted(member_g, k, "left") - np.searchsorted(member_g, off[rank_of_call], "left")
    upto = np.searchsorted(member_g, k, "right") - np.searchsorted(member_g, off[rank_of_call], "left")
    piece[0:2 * n_calls:2] = before
    piece[1:2 * n_calls:2] = upto
    hub_in = kind == HUB_IN
    np.maximum.at(piece, dst[hub_in], piece[src[hub_in]])
    # a collective's round vertices: its member's piece, along the member's own rounds
    own = kind == ROUND
    for _ in range(64):              # a round per step: at most log2 of the ranks
        before = piece[dst[own]]
        piece[dst[own]] = piece[src[own]]
        if (piece[dst[own]] == before).all():
            break
    piece[cuts] = np.arange(len(cuts))
    piece[n_vertices - 1] = len(cuts)
    return piece


def _messages(out, matched, params, delta, off, start, end, release, S, E):
    """Message and late-receiver edges of every matched message."""
    m = matched.messages
    done = m["r_done_call"] >= 0
    s_call = off[m["s_rank"][done]] + m["s_post_call"][done]
    r_call = off[m["r_rank"][done]] + m["r_done_call"][done]
    nbytes = m["bytes"][done].astype(np.float64)
    if delta:
        took = end[r_call] - start[s_call]
        late = start[s_call] > start[r_call]
        base = delivery_base(matched, params)
        c = np.where(late, took, np.minimum(took, base + nbytes * params.G0_ns))
        np.maximum.at(release, r_call, start[s_call])
    else:
        c = np.full(len(s_call), 2 * params.o_ns)
    out.add(MESSAGE, S[s_call], E[r_call], np.maximum(c, 0), 1.0, nbytes, m["s_rank"][done], m["r_rank"][done])

    # the sender waited for the receive to be posted (rendezvous, synchronous sends)
    s_done = m["s_done_call"] >= 0
    waited = s_done & (m["r_post_start"] > m["s_done_start"]) & (m["r_post_start"] <= m["s_done_end"])
    if not delta:
        waited = s_done & (m["bytes"] > params.S_bytes)
    sd_call = off[m["s_rank"][waited]] + m["s_done_call"][waited]
    rp_call = off[m["r_rank"][waited]] + m["r_post_call"][waited]
    if delta:
        c = end[sd_call] - start[rp_call]
        np.maximum.at(release, sd_call, start[rp_call])
    else:
        c = np.full(len(sd_call), 2 * params.o_ns)
    out.add(LATE_RECEIVER, S[rp_call], E[sd_call], np.maximum(c, 0), 1.0, m["bytes"][waited].astype(np.float64),
            m["r_rank"][waited], m["s_rank"][waited])


def _synchronisations(out, matched, params, delta, off, start, end, release, S, E):
    """Neighbourhood and one-sided epoch edges (sync.py): one message each, from every partner,
    S(partner's call) -> E(the call that waited for it).  Weights as a message's: delta mode
    t(E) - t(S) where the partner came later than the waiting call started (the match stage's
    wait), else min(that, the delivery time of a message nobody waits for); loggps 2o."""
    p = matched.sync
    if p is None or not len(p["src_rank"]):
        return
    s_call = off[p["src_rank"]] + p["src_call"]
    d_call = off[p["dst_rank"]] + p["dst_call"]
    nbytes = p["bytes"].astype(np.float64)
    if delta:
        took = end[d_call] - start[s_call]
        late = start[s_call] > start[d_call]
        c = np.where(late, took, np.minimum(took, delivery_base(matched, params) + nbytes * params.G0_ns))
        np.maximum.at(release, d_call, start[s_call])
    else:
        c = np.full(len(s_call), 2 * params.o_ns)
    for k in range(len(_SYNC_KIND)):         # three kinds
        g = p["kind"] == k
        out.add(_SYNC_KIND[k], S[s_call[g]], E[d_call[g]], np.maximum(c[g], 0), 1.0, nbytes[g], p["src_rank"][g],
                p["dst_rank"][g], p["func"][g])


def _collectives(out, matched, params, delta, off, start, end, release, has_call_edge, S, E, first_hub, algorithm):
    """Hub and release edges of the collective instances; (hubs made, the hubs over all ranks)."""
    grp = matched.groups
    mem = grp.members
    if not len(mem["rank"]):
        return 0, np.zeros(0, np.int64), np.zeros(0, np.int64)
    n_inst = len(grp.start_idx)
    inst = grp.group
    gcall = off[mem["rank"].astype(np.int64)] + mem["call"]
    count = np.diff(np.r_[grp.start_idx, len(inst)])
    ifunc = grp.instance["func"].astype(np.int64)
    pattern = collectives.pattern_of(ifunc)
    d, bfac = depth(ifunc, count, algorithm)
    max_start = np.maximum.reduceat(start[gcall], grp.start_idx)
    is_root = mem["rank"] == mem["root"]
    root_row = np.full(n_inst, -1, np.int64)
    np.maximum.at(root_row, inst[is_root], np.flatnonzero(is_root))
    one_to_n = (pattern == COLLECTIVE_ONE_TO_N) & (root_row >= 0)
    n_to_one = (pattern == COLLECTIVE_N_TO_ONE) & (root_row >= 0)
    hubbed = ((pattern == COLLECTIVE_N_TO_N) | (pattern == SCAN) | n_to_one
              | ((pattern == COLLECTIVE_ONE_TO_N) & (root_row < 0)))
    hubbed &= ~_disseminated(ifunc, pattern, count, algorithm)
    hub_id = np.full(n_inst, -1, np.int64)
    hub_id[hubbed] = first_hub + np.arange(int(hubbed.sum()))
    mb = matched.member_bytes.astype(np.float64)

    # hubs: every member in, out to every member (N-to-N) or to the root (N-to-1)
    rows = np.flatnonzero(hubbed[inst])
    h = hub_id[inst[rows]]
    out.add(HUB_IN, S[gcall[rows]], h, 0.0, src_rank=mem["rank"][rows], func=ifunc[inst[rows]])
    outs = rows[~n_to_one[inst[rows]] | is_root[rows]]
    i = inst[outs]
    c = np.maximum(end[gcall[outs]] - max_start[i], 0) if delta else 2 * params.o_ns * d[i]
    out.add(HUB_OUT, hub_id[i], E[gcall[outs]], c, d[i], bfac[i] * mb[outs], dst_rank=mem["rank"][outs],
            func=ifunc[i])
    has_call_edge[gcall[outs]] = False

    # 1-to-N: the root's start releases every other member
    rows = np.flatnonzero(one_to_n[inst] & ~is_root)
    i = inst[rows]
    root_call = gcall[root_row[i]]
    if delta:
        c = np.maximum(end[gcall[rows]] - start[root_call], 0)
        np.maximum.at(release, gcall[rows], start[root_call])
    else:
        c = 2 * params.o_ns * d[i]
    out.add(RELEASE, S[root_call], E[gcall[rows]], c, d[i], bfac[i] * mb[rows], mem["rank"][root_row[i]],
            mem["rank"][rows], ifunc[i])

    world = hubbed & (pattern == COLLECTIVE_N_TO_N) & (count == matched.world_size)
    cuts = hub_id[world]
    return int(hubbed.sum()), cuts[np.argsort(max_start[world], kind="stable")], gcall[world[inst]]


# ---- collectives expanded into their message rounds (--collectives dissemination) ----------

def _disseminated(ifunc, pattern, count, algorithm):
    """The instances that get message rounds instead of a hub: N-to-N ones but Alltoall, over
    two ranks or more, with --collectives dissemination."""
    if algorithm != "dissemination":
        return np.zeros(len(ifunc), bool)
    names = mpi_functions.names_array()[ifunc].astype(str)
    return (pattern == COLLECTIVE_N_TO_N) & (count >= 2) & ~np.char.startswith(names, "MPI_Alltoall")


def _disseminations(out, matched, params, delta, off, start, end, has_call_edge, S, E, first, algorithm):
    """The dissemination schedule of each such instance (LLAMP expands collectives the same way,
    with Schedgen): d = ceil(log2 P) rounds; in round k member p gets a message from member
    (p - 2^k) mod P.  Vertices R(p, k), k = 1..d, after `first`; R(p, 0) is S(p):
        R(p, k) -> R(p, k+1)                 c = 0                  (the member's own order)
        R((p - 2^k) mod P, k) -> R(p, k+1)   m = 1, b = bytes, c = 0 (delta) or 2o (loggps)
        R(p, d) -> E(p)                      c = t(E) - last arrival (delta) or 0 (loggps)
    At dL = 0 every R(p, d) is the last arrival, so delta mode still gives the measured times
    back; with dL, the last arriver waits only for messages that left before it arrived,
    not d latencies after its own arrival as at a hub.  Returns the vertices made."""
    grp = matched.groups
    mem = grp.members
    if algorithm != "dissemination" or not len(mem["rank"]):
        return 0
    inst = grp.group
    count = np.diff(np.r_[grp.start_idx, len(inst)])
    ifunc = grp.instance["func"].astype(np.int64)
    chosen = _disseminated(ifunc, collectives.pattern_of(ifunc), count, algorithm)
    rows = np.flatnonzero(chosen[inst])
    if not len(rows):
        return 0
    i = inst[rows]
    P = count[i]
    d = np.ceil(np.log2(P)).astype(np.int64)
    pos = rows - grp.start_idx[i]                          # the member's place in its instance
    gcall = off[mem["rank"].astype(np.int64)] + mem["call"]
    max_start = np.maximum.reduceat(start[gcall], grp.start_idx)
    first_round = np.zeros(len(mem["rank"]), np.int64)    # vertex of R(row, 1), per member row
    first_round[rows] = first + np.concatenate(([0], np.cumsum(d)[:-1]))
    # one entry per (member, round k = 0..d-1)
    r = np.repeat(rows, d)
    k = np.arange(len(r)) - np.repeat(np.cumsum(d) - d, d)
    ri = inst[r]
    partner = grp.start_idx[ri] + (r - grp.start_idx[ri] - (1 << k)) % count[ri]
    here_k = np.where(k == 0, S[gcall[r]], first_round[r] + k - 1)           # R(row, k)
    there_k = np.where(k == 0, S[gcall[partner]], first_round[partner] + k - 1)
    nxt = first_round[r] + k                                                   # R(row, k + 1)
    mb = matched.member_bytes.astype(np.float64)
    out.add(ROUND, here_k, nxt, 0.0, src_rank=mem["rank"][r], dst_rank=mem["rank"][r], func=ifunc[ri])
    out.add(ROUND_MESSAGE, there_k, nxt, 0.0 if delta else 2 * params.o_ns, 1.0, mb[r], mem["rank"][partner],
            mem["rank"][r], ifunc[ri])
    last = first_round[rows] + d - 1
    c = np.maximum(end[gcall[rows]] - max_start[i], 0) if delta else 0.0
    out.add(HUB_OUT, last, E[gcall[rows]], c, 0.0, 0.0, dst_rank=mem["rank"][rows], func=ifunc[i])
    has_call_edge[gcall[rows]] = False
    return int(d.sum())
