/* Fortran 2008 bindings (use mpi_f08) of MPICH for the routines that do not
 * reach the C MPI_* symbols.
 *
 * MPICH's `use mpi` routines and its f08 routines with buffer arguments
 * (mpi_send_f08ts_, ...) call the C MPI_* functions, so the C wrappers record
 * them.  Its f08 routines without buffers call PMPI_* directly: the shim is
 * their binding here.  Each converts its Fortran handles and statuses, calls
 * the C wrapper (which records and calls PMPI), and converts back: what
 * MPICH's own binding does.  Init and Finalize instead call MPICH's routine
 * (found with RTLD_NEXT) so its Fortran start-up is untouched.  Handles are
 * MPI_Fint; TYPE(MPI_Status) is MPI_F08_status; an absent optional ierror
 * arrives as NULL.  The f08 status conversions are MPI-4.0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "shim.h"

#if MPI_VERSION >= 4

#define SMALL 16

static MPI_F08_status *f08_ignore(const char *name)
{
    MPI_F08_status **sentinel = mg_mpi_symbol(name);
    return sentinel ? *sentinel : NULL;
}

/* C status for a Fortran status argument: NULL-equivalent when ignored. */
static MPI_Status *c_status_for(MPI_F08_status *f, MPI_Status *local)
{
    return f == f08_ignore("MPI_F08_STATUS_IGNORE") ? MPI_STATUS_IGNORE : local;
}

static void set_ierror(MPI_Fint *ierror, int rc)
{
    if (ierror)
        *ierror = rc;
}

static void status_back(MPI_F08_status *f, MPI_Status *c)
{
    if (c != MPI_STATUS_IGNORE)
        PMPI_Status_c2f08(c, f);
}

/* Request arrays: Fortran handles in, C handles for the call, back out after. */
typedef struct {
    MPI_Request small_req[SMALL];
    MPI_Status small_st[SMALL];
    MPI_Request *req;
    MPI_Status *st; /* MPI_STATUSES_IGNORE when the program ignores them */
} f_arrays;

static void arrays_in(f_arrays *a, int n, const MPI_Fint *requests, MPI_F08_status *statuses)
{
    int big = n > SMALL;
    a->req = big ? malloc(sizeof(MPI_Request) * (size_t)n) : a->small_req;
    for (int i = 0; i < n; i++)
        a->req[i] = MPI_Request_f2c(requests[i]);
    if (statuses == f08_ignore("MPI_F08_STATUSES_IGNORE"))
        a->st = MPI_STATUSES_IGNORE;
    else
        a->st = big ? malloc(sizeof(MPI_Status) * (size_t)n) : a->small_st;
}

/* Copy back the first n_status statuses (positions given by indices, or 0..n-1). */
static void arrays_out(f_arrays *a, int n, MPI_Fint *requests, MPI_F08_status *statuses, int n_status)
{
    for (int i = 0; i < n; i++)
        requests[i] = MPI_Request_c2f(a->req[i]);
    if (a->st != MPI_STATUSES_IGNORE)
        for (int j = 0; j < n_status; j++)
            PMPI_Status_c2f08(&a->st[j], &statuses[j]);
    if (a->req != a->small_req)
        free(a->req);
    if (a->st != MPI_STATUSES_IGNORE && a->st != a->small_st)
        free(a->st);
}

/* MPICH's own routine behind one of ours. */
static void *next_routine(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        mg_say("%s not found in the MPI library", name);
        abort();
    }
    return f;
}

typedef void (*f_ierror_fn)(MPI_Fint *);
typedef void (*f_init_thread_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *);

void mpi_init_f08_(MPI_Fint *ierror)
{
    mg_sites_setup_once();
    MG_SITE();
    static f_ierror_fn next;
    if (!next)
        next = (f_ierror_fn)next_routine("mpi_init_f08_");
    mg_choose_clock();
    int64_t t0 = mg_now();
    MPI_Fint rc = MPI_SUCCESS;
    mg_depth++;
    next(&rc);
    mg_depth--;
    if (rc == MPI_SUCCESS)
        mg_start_recording(MG_ID_MPI_Init, t0, MPI_THREAD_SINGLE);
    set_ierror(ierror, rc);
}

void mpi_init_thread_f08_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror)
{
    mg_sites_setup_once();
    MG_SITE();
    static f_init_thread_fn next;
    if (!next)
        next = (f_init_thread_fn)next_routine("mpi_init_thread_f08_");
    mg_choose_clock();
    int64_t t0 = mg_now();
    MPI_Fint rc = MPI_SUCCESS;
    mg_depth++;
    next(required, provided, &rc);
    mg_depth--;
    if (rc == MPI_SUCCESS)
        mg_start_recording(MG_ID_MPI_Init_thread, t0, *provided);
    set_ierror(ierror, rc);
}

void mpi_finalize_f08_(MPI_Fint *ierror)
{
    MG_SITE();
    static f_ierror_fn next;
    if (!next)
        next = (f_ierror_fn)next_routine("mpi_finalize_f08_");
    mg_finalize_handover();
    mg_depth++;
    next(ierror);
    mg_depth--;
}

void mpi_barrier_f08_(MPI_Fint *comm, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Barrier(MPI_Comm_f2c(*comm)));
}

void mpi_ibarrier_f08_(MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Request r;
    set_ierror(ierror, MPI_Ibarrier(MPI_Comm_f2c(*comm), &r));
    *request = MPI_Request_c2f(r);
}

void mpi_comm_split_f08_(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Comm c;
    set_ierror(ierror, MPI_Comm_split(MPI_Comm_f2c(*comm), *color, *key, &c));
    *newcomm = MPI_Comm_c2f(c);
}

void mpi_comm_dup_f08_(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Comm c;
    set_ierror(ierror, MPI_Comm_dup(MPI_Comm_f2c(*comm), &c));
    *newcomm = MPI_Comm_c2f(c);
}

void mpi_comm_free_f08_(MPI_Fint *comm, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Comm c = MPI_Comm_f2c(*comm);
    set_ierror(ierror, MPI_Comm_free(&c));
    *comm = MPI_Comm_c2f(c);
}

void mpi_start_f08_(MPI_Fint *request, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Request r = MPI_Request_f2c(*request);
    set_ierror(ierror, MPI_Start(&r));
    *request = MPI_Request_c2f(r);
}

void mpi_startall_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *ierror)
{
    MG_SITE();
    f_arrays a;
    arrays_in(&a, *count, requests, f08_ignore("MPI_F08_STATUSES_IGNORE"));
    set_ierror(ierror, MPI_Startall(*count, a.req));
    arrays_out(&a, *count, requests, NULL, 0);
}

void mpi_request_free_f08_(MPI_Fint *request, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Request r = MPI_Request_f2c(*request);
    set_ierror(ierror, MPI_Request_free(&r));
    *request = MPI_Request_c2f(r);
}

void mpi_probe_f08_(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_F08_status *status, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Status local, *st = c_status_for(status, &local);
    set_ierror(ierror, MPI_Probe(*source, *tag, MPI_Comm_f2c(*comm), st));
    status_back(status, st);
}

void mpi_iprobe_f08_(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag, MPI_F08_status *status,
                     MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Status local, *st = c_status_for(status, &local);
    int f = 0;
    set_ierror(ierror, MPI_Iprobe(*source, *tag, MPI_Comm_f2c(*comm), &f, st));
    *flag = f;
    status_back(status, st);
}

void mpi_wait_f08_(MPI_Fint *request, MPI_F08_status *status, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Request r = MPI_Request_f2c(*request);
    MPI_Status local, *st = c_status_for(status, &local);
    set_ierror(ierror, MPI_Wait(&r, st));
    *request = MPI_Request_c2f(r);
    status_back(status, st);
}

void mpi_test_f08_(MPI_Fint *request, MPI_Fint *flag, MPI_F08_status *status, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Request r = MPI_Request_f2c(*request);
    MPI_Status local, *st = c_status_for(status, &local);
    int f = 0;
    set_ierror(ierror, MPI_Test(&r, &f, st));
    *request = MPI_Request_c2f(r);
    *flag = f;
    if (f)
        status_back(status, st);
}

void mpi_waitall_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_F08_status *statuses, MPI_Fint *ierror)
{
    MG_SITE();
    f_arrays a;
    arrays_in(&a, *count, requests, statuses);
    set_ierror(ierror, MPI_Waitall(*count, a.req, a.st));
    arrays_out(&a, *count, requests, statuses, *count);
}

void mpi_testall_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, MPI_F08_status *statuses,
                      MPI_Fint *ierror)
{
    MG_SITE();
    f_arrays a;
    int f = 0;
    arrays_in(&a, *count, requests, statuses);
    set_ierror(ierror, MPI_Testall(*count, a.req, &f, a.st));
    *flag = f;
    arrays_out(&a, *count, requests, statuses, f ? *count : 0);
}

/* Fortran indices count from 1. */
void mpi_waitany_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_F08_status *status,
                      MPI_Fint *ierror)
{
    MG_SITE();
    f_arrays a;
    MPI_Status local, *st = c_status_for(status, &local);
    int i = 0;
    arrays_in(&a, *count, requests, f08_ignore("MPI_F08_STATUSES_IGNORE"));
    set_ierror(ierror, MPI_Waitany(*count, a.req, &i, st));
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    arrays_out(&a, *count, requests, NULL, 0);
    status_back(status, st);
}

void mpi_testany_f08_(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
                      MPI_F08_status *status, MPI_Fint *ierror)
{
    MG_SITE();
    f_arrays a;
    MPI_Status local, *st = c_status_for(status, &local);
    int i = 0, f = 0;
    arrays_in(&a, *count, requests, f08_ignore("MPI_F08_STATUSES_IGNORE"));
    set_ierror(ierror, MPI_Testany(*count, a.req, &i, &f, st));
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    *flag = f;
    arrays_out(&a, *count, requests, NULL, 0);
    if (f && i != MPI_UNDEFINED)
        status_back(status, st);
}

static void some_f08(int wait, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
                     MPI_F08_status *statuses, MPI_Fint *ierror)
{
    f_arrays a;
    int n = *incount, out = 0;
    int *idx = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    arrays_in(&a, n, requests, statuses);
    int rc = wait ? MPI_Waitsome(n, a.req, &out, idx, a.st) : MPI_Testsome(n, a.req, &out, idx, a.st);
    set_ierror(ierror, rc);
    *outcount = out;
    for (int j = 0; out != MPI_UNDEFINED && j < out; j++)
        indices[j] = idx[j] + 1;
    arrays_out(&a, n, requests, statuses, out == MPI_UNDEFINED ? 0 : out);
    free(idx);
}

void mpi_waitsome_f08_(MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_F08_status *statuses, MPI_Fint *ierror)
{
    MG_SITE();
    some_f08(1, incount, requests, outcount, indices, statuses, ierror);
}

void mpi_testsome_f08_(MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_F08_status *statuses, MPI_Fint *ierror)
{
    MG_SITE();
    some_f08(0, incount, requests, outcount, indices, statuses, ierror);
}

/* One-sided synchronisation, file close/sync, abort: MPICH's f08 routines for these have no
 * buffer argument and call PMPI directly, so the shim binds them to its C wrappers here. */
void mpi_win_fence_f08_(MPI_Fint *assert, MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_fence(*assert, MPI_Win_f2c(*win)));
}

void mpi_win_free_f08_(MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_Win w = MPI_Win_f2c(*win);
    set_ierror(ierror, MPI_Win_free(&w));
    *win = MPI_Win_c2f(w);
}

void mpi_win_lock_f08_(MPI_Fint *lock_type, MPI_Fint *rank, MPI_Fint *assert, MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_lock(*lock_type, *rank, *assert, MPI_Win_f2c(*win)));
}

void mpi_win_unlock_f08_(MPI_Fint *rank, MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_unlock(*rank, MPI_Win_f2c(*win)));
}

void mpi_win_lock_all_f08_(MPI_Fint *assert, MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_lock_all(*assert, MPI_Win_f2c(*win)));
}

void mpi_win_unlock_all_f08_(MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_unlock_all(MPI_Win_f2c(*win)));
}

void mpi_win_flush_f08_(MPI_Fint *rank, MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_flush(*rank, MPI_Win_f2c(*win)));
}

void mpi_win_flush_all_f08_(MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_flush_all(MPI_Win_f2c(*win)));
}

void mpi_win_post_f08_(MPI_Fint *group, MPI_Fint *assert, MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_post(MPI_Group_f2c(*group), *assert, MPI_Win_f2c(*win)));
}

void mpi_win_start_f08_(MPI_Fint *group, MPI_Fint *assert, MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_start(MPI_Group_f2c(*group), *assert, MPI_Win_f2c(*win)));
}

void mpi_win_complete_f08_(MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_complete(MPI_Win_f2c(*win)));
}

void mpi_win_wait_f08_(MPI_Fint *win, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Win_wait(MPI_Win_f2c(*win)));
}

void mpi_file_close_f08_(MPI_Fint *fh, MPI_Fint *ierror)
{
    MG_SITE();
    MPI_File f = MPI_File_f2c(*fh);
    set_ierror(ierror, MPI_File_close(&f));
    *fh = MPI_File_c2f(f);
}

void mpi_file_sync_f08_(MPI_Fint *fh, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_File_sync(MPI_File_f2c(*fh)));
}

void mpi_abort_f08_(MPI_Fint *comm, MPI_Fint *errorcode, MPI_Fint *ierror)
{
    MG_SITE();
    set_ierror(ierror, MPI_Abort(MPI_Comm_f2c(*comm), *errorcode));
}

#endif /* MPI_VERSION >= 4 */
