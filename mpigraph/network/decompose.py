"""Where MPI time goes: synchronisation, the network (estimated) and the MPI stack (seed 003).

    from mpigraph.network.decompose import decompose
    d = decompose("RUN_DIR", params="params.csv")      # params=None: the built-in defaults
    d.calls, d.table, d.callsites, d.compute_only_ns, d.text

Per call (duration D = end - start, the call's MPI time):
    sync     the call's wait: wait_before + wait_after of calls.parquet, i.e. seed 003's
             equations 1-4 (metrics/waits.py): late sender = max(0, TSend - TPostRecv) for a
             Recv (eq 2) or max(0, TSend - TWaitRecv) for the Wait of an Irecv (eq 4, deferred);
             late receiver = max(0, TPostRecv - TSend or TWaitSend) for a send call that was
             still running when the receive was posted (eq 1/3: rendezvous; an eager send that
             returned before is not waiting).  Collectives: the member's wait by pattern.
    R        D - sync: network + stack, exact up to the clock error.
    network  an ESTIMATE: network_est = alpha_p + N beta_p of the message's protocol p and host
             pair (params.csv from `mpigraph calibrate`; an eager message from the params'
             medium threshold on takes the medium line, see line_names), charged where a side
             waited for data:
               receiver: max(0, TSend + network_est - max(TSend, start of the completing call));
               rendezvous sender: network_est (its ACK needs the data across); eager sender: 0;
             summed over the messages a call completed, at most R.  Collectives: depth d alpha +
             bytes beta (d = ceil(log2 P), a recursive-doubling or binomial tree), at most R.
    stack    R - network: the MPI library's copies, pinning and progress, and the model's error.
So sync + network + stack = D for every call and each part is >= 0.

The protocol of each message is read from the trace where the trace shows it: a send whose
receive was posted after it started is eager if its call returned before that post, rendezvous
if it was still blocked then.  The threshold S is put between the largest eager and the smallest
rendezvous size so seen (the split that contradicts fewest such messages); the other messages
take the side of S their size falls on (the params' S when the trace shows no rendezvous).

The compute-only run time T_co (seed 003's third model: zero latency, infinite bandwidth, zero
stack) is the longest path of the run's graph with every call and message weight 0 (the what-if
forward pass, see compute_only_ns).  T - T_co bounds what any network or MPI improvement could save.
"""

import dataclasses
import os
from typing import Optional, Union

import numpy as np
import pyarrow as pa

from mpigraph.network import NetworkError, decompose_report
from mpigraph.network.params import NetworkParams, read_params

EAGER, RENDEZVOUS = 1, 2
PROTOCOL_NAMES = np.array(["", "eager", "rendezvous", "mixed", "collective"], dtype=object)
COLLECTIVE_CODE = 4
MARGIN_NS = 20_000


@dataclasses.dataclass
class Messages:
    """The run's matched point-to-point messages (one row each) and its collective members."""

    world_size: int
    n_calls: np.ndarray          # per rank
    columns: dict                # match.p2p.MESSAGE_COLUMNS, on rank 0's clock after the repair
    members: dict                # match.collectives.MEMBER_COLUMNS, by instance
    instance: np.ndarray         # per member: its instance (0 .. n-1)
    matched: object              # whatif.build.Matched: what the compute-only pass builds its graph of


@dataclasses.dataclass
class Decomposition:
    calls: "object"              # pyarrow.Table: decomposition_calls
    table: "object"              # pyarrow.Table: per rank x function
    ranks: dict                  # per rank: program, compute, mpi, sync, network_est, stack (ns)
    run_time_ns: int
    compute_only_ns: int
    threshold: tuple             # (S, largest eager size seen, smallest rendezvous size seen) or Nones
    params_source: str
    text: str
    files: list = dataclasses.field(default_factory=list)
    callsites: "object" = None   # pyarrow.Table: per call site x function (by_callsite_function)


# ---- the trace's messages -------------------------------------------------------------------

def matched_messages(run_dir: str, clock: str = "pingpong") -> Messages:
    """The pipeline's trace, clock and match stages (with the receive-before-send repair) on one
    analysis rank, as `mpigraph whatif` runs them: the same times calls.parquet has."""
    from mpigraph.whatif.build import matched_run

    matched = matched_run(run_dir, clock)
    n_calls = np.array([matched.calls[r].n_calls for r in range(matched.world_size)], np.int64)
    groups = matched.groups
    return Messages(matched.world_size, n_calls, matched.messages, groups.members, np.asarray(groups.group, np.int64),
                    matched)


# ---- protocol --------------------------------------------------------------------------------

def protocol_evidence(m: dict, margin_ns) -> np.ndarray:
    """Per message: EAGER / RENDEZVOUS where the trace shows it, else 0.

    Only a receive posted after the send started tells: the send's completing call returned
    before that post (eager), or it had started at least `margin_ns` before the post and was
    still running then (rendezvous: it needed the receive).  The margin keeps an eager send whose
    receive was posted while it was still copying (a few us) from counting as blocked."""
    told = (m["s_done_call"] >= 0) & (m["r_post_start"] > m["s_post_start"])
    eager = told & (m["s_done_end"] < m["r_post_start"])
    rendezvous = told & ~eager & (m["r_post_start"] - m["s_done_start"] > margin_ns)
    return np.where(eager, EAGER, np.where(rendezvous, RENDEZVOUS, 0)).astype(np.int8)


def infer_threshold(nbytes: np.ndarray, evidence: np.ndarray):
    """(S, largest eager size below S, smallest rendezvous size from S) from the messages the
    trace shows; S None when no rendezvous was seen.  S is the split of the sizes that
    contradicts fewest of them (eager at or above S, rendezvous below), the largest such
    split on a tie (a blocked small send is rarer than an eager one)."""
    rdv = nbytes[evidence == RENDEZVOUS]
    eager = nbytes[evidence == EAGER]
    if not len(rdv):
        return None, (int(eager.max()) if len(eager) else None), None
    candidates = np.unique(rdv)
    wrong = (len(eager) - np.searchsorted(np.sort(eager), candidates, side="left")
             + np.searchsorted(np.sort(rdv), candidates, side="left"))
    S = int(candidates[np.flatnonzero(wrong == wrong.min())[-1]])
    below = eager[eager < S]
    return S, (int(below.max()) if len(below) else None), S


def message_protocols(m: dict, params: NetworkParams, synchronous=None):
    """(protocol code per message, (S, eager bound, rendezvous bound)): the evidence where
    there is some, else the side of the inferred S (the params' S when none was inferred).

    `synchronous`: per message, sent by MPI_Ssend / MPI_Issend (or their persistent forms):
    those wait for the receive at every size, so they say nothing about S; they are marked
    rendezvous (the sender completes after the receiver has the data, like a rendezvous)."""
    nbytes = np.asarray(m["bytes"], np.int64)
    evidence = protocol_evidence(m, evidence_margin_ns(params, nbytes))
    if synchronous is not None:
        evidence[synchronous] = 0
    S, lo, hi = infer_threshold(nbytes, evidence)
    if S is None:
        S = params.threshold()
        above = nbytes >= S if S is not None else np.zeros(len(nbytes), bool)
        if lo is not None:                  # the trace saw eager up to lo: those sizes are eager
            above &= nbytes > lo
    else:
        above = nbytes >= S
    protocol = np.where(evidence > 0, evidence, np.where(above, RENDEZVOUS, EAGER)).astype(np.int8)
    if synchronous is not None:
        protocol[synchronous] = RENDEZVOUS
    return protocol, (S, lo, hi)


SYNCHRONOUS_SENDS = ("MPI_Ssend", "MPI_Issend", "MPI_Ssend_init")


def evidence_margin_ns(params: NetworkParams, nbytes) -> np.ndarray:
    """How long before the receive's post a send must have started to count as blocked by it:
    4 x its eager one-way time, at least MARGIN_NS (clock error and a busy host's scheduling)."""
    row = _row(params, "eager", params.default_host_pair())
    return np.maximum(MARGIN_NS, 4e9 * (row.latency_s + row.per_byte_s * np.asarray(nbytes, float)))


def _row(params: NetworkParams, protocol: str, host_pair: str):
    """The params row of protocol and host pair; the measured host pair and eager where absent."""
    pairs = params.host_pairs()
    pair = host_pair if host_pair in pairs else params.default_host_pair()
    try:
        return params.get(protocol, pair)
    except KeyError:
        return params.get("eager", pair)


def _line(params: NetworkParams, protocol: str, host_pair: str, nbytes):
    """(alpha, beta) per size on the line of _row's row: past a bend of that protocol (a hinge
    row, params.py) the bend's piece."""
    row = _row(params, protocol, host_pair)
    return params.line(row.protocol, nbytes, row.host_pair)


def line_names(params: NetworkParams, nbytes, protocol, host_pair: str) -> np.ndarray:
    """The params line of each message: rendezvous for the rendezvous code; for the eager code
    medium from the params' medium threshold M on, else eager.  Seed 003's medium protocol
    (eager RDMA) is an eager protocol: the sender completes at once and only the receiver can
    wait, so the trace cannot tell it from mailbox eager and it keeps the eager code (and its
    sync); only its network time, its own alpha + beta N, differs."""
    M = _row(params, "eager", host_pair).medium_bytes
    medium = (np.asarray(nbytes) >= M) if M is not None else np.zeros(len(nbytes), bool)
    return np.where(protocol == RENDEZVOUS, "rendezvous", np.where(medium, "medium", "eager"))


def network_ns(params: NetworkParams, nbytes, protocol, same_host) -> np.ndarray:
    """alpha_p + beta_p N (ns) per message of its line (line_names) and host pair."""
    nbytes = np.asarray(nbytes, float)
    out = np.zeros(len(nbytes))
    for pair, where in (("same-host", same_host), ("other-host", ~same_host)):
        names = line_names(params, nbytes, protocol, pair)
        for name in ("eager", "medium", "rendezvous"):
            pick = (names == name) & where & (protocol > 0)
            alpha, beta = _line(params, name, pair, nbytes[pick])
            out[pick] = (alpha + beta * nbytes[pick]) * 1e9
    return out


# ---- per call --------------------------------------------------------------------------------

def _global(offsets, rank, call):
    return offsets[np.asarray(rank, np.int64)] + np.asarray(call, np.int64)


def p2p_network(m: dict, protocol, est, offsets, n) -> np.ndarray:
    """Per call (global numbering): the network time charged to it, before the cap at R.

    receiver: the part of the transfer [TSend, TSend + est] after its completing call started;
    rendezvous sender: est (the completion waits for the data to cross)."""
    out = np.zeros(n)
    recv = m["r_done_call"] >= 0
    t_send = m["s_post_start"][recv].astype(float)
    charge = np.maximum(0.0, t_send + est[recv] - np.maximum(t_send, m["r_done_start"][recv]))
    np.add.at(out, _global(offsets, m["r_rank"][recv], m["r_done_call"][recv]), charge)
    rdv = (m["s_done_call"] >= 0) & (protocol == RENDEZVOUS)
    np.add.at(out, _global(offsets, m["s_rank"][rdv], m["s_done_call"][rdv]), est[rdv])
    return out


def call_protocols(m: dict, protocol, offsets, n) -> np.ndarray:
    """Per call: the OR of the protocol codes of the messages it posted or completed (3: mixed)."""
    code = np.zeros(n, np.int8)
    for side in ("s", "r"):
        for what in ("post_call", "done_call"):
            ok = m[side + "_" + what] >= 0
            np.bitwise_or.at(code, _global(offsets, m[side + "_rank"][ok], m[side + "_" + what][ok]), protocol[ok])
    return code


def collective_network(members: dict, instance, params: NetworkParams, member_bytes, one_host, offsets, n):
    """Per call: d alpha + bytes beta of the collective it completed, d = ceil(log2 P) (an
    estimate: the algorithm's own messages are not in the trace)."""
    out = np.zeros(n)
    done = members["done_call"] >= 0
    if not done.any():
        return out, np.zeros(n, bool)
    size = np.bincount(instance, minlength=instance.max() + 1)[instance]
    depth = np.ceil(np.log2(np.maximum(size, 1)))
    pair = "same-host" if one_host else "other-host"
    S = params.threshold(_row(params, "eager", pair).host_pair)
    big = np.asarray(member_bytes) >= S if S is not None else np.zeros(len(size), bool)
    names = line_names(params, member_bytes, np.where(big, RENDEZVOUS, EAGER), pair)
    est = np.zeros(len(size))
    for name in ("eager", "medium", "rendezvous"):
        row = _row(params, name, pair)
        pick = names == name
        # d alpha + the bytes' time past alpha: past a bend that is the bend's piece (its own
        # intercept is no latency), before it d alpha + bytes beta as always.
        alpha, beta = _line(params, name, pair, member_bytes[pick])
        est[pick] = ((depth[pick] - 1) * row.latency_s + alpha + member_bytes[pick] * beta) * 1e9
    at = _global(offsets, members["rank"][done], members["done_call"][done])
    np.add.at(out, at, est[done])
    is_coll = np.zeros(n, bool)
    is_coll[_global(offsets, members["rank"], members["call"])] = True
    return out, is_coll


# ---- compute only ----------------------------------------------------------------------------

def compute_only_ns(matched) -> int:
    """The longest path of the run's graph with every call and message weight 0: the what-if
    forward pass (mpigraph.whatif, its LogGPS mode) at o = L = G = 0, so that only the compute
    edges (the measured gaps between a rank's calls) weigh.  Its edges: every message (send
    post -> the call completing the receive), the late-receiver edges of sends that waited for
    their receive, collectives through a hub by pattern; every rank starts where its MPI_Init
    ended.  Independent pieces between global synchronisation points are solved side by side."""
    from mpigraph.whatif.build import NetParams, build
    from mpigraph.whatif.cuts import split_union
    from mpigraph.whatif.envelope import Model

    graph = build(matched, "loggps", NetParams(0.0, 0.0, 0.0, float("inf"), "compute only", True))
    if len(graph.cuts):
        edges, _, edge_piece = split_union(graph.edges, graph.cuts, graph.piece)
        model = Model(edges, edge_piece)
    else:
        model = Model(graph.edges)
    ref, _ = model.path(0.0, fixed=0.0)
    return int(round(float(ref.T[0])))


# ---- the whole ---------------------------------------------------------------------------------

def load_params(params: Union[None, str, NetworkParams]):
    """(NetworkParams, where they come from)."""
    if params is None:
        from mpigraph.network.defaults import SOURCE, default_params

        return default_params(), SOURCE
    if isinstance(params, NetworkParams):
        return params, "parameters given by the caller"
    if not os.path.isfile(params):
        raise NetworkError("--params %s: no such file (make it with mpiexec -n 2 mpigraph calibrate --out %s)"
                           % (params, params))
    read = read_params(params)
    M = read.medium_threshold()
    medium = "; eager messages from M = %d B on take the medium line" % M if M is not None else ""
    pieces = ["%s from %d B" % (r.protocol, r.from_bytes) for r in read.rows
              if r.from_bytes is not None and r.host_pair == read.default_host_pair()]
    bent = "; where a protocol bends (no jump), its pieces taken: %s" % ", ".join(pieces) if pieces else ""
    return read, "alpha, beta, S from %s (mpigraph calibrate)%s%s" % (params, medium, bent)


def decompose(run_dir: str, params: Union[None, str, NetworkParams] = None, out: Optional[str] = None,
              summary: bool = True) -> Decomposition:
    """Decompose the MPI time of the analysed run in run_dir (see the module doc).

    params: a params.csv path, a NetworkParams, or None (the built-in defaults, see
    network/defaults.py).  out: where to write decomposition_calls.parquet, decomposition.csv,
    decomposition.parquet, decomposition_callsites.csv/.parquet and decomposition.svg (None: run_dir); with summary, the paragraph
    also goes at the end of out's summary.txt when there is one."""
    import mpigraph
    from mpigraph.report import outdir

    if out is not None:     # never over a user's files: a new or empty directory, a report, or decompose's own
        outdir.check_report_dir(out, also=decompose_report.FILE_NAMES, what="the decomposition")
    run = mpigraph.load(run_dir)
    try:
        calls = run.table("calls")
        ranks = run.table("ranks")
        facts = run.facts
    except (KeyError, OSError) as error:
        raise NetworkError("%s: not analysed (%s): run mpigraph analyze %s first" % (run_dir, error, run_dir))
    net, source = load_params(params)
    matched = matched_messages(run_dir, facts.get("clock_method", "pingpong"))
    result = _decompose(calls, ranks, facts, matched, net, source)
    result.callsites = by_callsite_function(result.calls, _site_names(run))
    result.files = decompose_report.write(result, out or run_dir, summary)
    return result


def _col(table, name):
    return table.column(name).to_numpy()


def _is_in(strings, names) -> np.ndarray:
    """Per row of a string column: is it one of `names` (in Arrow: no Python string per row)."""
    import pyarrow.compute as pc

    return pc.is_in(strings, value_set=pa.array(list(names), pa.string())).to_numpy(zero_copy_only=False)


def _call_order(calls, matched: Messages):
    """(offsets of each rank's calls in the global numbering, order of calls.parquet's rows in it)."""
    offsets = np.concatenate([[0], np.cumsum(matched.n_calls)])
    at = _global(offsets, _col(calls, "rank"), _col(calls, "call"))
    if len(at) != offsets[-1] or not np.array_equal(np.sort(at), np.arange(offsets[-1])):
        raise NetworkError("calls.parquet does not list the calls of raw/ one by one: re-analyse the run "
                           "(mpigraph analyze) with this version of mpigraph")
    return offsets, np.argsort(at)


def _network(is_synchronous, nbytes, ranks, matched: Messages, params: NetworkParams, offsets):
    """(network estimate charged to each call before the cap at R, protocol code per call,
    the threshold bracket): point-to-point messages by protocol and host pair, collectives."""
    m, n = matched.columns, int(offsets[-1])
    host_of = np.empty(matched.world_size, dtype=object)
    host_of[_col(ranks, "rank")] = np.asarray(_col(ranks, "host").astype(str), dtype=object)
    synchronous = is_synchronous[_global(offsets, m["s_rank"], m["s_post_call"])]
    protocol, threshold = message_protocols(m, params, synchronous)
    est = network_ns(params, m["bytes"], protocol, host_of[m["s_rank"]] == host_of[m["r_rank"]])
    member_bytes = nbytes[_global(offsets, matched.members["rank"], matched.members["call"])].astype(float)
    coll, is_coll = collective_network(matched.members, matched.instance, params, member_bytes,
                                       len(set(host_of)) <= 1, offsets, n)
    code = call_protocols(m, protocol, offsets, n)
    code[is_coll] = COLLECTIVE_CODE
    return p2p_network(m, protocol, est, offsets, n) + coll, code, threshold


def _decompose(calls, ranks, facts, matched: Messages, params: NetworkParams, source: str) -> Decomposition:
    """The decomposition of the run's calls (calls.parquet and ranks.parquet rows, run.json's facts)."""
    offsets, order = _call_order(calls, matched)

    def column(name):
        return _col(calls, name)[order]

    start, end = column("start_ns"), column("end_ns")
    duration = end - start
    sync = column("wait_before_ns") + column("wait_after_ns")
    rest = duration - sync
    is_synchronous = _is_in(calls.column("function"), SYNCHRONOUS_SENDS)[order]
    estimate, code, threshold = _network(is_synchronous, column("bytes"), ranks, matched, params, offsets)
    network = np.minimum(np.round(estimate).astype(np.int64), rest)
    call_table = pa.table({
        "rank": np.repeat(np.arange(matched.world_size), matched.n_calls),
        "call": np.arange(offsets[-1]) - np.repeat(offsets[:-1], matched.n_calls),
        "function": column("function"),
        # A report of a version without call sites has no callsite column: every call at site 0.
        "callsite": column("callsite") if "callsite" in calls.column_names else np.zeros(len(start), np.int64),
        "bytes": column("bytes"), "start_ns": start, "end_ns": end,
        "mpi_ns": duration, "sync_ns": sync, "network_est_ns": network, "stack_ns": rest - network,
        "protocol": PROTOCOL_NAMES[code].astype(str), "wait_state": column("wait_state"),
        "wait_state_time_ns": column("wait_state_time_ns"), "other_state_time_ns": column("other_state_time_ns")})
    per_rank = _per_rank(call_table, ranks, matched.world_size)
    run_time = int(facts.get("run_time_ns", 0))
    t_co = compute_only_ns(matched.matched)
    text = decompose_report.paragraph(per_rank, run_time, t_co, threshold, source)
    return Decomposition(call_table, by_rank_function(call_table), per_rank, run_time, t_co, threshold, source, text)


def user_calls(call_table) -> np.ndarray:
    """Calls but MPI_Init* and MPI_Finalize: what ranks.csv's MPI time sums."""
    from mpigraph.trace import functions as mf

    return ~_is_in(call_table.column("function"), [f.name for f in mf.FUNCTIONS if f.kind in (mf.INIT, mf.FINALIZE)])


def by_rank_function(call_table):
    """Per rank x function: calls, MPI, sync (late sender, late receiver, collective), network
    estimate and stack (ns); MPI_Init* and MPI_Finalize left out, like ranks.csv's MPI time."""
    return _by_key_function(call_table, "rank")


def by_callsite_function(call_table, names=None):
    """Per call site x function over all ranks: by_rank_function's twin (the same sums, keyed by
    calls.parquet's callsite instead of the rank: summed over the call sites, a function's rows are
    its decomposition.csv rows summed over the ranks).  `names`: {(callsite, function): its name in
    callsites.csv} ("" where unknown)."""
    table = _by_key_function(call_table, "callsite")
    names = names or {}
    named = [names.get(k, "") for k in zip(table.column("callsite").to_pylist(), table.column("function").to_pylist())]
    return table.add_column(1, "name", pa.array(named, pa.string()))


def _site_names(run):
    """{(callsite, function): name} of the run's callsites table ({} without one)."""
    if "callsites" not in run.tables:
        return {}
    sites = run.table("callsites").select(["callsite", "function", "name"]).to_pydict()
    return {(i, f): n for i, f, n in zip(sites["callsite"], sites["function"], sites["name"])}


def _by_key_function(call_table, key_name):
    """The sums of by_rank_function per (key_name column, function): rows by key, then function name."""
    call_table = call_table.filter(user_calls(call_table))
    rank = call_table.column(key_name).to_numpy().astype(np.int64)
    encoded = call_table.column("function").combine_chunks().dictionary_encode()
    names = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
    fid = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    by_name = np.argsort(names.astype(str))                  # rows by rank, then function name
    rename = np.empty(len(names), np.int64)
    rename[by_name] = np.arange(len(names))
    names = names[by_name]
    keys, group = np.unique(rank * len(names) + rename[fid], return_inverse=True)
    is_ls = _is_in(call_table.column("wait_state"), ["late_sender"])
    is_lr = _is_in(call_table.column("wait_state"), ["late_receiver"])
    own = call_table.column("wait_state_time_ns").to_numpy()
    other = call_table.column("other_state_time_ns").to_numpy()
    late_sender = np.where(is_ls, own, 0) + np.where(is_lr, other, 0)
    late_receiver = np.where(is_lr, own, 0) + np.where(is_ls, other, 0)
    sync = call_table.column("sync_ns").to_numpy()
    p2p = np.minimum(late_sender + late_receiver, sync)

    def total(values):
        return np.bincount(group, weights=values, minlength=len(keys)).round().astype(np.int64)

    return pa.table({
        key_name: keys // len(names), "function": names[keys % len(names)].astype(str),
        "calls": np.bincount(group, minlength=len(keys)).astype(np.int64),
        "mpi_ns": total(call_table.column("mpi_ns").to_numpy()), "sync_ns": total(sync),
        "late_sender_ns": total(np.minimum(late_sender, sync)), "late_receiver_ns": total(p2p - np.minimum(
            late_sender, sync)), "collective_sync_ns": total(sync - p2p),
        "network_est_ns": total(call_table.column("network_est_ns").to_numpy()),
        "stack_ns": total(call_table.column("stack_ns").to_numpy())})


def _per_rank(call_table, ranks, world_size):
    """Per rank sums over its calls but MPI_Init* and MPI_Finalize (as ranks.csv's MPI time)."""
    user = user_calls(call_table)
    rank = call_table.column("rank").to_numpy()[user]
    out = {"rank": np.arange(world_size)}
    for name in ("mpi_ns", "sync_ns", "network_est_ns", "stack_ns"):
        out[name] = np.bincount(rank, weights=call_table.column(name).to_numpy()[user],
                                minlength=world_size).round().astype(np.int64)
    program = np.zeros(world_size, np.int64)
    program[_col(ranks, "rank")] = _col(ranks, "program_time_ns")
    out["program_ns"] = program
    out["compute_ns"] = np.maximum(program - out["mpi_ns"], 0)
    return out

