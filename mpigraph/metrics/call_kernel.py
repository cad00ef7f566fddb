"""The calls table's passes per row in C: a block's record fields, its sums per key, its on_path
searches, and the text of its function and wait-state names.

The report makes the calls table a block of rows at a time (run_tables.call_chunks) and sums
each block per call site as it passes (callsites.stats).  With numpy these are many passes over
the block: a field of the 64-byte records is a pass that reads all of them (eight fields: eight
passes), and each of the five sums per key is a bincount, which converts its int64 weights to
float64 first.  Here each is one pass: ``call_fields`` reads each record once and writes every
column the table takes from it; ``call_sums`` and ``charge_sums`` add a block's columns into a
small hash table of its keys (a few thousand in a block of 2^18 rows), in int64; ``PathMarks``
finds the calls each path query holds by a search within its rank's calls, from the row the
query before found; ``label_strings`` writes a names.Labels column's Arrow text from its codes.

Compiled on first use (``util.ckernel``); where it cannot be (no compiler), or with
MPIGRAPH_CALLS_KERNEL=off (a test setting), every function here returns None and the caller
does the same work with numpy or pyarrow: the same numbers (the numpy sums are exact below 2^53).
"""

import ctypes

import numpy as np

from mpigraph.trace import record
from mpigraph.util import ckernel

_C_TYPES = {"i8": "int64_t", "i4": "int32_t", "u4": "uint32_t", "u2": "uint16_t"}


def _record_struct(dtype):
    """The C struct of a record (trace.record.RECORD_DTYPE, packed: no padding between fields)."""
    fields = "".join("    %s %s;\n" % (_C_TYPES[dtype.fields[name][0].str[1:]], name) for name in dtype.names)
    return "typedef struct {\n%s} record_t;\n_Static_assert(sizeof(record_t) == %d, \"record size\");\n" \
        % (fields, dtype.itemsize)


SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
""" + _record_struct(record.RECORD_DTYPE) + r"""

/* The columns of the records take[0..n) (ascending indices into n_parts arrays of records end to
 * end: part[p] the address of the p-th, len[p] its records; take NULL: every record, n of them).
 * calls and seq: a REPEAT record's seq is its count of calls, and it has no sequence number. */
void call_fields(int64_t n_parts, const int64_t *part, const int64_t *len, const int64_t *take, int64_t n,
                 int64_t device_flag, int64_t repeat_flag, int64_t *peer, int64_t *tag, int64_t *comm,
                 int64_t *bytes, int64_t *root, int64_t *site, uint8_t *device, int64_t *calls, int64_t *seq)
{
    int64_t p = 0, first = 0;       /* the part holding record j, and its first record's index */
    for (int64_t i = 0; i < n; i++) {
        int64_t j = take ? take[i] : i;
        while (p < n_parts && j >= first + len[p])
            first += len[p++];
        const record_t *r = (const record_t *)(intptr_t)part[p] + (j - first);
        peer[i] = r->peer;
        tag[i] = r->tag;
        comm[i] = r->comm;
        bytes[i] = r->bytes;
        root[i] = r->root;
        site[i] = r->site;
        device[i] = (r->flags & device_flag) != 0;
        int repeated = (r->flags & repeat_flag) != 0;
        calls[i] = repeated ? (int64_t)r->seq : 1;
        seq[i] = repeated ? 0 : (int64_t)r->seq;
    }
}

/* A hash table of up to cap distinct int64 keys, numbered in the order they first come. */
typedef struct {
    int64_t *slot;          /* the key's number, -1: empty */
    uint64_t mask;
    int shift;
    int64_t n, cap, last_key, last;
    int64_t *keys;          /* keys[number] */
} table_t;

static int table_open(table_t *t, int64_t cap, int64_t *keys)
{
    uint64_t size = 1024;
    int bits = 10;
    while (size < 2 * (uint64_t)cap) {
        size <<= 1;
        bits++;
    }
    t->slot = malloc(size * sizeof(int64_t));
    if (!t->slot)
        return -1;
    for (uint64_t s = 0; s < size; s++)
        t->slot[s] = -1;
    t->mask = size - 1;
    t->shift = 64 - bits;
    t->n = 0;
    t->cap = cap;
    t->last = -1;
    t->last_key = 0;
    t->keys = keys;
    return 0;
}

/* The key's number, a new one where it is new (*created set), -1 when the table is full.  Rows of
 * one key mostly come together: the last key's number is kept. */
static inline int64_t table_number(table_t *t, int64_t key, int *created)
{
    *created = 0;
    if (t->last >= 0 && key == t->last_key)
        return t->last;
    uint64_t s = ((uint64_t)key * 0x9E3779B97F4A7C15ull) >> t->shift;
    while (t->slot[s] >= 0 && t->keys[t->slot[s]] != key)
        s = (s + 1) & t->mask;
    if (t->slot[s] < 0) {
        if (t->n == t->cap)
            return -1;
        t->keys[t->n] = key;
        t->slot[s] = t->n++;
        *created = 1;
    }
    t->last_key = key;
    t->last = t->slot[s];
    return t->last;
}

/* Per distinct key of the rows (up to cap of them, numbered as they first come: out_key), the
 * sums of a calls-table block (out, 5 x cap: count = calls, time = end - start, wait =
 * wait_before + wait_after, bytes, path_time = end - start where on_path).  Returns how many
 * keys, -1 when there are more than cap. */
int64_t call_sums(int64_t n, const int64_t *key, const int64_t *calls, const int64_t *start, const int64_t *end,
                  const int64_t *wait_before, const int64_t *wait_after, const int64_t *bytes,
                  const uint8_t *on_path, int64_t cap, int64_t *out_key, int64_t *out)
{
    table_t t;
    int created;
    if (table_open(&t, cap, out_key) < 0)
        return -1;
    int64_t *count = out, *time = out + cap, *wait = out + 2 * cap, *size = out + 3 * cap, *path = out + 4 * cap;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = table_number(&t, key[i], &created);
        if (k < 0) {
            t.n = -1;
            break;
        }
        if (created)
            count[k] = time[k] = wait[k] = size[k] = path[k] = 0;
        int64_t duration = end[i] - start[i];
        count[k] += calls[i];
        time[k] += duration;
        wait[k] += wait_before[i] + wait_after[i];
        size[k] += bytes[i];
        path[k] += on_path[i] ? duration : 0;
    }
    free(t.slot);
    return t.n;
}

/* The wait-state charges of a block's rows per (key, kind): key * n_states + kind, up to cap of
 * them (out_key, numbered as they first come), with the count and time of the charges (out,
 * 2 x cap).  A row is charged its own state (state[i] - shift, none where below 0) with
 * state_time, and where other_time > 0 the other point-to-point kind (late_receiver where its
 * state is late_sender, else late_sender) with other_time: metrics.waits.charged_states.
 * Returns how many keys, -1 when there are more than cap. */
int64_t charge_sums(int64_t n, const int64_t *key, const int64_t *state, int64_t shift, const int64_t *state_time,
                    const int64_t *other_time, int64_t n_states, int64_t late_sender, int64_t late_receiver,
                    int64_t cap, int64_t *out_key, int64_t *out)
{
    table_t t;
    int created;
    if (table_open(&t, cap, out_key) < 0)
        return -1;
    int64_t *count = out, *time = out + cap;
    for (int64_t i = 0; i < n && t.n >= 0; i++) {
        int64_t kind = state[i] - shift;
        for (int charge = 0; charge < 2; charge++) {
            int64_t spent = state_time[i];
            if (charge == 1) {
                if (other_time[i] <= 0)
                    break;
                kind = kind == late_sender ? late_receiver : late_sender;
                spent = other_time[i];
            } else if (kind < 0) {
                continue;
            }
            int64_t k = table_number(&t, key[i] * n_states + kind, &created);
            if (k < 0) {
                t.n = -1;
                break;
            }
            if (created)
                count[k] = time[k] = 0;
            count[k] += 1;
            time[k] += spent;
        }
    }
    free(t.slot);
    return t.n;
}

/* Whether each run of rows [firsts[r], stops[r]) of the calls is out of order: a call starts or
 * ends before the one before it (threads overlapped them). */
void runs_unordered(const int64_t *starts, const int64_t *ends, int64_t n_runs, const int64_t *firsts,
                    const int64_t *stops, uint8_t *unordered)
{
    for (int64_t r = 0; r < n_runs; r++) {
        uint8_t out = 0;
        for (int64_t i = firsts[r] + 1; i < stops[r] && !out; i++)
            out = starts[i] < starts[i - 1] || ends[i] < ends[i - 1];
        unordered[r] = out;
    }
}

/* The first row of [a, b) whose x is >= v (after: > v), b where none (x ascending there). */
static inline int64_t search(const int64_t *x, int64_t a, int64_t b, int64_t v, int after)
{
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (x[m] < v || (after && x[m] == v))
            a = m + 1;
        else
            b = m;
    }
    return a;
}

#define BEFORE(m) (x[m] < v || (after && x[m] == v))

/* search's row, found from `near` (the row of the query before): steps of 1, 2, 4, ... from
 * there to a range holding it, then a binary search in that range.  A path's queries of a rank
 * come in time order: each is a few rows from the one before, not a search over all the rank's
 * calls (which at a million calls misses the caches at most of its steps). */
static inline int64_t search_near(const int64_t *x, int64_t a, int64_t b, int64_t v, int after, int64_t near)
{
    int64_t lo, hi, step = 1;
    if (near < a || near > b)
        return search(x, a, b, v, after);
    if (near < b && BEFORE(near)) {     /* the row is after near */
        lo = hi = near + 1;
        while (hi < b && BEFORE(hi)) {
            lo = hi + 1;
            hi = lo + step;
            step <<= 1;
        }
        return search(x, lo, hi < b ? hi : b, v, after);
    }
    hi = near;                          /* the row is near or before it */
    lo = hi - 1;
    while (lo >= a && !BEFORE(lo)) {
        hi = lo;
        lo = hi - step;
        step <<= 1;
    }
    return search(x, lo < a ? a : lo + 1, hi, v, after);
}

/* The rows [first, last) each query holds added to marked (+1 at first, -1 at last): query q of
 * run q_run[q] (rows firsts[r] to stops[r], in order: skipped where unordered), times lo[q]
 * and hi[q], `how` 0 overlap (start < hi and end > lo; where lo == hi, start <= lo <= end),
 * 1 ends in (the first call ending at or after lo, if it started by then), 2 starts in (the
 * last call starting at or before lo, if it ends at or after it). */
void mark_ordered(const int64_t *starts, const int64_t *ends, const int64_t *firsts, const int64_t *stops,
                  const uint8_t *unordered, int64_t n_q, const int64_t *q_run, const int64_t *lo,
                  const int64_t *hi, int64_t how, int64_t *marked)
{
    int64_t near_end = -1, near_start = -1;     /* the rows the query before found */
    for (int64_t q = 0; q < n_q; q++) {
        int64_t r = q_run[q], a = firsts[r], b = stops[r], first, last;
        if (unordered[r])
            continue;
        if (how == 0) {
            int point = lo[q] == hi[q];
            first = near_end = search_near(ends, a, b, lo[q], !point, near_end);
            last = near_start = search_near(starts, a, b, hi[q], point, near_start);
        } else if (how == 1) {
            first = near_end = search_near(ends, a, b, lo[q], 0, near_end);
            last = first + 1;
            if (first >= b || starts[first] > lo[q])
                continue;
        } else {
            near_start = search_near(starts, a, b, lo[q], 1, near_start);
            first = near_start - 1;
            last = first + 1;
            if (first < a || ends[first] < lo[q])
                continue;
        }
        if (first < last) {
            marked[first] += 1;
            marked[last] -= 1;
        }
    }
}

/* on_path of each of n rows from marked (the running sum above 0). */
void marked_rows(int64_t n, const int64_t *marked, uint8_t *on_path)
{
    int64_t depth = 0;
    for (int64_t i = 0; i < n; i++) {
        depth += marked[i];
        on_path[i] = depth > 0;
    }
}

/* The text of labels as an Arrow string array: row i is name codes[i], name k the bytes
 * [name_start[k], name_start[k + 1]) of the names' text.  label_offsets: the n + 1 offsets;
 * returns the text's length, -1 where a code is no name's or the text passes 2^31 - 1 bytes. */
int64_t label_offsets(int64_t n, const int64_t *codes, int64_t n_names, const int64_t *name_start, int32_t *offsets)
{
    int64_t at = 0;
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = codes[i];
        if (c < 0 || c >= n_names)
            return -1;
        at += name_start[c + 1] - name_start[c];
        if (at > INT32_MAX)
            return -1;
        offsets[i + 1] = (int32_t)at;
    }
    return at;
}

/* label_offsets' text: each row's name copied to its offset. */
void label_text(int64_t n, const int64_t *codes, const int64_t *name_start, const uint8_t *names,
                const int32_t *offsets, uint8_t *text)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(text + offsets[i], names + name_start[codes[i]], offsets[i + 1] - offsets[i]);
}
"""

CDEF = ckernel.declarations(SOURCE)

_KERNEL = ckernel.Kernel("calls-kernel", SOURCE, CDEF, "MPIGRAPH_CALLS_KERNEL", "off")

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_FUNCTIONS = {"call_fields": (None, [_I64, _PTR, _PTR, _PTR, _I64, _I64, _I64] + [_PTR] * 9),
              "call_sums": (_I64, [_I64] + [_PTR] * 8 + [_I64, _PTR, _PTR]),
              "charge_sums": (_I64, [_I64, _PTR, _PTR, _I64, _PTR, _PTR, _I64, _I64, _I64, _I64, _PTR, _PTR]),
              "runs_unordered": (None, [_PTR, _PTR, _I64, _PTR, _PTR, _PTR]),
              "mark_ordered": (None, [_PTR] * 5 + [_I64] + [_PTR] * 3 + [_I64, _PTR]),
              "marked_rows": (None, [_I64, _PTR, _PTR]),
              "label_offsets": (_I64, [_I64, _PTR, _I64, _PTR, _PTR]),
              "label_text": (None, [_I64] + [_PTR] * 5)}


def _library():
    return _KERNEL.load_ctypes(_FUNCTIONS)


def available():
    """Whether the kernel runs here (compiled, and not switched off)."""
    return _library() is not None


FIELDS = ("peer", "tag", "comm", "bytes", "root", "callsite", "device_buffer", "calls", "seq")


def call_fields(parts, take=None):
    """{column: values} of the calls table's columns read from records (FIELDS: int64, and
    device_buffer bool) of the records `take` (ascending indices into the arrays of records
    `parts` end to end; None: all of them); None where the kernel does not run."""
    lib = _library()
    if lib is None:
        return None
    parts = [np.ascontiguousarray(p) for p in parts]
    if any(p.dtype != record.RECORD_DTYPE for p in parts):
        return None
    lengths = np.array([len(p) for p in parts], np.int64)
    addresses = np.array([p.ctypes.data for p in parts], np.int64)
    if take is not None:
        take = np.ascontiguousarray(take, np.int64)
        if len(take) and (take[0] < 0 or take[-1] >= lengths.sum()):
            return None         # not the records' (numpy raises)
    n = int(lengths.sum()) if take is None else len(take)
    out = {name: np.empty(n, bool if name == "device_buffer" else np.int64) for name in FIELDS}
    lib.call_fields(len(parts), addresses.ctypes.data, lengths.ctypes.data, None if take is None else take.ctypes.data,
                    n, record.DEVICE, record.REPEAT, *(out[name].ctypes.data for name in FIELDS))
    return out


# A block's keys are a few thousand: the table is made for this many, and made again for one
# per row where a block has more.
FEW_KEYS = 1 << 14

CALL_SUMS = ("count", "time", "wait", "bytes", "path_time")     # callsites.stats.SUMS


def call_sums(keys, block):
    """(the distinct keys, {CALL_SUMS name: int64 sums per key}) of a calls-table block's rows
    (`keys`: one per row), the keys in the order they first come; None where the kernel does
    not run.  What callsites.stats.KeyedSums.add sums."""
    lib = _library()
    if lib is None:
        return None
    columns = [np.ascontiguousarray(keys, np.int64)] \
        + [np.ascontiguousarray(block[name], np.int64) for name in ("calls", "start", "end", "wait_before",
                                                                      "wait_after", "bytes")] \
        + [np.ascontiguousarray(block["on_path"], bool)]
    found = _summed(lambda cap, out_key, out: lib.call_sums(len(columns[0]), *(c.ctypes.data for c in columns), cap,
                                                            out_key.ctypes.data, out.ctypes.data),
                    len(columns[0]), len(CALL_SUMS))
    return None if found is None else (found[0], dict(zip(CALL_SUMS, found[1])))


def charge_sums(keys, state, shift, state_time, other_time, kinds):
    """(the distinct keys * n_states + kind, (count, time) per key) of the wait-state charges of
    a block's rows (metrics.waits.charged_states: `state` - `shift` each row's state, below 0 for
    none); `kinds`: (n_states, late sender, late receiver); None where the kernel does not run."""
    lib = _library()
    if lib is None:
        return None
    columns = [np.ascontiguousarray(c, np.int64) for c in (keys, state, state_time, other_time)]
    n_states, late_sender, late_receiver = kinds
    return _summed(lambda cap, out_key, out: lib.charge_sums(
        len(columns[0]), columns[0].ctypes.data, columns[1].ctypes.data, shift, columns[2].ctypes.data,
        columns[3].ctypes.data, n_states, late_sender, late_receiver, cap, out_key.ctypes.data, out.ctypes.data),
        2 * len(columns[0]), 2)


def _summed(run, most, n_sums):
    """(keys, n_sums x keys sums) from a kernel `run(cap, out_key, out)` that returns how many
    keys it found, -1 past cap: first for FEW_KEYS, then where more, for `most` (as many as
    the rows can have); None where even that fails (no memory for the table: numpy's turn)."""
    for cap in sorted({min(FEW_KEYS, most), most}):
        cap = max(cap, 1)
        out_key, out = np.empty(cap, np.int64), np.empty((n_sums, cap), np.int64)
        n = run(cap, out_key, out)
        if n >= 0:
            return out_key[:n].copy(), out[:, :n].copy()
    return None


class PathMarks:
    """``run_tables.calls_on_path``'s searches, a binary search per query in its run's calls:
    calls that are runs of rows [firsts[r], stops[r]) (`starts`, `ends`: int64); None from
    ``open`` where the kernel does not run."""

    @classmethod
    def open(cls, starts, ends, firsts, stops):
        lib = _library()
        return None if lib is None else cls(lib, starts, ends, firsts, stops)

    def __init__(self, lib, starts, ends, firsts, stops):
        self._lib = lib
        self._columns = [np.ascontiguousarray(c, np.int64) for c in (starts, ends, firsts, stops)]
        self.unordered = np.zeros(len(firsts), bool)
        starts, ends, firsts, stops = (c.ctypes.data for c in self._columns)
        lib.runs_unordered(starts, ends, len(self.unordered), firsts, stops, self.unordered.ctypes.data)

    def mark(self, marked, how, q_run, lo, hi):
        """Adds the rows each query of kind `how` (an index of run_tables.QUERY_KINDS) holds to
        `marked` (int64, a row more than the calls: +1 at a range's first row, -1 after its
        last), the queries of unordered runs left out."""
        q_run, lo, hi = (np.ascontiguousarray(c, np.int64) for c in (q_run, lo, hi))
        self._lib.mark_ordered(*(c.ctypes.data for c in self._columns), self.unordered.ctypes.data, len(q_run),
                               q_run.ctypes.data, lo.ctypes.data, hi.ctypes.data, how, marked.ctypes.data)

    def rows(self, marked):
        """on_path of each call from `marked`."""
        on_path = np.empty(len(marked) - 1, bool)
        self._lib.marked_rows(len(on_path), marked.ctypes.data, on_path.ctypes.data)
        return on_path


def label_strings(codes, names):
    """A pyarrow string array of names[codes] (a names.Labels' codes and names: str), made from
    the text's offsets and bytes without a take; None where the kernel does not run, a name is
    not a str (None: a null) or a code is no name's."""
    lib = _library()
    if lib is None or not all(isinstance(name, str) for name in names):
        return None
    import pyarrow as pa

    encoded = [name.encode("utf-8") for name in names]
    name_start = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(b) for b in encoded], out=name_start[1:])
    text_of_names = np.frombuffer(b"".join(encoded) or b"\0", np.uint8)
    codes = np.ascontiguousarray(codes, np.int64)
    offsets = np.empty(len(codes) + 1, np.int32)
    size = lib.label_offsets(len(codes), codes.ctypes.data, len(encoded), name_start.ctypes.data, offsets.ctypes.data)
    if size < 0:
        return None
    text = np.empty(max(size, 1), np.uint8)
    lib.label_text(len(codes), codes.ctypes.data, name_start.ctypes.data, text_of_names.ctypes.data,
                   offsets.ctypes.data, text.ctypes.data)
    return pa.StringArray.from_buffers(len(codes), pa.py_buffer(offsets), pa.py_buffer(text[:size]))
