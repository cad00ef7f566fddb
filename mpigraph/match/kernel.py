"""The match's counting passes in C: what a sort does in numpy, in one pass over the rows.

``ordinals`` numbers each row within its group (a message's place in its stream, an epoch's
among its window's): a count per group, read and incremented row by row, where numpy sorts the
rows by group and numbers the sorted runs (a sort, a gather and a scatter of every row).

Each function returns None where the kernel cannot be used (no C compiler, or
MPIGRAPH_MATCH_KERNEL=off, a test setting); the callers then do the same with numpy.
"""

import ctypes

import numpy as np

from mpigraph.util import ckernel

SOURCE = r"""
#include <stdint.h>

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
"""

CDEF = """
int64_t ordinals(int64_t n, const int64_t *code, const int64_t *order, int64_t *count, int64_t *last,
                 int64_t *out);
"""

_KERNEL = ckernel.Kernel("match-kernel", SOURCE, CDEF, "MPIGRAPH_MATCH_KERNEL", "off")
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_FUNCTIONS = {"ordinals": (_I64, [_I64, _PTR, _PTR, _PTR, _PTR, _PTR])}


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
