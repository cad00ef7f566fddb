"""The least distances of an acyclic graph in one sweep, in C: what csgraph's Dijkstra finds,
without its heap.

The activity graph is acyclic (its edges go forward in time), so its least distances from a
set of sources follow from one pass in topological order: a vertex's distance is final when
every edge into it has been relaxed (Kahn's algorithm).  That is linear in the edges reached,
where Dijkstra pays a heap operation per vertex: a pipelined program's graph, tens of millions
of vertices with hardly a vertex to bypass, is where that shows.  The distances are the same
integers (int64 sums, exact, where csgraph sums in float64); next[] follows from them by the
shared pass, so the path is the same too.  That pass is next_from_dist() here, on every
analysis rank: one loop over the CSR, not numpy's chunks of gathers.

run_exits() is the distributed walk's (``walk.local_exits``) in one pass: where each vertex's run
along next[] leaves an analysis rank's vertices; walk_runs() its runs on the path, on each rank
(``walk._Runs``); chain_entries() their entries' chain on rank 0 (``walk._chain_entries``): a
run at a time, without Python's cost per run.

bypass_runs() finds a Bypass's runs of one-way vertices (``dijkstra.Bypass``) and split_part()
splits an analysis rank's part into its local and crossing edges (``parallel_dijkstra._split``):
passes over the edges that numpy would make as several passes and temporaries each.

The CSR's kernels read its columns in the dtypes the graph keeps (int32 indptr and ids, uint32
slacks where they fit: ``model.index_dtype``, ``model.slack_dtype``), one variant per combination.

Each returns None where the kernel cannot be used (no C compiler, or MPIGRAPH_PATH_KERNEL=off,
a test setting), and search() also where the part of the graph it reaches has a cycle; the
callers then use csgraph's Dijkstra, numpy's pointer jumping and a Python loop.
"""

import ctypes
import itertools

import numpy as np

from mpigraph.util import ckernel

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>

/* A stack twice as large (its old room: *room), or 0 where there is no memory for it. */
static int grow(int64_t **stack, int64_t *room)
{
    int64_t *larger = realloc(*stack, 2 * *room * sizeof(int64_t));
    if (!larger)
        return 0;
    *stack = larger;
    *room *= 2;
    return 1;
}

/* Least distances from the sources (dist holds their offsets, INF elsewhere) along the CSR
 * (indptr, indices, weight: row v lists the edges v -> indices[e]), in Kahn's order: a vertex's
 * distance is final once every edge into it is relaxed; its ready vertices are taken from a
 * stack (a rank's chain of calls is followed backwards while it is in cache).
 *
 * NAME, over the part reached from the sources (found by a depth-first walk): reached: n bytes
 * of 0; indeg: n int32 of 0; order: n int64.  Returns the number of vertices reached, or -1
 * when that part has a cycle.
 *
 * NAME_whole, over every vertex, where the sources reach most of the graph: the in-degrees by
 * one pass over the edges in order, which costs less than finding the reached part, and a
 * stack of its own (of the few ready vertices at a time, not n).  A vertex the sources do not
 * reach keeps INF: relaxing its edges lowers nothing.  Returns n, or -1 where the graph has a
 * cycle (reached or not: the caller then searches the reached part). */
#define DAG_SEARCH(NAME, PTR, INDEX, WEIGHT)                                                    \
static int64_t NAME##_kahn(int64_t top, const PTR *indptr, const INDEX *indices,               \
                           const WEIGHT *weight, int64_t *dist, int32_t *indeg,               \
                           int64_t **stack, int64_t *room)                                    \
{                                                                                             \
    int64_t taken = 0, *ready = *stack, limit = *room; /* locals: no alias of dist */         \
    while (top) {                                                                             \
        int64_t v = ready[--top], d = dist[v];                                                \
        taken++;                                                                              \
        for (int64_t e = indptr[v]; e < indptr[v + 1]; e++) {                                 \
            int64_t u = indices[e], c = d + (int64_t)weight[e];                               \
            if (c < dist[u])                                                                  \
                dist[u] = c;                                                                  \
            if (--indeg[u] == 0) {                                                            \
                if (top == limit) {                                                           \
                    if (!grow(stack, room))                                                   \
                        return -1;                                                            \
                    ready = *stack;                                                           \
                    limit = *room;                                                            \
                }                                                                             \
                ready[top++] = u;                                                             \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    return taken;                                                                             \
}                                                                                             \
                                                                                              \
int64_t NAME##_whole(int64_t n, const PTR *indptr, const INDEX *indices, const WEIGHT *weight, \
                     int64_t *dist, int32_t *indeg)                                           \
{                                                                                             \
    int64_t m = indptr[n], top = 0, room = 1024, taken = -1;                                  \
    int64_t *stack = malloc(room * sizeof(int64_t));                                          \
    for (int64_t e = 0; e < m; e++)                                                           \
        indeg[indices[e]]++;                                                                  \
    for (int64_t v = 0; v < n && stack; v++)                                                  \
        if (indeg[v] == 0) {                                                                  \
            if (top == room && !grow(&stack, &room))                                          \
                break;                                                                        \
            stack[top++] = v;                                                                 \
        }                                                                                     \
    if (stack)                                                                                \
        taken = NAME##_kahn(top, indptr, indices, weight, dist, indeg, &stack, &room);       \
    free(stack);                                                                              \
    return taken == n ? n : -1;                                                               \
}                                                                                             \
                                                                                              \
int64_t NAME(int64_t n, const PTR *indptr, const INDEX *indices, const WEIGHT *weight,        \
             int64_t n_sources, const int64_t *sources, int64_t *dist, char *reached,         \
             int32_t *indeg, int64_t *order)                                                  \
{                                                                                             \
    int64_t top = 0, n_reached = 0;                                                           \
    /* The reached part and each of its vertices' edges in from it: a depth-first walk with  \
     * order[] as its stack; each vertex is appended to the front of order[] once. */        \
    for (int64_t i = 0; i < n_sources; i++) {                                                 \
        int64_t s = sources[i];                                                               \
        if (!reached[s]) {                                                                    \
            reached[s] = 1;                                                                   \
            order[n - 1 - top++] = s;                                                         \
        }                                                                                     \
    }                                                                                         \
    while (top) {                                                                             \
        int64_t v = order[n - top--];                                                         \
        order[n_reached++] = v;                                                               \
        for (int64_t e = indptr[v]; e < indptr[v + 1]; e++) {                                 \
            int64_t u = indices[e];                                                           \
            indeg[u]++;                                                                       \
            if (!reached[u]) {                                                                \
                reached[u] = 1;                                                               \
                order[n - 1 - top++] = u;                                                     \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    /* Kahn's order over the reached part, its first vertices moved to the front of order[]  \
     * (tail <= i, nothing unread is overwritten), which is then the stack: room for all. */  \
    int64_t tail = 0, room = n;                                                               \
    for (int64_t i = 0; i < n_reached; i++)                                                   \
        if (indeg[order[i]] == 0)                                                             \
            order[tail++] = order[i];                                                         \
    tail = NAME##_kahn(tail, indptr, indices, weight, dist, indeg, &order, &room);            \
    return tail == n_reached ? n_reached : -1;                                                \
}

/* next[] from the final distances (labels.py's tie-break): for each edge u -> v of the CSR (row v
 * lists its edges in, from src[e]) with dist[v] < inf, the offer dist[v] + weight; u's next is
 * the least key of v (its global id) among the offers equal to dist[u].  With split, an edge out
 * of a hub (u >= n_rank) is an offer to hub u - n_rank instead: its least, and the least key
 * among equals, go to hub_best and hub_key.
 *
 * The rows are analysis rank me's of k: rows 0 .. hi - lo - 1 are the rank vertices lo .. hi - 1,
 * the rows after them its hubs (hub h at row hi - lo + h / k, h % k == me); src are global ids.
 * An edge out of a vertex another rank owns is decided there: its (u, offer, key) go to away_*
 * (room for every edge), unless its row is remote_from or later (an edge into a hub from another
 * rank's member, decided there without being sent).  Returns the count of edges sent away. */
#define NEXT_FROM_DIST(NAME, PTR, INDEX, WEIGHT)                                                \
int64_t NAME(int64_t n, const PTR *indptr, const INDEX *src, const WEIGHT *weight,           \
             const int64_t *dist, int64_t inf, int64_t n_rank, int64_t split, int64_t lo,     \
             int64_t hi, int64_t me, int64_t k, int64_t remote_from, int64_t *next,           \
             int64_t *hub_best, int64_t *hub_key, int64_t *away_src, int64_t *away_offer,     \
             int64_t *away_key)                                                               \
{                                                                                             \
    int64_t n_rows = hi - lo, away = 0;                                                       \
    for (int64_t v = 0; v < n; v++) {                                                         \
        int64_t d = dist[v], key = v < n_rows ? lo + v : n_rank + me + k * (v - n_rows);      \
        if (d >= inf)                                                                         \
            continue;                                                                         \
        for (int64_t e = indptr[v]; e < indptr[v + 1]; e++) {                                 \
            int64_t u = src[e], offer = d + (int64_t)weight[e], local = -1;                   \
            if (split && u >= n_rank) {                                                       \
                int64_t h = u - n_rank;                                                       \
                if (offer < hub_best[h] || (offer == hub_best[h] && key < hub_key[h])) {     \
                    hub_best[h] = offer;                                                      \
                    hub_key[h] = key;                                                         \
                }                                                                             \
                continue;                                                                     \
            }                                                                                 \
            if (u < n_rank) {                                                                 \
                if (u >= lo && u < hi)                                                        \
                    local = u - lo;                                                           \
            } else if ((u - n_rank) % k == me)                                                \
                local = n_rows + (u - n_rank) / k;                                            \
            if (local >= 0) {                                                                 \
                if (offer == dist[local] && key < next[local])                                \
                    next[local] = key;                                                        \
            } else if (v < remote_from) {                                                     \
                away_src[away] = u;                                                           \
                away_offer[away] = offer;                                                     \
                away_key[away++] = key;                                                       \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    return away;                                                                              \
}

/* A Bypass's runs (paths.dijkstra.Bypass): where each one-way vertex's run of one-way vertices
 * ends and the slacks up to there, and the edges the search keeps.  Row d of the CSR lists the
 * edges src[e] -> d.  state[v]: 1 where v is one-way (its single edge is its run's next step),
 * else 0; overwritten.  searched[v]: the search keeps v's edges.
 *
 * target[v], slack[v] (v and 0 unless one-way) become the first vertex of v's run that is not
 * one-way and the weights up to it; kept_* get the edges out of searched vertices, in edge order.
 * A run is walked twice: once to its end, summing the weights (state 2: on this walk), once more
 * to write each vertex's end and the rest of the sum (state 3: done, read by later runs that
 * lead into it).  Returns the kept edges' count; -1 where one-way vertices make a cycle; -2 where
 * a run's slack does not fit WEIGHT (the caller widens the weights and calls again). */
#define BYPASS_RUNS(NAME, PTR, INDEX, WEIGHT, LARGEST)                                          \
int64_t NAME(int64_t n, const PTR *indptr, const INDEX *src, const WEIGHT *weight, char *state,  \
             const char *searched, INDEX *target, WEIGHT *slack, INDEX *kept_dst,              \
             INDEX *kept_src, WEIGHT *kept_weight)                                            \
{                                                                                             \
    int64_t kept = 0;                                                                         \
    for (int64_t v = 0; v < n; v++)                                                           \
        if (!state[v]) {                                                                      \
            target[v] = (INDEX)v;                                                             \
            slack[v] = 0;                                                                     \
        }                                                                                     \
    for (int64_t d = 0; d < n; d++)                                                           \
        for (int64_t e = indptr[d]; e < indptr[d + 1]; e++) {                                 \
            int64_t s = src[e];                                                               \
            if (state[s]) {                                                                   \
                target[s] = (INDEX)d;                                                         \
                slack[s] = weight[e];                                                         \
            } else if (searched[s]) {                                                         \
                kept_dst[kept] = (INDEX)d;                                                    \
                kept_src[kept] = (INDEX)s;                                                    \
                kept_weight[kept++] = weight[e];                                              \
            }                                                                                 \
        }                                                                                     \
    for (int64_t v = 0; v < n; v++) {                                                         \
        if (state[v] != 1)                                                                    \
            continue;                                                                         \
        uint64_t sum = 0;                                                                     \
        int64_t u = v;                                                                        \
        for (; state[u] == 1; u = target[u]) {                                                \
            state[u] = 2;                                                                     \
            sum += slack[u];                                                                  \
        }                                                                                     \
        if (state[u] == 2)                                                                    \
            return -1;                                                                        \
        int64_t end = u;                                                                      \
        if (state[u] == 3) {       /* into a run done before: on to its end */                \
            sum += slack[u];                                                                  \
            end = target[u];                                                                  \
        }                                                                                     \
        if (sum > (uint64_t)(LARGEST))                                                        \
            return -2;                                                                        \
        for (int64_t w = v; state[w] == 2;) {                                                 \
            int64_t next = target[w];                                                         \
            uint64_t own = slack[w];                                                          \
            slack[w] = (WEIGHT)sum;                                                           \
            target[w] = (INDEX)end;                                                           \
            state[w] = 3;                                                                     \
            sum -= own;                                                                       \
            w = next;                                                                         \
        }                                                                                     \
    }                                                                                         \
    return kept;                                                                              \
}

/* An analysis rank's part of the graph split for parallel-dijkstra's rounds
 * (parallel_dijkstra._JoinedSearch.of): the edges src[e] -> d of its CSR (rows: its local vertices)
 * whose source it owns, as a CSR of local ids, and the others, the crossing edges.  A source s
 * at or past n_rank is hub s - n_rank, owned by analysis rank (s - n_rank) % k, at local id
 * (hi - lo) + (s - n_rank) / k; a rank vertex is owned in lo .. hi - 1, at local id s - lo.
 * Edges out of hubs are left out unless relax_hubs; crossing edges at or past cut are left out.
 *
 * NAME_count: the local edges' count, and the crossing ones' in *n_cross.  NAME: fills
 * out_indptr (n + 1), out_src and out_weight (the local edges, in order) and the crossing edges'
 * cross_dst (their rows), cross_src and cross_weight, in order. */
#define SPLIT_PART(NAME, PTR, INDEX, WEIGHT)                                                    \
static inline int NAME##_side(int64_t s, int64_t lo, int64_t hi, int64_t n_rank, int64_t k,      \
                              int64_t me, int64_t relax_hubs, int64_t *local)                 \
{   /* 1: local (its local id in *local), -1: crossing, 0: left out */                        \
    if (s >= n_rank) {                                                                        \
        if (!relax_hubs)                                                                      \
            return 0;                                                                         \
        if ((s - n_rank) % k != me)                                                           \
            return -1;                                                                        \
        *local = (hi - lo) + (s - n_rank) / k;                                                \
        return 1;                                                                             \
    }                                                                                         \
    if (s < lo || s >= hi)                                                                    \
        return -1;                                                                            \
    *local = s - lo;                                                                          \
    return 1;                                                                                 \
}                                                                                             \
int64_t NAME##_count(int64_t n, const PTR *indptr, const INDEX *src, int64_t lo, int64_t hi,    \
                     int64_t n_rank, int64_t k, int64_t me, int64_t relax_hubs, int64_t cut,   \
                     int64_t *n_cross)                                                        \
{                                                                                             \
    int64_t n_local = 0, crossing = 0, local;                                                 \
    for (int64_t e = 0; e < (int64_t)indptr[n]; e++) {                                        \
        int side = NAME##_side(src[e], lo, hi, n_rank, k, me, relax_hubs, &local);            \
        n_local += side > 0;                                                                  \
        crossing += side < 0 && e < cut;                                                      \
    }                                                                                         \
    *n_cross = crossing;                                                                      \
    return n_local;                                                                           \
}                                                                                             \
void NAME(int64_t n, const PTR *indptr, const INDEX *src, const WEIGHT *weight, int64_t lo,     \
          int64_t hi, int64_t n_rank, int64_t k, int64_t me, int64_t relax_hubs, int64_t cut,   \
          PTR *out_indptr, INDEX *out_src, WEIGHT *out_weight, INDEX *cross_dst,              \
          INDEX *cross_src, WEIGHT *cross_weight)                                             \
{                                                                                             \
    int64_t at = 0, c = 0, local;                                                             \
    out_indptr[0] = 0;                                                                        \
    for (int64_t d = 0; d < n; d++) {                                                         \
        for (int64_t e = indptr[d]; e < (int64_t)indptr[d + 1]; e++) {                        \
            int side = NAME##_side(src[e], lo, hi, n_rank, k, me, relax_hubs, &local);        \
            if (side > 0) {                                                                   \
                out_src[at] = (INDEX)local;                                                   \
                out_weight[at++] = weight[e];                                                 \
            } else if (side < 0 && e < cut) {                                                 \
                cross_dst[c] = (INDEX)d;                                                      \
                cross_src[c] = src[e];                                                        \
                cross_weight[c++] = weight[e];                                                \
            }                                                                                 \
        }                                                                                     \
        out_indptr[d + 1] = (PTR)at;                                                          \
    }                                                                                         \
}

#define CSR_KERNELS(SUFFIX, PTR, INDEX, WEIGHT)                                                 \
    DAG_SEARCH(dag_search_##SUFFIX, PTR, INDEX, WEIGHT)                                       \
    NEXT_FROM_DIST(next_from_dist_##SUFFIX, PTR, INDEX, WEIGHT)                               \
    BYPASS_RUNS(bypass_runs_##SUFFIX, PTR, INDEX, WEIGHT, (WEIGHT)-1 > 0 ? (uint64_t)(WEIGHT)-1 : INT64_MAX) \
    SPLIT_PART(split_part_##SUFFIX, PTR, INDEX, WEIGHT)

/* (Their variants, and CSR_COUNT's and CSR_PLACE's, are instantiated after this text: one per
 * entry of CSR_VARIANTS, PLACE_VARIANTS.) */


/* A CSR from groups of edges (dst, src, weight), as a stable sort of them all by dst would place
 * them (graph._csr): a counting sort.  csr_count_D: each row's count of a group's edges into
 * fill (n int64), or -1 where a dst is not a row.  csr_place_D_S_W: a group's edges at their
 * rows' next free places (fill: each row's, moved on), weight NULL for zero weights (the output's
 * start at zero). */
#define CSR_COUNT(NAME, DST)                                                                    \
int64_t NAME(int64_t m, const DST *dst, int64_t n, int64_t *fill)                              \
{                                                                                             \
    for (int64_t e = 0; e < m; e++) {                                                         \
        if ((uint64_t)dst[e] >= (uint64_t)n)                                                  \
            return -1;                                                                        \
        fill[dst[e]]++;                                                                       \
    }                                                                                         \
    return m;                                                                                 \
}

#define CSR_PLACE(NAME, DST, SRC, WEIGHT)                                                       \
void NAME(int64_t m, const DST *dst, const SRC *src, const int64_t *weight, int64_t *fill,    \
          SRC *out_src, WEIGHT *out_weight)                                                   \
{                                                                                             \
    for (int64_t e = 0; e < m; e++) {                                                         \
        int64_t place = fill[dst[e]]++;                                                       \
        out_src[place] = src[e];                                                              \
        if (weight)                                                                           \
            out_weight[place] = (WEIGHT)weight[e];                                            \
    }                                                                                         \
}


/* For each of the n vertices lo .. lo + n - 1 (next of v: nxt[v - lo], a global id), where its
 * run along next[] through them leaves them: a vertex out of the range, or no_next after the
 * sink or on a cycle.  exits: n int64 of -1; stack: n int64.  Each vertex is walked once: a
 * walk stops at a vertex whose exit is known and gives its own to the vertices it passed. */
void run_exits(int64_t n, int64_t lo, int64_t sink, int64_t no_next, const int64_t *nxt, int64_t *exits,
               int64_t *stack)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t top = 0, v = i, x;
        while (1) {
            if (exits[v] == -2) {           /* on this walk already: a cycle */
                x = no_next;
                break;
            }
            if (exits[v] != -1) {
                x = exits[v];
                break;
            }
            exits[v] = -2;
            stack[top++] = v;
            int64_t w = nxt[v];
            if (lo + v == sink) {
                x = no_next;
                break;
            }
            if (w < lo || w >= lo + n) {
                x = w;
                break;
            }
            v = w - lo;
        }
        while (top)
            exits[stack[--top]] = x;
    }
}

/* Each entry's run along next[] through the vertices lo .. lo + n - 1 (next of v: nxt[v - lo]):
 * its vertices, one run after another, into vertices (room for cap), its length and its exit:
 * the vertex after its last, out of the range, or no_next after the sink, at a dead end or on a
 * cycle (a run longer than the range).  Returns how many vertices, or -1 when cap is short. */
int64_t walk_runs(int64_t n, int64_t lo, int64_t sink, int64_t no_next, const int64_t *nxt,
                  int64_t n_entries, const int64_t *entries, int64_t *exits, int64_t *lengths,
                  int64_t *vertices, int64_t cap)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n_entries; i++) {
        int64_t v = entries[i], count = 0, x;
        while (1) {
            if (k == cap)
                return -1;
            vertices[k++] = v;
            count++;
            if (v == sink) {
                x = no_next;
                break;
            }
            int64_t w = nxt[v - lo];
            if (w == no_next || w < lo || w >= lo + n) {
                x = w;
                break;
            }
            if (count > n) {
                x = no_next;
                break;
            }
            v = w;
        }
        exits[i] = x;
        lengths[i] = count;
    }
    return k;
}

/* The runs' entries on the path, in order, into path (n int64): from start, each entry's run
 * hands over at its exit (exit_[i] of entry[i], entry sorted), past a hub (an id n_rank or
 * above) at the vertex after it; up to an exit no_next or one that is no entry.  Returns how
 * many. */
int64_t chain_entries(int64_t n, const int64_t *entry, const int64_t *exit_, int64_t start,
                      const int64_t *after_hub, int64_t n_rank, int64_t no_next, int64_t *path)
{
    int64_t count = 0, v = start;
    while (count < n) {
        int64_t lo = 0, hi = n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (entry[mid] < v)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == n || entry[lo] != v)
            break;
        path[count++] = v;
        v = exit_[lo];
        if (v != no_next && v >= n_rank)
            v = after_hub[v - n_rank];
        if (v == no_next)
            break;
    }
    return count;
}
"""

# The CSR kernels' variants: (indptr, indices, weight) dtypes as the graph holds them
# (``model.index_dtype``, ``model.slack_dtype``), read without a copy.
_C_TYPES = {"int32": "int32_t", "int64": "int64_t", "uint32": "uint32_t"}


def _short(dtype):
    """A dtype's name in a variant's: int32 i32, uint32 u32, int64 i64."""
    name = np.dtype(dtype).name
    return name[0] + name[-2:]


def _variants(columns):
    """{dtype names: variant suffix} of every combination of the columns' dtype names."""
    return {names: "_".join(_short(name) for name in names) for names in itertools.product(*columns)}


CSR_VARIANTS = {names: suffix for names, suffix in _variants((("int32", "int64"),) * 2 + (("uint32", "int64"),)).items()
                if not (names[0] == "int32" and names[1] == "int64")}   # such an indptr is read as int64 (_csr)

_SEARCH_DECL = """int64_t dag_search_%s(int64_t n, const void *indptr, const void *indices, const void *weight,
                     int64_t n_sources, const int64_t *sources, int64_t *dist, char *reached,
                     int32_t *indeg, int64_t *order);"""
_WHOLE_DECL = """int64_t dag_search_%s_whole(int64_t n, const void *indptr, const void *indices, const void *weight,
                           int64_t *dist, int32_t *indeg);"""
_NEXT_DECL = """int64_t next_from_dist_%s(int64_t n, const void *indptr, const void *src, const void *weight,
                     const int64_t *dist, int64_t inf, int64_t n_rank, int64_t split, int64_t lo,
                     int64_t hi, int64_t me, int64_t k, int64_t remote_from, int64_t *next,
                     int64_t *hub_best, int64_t *hub_key, int64_t *away_src, int64_t *away_offer,
                     int64_t *away_key);"""

# The CSR building kernels' variants: (dst, src, output weight) dtypes.
PLACE_VARIANTS = _variants((("int32", "int64"),) * 2 + (("uint32", "int64"),))

SOURCE += "".join("CSR_KERNELS(%s, %s, %s, %s)\n" % ((suffix,) + tuple(_C_TYPES[name] for name in names))
                  for names, suffix in CSR_VARIANTS.items()) \
    + "".join("CSR_COUNT(csr_count_%s, %s)\n" % (_short(name), _C_TYPES[name]) for name in ("int32", "int64")) \
    + "".join("CSR_PLACE(csr_place_%s, %s, %s, %s)\n" % ((suffix,) + tuple(_C_TYPES[name] for name in names))
              for names, suffix in PLACE_VARIANTS.items())

_COUNT_DECL = "int64_t csr_count_%s(int64_t m, const void *dst, int64_t n, int64_t *fill);"
_PLACE_DECL = """void csr_place_%s(int64_t m, const void *dst, const void *src, const int64_t *weight, int64_t *fill,
                    void *out_src, void *out_weight);"""

_BYPASS_DECL = """int64_t bypass_runs_%s(int64_t n, const void *indptr, const void *src, const void *weight, char *state,
                     const char *searched, void *target, void *slack, void *kept_dst, void *kept_src,
                     void *kept_weight);"""

_SPLIT_COUNT_DECL = """int64_t split_part_%s_count(int64_t n, const void *indptr, const void *src, int64_t lo, int64_t hi,
                     int64_t n_rank, int64_t k, int64_t me, int64_t relax_hubs, int64_t cut,
                     int64_t *n_cross);"""
_SPLIT_DECL = """void split_part_%s(int64_t n, const void *indptr, const void *src, const void *weight, int64_t lo,
          int64_t hi, int64_t n_rank, int64_t k, int64_t me, int64_t relax_hubs, int64_t cut,
          void *out_indptr, void *out_src, void *out_weight, void *cross_dst, void *cross_src,
          void *cross_weight);"""

CDEF = "\n".join(decl % suffix for suffix in CSR_VARIANTS.values()
                 for decl in (_SEARCH_DECL, _WHOLE_DECL, _NEXT_DECL, _BYPASS_DECL, _SPLIT_COUNT_DECL, _SPLIT_DECL)) \
    + "\n" \
    + "\n".join([_COUNT_DECL % "i32", _COUNT_DECL % "i64"] + [_PLACE_DECL % v for v in PLACE_VARIANTS.values()]) + """
void run_exits(int64_t n, int64_t lo, int64_t sink, int64_t no_next, const int64_t *nxt, int64_t *exits,
               int64_t *stack);
int64_t chain_entries(int64_t n, const int64_t *entry, const int64_t *exit_, int64_t start,
                      const int64_t *after_hub, int64_t n_rank, int64_t no_next, int64_t *path);
int64_t walk_runs(int64_t n, int64_t lo, int64_t sink, int64_t no_next, const int64_t *nxt,
                  int64_t n_entries, const int64_t *entries, int64_t *exits, int64_t *lengths,
                  int64_t *vertices, int64_t cap);
"""

_KERNEL = ckernel.Kernel("path-kernel", SOURCE, CDEF, "MPIGRAPH_PATH_KERNEL", "off")

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_SEARCH_ARGS = (_I64, [_I64, _PTR, _PTR, _PTR, _I64, _PTR, _PTR, _PTR, _PTR, _PTR])
_WHOLE_ARGS = (_I64, [_I64, _PTR, _PTR, _PTR, _PTR, _PTR])
_NEXT_ARGS = (_I64, [_I64, _PTR, _PTR, _PTR, _PTR] + [_I64] * 8 + [_PTR] * 6)
_FUNCTIONS = {"run_exits": (None, [_I64, _I64, _I64, _I64, _PTR, _PTR, _PTR]),
              "chain_entries": (_I64, [_I64, _PTR, _PTR, _I64, _PTR, _I64, _I64, _PTR]),
              "walk_runs": (_I64, [_I64, _I64, _I64, _I64, _PTR, _I64, _PTR, _PTR, _PTR, _PTR, _I64])}
_FUNCTIONS["csr_count_i32"] = _FUNCTIONS["csr_count_i64"] = (_I64, [_I64, _PTR, _I64, _PTR])
for _suffix in PLACE_VARIANTS.values():
    _FUNCTIONS["csr_place_" + _suffix] = (None, [_I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR])
for _suffix in CSR_VARIANTS.values():
    _FUNCTIONS["dag_search_" + _suffix], _FUNCTIONS["dag_search_%s_whole" % _suffix] = _SEARCH_ARGS, _WHOLE_ARGS
    _FUNCTIONS["next_from_dist_" + _suffix] = _NEXT_ARGS
    _FUNCTIONS["bypass_runs_" + _suffix] = (_I64, [_I64] + [_PTR] * 10)
    _FUNCTIONS["split_part_%s_count" % _suffix] = (_I64, [_I64, _PTR, _PTR] + [_I64] * 7 + [_PTR])
    _FUNCTIONS["split_part_" + _suffix] = (None, [_I64, _PTR, _PTR, _PTR] + [_I64] * 7 + [_PTR] * 6)


def _library():
    return _KERNEL.load_ctypes(_FUNCTIONS)


def _int64(*arrays):
    """The arrays as the kernel reads them: C-contiguous int64 (a copy only where they are not)."""
    return [np.ascontiguousarray(a, np.int64) for a in arrays]


# The id dtypes the CSR kernels read (indices, a group's dst).
_IDS = ("int32", "int64")


def _kept(a, dtypes):
    """`a` C-contiguous in its own dtype where a kernel reads that one (`dtypes`), else as int64:
    a copy only where needed."""
    a = np.asarray(a)
    return np.ascontiguousarray(a) if a.dtype.name in dtypes else np.ascontiguousarray(a, np.int64)


def _csr(indptr, indices, weight):
    """(variant suffix, indptr, indices, weight): the CSR as a kernel variant reads it, a copy
    only of a column whose dtype none reads (as int64) or that is not C-contiguous."""
    indices = _kept(indices, _IDS)
    indptr = _kept(indptr, ("int32",) if indices.dtype == np.int32 else ())
    weight = _kept(weight, ("uint32",))
    return CSR_VARIANTS[indptr.dtype.name, indices.dtype.name, weight.dtype.name], indptr, indices, weight


def available():
    """Whether search() can run here (the kernel compiled and not switched off)."""
    return _library() is not None


def search(n, indptr, indices, weight, sources, offsets, inf, whole=False):
    """int64 least distance of each of n vertices from the nearest source (each starting at its
    offset; `inf` where none reaches it), along the CSR (indptr, indices: int32 or int64,
    weight: uint32 or int64; other dtypes are copied); None where the kernel cannot run or the
    reached part has a cycle.  `whole`: the sources reach most of the graph, which is then swept
    whole, not found first (the same distances)."""
    lib = _library()
    if lib is None:
        return None
    suffix, indptr, indices, weight = _csr(indptr, indices, weight)
    (sources,) = _int64(sources)
    columns = indptr.ctypes.data, indices.ctypes.data, weight.ctypes.data
    if whole:
        dist, indeg = _starts(n, sources, offsets, inf), np.zeros(n, np.int32)
        if getattr(lib, "dag_search_%s_whole" % suffix)(n, *columns, dist.ctypes.data, indeg.ctypes.data) >= 0:
            return dist
    dist, indeg = _starts(n, sources, offsets, inf), np.zeros(n, np.int32)
    reached = np.zeros(n, np.int8)
    order = np.empty(n, np.int64)
    found = getattr(lib, "dag_search_" + suffix)(n, *columns, len(sources), sources.ctypes.data, dist.ctypes.data,
                                                 reached.ctypes.data, indeg.ctypes.data, order.ctypes.data)
    return dist if found >= 0 else None


def bypass_runs(one_way, searched, indptr, src, weight, n_kept, index):
    """A Bypass's (target, slack, [dst, src, weight] of the n_kept edges out of `searched`
    vertices), as ``dijkstra.Bypass._runs`` makes them, in one pass over the edges and two over
    each run; None where the kernel cannot run.  The ids (target, the kept edges' ends) are in
    `index` (int32 where the graph's vertices fit); the slacks in weight's dtype, int64 where a
    run's sum does not fit uint32.  ValueError where one-way vertices make a cycle."""
    lib = _library()
    if lib is None:
        return None
    src = np.asarray(src).astype(index, copy=False)        # a copy only where the kernel runs
    n = len(one_way)
    searched = np.ascontiguousarray(searched, bool)
    while True:
        suffix, indptr, src, weight = _csr(indptr, src, weight)
        target, slack = np.empty(n, src.dtype), np.empty(n, weight.dtype)
        kept = [np.empty(n_kept, src.dtype), np.empty(n_kept, src.dtype), np.empty(n_kept, weight.dtype)]
        state = one_way.astype(np.int8)
        found = getattr(lib, "bypass_runs_" + suffix)(n, indptr.ctypes.data, src.ctypes.data, weight.ctypes.data,
                                                     state.ctypes.data, searched.ctypes.data, target.ctypes.data,
                                                     slack.ctypes.data, *(k.ctypes.data for k in kept))
        if found == -1:
            raise ValueError("the graph has a cycle of one-way vertices")
        if found == -2 and weight.dtype != np.int64:
            weight = weight.astype(np.int64)       # a run's slack beyond uint32: widened once
            continue
        if found != n_kept:
            raise ValueError("a run's slack does not fit int64")
        return target, slack, kept


def split_part(indptr, src, weight, lo, hi, n_rank, k, me, relax_hubs, cut):
    """(indptr, src, weight of the owned sources' edges, src as local ids; dst (row), src, weight
    of the crossing edges before edge `cut`) of an analysis rank's CSR, in two passes over its
    edges (the split that ``parallel_dijkstra._JoinedSearch.of`` makes); None where the kernel
    cannot run.  The columns keep the CSR's dtypes where a kernel reads them."""
    lib = _library()
    if lib is None:
        return None
    suffix, indptr, src, weight = _csr(indptr, src, weight)
    n = len(indptr) - 1
    scalars = (lo, hi, n_rank, k, me, int(relax_hubs), cut)
    n_cross = np.zeros(1, np.int64)
    n_local = getattr(lib, "split_part_%s_count" % suffix)(n, indptr.ctypes.data, src.ctypes.data, *scalars,
                                                         n_cross.ctypes.data)
    part = np.empty(n + 1, indptr.dtype), np.empty(n_local, src.dtype), np.empty(n_local, weight.dtype)
    cross = np.empty(n_cross[0], src.dtype), np.empty(n_cross[0], src.dtype), np.empty(n_cross[0], weight.dtype)
    getattr(lib, "split_part_" + suffix)(n, indptr.ctypes.data, src.ctypes.data, weight.ctypes.data, *scalars,
                                         *(a.ctypes.data for a in part + cross))
    return part, cross


def _starts(n, sources, offsets, inf):
    """dist before a search: each source's least offset, inf elsewhere."""
    dist = np.full(n, inf, np.int64)
    np.minimum.at(dist, sources, np.asarray(offsets, np.int64))
    return dist


def next_from_dist(indptr, src, weight, dist, inf, n_rank, n_hubs, split, no_next, owner=(0, None, 0, 1, None)):
    """(next, hub_best, hub_key, (src, offer, key) of the edges sent away): ``labels.next_from_dist``'s
    pass in C over an analysis rank's CSR, each vertex's least key among its tight edges, and with
    `split` each hub's least offer and least key among those; None where the kernel cannot run.
    `owner`: (lo, hi, me, k, remote_from) of the analysis rank (the kernel's comment; default: the
    whole graph on one rank, hi n_rank, remote_from every row)."""
    lib = _library()
    if lib is None:
        return None
    suffix, indptr, src, weight = _csr(indptr, src, weight)
    (dist,) = _int64(dist)
    n = len(dist)
    lo, hi, me, k, remote_from = owner
    hi = n_rank if hi is None else hi
    remote_from = n if remote_from is None else remote_from
    nxt = np.full(n, no_next, np.int64)
    hub_best = np.full(n_hubs if split else 0, inf, np.int64)
    hub_key = np.full(len(hub_best), no_next, np.int64)
    # Room for every edge, untouched (no page written) but for the edges sent away.
    away = [np.empty(len(src) if k > 1 else 0, np.int64) for _ in range(3)]
    count = getattr(lib, "next_from_dist_" + suffix)(
        n, indptr.ctypes.data, src.ctypes.data, weight.ctypes.data, dist.ctypes.data, inf, n_rank, int(split),
        lo, hi, me, k, remote_from, nxt.ctypes.data, hub_best.ctypes.data, hub_key.ctypes.data,
        *(a.ctypes.data for a in away))
    return nxt, hub_best, hub_key, [a[:count].copy() for a in away]


def csr(n, groups, index_dtype, src_dtype, weight_dtype, is_zeros):
    """(indptr, src, weight): graph._csr's CSR of `groups` ((local dst, src, weight) columns,
    emptied as they are placed) by a counting sort in C: the order of a stable sort by dst, with
    no sort and no runs; indptr as index_dtype(edges), src as src_dtype (int32 or int64), weight
    as weight_dtype (uint32 or int64), a group's weights not written where is_zeros(them).
    None where the kernel cannot be used or a dst is no row (groups then untouched)."""
    lib = _library()
    if lib is None or np.dtype(src_dtype).name not in ("int32", "int64") or \
            np.dtype(weight_dtype).name not in ("uint32", "int64"):
        return None
    fill = np.zeros(n, np.int64)
    for dst, _, _ in groups:
        dst = _kept(dst, _IDS)
        if getattr(lib, "csr_count_" + _short(dst.dtype))(len(dst), dst.ctypes.data, n, fill.ctypes.data) < 0:
            return None
    indptr = np.zeros(n + 1, index_dtype(int(fill.sum())))
    np.cumsum(fill, out=indptr[1:])
    fill[:] = indptr[:-1]             # each row's next free place
    src = np.empty(int(indptr[-1]), src_dtype)
    weight = np.zeros(int(indptr[-1]), weight_dtype)
    while groups:
        dst, group_src, group_weight = groups.pop(0)
        dst = _kept(dst, _IDS)
        group_src = np.ascontiguousarray(group_src, src.dtype)
        group_weight = None if is_zeros(group_weight) else np.ascontiguousarray(group_weight, np.int64)
        place = getattr(lib, "csr_place_" + PLACE_VARIANTS[dst.dtype.name, src.dtype.name, weight.dtype.name])
        place(len(dst), dst.ctypes.data, group_src.ctypes.data, None if group_weight is None else
              group_weight.ctypes.data, fill.ctypes.data, src.ctypes.data, weight.ctypes.data)
        del dst, group_src, group_weight
    return indptr, src, weight


def run_exits(nxt, lo, n, sink, no_next):
    """For vertices lo .. lo + n - 1 (next of v: nxt[v - lo]): where each one's run along next[]
    leaves them (walk.local_exits); None where the kernel cannot run."""
    lib = _library()
    if lib is None:
        return None
    (nxt,) = _int64(nxt[:n])
    exits = np.full(n, -1, np.int64)
    stack = np.empty(n, np.int64)
    lib.run_exits(n, lo, sink, no_next, nxt.ctypes.data, exits.ctypes.data, stack.ctypes.data)
    return exits


def chain_entries(entry, exit_, start, after_hub, n_rank_vertices, no_next):
    """``walk._chain_entries`` in one C loop (a binary search of the sorted entries per run on
    the path); None where the kernel cannot be used."""
    lib = _library()
    if lib is None:
        return None
    entry, exit_, after_hub = _int64(entry, exit_, after_hub)
    path = np.empty(len(entry), np.int64)
    count = lib.chain_entries(len(entry), entry.ctypes.data, exit_.ctypes.data, int(start), after_hub.ctypes.data,
                              n_rank_vertices, no_next, path.ctypes.data)
    return path[:count].copy()


def walk_runs(nxt, lo, n, sink, no_next, entries):
    """(exits, lengths, vertices): ``walk._Runs.walk``'s runs in one C loop, each entry's run
    along next[] through the vertices lo .. lo + n - 1; None where the kernel cannot be used or
    the runs hold more vertices than the range and the entries (they overlap: cycles)."""
    lib = _library()
    if lib is None:
        return None
    nxt, entries = _int64(nxt[:n], entries)
    exits, lengths = np.empty(len(entries), np.int64), np.empty(len(entries), np.int64)
    cap = n + len(entries)
    vertices = np.empty(cap, np.int64)
    k = lib.walk_runs(n, lo, sink, no_next, nxt.ctypes.data, len(entries), entries.ctypes.data, exits.ctypes.data,
                      lengths.ctypes.data, vertices.ctypes.data, cap)
    return None if k < 0 else (exits, lengths, vertices[:k].copy())
