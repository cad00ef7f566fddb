"""The CSV text of a block of rows in C: one pass that writes each field's text and its comma or
line end straight into the block's buffer.

The string kernels (``writer._csv_lines``) make each column's text as an Arrow array, then join
the columns into lines: 0.9-1.2 s of CPU for calls.csv's million rows (21 columns), the longest
part of the report of a run of that size.  Here a field is a few digits' stores: integers two
digits at a time from a table, a time as its whole seconds, a point and nine digits of
nanoseconds, a name copied from the names' text, quoted once per block.

It takes int and time columns (int64), bool columns and str columns of few names (names.Labels:
codes into the names' text).  Compiled on first use (``util.ckernel``); where it cannot be, or
with MPIGRAPH_CSV_KERNEL=off (a test setting), ``lines`` returns None and the caller makes the
same text with the string kernels.
"""

import ctypes

import numpy as np

from mpigraph.util import ckernel

SOURCE = r"""
#include <stdint.h>
#include <string.h>

static const char PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static const uint64_t POWERS[20] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u, 1000000000u, 10000000000u,
    100000000000u, 1000000000000u, 10000000000000u, 100000000000000u, 1000000000000000u,
    10000000000000000u, 100000000000000000u, 1000000000000000000u, 10000000000000000000u};

/* v's decimal digits at p; returns the end.  Counted first, then written from the last by pairs:
 * fixed-size stores only (a copy of a length known only here would be a call to memcpy). */
static char *put_unsigned(char *p, uint64_t v)
{
    /* digits: from the bits (log10(2) ~ 1233 / 4096), one more where v reaches the next power */
    int n = ((64 - __builtin_clzll(v | 1)) * 1233) >> 12;       /* 0 .. 19 */
    n += v >= POWERS[n];
    n += n == 0;
    char *end = p + n, *q = end;
    while (v >= 100) {
        q -= 2;
        memcpy(q, PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10)
        memcpy(q - 2, PAIRS + 2 * v, 2);
    else
        q[-1] = (char)('0' + v);
    return end;
}

/* |v| as uint64 (exact for INT64_MIN too), after a '-' at p where v < 0. */
static char *put_sign(char *p, int64_t v, uint64_t *magnitude)
{
    *magnitude = (uint64_t)v;
    if (v < 0) {
        *p++ = '-';
        *magnitude = 0 - *magnitude;
    }
    return p;
}

/* ns as seconds, exact: [-]s.nnnnnnnnn */
static char *put_seconds(char *p, int64_t ns)
{
    uint64_t m;
    p = put_sign(p, ns, &m);
    p = put_unsigned(p, m / 1000000000u);
    *p++ = '.';
    uint32_t part = (uint32_t)(m % 1000000000u);
    for (int i = 7; i >= 1; i -= 2) {       /* digits 8..1 by pairs, then the first */
        memcpy(p + i, PAIRS + 2 * (part % 100), 2);
        part /= 100;
    }
    p[0] = (char)('0' + part);
    return p + 9;
}

/* The CSV lines of n_rows rows of n_cols columns into out; returns the bytes written, or -1 where
 * a code is no name's.  Column c: kind[c] 0 an int64 column, 1 int64 ns written as seconds, 2 a
 * bool (uint8) column, 3 int64 codes into names: name k is text[c][offset[c][k] .. offset[c][k+1]).
 * column, offset and text hold addresses. */
int64_t csv_lines(int64_t n_rows, int64_t n_cols, const int64_t *kind, const int64_t *column,
                  const int64_t *n_names, const int64_t *offset, const int64_t *text, char *out)
{
    char *p = out;
    for (int64_t i = 0; i < n_rows; i++) {
        for (int64_t c = 0; c < n_cols; c++) {
            const void *values = (const void *)(intptr_t)column[c];
            uint64_t m;
            switch (kind[c]) {
            case 0:
                p = put_sign(p, ((const int64_t *)values)[i], &m);
                p = put_unsigned(p, m);
                break;
            case 1:
                p = put_seconds(p, ((const int64_t *)values)[i]);
                break;
            case 2:
                if (((const uint8_t *)values)[i]) {
                    memcpy(p, "true", 4);
                    p += 4;
                } else {
                    memcpy(p, "false", 5);
                    p += 5;
                }
                break;
            default: {
                int64_t code = ((const int64_t *)values)[i];
                if (code < 0 || code >= n_names[c])
                    return -1;
                const int64_t *bounds = (const int64_t *)(intptr_t)offset[c];
                memcpy(p, (const char *)(intptr_t)text[c] + bounds[code], (size_t)(bounds[code + 1] - bounds[code]));
                p += bounds[code + 1] - bounds[code];
            }
            }
            *p++ = c + 1 < n_cols ? ',' : '\n';
        }
    }
    return p - out;
}
"""

CDEF = ckernel.declarations(SOURCE)

_KERNEL = ckernel.Kernel("csv-kernel", SOURCE, CDEF, "MPIGRAPH_CSV_KERNEL", "off")

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_FUNCTIONS = {"csv_lines": (_I64, [_I64, _I64] + [_PTR] * 6)}

KINDS = {"int": 0, "time": 1, "bool": 2, "str": 3}
# The longest text of a field of each kind: int64's least, "-9223372036854775808"; as seconds,
# "-9223372036.854775808"; "false".  A str field's is its longest name's.
WIDTHS = {"int": 20, "time": 21, "bool": 5}


def lines(fields):
    """The CSV text (a memoryview) of the rows of `fields`, one (kind, values, names) per column:
    kind "int" or "time" and int64 values, "bool" and bool values, or "str" and int codes into
    `names` (the fields' text of each name, as bytes: quoted already).  None where the kernel does
    not run or a code is no name's."""
    lib = _KERNEL.load_ctypes(_FUNCTIONS)
    if lib is None:
        return None
    n_rows = len(fields[0][1]) if fields else 0
    columns, offsets, texts, n_names, width = [], [], [], [], len(fields)
    for kind, values, names in fields:
        if kind == "str":
            values = np.ascontiguousarray(values, np.int64)
            offsets.append(np.concatenate([[0], np.cumsum([len(n) for n in names], dtype=np.int64)]))
            texts.append(np.frombuffer(b"".join(names) or b"\0", np.uint8))
            n_names.append(len(names))
            width += max(map(len, names), default=0)
        else:
            values = np.ascontiguousarray(values, bool if kind == "bool" else np.int64)
            offsets.append(np.zeros(1, np.int64))
            texts.append(np.zeros(1, np.uint8))
            n_names.append(0)
            width += WIDTHS[kind]
        columns.append(values)
    # Room for the longest text of every row; only the pages written are ever touched.
    out = np.empty(n_rows * width, np.uint8)
    held = [np.array([KINDS[f[0]] for f in fields], np.int64), _address_table(columns),
            np.array(n_names, np.int64), _address_table(offsets), _address_table(texts)]   # alive through the call
    n = lib.csv_lines(n_rows, len(fields), *(a.ctypes.data for a in held), out.ctypes.data)
    return None if n < 0 else memoryview(out)[:n]


def _address_table(arrays):
    """The addresses of `arrays` (each held by the caller through the call) as an int64 array."""
    return np.array([a.ctypes.data for a in arrays], np.int64)
