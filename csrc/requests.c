/* Requests: ids from the call that creates a request to the Wait/Test call
 * that completes it (one part record per completed request), persistent
 * requests and their Starts. */
#include <stdlib.h>
#include <string.h>

#include "handle_map.h"
#include "shim.h"

#define SMALL 16 /* requests handled without malloc in one Wait/Test call */

/* Requests are looked up by handle, but a handle does not name one request:
 * MPICH hands the same built-in handle to every send that completed at once.
 * So each handle keys a list of outstanding requests (oldest first), and each
 * request remembers the program's MPI_Request variable it was stored in: a
 * completion takes the request whose variable it is given, else the oldest. */
static handle_map request_map;
static mg_request *free_requests;

static mg_request *request_alloc(void)
{
    if (!free_requests) {
        /* Requests come from slabs and go back to a free list: no malloc per request. */
        mg_request *slab = calloc(1024, sizeof *slab);
        for (int i = 0; i < 1024; i++) {
            slab[i].next = free_requests;
            free_requests = &slab[i];
        }
    }
    mg_request *q = free_requests;
    free_requests = q->next;
    q->next = NULL;
    return q;
}

/* Unlink q from its handle's list and return it to the free list. */
static void request_release(mg_request *q)
{
    mg_request *first = map_get(&request_map, q->key);
    if (first == q) {
        if (q->next)
            map_put(&request_map, q->key, q->next);
        else
            map_remove(&request_map, q->key);
    } else {
        mg_request *p = first;
        while (p && p->next != q)
            p = p->next;
        if (p)
            p->next = q->next;
    }
    q->next = free_requests;
    free_requests = q;
}

/* The request stored in `slot` under `handle`, else the oldest with that
 * handle (a copied handle); with `active`, only requests still in flight. */
static mg_request *request_lookup(MPI_Request handle, const void *slot, int active)
{
    mg_request *first = map_get(&request_map, HANDLE_KEY(handle)), *q;
    for (q = first; q; q = q->next)
        if (q->slot == slot && (q->active || !active))
            return q;
    for (q = first; q; q = q->next)
        if (q->active || !active)
            return q;
    return NULL;
}

int64_t mg_request_new(MPI_Request handle, const void *slot, mg_comm *comm, int32_t peer, int32_t tag,
                       int64_t bytes, uint16_t flags, uint32_t seq)
{
    if (handle == MPI_REQUEST_NULL)
        return 0;
    if (mg.threaded)
        mg_lock();
    uint64_t key = HANDLE_KEY(handle);
    mg_request *first = map_get(&request_map, key), *last = NULL;
    for (mg_request *p = first, *next; p; p = next) {
        next = p->next;
        if (p->slot == slot) /* the variable was overwritten: that request is gone */
            request_release(p);
        else
            last = p;
    }
    mg_request *q = request_alloc();
    q->key = key;
    q->slot = slot;
    q->id = ++mg.next_request_id;
    q->comm = comm;
    q->peer = peer;
    q->tag = tag;
    q->bytes = bytes;
    q->flags = flags;
    q->seq = seq;
    q->active = !(flags & MG_PERSISTENT);
    if (last)
        last->next = q;
    else
        map_put(&request_map, key, q);
    if (mg.threaded)
        mg_unlock();
    return q->id;
}

int mg_request_describe(MPI_Request handle, const void *slot, int32_t *peer, int32_t *tag, int64_t *comm)
{
    if (handle == MPI_REQUEST_NULL)
        return 0;
    if (mg.threaded)
        mg_lock();
    mg_request *q = request_lookup(handle, slot, 1);
    if (q) {
        *peer = q->peer;
        *tag = q->tag;
        *comm = q->comm->id;
    }
    if (mg.threaded)
        mg_unlock();
    return q != NULL;
}

/* The in-flight slot of a Wait family call on `count` requests: their peer, tag and
 * communicator when the first SMALL requests the shim knows all share them (so a cycle of
 * ranks waiting on each other can be named), else none; bytes holds the count. */
static int begin_wait(int func, int64_t t0, int count, const MPI_Request *requests)
{
    int32_t peer = MG_PEER_NONE, tag = MG_TAG_NONE;
    int64_t comm = 0;
    int known = 0;
    for (int i = 0; i < count && i < SMALL; i++) {
        int32_t p, t;
        int64_t c;
        if (!mg_request_describe(requests[i], &requests[i], &p, &t, &c))
            continue;
        if (known++ == 0)
            peer = p, tag = t, comm = c;
        else if (p != peer || c != comm) {
            peer = MG_PEER_NONE, tag = MG_TAG_NONE;
            break;
        } else if (t != tag)
            tag = MG_TAG_NONE;
    }
    return mg_begin(func, t0, peer, tag, comm, 0, MG_ROOT_NONE, count);
}

/* The arguments of an unsuccessful Test family call: its request handles. */
static uint64_t poll_args(int count, const MPI_Request *requests)
{
    uint64_t h = mg_hash_args(0, (uint64_t)count);
    for (int i = 0; i < count; i++)
        h = mg_hash_args(h, HANDLE_KEY(requests[i]));
    return h;
}

/* An unsuccessful poll merged into the previous one (1), or to be recorded and noted (0). */
static int poll_merged(int func, int rc, int missed, int count, const MPI_Request *saved, int64_t t0, int64_t t1,
                       uint64_t *args)
{
    if (rc != MPI_SUCCESS || !missed)
        return 0;
    *args = poll_args(count, saved);
    return mg_poll_repeat(func, *args, t0, t1);
}

/* One part record per request a Wait/Test call completed.  Completion j is
 * the request saved[i] stored in slots[i], i = done ? done[j] : j; its status
 * is statuses[j]. */
static void log_completions(int func, int64_t t0, int64_t t1, int rc, const MPI_Request *saved,
                            const MPI_Request *slots, int n_done, const int *done, const MPI_Status *statuses)
{
    mg_request *small[SMALL];
    mg_request **found = n_done <= SMALL ? small : malloc(sizeof *found * (size_t)n_done);
    int n_found = 0;
    if (mg.threaded)
        mg_lock();
    for (int j = 0; j < n_done; j++) {
        int i = done ? done[j] : j;
        mg_request *q = saved[i] == MPI_REQUEST_NULL ? NULL : request_lookup(saved[i], &slots[i], 1);
        if (q)
            q->active = 0; /* taken: a second completion with the same handle gets another */
        found[j] = q;
        n_found += q != NULL;
    }
    mg_record *r = mg_reserve(1 + n_found);
    if (r) {
        uint16_t err = rc == MPI_SUCCESS ? 0 : MG_ERROR;
        mg_fill(r, func, t0, t1, err);
        mg_record *part = r + 1;
        for (int j = 0; j < n_done; j++) {
            mg_request *q = found[j];
            if (!q)
                continue;
            mg_fill(part, func, t0, t1, MG_PART | q->flags | err);
            part->request = q->id;
            part->comm = q->comm->id;
            part->seq = q->seq;
            part->peer = q->peer;
            part->tag = q->tag;
            part->bytes = q->bytes;
            if ((q->flags & MG_RECV) && statuses)
                mg_fill_from_status(part, q->comm, &statuses[j]);
            part++;
        }
        mg_publish(1 + n_found);
    }
    for (int j = 0; j < n_done; j++)
        if (found[j] && !(found[j]->flags & MG_PERSISTENT))
            request_release(found[j]);
    if (mg.threaded)
        mg_unlock();
    if (found != small)
        free(found);
}

/* Scratch space for the request handles and statuses of one Wait/Test call. */
typedef struct {
    MPI_Request small_req[SMALL];
    MPI_Status small_st[SMALL];
    int small_idx[SMALL];
    MPI_Request *saved;
    MPI_Status *st;
    int *idx;
} scratch;

static void scratch_init(scratch *s, int n, const MPI_Request *reqs, MPI_Status *statuses)
{
    int big = n > SMALL;
    s->saved = big ? malloc(sizeof(MPI_Request) * (size_t)n) : s->small_req;
    s->idx = big ? malloc(sizeof(int) * (size_t)n) : s->small_idx;
    s->st = statuses != MPI_STATUSES_IGNORE ? statuses : big ? malloc(sizeof(MPI_Status) * (size_t)n) : s->small_st;
    if (n > 0)
        memcpy(s->saved, reqs, sizeof(MPI_Request) * (size_t)n);
}

static void scratch_free(scratch *s, MPI_Status *statuses)
{
    if (s->saved != s->small_req)
        free(s->saved);
    if (s->idx != s->small_idx)
        free(s->idx);
    if (s->st != statuses && s->st != s->small_st)
        free(s->st);
}

#define BEGIN_COMPLETION(call)                                                                                 \
    if (!mg_should_record())                                                                                   \
        return call;                                                                                           \
    mg_depth++

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    BEGIN_COMPLETION(PMPI_Wait(request, status));
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;
    MPI_Request saved = *request;
    int64_t t0 = mg_now();
    int fl = begin_wait(MG_ID_MPI_Wait, t0, 1, request);
    int rc = PMPI_Wait(request, st);
    mg_end(fl);
    int64_t t1 = mg_now();
    log_completions(MG_ID_MPI_Wait, t0, t1, rc, &saved, request, 1, NULL, st);
    mg_depth--;
    return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    BEGIN_COMPLETION(PMPI_Test(request, flag, status));
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;
    MPI_Request saved = *request;
    int64_t t0 = mg_now();
    int rc = PMPI_Test(request, flag, st);
    int64_t t1 = mg_now();
    uint64_t args = 0;
    if (!poll_merged(MG_ID_MPI_Test, rc, !*flag, 1, &saved, t0, t1, &args)) {
        log_completions(MG_ID_MPI_Test, t0, t1, rc, &saved, request, *flag ? 1 : 0, NULL, st);
        if (rc == MPI_SUCCESS && !*flag)
            mg_poll_note(args);
    }
    mg_depth--;
    return rc;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    BEGIN_COMPLETION(PMPI_Waitall(count, requests, statuses));
    scratch s;
    scratch_init(&s, count, requests, statuses);
    int64_t t0 = mg_now();
    int fl = begin_wait(MG_ID_MPI_Waitall, t0, count, requests);
    int rc = PMPI_Waitall(count, requests, s.st);
    mg_end(fl);
    int64_t t1 = mg_now();
    log_completions(MG_ID_MPI_Waitall, t0, t1, rc, s.saved, requests, count, NULL, s.st);
    scratch_free(&s, statuses);
    mg_depth--;
    return rc;
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    BEGIN_COMPLETION(PMPI_Testall(count, requests, flag, statuses));
    scratch s;
    scratch_init(&s, count, requests, statuses);
    int64_t t0 = mg_now();
    int rc = PMPI_Testall(count, requests, flag, s.st);
    int64_t t1 = mg_now();
    uint64_t args = 0;
    if (!poll_merged(MG_ID_MPI_Testall, rc, !*flag, count, s.saved, t0, t1, &args)) {
        log_completions(MG_ID_MPI_Testall, t0, t1, rc, s.saved, requests, *flag ? count : 0, NULL, s.st);
        if (rc == MPI_SUCCESS && !*flag)
            mg_poll_note(args);
    }
    scratch_free(&s, statuses);
    mg_depth--;
    return rc;
}

static int any_wrapper(int func, int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    scratch s;
    scratch_init(&s, count, requests, MPI_STATUSES_IGNORE);
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;
    int done_flag = 1;
    int64_t t0 = mg_now();
    int fl = func == MG_ID_MPI_Waitany ? begin_wait(func, t0, count, requests) : -1;
    int rc = func == MG_ID_MPI_Waitany ? PMPI_Waitany(count, requests, index, st)
                                  : PMPI_Testany(count, requests, index, &done_flag, st);
    mg_end(fl);
    int64_t t1 = mg_now();
    if (flag)
        *flag = done_flag;
    int completed = done_flag && *index != MPI_UNDEFINED && rc == MPI_SUCCESS;
    uint64_t args = 0;
    if (!poll_merged(func, rc, !done_flag, count, s.saved, t0, t1, &args)) {
        log_completions(func, t0, t1, rc, s.saved, requests, completed, index, st);
        if (rc == MPI_SUCCESS && !done_flag)
            mg_poll_note(args);
    }
    scratch_free(&s, MPI_STATUSES_IGNORE);
    return rc;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    BEGIN_COMPLETION(PMPI_Waitany(count, requests, index, status));
    int rc = any_wrapper(MG_ID_MPI_Waitany, count, requests, index, NULL, status);
    mg_depth--;
    return rc;
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    BEGIN_COMPLETION(PMPI_Testany(count, requests, index, flag, status));
    int rc = any_wrapper(MG_ID_MPI_Testany, count, requests, index, flag, status);
    mg_depth--;
    return rc;
}

static int some_wrapper(int func, int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
    scratch s;
    scratch_init(&s, incount, requests, statuses);
    int64_t t0 = mg_now();
    int fl = func == MG_ID_MPI_Waitsome ? begin_wait(func, t0, incount, requests) : -1;
    int rc = func == MG_ID_MPI_Waitsome ? PMPI_Waitsome(incount, requests, outcount, indices, s.st)
                                   : PMPI_Testsome(incount, requests, outcount, indices, s.st);
    mg_end(fl);
    int64_t t1 = mg_now();
    int n = *outcount == MPI_UNDEFINED ? 0 : *outcount;
    uint64_t args = 0;
    int missed = func == MG_ID_MPI_Testsome && *outcount == 0;
    if (!poll_merged(func, rc, missed, incount, s.saved, t0, t1, &args)) {
        log_completions(func, t0, t1, rc, s.saved, requests, n, indices, s.st);
        if (rc == MPI_SUCCESS && missed)
            mg_poll_note(args);
    }
    scratch_free(&s, statuses);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    BEGIN_COMPLETION(PMPI_Waitsome(incount, requests, outcount, indices, statuses));
    int rc = some_wrapper(MG_ID_MPI_Waitsome, incount, requests, outcount, indices, statuses);
    mg_depth--;
    return rc;
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    BEGIN_COMPLETION(PMPI_Testsome(incount, requests, outcount, indices, statuses));
    int rc = some_wrapper(MG_ID_MPI_Testsome, incount, requests, outcount, indices, statuses);
    mg_depth--;
    return rc;
}

/* Start and Startall: a part per request started, so each activation of a
 * persistent request can be matched like a fresh Isend/Irecv. */
static void log_starts(int func, int64_t t0, int64_t t1, int rc, int count, const MPI_Request *requests)
{
    if (mg.threaded)
        mg_lock();
    mg_record *r = mg_reserve(1 + count);
    if (r) {
        uint16_t err = rc == MPI_SUCCESS ? 0 : MG_ERROR;
        mg_fill(r, func, t0, t1, err);
        int parts = 0;
        for (int i = 0; i < count; i++) {
            mg_request *q = request_lookup(requests[i], &requests[i], 0);
            if (!q)
                continue;
            q->active = rc == MPI_SUCCESS;
            if (q->flags & MG_COLLECTIVE) /* each start of a persistent collective is an instance */
                q->seq = ++q->comm->seq;
            mg_record *p = r + 1 + parts++;
            mg_fill(p, func, t0, t1, MG_PART | q->flags | err);
            p->request = q->id;
            p->comm = q->comm->id;
            p->peer = q->peer;
            p->tag = q->tag;
            p->bytes = q->bytes;
            p->seq = q->seq;
        }
        mg_publish(1 + parts);
    }
    if (mg.threaded)
        mg_unlock();
}

int MPI_Start(MPI_Request *request)
{
    BEGIN_COMPLETION(PMPI_Start(request));
    int64_t t0 = mg_now();
    int rc = PMPI_Start(request);
    int64_t t1 = mg_now();
    log_starts(MG_ID_MPI_Start, t0, t1, rc, 1, request);
    mg_depth--;
    return rc;
}

int MPI_Startall(int count, MPI_Request requests[])
{
    BEGIN_COMPLETION(PMPI_Startall(count, requests));
    int64_t t0 = mg_now();
    int rc = PMPI_Startall(count, requests);
    int64_t t1 = mg_now();
    log_starts(MG_ID_MPI_Startall, t0, t1, rc, count, requests);
    mg_depth--;
    return rc;
}

int MPI_Request_free(MPI_Request *request)
{
    BEGIN_COMPLETION(PMPI_Request_free(request));
    MPI_Request saved = *request;
    int64_t t0 = mg_now();
    int rc = PMPI_Request_free(request);
    int64_t t1 = mg_now();
    if (mg.threaded)
        mg_lock();
    mg_request *q = saved == MPI_REQUEST_NULL ? NULL : request_lookup(saved, request, 0);
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, MG_ID_MPI_Request_free, t0, t1, rc == MPI_SUCCESS ? 0 : MG_ERROR);
        if (q) {
            r->request = q->id;
            r->comm = q->comm->id;
            r->flags |= q->flags;
        }
        mg_publish(1);
    }
    if (q && rc == MPI_SUCCESS)
        request_release(q);
    if (mg.threaded)
        mg_unlock();
    mg_depth--;
    return rc;
}
