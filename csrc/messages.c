/* Matched probe and receive: MPI_Mprobe / MPI_Improbe match a message and
 * return its handle; MPI_Mrecv / MPI_Imrecv receive it by that handle.
 *
 * The receive names no communicator, so the shim remembers, per message
 * handle, the communicator and the source, tag and size the probe found.
 * Mprobe is recorded like Probe, Mrecv like Recv and Imrecv like Irecv (with
 * a known source), so the analysis treats them like their plain cousins. */
#include <stdlib.h>

#include "handle_map.h"
#include "shim.h"

typedef struct {
    mg_comm *comm;
    int32_t peer;
    int32_t tag;
    int64_t bytes;
} mg_message;

static handle_map message_map;

static void remember(MPI_Message message, mg_comm *c, const mg_record *probe)
{
    if (message == MPI_MESSAGE_NULL || message == MPI_MESSAGE_NO_PROC)
        return;
    mg_message *m = malloc(sizeof *m);
    *m = (mg_message){c, probe->peer, probe->tag, probe->bytes};
    if (mg.threaded)
        mg_lock();
    free(map_get(&message_map, HANDLE_KEY(message)));
    map_put(&message_map, HANDLE_KEY(message), m);
    if (mg.threaded)
        mg_unlock();
}

/* The message's details, forgotten as it is received (MPI frees the handle). */
static mg_message take(MPI_Message message)
{
    mg_message found = {&mg.world, MG_PEER_NONE, MG_TAG_NONE, 0};
    if (message == MPI_MESSAGE_NO_PROC)
        found.peer = MG_PEER_PROC_NULL;
    if (mg.threaded)
        mg_lock();
    mg_message *m = map_get(&message_map, HANDLE_KEY(message));
    if (m) {
        found = *m;
        map_remove(&message_map, HANDLE_KEY(message));
        free(m);
    }
    if (mg.threaded)
        mg_unlock();
    return found;
}

static void log_probe(int func, int64_t t0, int64_t t1, int rc, MPI_Comm comm, int source, int tag, int matched,
                      const MPI_Status *st, MPI_Message message)
{
    mg_comm *c = mg_comm_of(comm);
    mg_record *r = mg_reserve(1);
    if (!r)
        return;
    mg_fill(r, func, t0, t1, rc == MPI_SUCCESS ? 0 : MG_ERROR);
    r->comm = c->id;
    if (rc == MPI_SUCCESS && matched) {
        r->flags |= MG_MATCHED;
        mg_fill_from_status(r, c, st);
        remember(message, c, r);
    } else {
        r->peer = mg_world_peer(c, source);
        r->tag = mg_tag(tag);
    }
    mg_publish(1);
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    if (!mg_should_record())
        return PMPI_Mprobe(source, tag, comm, message, status);
    mg_depth++;
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;
    int64_t t0 = mg_now();
    mg_comm *c = mg_comm_of(comm);
    int fl = mg_begin(MG_ID_MPI_Mprobe, t0, mg_world_peer(c, source), mg_tag(tag), c->id, 0, MG_ROOT_NONE, 0);
    int rc = PMPI_Mprobe(source, tag, comm, message, st);
    mg_end(fl);
    int64_t t1 = mg_now();
    log_probe(MG_ID_MPI_Mprobe, t0, t1, rc, comm, source, tag, 1, st, *message);
    mg_depth--;
    return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status)
{
    if (!mg_should_record())
        return PMPI_Improbe(source, tag, comm, flag, message, status);
    mg_depth++;
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;
    int64_t t0 = mg_now();
    int rc = PMPI_Improbe(source, tag, comm, flag, message, st);
    int64_t t1 = mg_now();
    /* A failed Improbe is a poll like a failed Iprobe: merged with the one before (shim.h). */
    int missed = rc == MPI_SUCCESS && !*flag;
    uint64_t args = missed ? mg_hash_args(mg_hash_args(mg_hash_args(0, (uint64_t)source), (uint64_t)tag),
                                          (uint64_t)mg_comm_of(comm)->id) : 0;
    if (!missed || !mg_poll_repeat(MG_ID_MPI_Improbe, args, t0, t1)) {
        log_probe(MG_ID_MPI_Improbe, t0, t1, rc, comm, source, tag, *flag, st, *message);
        if (missed)
            mg_poll_note(args);
    }
    mg_depth--;
    return rc;
}

static void log_mrecv(int64_t t0, int64_t t1, int rc, uint16_t large, const mg_message *m, const MPI_Status *st)
{
    mg_record *r = mg_reserve(1);
    if (!r)
        return;
    mg_fill(r, MG_ID_MPI_Mrecv, t0, t1, MG_RECV | large | (rc == MPI_SUCCESS ? 0 : MG_ERROR));
    r->comm = m->comm->id;
    r->peer = m->peer;
    r->tag = m->tag;
    r->bytes = m->bytes;
    if (rc == MPI_SUCCESS && m->peer != MG_PEER_PROC_NULL)
        mg_fill_from_status(r, m->comm, st);
    mg_publish(1);
}

static void log_imrecv(int64_t t0, int64_t t1, int rc, uint16_t large, const mg_message *m, MPI_Request *request)
{
    int64_t id = rc == MPI_SUCCESS ? mg_request_new(*request, request, m->comm, m->peer, m->tag, m->bytes, MG_RECV, 0)
                                   : 0;
    mg_record *r = mg_reserve(1);
    if (!r)
        return;
    mg_fill(r, MG_ID_MPI_Imrecv, t0, t1, MG_RECV | large | (rc == MPI_SUCCESS ? 0 : MG_ERROR));
    r->comm = m->comm->id;
    r->peer = m->peer;
    r->tag = m->tag;
    r->bytes = m->bytes;
    r->request = id;
    mg_publish(1);
}

#define MRECV_BODY(call, large)                                                                                \
    mg_depth++;                                                                                                \
    mg_message m = take(*message);                                                                             \
    MPI_Status local, *st = status == MPI_STATUS_IGNORE ? &local : status;                                     \
    int64_t t0 = mg_now();                                                                                     \
    int rc = call;                                                                                             \
    int64_t t1 = mg_now();                                                                                     \
    log_mrecv(t0, t1, rc, large, &m, st);                                                                      \
    mg_depth--;                                                                                                \
    return rc

#define IMRECV_BODY(call, large)                                                                               \
    mg_depth++;                                                                                                \
    mg_message m = take(*message);                                                                             \
    int64_t t0 = mg_now();                                                                                     \
    int rc = call;                                                                                             \
    int64_t t1 = mg_now();                                                                                     \
    log_imrecv(t0, t1, rc, large, &m, request);                                                                \
    mg_depth--;                                                                                                \
    return rc

int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status)
{
    if (!mg_should_record())
        return PMPI_Mrecv(buf, count, datatype, message, status);
    MRECV_BODY(PMPI_Mrecv(buf, count, datatype, message, st), 0);
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request)
{
    if (!mg_should_record())
        return PMPI_Imrecv(buf, count, datatype, message, request);
    IMRECV_BODY(PMPI_Imrecv(buf, count, datatype, message, request), 0);
}

#if MPI_VERSION >= 4
int MPI_Mrecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status)
{
    if (!mg_should_record())
        return PMPI_Mrecv_c(buf, count, datatype, message, status);
    MRECV_BODY(PMPI_Mrecv_c(buf, count, datatype, message, st), MG_LARGE_COUNT);
}

int MPI_Imrecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request)
{
    if (!mg_should_record())
        return PMPI_Imrecv_c(buf, count, datatype, message, request);
    IMRECV_BODY(PMPI_Imrecv_c(buf, count, datatype, message, request), MG_LARGE_COUNT);
}
#endif
