/* An independent call counter, preloaded before the shim (LD_PRELOAD=count_calls.so:libmpigraph.so):
 * each MPI_X below counts its calls and passes them on to the next definition (the shim's),
 * and MPI_Finalize prints "count_calls: rank R MPI_X N" on stderr for every X called.  It
 * shares no code or table with the shim, so the tests compare the shim's functions.csv with
 * it (tests/test_io_rma.py, test_mpi4.py, test_polling.py, test_neighbor_rma.py).
 * Build: mpicc -shared -fPIC -o count_calls.so count_calls.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

#define N_MAX 64
static const char *names[N_MAX];
static long counts[N_MAX];
static int n_names;

/* The slot of `name` (functions are few: a linear search on first use, cached by the caller). */
static int slot_of(const char *name)
{
    for (int i = 0; i < n_names; i++)
        if (names[i] == name)
            return i;
    names[n_names] = name;
    return n_names++;
}

#define COUNT(name, ret, params, args)                                                                         \
    ret name params                                                                                            \
    {                                                                                                          \
        static ret(*next) params;                                                                              \
        static int slot = -1;                                                                                  \
        if (!next)                                                                                             \
            next = (ret(*) params)dlsym(RTLD_NEXT, #name);                                                     \
        if (slot < 0)                                                                                          \
            slot = slot_of(#name);                                                                             \
        counts[slot]++;                                                                                        \
        return next args;                                                                                      \
    }

COUNT(MPI_Iprobe, int, (int s, int t, MPI_Comm c, int *f, MPI_Status *st), (s, t, c, f, st))
COUNT(MPI_Test, int, (MPI_Request *r, int *f, MPI_Status *st), (r, f, st))
COUNT(MPI_Wait, int, (MPI_Request *r, MPI_Status *st), (r, st))
COUNT(MPI_Waitall, int, (int n, MPI_Request r[], MPI_Status st[]), (n, r, st))
COUNT(MPI_Start, int, (MPI_Request *r), (r))
COUNT(MPI_Startall, int, (int n, MPI_Request r[]), (n, r))
COUNT(MPI_Request_free, int, (MPI_Request *r), (r))
COUNT(MPI_File_open, int, (MPI_Comm c, const char *f, int a, MPI_Info i, MPI_File *fh), (c, f, a, i, fh))
COUNT(MPI_File_close, int, (MPI_File *fh), (fh))
COUNT(MPI_File_set_view, int, (MPI_File fh, MPI_Offset d, MPI_Datatype e, MPI_Datatype f, const char *r, MPI_Info i),
      (fh, d, e, f, r, i))
COUNT(MPI_File_write_all, int, (MPI_File fh, const void *b, int n, MPI_Datatype t, MPI_Status *st),
      (fh, b, n, t, st))
COUNT(MPI_File_write_at_all, int, (MPI_File fh, MPI_Offset o, const void *b, int n, MPI_Datatype t, MPI_Status *st),
      (fh, o, b, n, t, st))
COUNT(MPI_Win_create, int, (void *b, MPI_Aint s, int d, MPI_Info i, MPI_Comm c, MPI_Win *w), (b, s, d, i, c, w))
COUNT(MPI_Win_fence, int, (int a, MPI_Win w), (a, w))
COUNT(MPI_Win_free, int, (MPI_Win *w), (w))
COUNT(MPI_Put, int, (const void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win w),
      (o, oc, ot, r, d, tc, tt, w))
COUNT(MPI_Allreduce_init, int, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Info i,
                                MPI_Request *q), (s, r, n, t, o, c, i, q))
COUNT(MPI_Cart_create, int, (MPI_Comm c, int n, const int d[], const int p[], int r, MPI_Comm *o), (c, n, d, p, r, o))
COUNT(MPI_Comm_free, int, (MPI_Comm *c), (c))
COUNT(MPI_Neighbor_alltoall, int, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                                   MPI_Comm c), (s, sc, st, r, rc, rt, c))
COUNT(MPI_Ineighbor_allgather, int, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                                     MPI_Comm c, MPI_Request *q), (s, sc, st, r, rc, rt, c, q))
COUNT(MPI_Psend_init, int, (const void *b, int p, MPI_Count n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Info i,
                            MPI_Request *q), (b, p, n, t, d, g, c, i, q))
COUNT(MPI_Precv_init, int, (void *b, int p, MPI_Count n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Info i,
                            MPI_Request *q), (b, p, n, t, s, g, c, i, q))
COUNT(MPI_Pready, int, (int p, MPI_Request q), (p, q))

/* tests/test_neighbor_rma.py */
COUNT(MPI_Neighbor_allgather, int, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                                    MPI_Comm c), (s, sc, st, r, rc, rt, c))
COUNT(MPI_Neighbor_allgather_init, int, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                                         MPI_Comm c, MPI_Info i, MPI_Request *q), (s, sc, st, r, rc, rt, c, i, q))
COUNT(MPI_Ineighbor_alltoall, int, (const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                                    MPI_Comm c, MPI_Request *q), (s, sc, st, r, rc, rt, c, q))
COUNT(MPI_Dist_graph_create_adjacent, int, (MPI_Comm c, int ni, const int s[], const int sw[], int no, const int d[],
                                            const int dw[], MPI_Info i, int r, MPI_Comm *o),
      (c, ni, s, sw, no, d, dw, i, r, o))
COUNT(MPI_Dist_graph_create, int, (MPI_Comm c, int n, const int s[], const int g[], const int d[], const int w[],
                                   MPI_Info i, int r, MPI_Comm *o), (c, n, s, g, d, w, i, r, o))
COUNT(MPI_Graph_create, int, (MPI_Comm c, int n, const int x[], const int e[], int r, MPI_Comm *o), (c, n, x, e, r, o))
COUNT(MPI_Win_post, int, (MPI_Group g, int a, MPI_Win w), (g, a, w))
COUNT(MPI_Win_start, int, (MPI_Group g, int a, MPI_Win w), (g, a, w))
COUNT(MPI_Win_complete, int, (MPI_Win w), (w))
COUNT(MPI_Win_wait, int, (MPI_Win w), (w))
COUNT(MPI_File_write_all_begin, int, (MPI_File fh, const void *b, int n, MPI_Datatype t), (fh, b, n, t))
COUNT(MPI_File_write_all_end, int, (MPI_File fh, const void *b, MPI_Status *st), (fh, b, st))
COUNT(MPI_File_read_at_all_begin, int, (MPI_File fh, MPI_Offset o, void *b, int n, MPI_Datatype t), (fh, o, b, n, t))
COUNT(MPI_File_read_at_all_end, int, (MPI_File fh, void *b, MPI_Status *st), (fh, b, st))

int MPI_Finalize(void)
{
    static int (*next)(void);
    if (!next)
        next = (int (*)(void))dlsym(RTLD_NEXT, "MPI_Finalize");
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < n_names; i++)
        fprintf(stderr, "count_calls: rank %d %s %ld\n", rank, names[i], counts[i]);
    return next();
}
