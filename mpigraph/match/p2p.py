"""Point-to-point: each rank's operations, requests with their completions, sends with receives.

An *operation* is one message as one rank saw it: a send or a receive, with
the call that posted it (Send, Recv, Sendrecv, Isend, Irecv, or the Start of a
persistent request) and the call in which it completed (the same call for
blocking ones, the Wait/Test call for the others; -1 if it never completed).
See match.py for the matching rules.
"""

import numpy as np

from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.match.core import (CallIndex, group_key, joint_keys, kind_is, ordinal_in_groups, pair_by_ordinal,
                                 pair_occurrences, route)
from mpigraph.match import kernel
from mpigraph.util import arrays

SEND_SIDE, RECV_SIDE = 0, 1

# The columns of an operation table (one rank's, or several ranks' concatenated), as narrow as
# the log's fields (record.RECORD_DTYPE): a pipelined program has an operation per record.
OP_DTYPES = {"side": np.int8, "rank": np.int32, "comm": np.int64, "peer": np.int32, "tag": np.int32,
             "bytes": np.int64, "post_call": np.int64, "done_call": np.int64, "post_record": np.int64,
             "func": np.uint16, "site": np.uint16}


# What a record that moves data (SEND or RECV) is to the operation table, by its function and
# PART flag: one lookup per record (_ROLE, at 2 * function id + PART), not one per function kind.
NO_ROLE, BLOCKING, BLOCKING_IF_RECV, POST, COMPLETES = range(5)


def _role_table():
    table = np.full(2 * (mf.MAX_ID + 1), NO_ROLE, np.uint8)
    functions = np.arange(mf.MAX_ID + 1)
    for role, part, kinds in ((BLOCKING, 0, (mf.SEND, mf.RECV, mf.SENDRECV)), (POST, 0, (mf.ISEND, mf.IRECV)),
                              (BLOCKING_IF_RECV, 1, (mf.SENDRECV,)),     # a Sendrecv's receive half
                              (POST, 1, (mf.START,)), (COMPLETES, 1, (mf.COMPLETION,))):
        table[2 * functions[kind_is(functions, *kinds)] + part] = role
    return table


_ROLE = _role_table()


def request_pairs(batch, posts, done):
    """(post record, completion record or -1) of the nonblocking operations of a CallBatch
    (rows of the batch), and the completion records with no post (requests from before
    recording, or unknown).  On each rank the k-th post of a request id pairs with the k-th
    completion of that id (request ids are the rank's own: the key is (rank, request)).

    `posts`, `done`: the records that post a nonblocking operation (Isend, Irecv, a Start part)
    and the completion parts that move data, each in record order."""
    post_request, done_request = batch.records["request"][posts], batch.records["request"][done]
    posts, post_request = posts[post_request != 0], post_request[post_request != 0]
    done, done_request = done[done_request != 0], done_request[done_request != 0]
    post_key, done_key = joint_keys([[batch.positions(posts), post_request], [batch.positions(done), done_request]])
    ip, ic = pair_occurrences(post_key, done_key)     # posts and done are in record order
    completion = np.full(len(posts), -1, np.int64)
    completion[ip] = done[ic]
    orphans = np.ones(len(done), bool)
    orphans[ic] = False
    return posts, completion, done[orphans]


def operations(batch):
    """The operation table of a CallBatch (columns OP_DTYPES; rank after rank, each rank's
    blocking operations and then its nonblocking ones, each in record order) and its orphan
    completion records ({trace rank: records of its log}, the ranks that have any)."""
    flags, func = batch.flags, batch.func
    # Functions are looked up for the records that move data only (none in a run of collectives):
    # SEND or RECV and no ERROR, the highest of the three bits.
    moving = flags & (record.SEND | record.RECV | record.ERROR)
    moves = np.flatnonzero((moving != 0) & (moving < record.ERROR))
    if not len(moves):      # no copy of the batch's records (batch.records) for nothing
        return {name: np.zeros(0, dtype) for name, dtype in OP_DTYPES.items()}, {}
    records = batch.records
    moved_flags = flags[moves]
    role = _ROLE[(func[moves] << 1) | (moved_flags & record.PART)]
    blocking = moves[(role == BLOCKING) | ((role == BLOCKING_IF_RECV) & ((moved_flags & record.RECV) != 0))]
    posts, completion, orphans = request_pairs(batch, moves[role == POST], moves[role == COMPLETES])
    post = np.concatenate([blocking, posts])
    done = np.concatenate([blocking, completion])
    if not batch.one_rank and len(posts) and len(blocking):
        # Rank after rank: each rank's blocking rows, then its posts (both in record order already).
        order = np.argsort(batch.position[post], kind="stable")
        post, done = post[order], done[order]
    has_done = done >= 0
    # A receive's real source and tag are on the record that completed it (its status).
    post_flags = flags[post]
    described = np.where(((post_flags & record.RECV) != 0) & has_done, done, post)
    fields = _fields(records, post, described)
    # MPI_PROC_NULL moves no message; PEER_NONE cannot occur on a send or receive.
    keep = (fields["peer"] >= 0) | (fields["peer"] == record.PEER_ANY)
    if not keep.all():            # no copy of each column where no operation is dropped
        post, done, has_done, post_flags = post[keep], done[keep], has_done[keep], post_flags[keep]
        fields = {name: column[keep] for name, column in fields.items()}
    post_call = batch.call_of(post)
    if has_done.all():
        done_call = batch.call_of(done)
    else:
        done_call = np.where(has_done, batch.record_call[np.maximum(done, 0)], -1)
    ops = {
        "side": np.where((post_flags & record.SEND) != 0, np.int8(SEND_SIDE), np.int8(RECV_SIDE)),
        "rank": batch.rank_of(post),
        "post_call": post_call,
        "done_call": done_call,
        "post_record": batch.local_record(post),
        **fields,
    }
    return {name: ops[name].astype(dtype, copy=False) for name, dtype in OP_DTYPES.items()}, batch.per_rank(orphans)


def _fields(records, post, described):
    """The operations' fields read from their records: comm, func (reports name the posting call
    without the log) and site (callsite_sizes) of the post record, peer, tag and bytes of the
    `described` one.  Each operation's two records read once (``kernel.op_fields``), else a
    numpy gather a field (a 64-byte record's cache line read again for each)."""
    found = kernel.op_fields(records, post, described)
    if found is not None:
        return found
    return {"comm": records["comm"][post], "func": records["func"][post], "site": records["site"][post],
            "peer": records["peer"][described], "tag": records["tag"][described], "bytes": records["bytes"][described]}


def message_keys(ops):
    """(src, dst, ordinal, stream) of each operation: its place in its (comm, src, dst, tag)
    stream, and that stream as a code 0..streams-1 (in key order, a send's and its receive's
    alike).

    Unresolved receives (wildcard source or tag never completed) get ordinal -1.
    """
    send = ops["side"] == SEND_SIDE
    src = np.where(send, ops["rank"], ops["peer"])
    dst = np.where(send, ops["peer"], ops["rank"])
    stream, n_streams = _codes(group_key([ops["comm"], src, dst, ops["tag"]]))
    # The sends and the receives of a stream are numbered apart.
    side = stream * 2
    side += ops["side"]
    n = ordinal_in_groups(side, ops["post_record"], 2 * n_streams)
    resolved = (ops["peer"] >= 0) & (ops["tag"] >= 0)
    return src, dst, np.where(resolved, n, -1), stream


def _codes(*keys):
    """(each of `keys` (int64 arrays of keys, comparable across them) as codes 0..n-1 in key order,
    n): the keys less their least where they span a few times their rows (a pipeline's packed
    streams), else their dense ranks among the distinct keys."""
    n_rows = sum(len(k) for k in keys)
    present = [k for k in keys if len(k)]
    if not present:
        return (*(np.zeros(0, np.int64) for _ in keys), 0)
    low = min(int(k.min()) for k in present)
    span = max(int(k.max()) for k in present) - low + 1
    if span <= max(4 * n_rows, 1 << 16):
        return (*(k - low for k in keys), span)
    distinct, codes = arrays.unique_codes(np.concatenate(keys))
    return (*np.split(codes, np.cumsum([len(k) for k in keys])[:-1]), len(distinct))


MESSAGE_TIME_COLUMNS = ("post_start", "done_start", "done_end")


def op_times(index, start_ns, end_ns, rank, post_call, done_call):
    """{post_start, done_start, done_end} (int64 ns; done_* = -1 without completion) of the
    operations of owned ranks `rank` posted in calls `post_call` and completed in `done_call`
    (-1: never); `start_ns`, `end_ns`: index.column of the calls' times (index a CallIndex)."""
    if index.first_call_table is not None and len(rank):      # in one pass where the kernel is at hand
        found = kernel.op_times(rank, post_call, done_call, int(index.ranks[0]), index.first_call_table, start_ns,
                                end_ns)
        if found is not None:
            return dict(zip(MESSAGE_TIME_COLUMNS, found))
    has = done_call >= 0
    every = bool(has.all())
    done = index.of(rank, done_call if every else np.maximum(done_call, 0))
    times = {"post_start": start_ns[index.of(rank, post_call)], "done_start": start_ns[done],
             "done_end": end_ns[done]}
    if not every:
        for name in ("done_start", "done_end"):
            times[name][~has] = -1
    return times


# What a send's row takes to the receiver's owner: the pairing's keys (src and dst are the send's
# rank and peer), what a message row needs of it, and what unmatched.csv shows of an unmatched one.
SENT_COLUMNS = tuple(name for name in OP_DTYPES if name != "side") + ("ordinal",)


def _unmatched(ops, sends, rows, i_s, recv_rows, i_r):
    """The operations without partner (OP_DTYPES): the routed sends (rows `rows` of `sends`, None:
    all of them) not in i_s, then this rank's receives not in i_r."""
    unmatched_s = np.ones(len(sends["rank"]) if rows is None else len(rows), bool)
    unmatched_s[i_s] = False
    unmatched_r = np.ones(len(recv_rows), bool)
    unmatched_r[i_r] = False
    lone = np.flatnonzero(unmatched_s)
    lone, lone_recvs = lone if rows is None else rows[lone], recv_rows[unmatched_r]
    lone_sends = {name: np.full(len(lone), SEND_SIDE, dtype) if name == "side" else sends[name][lone]
                  for name, dtype in OP_DTYPES.items()}
    return {name: np.concatenate([lone_sends[name], ops[name][lone_recvs]]) for name in OP_DTYPES}


class MessagePairs:
    """Sends paired with receives on the owners of the receiving ranks.

    The pairing uses no times, so it is done once (on construction); each round
    of the receive-before-send repair then only moves the sends' new times to
    the receivers' owners again (``messages``).
    """

    def __init__(self, comm, ownership, ops, codec=None):
        """`ops`: the owned ranks' operation table (OP_DTYPES).  Collective over comm."""
        src, dst, ordinal, stream = message_keys(ops)
        send = ops["side"] == SEND_SIDE
        self.send_rows, self.recv_rows = np.flatnonzero(send), np.flatnonzero(~send)
        # A send's src and dst are its rank and peer, and its side is known: they do not travel.
        self.local = comm.Get_size() == 1
        self.send_owner = None if self.local else ownership.owner_of(ops["peer"][self.send_rows])
        if self.local:
            # The sends are this rank's: rows of ops, their streams numbered with the receives'.
            sends, rows, send_ordinal = ops, self.send_rows, ordinal[self.send_rows]
            send_stream, recv_stream = stream[self.send_rows], stream[self.recv_rows]
            n_streams = int(stream.max()) + 1 if len(stream) else 0
        else:
            sends = route(comm, {name: (ordinal if name == "ordinal" else ops[name])[self.send_rows]
                                 for name in SENT_COLUMNS}, self.send_owner, codec)
            rows, send_ordinal = None, sends["ordinal"]
            send_stream, recv_stream = joint_keys([[sends[k] for k in ("comm", "rank", "peer", "tag")],
                                                   [ops["comm"][self.recv_rows], src[self.recv_rows],
                                                    dst[self.recv_rows], ops["tag"][self.recv_rows]]])
            send_stream, recv_stream, n_streams = _codes(send_stream, recv_stream)
        del src, dst, stream
        self.i_s, self.i_r = pair_by_ordinal(send_stream, send_ordinal, recv_stream, ordinal[self.recv_rows],
                                             n_streams)
        del send_stream, recv_stream, ordinal, send_ordinal
        send_index = self.i_s if rows is None else rows[self.i_s]     # the matched sends' rows of `sends`
        recv_index = self.recv_rows[self.i_r]          # the matched receives' rows of ops
        self.untimed = {"comm": sends["comm"][send_index], "tag": sends["tag"][send_index],
                        "bytes": ops["bytes"][recv_index]}
        for name in ("rank", "post_call", "done_call"):
            self.untimed["s_" + name] = sends[name][send_index]
            self.untimed["r_" + name] = ops[name][recv_index]
        # The calls of the owned sends, whose times travel to the receivers' owners each round
        # (on one analysis rank the matched sends' own columns above: no route, no second gather).
        self.send_calls = None if self.local else {name: ops[name][self.send_rows]
                                                   for name in ("rank", "post_call", "done_call")}
        self.unmatched = _unmatched(ops, sends, rows, self.i_s, self.recv_rows, self.i_r)

    def messages(self, comm, calls_by_rank, codec=None):
        """One row per message whose receiver this analysis rank owns: the columns of both sides
        prefixed s_ and r_ (and comm, tag, bytes), with the times of the calls (op_times).

        Collective over comm: the sends' times travel to the receivers' owners, in the same
        order as the sends did, so the pairing found on construction still holds.  Only the
        times of the matched operations are looked up."""
        calls = _CallTimes(calls_by_rank)
        messages = dict(self.untimed)
        if self.local:          # every send is this rank's, and matched ones are untimed's
            sent, rows = calls.of_ops(*(self.untimed["s_" + name] for name in _CALLS)), None
        else:
            sent = route(comm, calls.of_ops(*(self.send_calls[name] for name in _CALLS)), self.send_owner, codec)
            rows = self.i_s
        received = calls.of_ops(*(self.untimed["r_" + name] for name in _CALLS))
        for name in MESSAGE_TIME_COLUMNS:
            messages["s_" + name] = sent[name] if rows is None else sent[name][rows]
            messages["r_" + name] = received[name]
        return {name: messages[name] for name in MESSAGE_COLUMNS}


_CALLS = ("rank", "post_call", "done_call")     # an operation's columns that op_times reads


class _CallTimes:
    """op_times of some operations of the owned ranks, the calls' times put together on first
    use: a run of collectives has no operation to look up."""

    def __init__(self, calls_by_rank):
        self.calls_by_rank, self.columns = calls_by_rank, None

    def of_ops(self, rank, post_call, done_call):
        if not len(rank):
            return {name: np.zeros(0, np.int64) for name in MESSAGE_TIME_COLUMNS}
        if self.columns is None:
            index = CallIndex(self.calls_by_rank)
            self.columns = (index, index.column(self.calls_by_rank, "start_ns"),
                            index.column(self.calls_by_rank, "end_ns"))
        return op_times(*self.columns, rank, post_call, done_call)


MESSAGE_COLUMNS = ("comm", "tag", "bytes") + tuple(
    prefix + name for prefix in ("s_", "r_") for name in ("rank", "post_call", "done_call") + MESSAGE_TIME_COLUMNS)


# What the senders' owners need of a matched message (waits.late_receiver, the late-receiver
# edges) that they do not have: the receive's side.  The send's own times are theirs already.
FROM_RECEIVER_COLUMNS = ("s_rank", "s_done_call", "r_rank", "r_post_call", "r_post_start")


def to_senders(comm, ownership, messages, calls_by_rank, codec=None):
    """The matched messages again, on the owners of their sending ranks: FROM_RECEIVER_COLUMNS,
    and s_done_start, s_done_end (-1 without completion) from the owned ranks' calls.  On one
    analysis rank these are the messages' own columns (the same calls' times): no lookup."""
    if comm.Get_size() == 1:
        return {name: messages[name] for name in FROM_RECEIVER_COLUMNS + ("s_done_start", "s_done_end")}
    back = route(comm, {name: messages[name] for name in FROM_RECEIVER_COLUMNS},
                 ownership.owner_of(messages["s_rank"]), codec)
    if not len(back["s_rank"]):
        return dict(back, s_done_start=np.zeros(0, np.int64), s_done_end=np.zeros(0, np.int64))
    index = CallIndex(calls_by_rank)
    has = back["s_done_call"] >= 0
    done = index.of(back["s_rank"], np.maximum(back["s_done_call"], 0))
    for name, times in (("s_done_start", "start_ns"), ("s_done_end", "end_ns")):
        back[name] = np.where(has, index.column(calls_by_rank, times)[done], -1)
    return back
