"""The match stage's passes in C: what numpy does in a sort or in several passes, in one pass.

``ordinals`` numbers each row within its group (a message's place in its stream, an epoch's
among its window's): a count per group, read and incremented row by row, where numpy sorts the
rows by group and numbers the sorted runs (a sort, a gather and a scatter of every row).

``member_waits`` is metrics.waits' member_waits and _per_call for blocking collective members
(each its own call's): one pass over the members, where numpy makes a dozen passes and three
scatters into the calls (a bulk-synchronous run has a member per call).  ``largest_waits`` is
metrics.message_kinds' np.maximum.at of the messages' waits into their calls, with the kinds
that waited, in one pass; ``op_times`` the times of operations' posting and completing calls.
``pair_by_slot`` is core.pair_by_ordinal's counting in three passes, where numpy makes fifteen.
``op_fields`` reads the operation table's fields from the log records (p2p.operations): each
operation's two records once, where numpy's gathers read a record's cache line once per field.

Each function returns None where the kernel cannot be used (no C compiler, or
MPIGRAPH_MATCH_KERNEL=off, a test setting); the callers then do the same with numpy.
"""

import ctypes

import numpy as np

from mpigraph.trace import record
from mpigraph.util import ckernel

SOURCE = r"""
#include <stdint.h>
#include <string.h>

/* out[i] = the number of rows j < i with code[j] == code[i] (codes 0..n_codes-1), where
 * `order` increases along each code's rows.  count: n_codes int64 of 0; last: n_codes int64
 * of INT64_MIN.  Returns 0, or 1 (out undefined) at the first row whose order is not above its
 * code's previous row's. */
int64_t ordinals(int64_t n, const int64_t *code, const int64_t *order, int64_t *count, int64_t *last,
                 int64_t *out)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t c = code[i];
        if (order[i] <= last[c])
            return 1;
        last[c] = order[i];
        out[i] = count[c]++;
    }
    return 0;
}

/* The waits of collective members each completed in its own call (blocking: done_call ==
 * call), as metrics.waits.member_waits and _per_call compute them with numpy, in one pass:
 * the member's call is first_call[rank - r0] + call (CallIndex.of); per call (zeros, NO_STATE
 * and zeros on entry) its wait before, state and wait after; per member its wait before +
 * after and the duration of its call (clamped at 0).  state_of: [3 * func + kind] the
 * member's state, kind 1 the root, 2 a non-root released by another member, else 0;
 * no_wait_after: per function.  Returns 0, or 1 (outputs undefined) at a member that is not
 * its own call's or lies outside the tables: numpy then does it all. */
int64_t member_waits(int64_t n, const int32_t *rank, const int64_t *call, const int64_t *done_call,
                     const uint16_t *func, const int32_t *root, const int64_t *start, const int64_t *end,
                     const int64_t *min_end, const int32_t *release_rank, const int64_t *release_start,
                     int64_t r0, int64_t n_first, const int64_t *first_call, int64_t n_funcs,
                     const int8_t *state_of, const uint8_t *no_wait_after, int64_t n_calls, int8_t no_state,
                     int64_t *wait_call, int8_t *state_call, int64_t *after_call, int64_t *member_wait,
                     int64_t *duration)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)rank[i] - r0, f = func[i];
        if (done_call[i] != call[i] || r < 0 || r >= n_first || f >= n_funcs)
            return 1;
        int64_t at = first_call[r] + call[i];
        if (at < 0 || at >= n_calls)
            return 1;
        int64_t d = end[i] - start[i];
        if (d < 0)
            d = 0;
        int64_t before = 0;
        if (release_rank[i] >= 0) {
            before = release_start[i] - start[i];
            before = before < 0 ? 0 : (before > d ? d : before);
        }
        int64_t after = 0;
        if (!no_wait_after[f]) {
            after = end[i] - min_end[i];
            if (after < 0)
                after = 0;
            after = (after + before > d ? d : after + before) - before;
        }
        int64_t kind = rank[i] == root[i] ? 1 : (release_rank[i] >= 0 && release_rank[i] != root[i] ? 2 : 0);
        wait_call[at] = before;
        state_call[at] = before == 0 ? no_state : state_of[3 * f + kind];
        after_call[at] = after;
        member_wait[i] = before + after;
        duration[i] = d;
    }
    return 0;
}

/* Per call 0..n_calls-1 (total: zeros, kinds: zeros on entry) the largest wait of its messages
 * and the kinds of those that waited: bit 0 late sender, bit 1 late receiver (`is_receiver`).
 * Returns 0, or 1 at a position outside the calls (numpy then does it). */
int64_t largest_waits(int64_t n, const int64_t *position, const int64_t *wait, const uint8_t *is_receiver,
                      int64_t n_calls, int64_t *total, uint8_t *kinds)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t p = position[i], w = wait[i];
        if (p < 0 || p >= n_calls)
            return 1;
        if (w > total[p])
            total[p] = w;
        if (w > 0)
            kinds[p] |= is_receiver[i] ? 2 : 1;
    }
    return 0;
}

/* post_start, done_start, done_end (-1 where done_call < 0) of operations of ranks `rank`
 * posted in calls post_call and completed in done_call, a call's times start_ns[at],
 * end_ns[at] at = first_call[rank - r0] + call (CallIndex.of).  Returns 0, or 1 at an
 * operation outside the tables (numpy then does it). */
int64_t op_times(int64_t n, const int32_t *rank, const int64_t *post_call, const int64_t *done_call, int64_t r0,
                 int64_t n_first, const int64_t *first_call, int64_t n_calls, const int64_t *start_ns,
                 const int64_t *end_ns, int64_t *post_start, int64_t *done_start, int64_t *done_end)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)rank[i] - r0;
        if (r < 0 || r >= n_first)
            return 1;
        int64_t post = first_call[r] + post_call[i];
        if (post < 0 || post >= n_calls)
            return 1;
        post_start[i] = start_ns[post];
        if (done_call[i] < 0) {
            done_start[i] = done_end[i] = -1;
            continue;
        }
        int64_t done = first_call[r] + done_call[i];
        if (done >= n_calls)
            return 1;
        done_start[i] = start_ns[done];
        done_end[i] = end_ns[done];
    }
    return 0;
}

/* core.pair_by_ordinal by counting: a's rows laid out stream after stream (streams 0..n_streams-1),
 * each at its ordinal, b's rows looking their slot up; the pairs (i_a, i_b) in slot order.
 * first: n_streams int64 of 0; a_of_slot, b_of_slot: na int64 of -1; i_a, i_b: room for
 * min(na, nb).  A row of b with an ordinal outside its stream's count pairs with none.  Returns
 * how many pairs, or -1 where counting does not apply (a stream outside the codes, an ordinal
 * of a outside its stream's count or twice in it, a slot asked for twice by b). */
int64_t pair_by_slot(int64_t na, const int64_t *stream_a, const int64_t *ordinal_a, int64_t nb,
                     const int64_t *stream_b, const int64_t *ordinal_b, int64_t n_streams, int64_t *first,
                     int64_t *a_of_slot, int64_t *b_of_slot, int64_t *i_a, int64_t *i_b)
{
    for (int64_t i = 0; i < na; i++) {
        if (stream_a[i] < 0 || stream_a[i] >= n_streams)
            return -1;
        first[stream_a[i]]++;
    }
    int64_t at = 0;
    for (int64_t s = 0; s < n_streams; s++) {       /* counts -> each stream's first slot */
        int64_t count = first[s];
        first[s] = at;
        at += count;
    }
    for (int64_t i = 0; i < na; i++) {
        int64_t s = stream_a[i], o = ordinal_a[i];
        int64_t end = s + 1 < n_streams ? first[s + 1] : na;
        if (o < 0 || first[s] + o >= end || a_of_slot[first[s] + o] != -1)
            return -1;
        a_of_slot[first[s] + o] = i;
    }
    for (int64_t j = 0; j < nb; j++) {
        int64_t s = stream_b[j], o = ordinal_b[j];
        if (s < 0 || s >= n_streams)
            return -1;
        int64_t end = s + 1 < n_streams ? first[s + 1] : na;
        if (o < 0 || first[s] + o >= end)
            continue;
        if (b_of_slot[first[s] + o] != -1)
            return -1;
        b_of_slot[first[s] + o] = j;
    }
    int64_t k = 0;
    for (int64_t slot = 0; slot < na; slot++)
        if (b_of_slot[slot] != -1) {
            i_a[k] = a_of_slot[slot];
            i_b[k++] = b_of_slot[slot];
        }
    return k;
}

/* The fields of operations i < n read from records of `size` bytes at `base` (p2p.operations):
 * comm, func and site of its post record post[i]; peer, tag and bytes of described[i], the
 * record whose status describes its message (a completed receive's completion, else the post).
 * at_*: each field's offset in a record (their widths: record.RECORD_DTYPE's). */
void op_fields(int64_t n, const char *base, int64_t size, const int64_t *post, const int64_t *described,
               int64_t at_comm, int64_t at_func, int64_t at_site, int64_t at_peer, int64_t at_tag,
               int64_t at_bytes, int64_t *comm, uint16_t *func, uint16_t *site, int32_t *peer, int32_t *tag,
               int64_t *bytes)
{
    for (int64_t i = 0; i < n; i++) {
        const char *p = base + post[i] * size, *d = base + described[i] * size;
        memcpy(comm + i, p + at_comm, sizeof *comm);
        memcpy(func + i, p + at_func, sizeof *func);
        memcpy(site + i, p + at_site, sizeof *site);
        memcpy(peer + i, d + at_peer, sizeof *peer);
        memcpy(tag + i, d + at_tag, sizeof *tag);
        memcpy(bytes + i, d + at_bytes, sizeof *bytes);
    }
}
"""

CDEF = ckernel.declarations(SOURCE)

_KERNEL = ckernel.Kernel("match-kernel", SOURCE, CDEF, "MPIGRAPH_MATCH_KERNEL", "off")
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_FUNCTIONS = {"ordinals": (_I64, [_I64, _PTR, _PTR, _PTR, _PTR, _PTR]),
              "member_waits": (_I64, [_I64] + [_PTR] * 10 + [_I64, _I64, _PTR, _I64, _PTR, _PTR, _I64, ctypes.c_int8]
                               + [_PTR] * 5),
              "largest_waits": (_I64, [_I64, _PTR, _PTR, _PTR, _I64, _PTR, _PTR]),
              "op_times": (_I64, [_I64, _PTR, _PTR, _PTR, _I64, _I64, _PTR, _I64, _PTR, _PTR, _PTR, _PTR, _PTR]),
              "pair_by_slot": (_I64, [_I64, _PTR, _PTR, _I64, _PTR, _PTR, _I64] + [_PTR] * 5),
              "op_fields": (None, [_I64, _PTR, _I64, _PTR, _PTR] + [_I64] * 6 + [_PTR] * 6)}


def _library():
    return _KERNEL.load_ctypes(_FUNCTIONS)


def available():
    """Whether the kernel can run here (compiled, and not switched off)."""
    return _library() is not None


def ordinals(code, n_codes, order):
    """Each row's position among the rows of its code (dense, 0..n_codes-1) counted in `order`
    (distinct within a code), int64; None without the kernel (or where `order` repeats).  Rows whose `order` does not
    increase along each code's rows are numbered after a stable sort by `order`."""
    lib = _library()
    if lib is None:
        return None
    code, order = np.ascontiguousarray(code, np.int64), np.ascontiguousarray(order, np.int64)
    n = len(code)
    out = np.empty(n, np.int64)
    if _ordinals(lib, code, order, n_codes, out) == 0:
        return out
    by_order = np.argsort(order, kind="stable")
    in_order = np.empty(n, np.int64)
    if _ordinals(lib, code[by_order], order[by_order], n_codes, in_order):
        return None         # `order` repeats within a code: numpy's order of the ties
    out[by_order] = in_order
    return out


def _ordinals(lib, code, order, n_codes, out):
    count = np.zeros(n_codes, np.int64)
    last = np.full(n_codes, np.iinfo(np.int64).min, np.int64)
    return lib.ordinals(len(code), code.ctypes.data, order.ctypes.data, count.ctypes.data, last.ctypes.data,
                        out.ctypes.data)


# The member columns member_waits reads, in its dtypes.
_MEMBER_COLUMNS = {"rank": np.int32, "call": np.int64, "done_call": np.int64, "func": np.uint16, "root": np.int32,
                   "start": np.int64, "end": np.int64, "min_end": np.int64, "release_rank": np.int32,
                   "release_start": np.int64}


def member_waits(members, r0, first_call, n_calls, state_of, no_wait_after, no_state):
    """(per call: wait before, state, wait after; per member: wait before + after, its call's
    duration) of collective members each completed in its own call, `first_call[rank - r0]` the
    first call of each rank in the calls' numbering; None without the kernel or where a member
    is not its own call's (metrics.waits then uses numpy)."""
    lib = _library()
    if lib is None:
        return None
    columns = [np.ascontiguousarray(members[name], dtype) for name, dtype in _MEMBER_COLUMNS.items()]
    n = len(columns[0])
    first_call = np.ascontiguousarray(first_call, np.int64)
    state_of = np.ascontiguousarray(state_of, np.int8).reshape(-1)
    no_wait_after = np.ascontiguousarray(no_wait_after, np.uint8)
    out = (np.zeros(n_calls, np.int64), np.full(n_calls, no_state, np.int8), np.zeros(n_calls, np.int64),
           np.empty(n, np.int64), np.empty(n, np.int64))
    failed = lib.member_waits(n, *(c.ctypes.data for c in columns), r0, len(first_call), first_call.ctypes.data,
                              len(no_wait_after), state_of.ctypes.data, no_wait_after.ctypes.data, n_calls,
                              no_state, *(o.ctypes.data for o in out))
    return None if failed else out


def largest_waits(position, wait, is_receiver, n_calls):
    """(per call the largest wait of its messages, the kinds that waited: bit 0 late sender, bit 1
    late receiver) of messages charged to calls `position` (metrics.message_kinds); None without
    the kernel or where a position lies outside 0..n_calls-1."""
    lib = _library()
    if lib is None:
        return None
    position, wait = np.ascontiguousarray(position, np.int64), np.ascontiguousarray(wait, np.int64)
    is_receiver = np.ascontiguousarray(is_receiver, bool).view(np.uint8)
    total, kinds = np.zeros(n_calls, np.int64), np.zeros(n_calls, np.uint8)
    if lib.largest_waits(len(position), position.ctypes.data, wait.ctypes.data, is_receiver.ctypes.data, n_calls,
                         total.ctypes.data, kinds.ctypes.data):
        return None
    return total, kinds


def op_times(rank, post_call, done_call, r0, first_call, start_ns, end_ns):
    """(post_start, done_start, done_end) of operations (match.p2p.op_times), the calls' times
    `start_ns`, `end_ns` (CallIndex.column) at first_call[rank - r0] + call, in one pass; None
    without the kernel or where an operation lies outside the tables."""
    lib = _library()
    if lib is None:
        return None
    rank = np.ascontiguousarray(rank, np.int32)
    post_call, done_call = np.ascontiguousarray(post_call, np.int64), np.ascontiguousarray(done_call, np.int64)
    first_call = np.ascontiguousarray(first_call, np.int64)
    start_ns, end_ns = np.ascontiguousarray(start_ns, np.int64), np.ascontiguousarray(end_ns, np.int64)
    out = tuple(np.empty(len(rank), np.int64) for _ in range(3))
    if lib.op_times(len(rank), rank.ctypes.data, post_call.ctypes.data, done_call.ctypes.data, r0, len(first_call),
                    first_call.ctypes.data, len(start_ns), start_ns.ctypes.data, end_ns.ctypes.data,
                    *(o.ctypes.data for o in out)):
        return None
    return out


def pair_by_slot(stream_a, ordinal_a, stream_b, ordinal_b, n_streams):
    """core.pair_by_ordinal's (i_a, i_b) by counting in C; None without the kernel or where
    counting does not apply (the caller then finds out why with numpy, and sorts)."""
    lib = _library()
    if lib is None:
        return None
    stream_a, ordinal_a, stream_b, ordinal_b = (np.ascontiguousarray(a, np.int64)
                                                for a in (stream_a, ordinal_a, stream_b, ordinal_b))
    na, nb = len(stream_a), len(stream_b)
    first = np.zeros(n_streams, np.int64)
    a_of_slot, b_of_slot = np.full(na, -1, np.int64), np.full(na, -1, np.int64)
    i_a, i_b = np.empty(min(na, nb), np.int64), np.empty(min(na, nb), np.int64)
    k = lib.pair_by_slot(na, stream_a.ctypes.data, ordinal_a.ctypes.data, nb, stream_b.ctypes.data,
                         ordinal_b.ctypes.data, n_streams, first.ctypes.data, a_of_slot.ctypes.data,
                         b_of_slot.ctypes.data, i_a.ctypes.data, i_b.ctypes.data)
    return None if k < 0 else (i_a[:k], i_b[:k])


# The fields op_fields reads, in its order: of the post record, then of the described one.
OP_FIELDS = ("comm", "func", "site", "peer", "tag", "bytes")


def op_fields(records, post, described):
    """{field: column} of OP_FIELDS (record.RECORD_DTYPE's dtypes) read from `records` at `post`
    (comm, func, site) and `described` (peer, tag, bytes) in one pass; None without the kernel
    or where the records are not one C-contiguous array of that dtype."""
    lib = _library()
    if lib is None or records.dtype != record.RECORD_DTYPE or not records.flags.c_contiguous:
        return None
    post, described = np.ascontiguousarray(post, np.int64), np.ascontiguousarray(described, np.int64)
    if len(post) and (min(post.min(), described.min()) < 0 or max(post.max(), described.max()) >= len(records)):
        raise IndexError("an operation's record is outside the batch's records")
    fields = record.RECORD_DTYPE.fields
    out = {name: np.empty(len(post), fields[name][0]) for name in OP_FIELDS}
    lib.op_fields(len(post), records.ctypes.data, records.itemsize, post.ctypes.data, described.ctypes.data,
                  *(fields[name][1] for name in OP_FIELDS), *(out[name].ctypes.data for name in OP_FIELDS))
    return out
