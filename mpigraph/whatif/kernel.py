"""The forward pass in C, through cffi (ABI mode): vertex after vertex in topological order.

numpy's pass (envelope.Model) costs a few array operations per topological level: fine for
the shallow pieces of a bulk-synchronous run, minutes for a deep one (a ping-pong of 10^6
messages has 4 10^6 levels).  This kernel does the same work in one sweep over the edges,
whatever the depth.  It is compiled on first use (``util.ckernel``); where that fails the numpy
pass is used.  MPIGRAPH_WHATIF_KERNEL=numpy (a test setting) uses numpy anyway.

The pass's rules are envelope.Model._forward's: t(v) = max(start_v, max over in-edges of
t(u) + w); an in-edge is tight when t(u) + w >= t(v) - eps; the right slope is the max,
the left the min, of (slope at u + k) over the tight in-edges (0 when the vertex's own start
is active), `other` follows the first tight in-edge of the largest right slope, which is the
vertex's critical in-edge (pred).
"""

from mpigraph.util import ckernel

SOURCE = r"""
#include <math.h>
#include <stdint.h>

int64_t wi_topo(int64_t n, const int64_t *out_ptr, const int64_t *out_dst, int64_t *indeg, int64_t *order)
{
    int64_t head = 0, tail = 0;
    for (int64_t v = 0; v < n; v++)
        if (indeg[v] == 0)
            order[tail++] = v;
    while (head < tail) {
        int64_t v = order[head++];
        for (int64_t e = out_ptr[v]; e < out_ptr[v + 1]; e++)
            if (--indeg[out_dst[e]] == 0)
                order[tail++] = out_dst[e];
    }
    return tail;
}

/* K columns at once (t, right, left, other: n x K, row-major): column j evaluates edge e at
 * w = base[e] + coef[e] * values[piece[e] * K + j] (piece NULL: values[j]).  pred: the
 * critical in-edge in the last column. */
void wi_forward(int64_t n, int64_t K, const int64_t *order, const int64_t *in_ptr, const int64_t *in_src,
                const double *base, const double *coef, const double *ocoef, const int64_t *piece,
                const double *values, const double *start, double eps, double rel,
                double *t, double *right, double *left, double *other, int64_t *pred)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t v = order[i], a = in_ptr[v], b = in_ptr[v + 1];
        for (int64_t j = 0; j < K; j++) {
            double best = -INFINITY;
            for (int64_t e = a; e < b; e++) {
                const double *val = values + (piece ? piece[e] * K : 0);
                double c = t[in_src[e] * K + j] + base[e] + coef[e] * val[j];
                if (c > best)
                    best = c;
            }
            int from_start = start[v] >= best - (eps + rel * fabs(best));
            double tv = start[v] > best ? start[v] : best;
            double low = tv - (eps + rel * fabs(tv));
            double r = -INFINITY, l = INFINITY, ob = -INFINITY;
            int64_t pe = -1;
            for (int64_t e = a; e < b; e++) {
                int64_t u = in_src[e] * K + j;
                const double *val = values + (piece ? piece[e] * K : 0);
                if (t[u] + base[e] + coef[e] * val[j] < low)
                    continue;
                double rs = right[u] + coef[e], ls = left[u] + coef[e], os = other[u] + ocoef[e];
                if (rs > r) {
                    r = rs;
                    pe = e;
                    ob = os;
                } else if (rs == r && os > ob) {
                    ob = os;
                }
                if (ls < l)
                    l = ls;
            }
            int64_t x = v * K + j;
            t[x] = tv;
            if (from_start) {
                right[x] = r > 0 ? r : 0;
                left[x] = l < 0 ? l : 0;
                other[x] = r <= 0 ? 0 : ob;
                pe = r <= 0 ? -1 : pe;
            } else {
                right[x] = r;
                left[x] = l;
                other[x] = ob;
            }
            if (j == K - 1)
                pred[v] = pe;
        }
    }
}

void wi_mark(int64_t n, const int64_t *order, const int64_t *pred, const int64_t *in_src, char *on_vertex,
             char *on_edge)
{
    for (int64_t i = n - 1; i >= 0; i--) {
        int64_t v = order[i];
        if (on_vertex[v] && pred[v] >= 0) {
            on_edge[pred[v]] = 1;
            on_vertex[in_src[pred[v]]] = 1;
        }
    }
}
"""

CDEF = """
int64_t wi_topo(int64_t n, const int64_t *out_ptr, const int64_t *out_dst, int64_t *indeg, int64_t *order);
void wi_forward(int64_t n, int64_t K, const int64_t *order, const int64_t *in_ptr, const int64_t *in_src,
                const double *base, const double *coef, const double *ocoef, const int64_t *piece,
                const double *values, const double *start, double eps, double rel,
                double *t, double *right, double *left, double *other, int64_t *pred);
void wi_mark(int64_t n, const int64_t *order, const int64_t *pred, const int64_t *in_src, char *on_vertex,
             char *on_edge);
"""

_KERNEL = ckernel.Kernel("whatif-kernel", SOURCE, CDEF, "MPIGRAPH_WHATIF_KERNEL", "numpy")


def load():
    """(ffi, lib) of the compiled kernel, or None (no compiler, or MPIGRAPH_WHATIF_KERNEL=numpy)."""
    return _KERNEL.load()
