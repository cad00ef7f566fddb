/* mpigraph shim core: the log file, the clock, the communicator and request
 * tables, the hand-written wrappers (Init, Finalize, Wait/Test families,
 * Start, Request_free, Comm_free) and the hand-over to Python.
 *
 * Rules: never break the program (any failure turns recording off and says
 * so once on stderr), never analyse (Python does that), keep the wrapper hot
 * path to a flag test, two clock reads and one record store. */
#define _GNU_SOURCE
#include <Python.h>

#include <dirent.h>
#include <stdarg.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "shim.h"

/* Entry points into Python, defined by cffi's embedding (see setup.py). */
extern int mpigraph_py_finalize(const char *run_dir);
extern int mpigraph_py_register_atexit(void);
extern const int mg_n_functions;

#define FUNC_INIT 1
#define FUNC_INIT_THREAD 2
#define FUNC_FINALIZE 3
#define FUNC_START 30
#define FUNC_STARTALL 31
#define FUNC_REQUEST_FREE 32
#define FUNC_WAIT 40
#define FUNC_WAITALL 41
#define FUNC_WAITANY 42
#define FUNC_WAITSOME 43
#define FUNC_TEST 44
#define FUNC_TESTALL 45
#define FUNC_TESTANY 46
#define FUNC_TESTSOME 47
#define FUNC_COMM_FREE 83

#define CHUNK_RECORDS (1 << 16) /* the file grows by 4 MiB at a time */
#define SMALL 16                /* requests handled without malloc in Wait/Test */

struct mg_state mg = {.fd = -1};
__thread int mg_depth __attribute__((tls_model("initial-exec")));
__thread int32_t mg_thread_slot __attribute__((tls_model("initial-exec"))) = -1;

/* Life cycle of the shim in this process. */
enum { MG_OFF, MG_RECORDING, MG_CLOSED, MG_ANALYSED };
static int mg_phase = MG_OFF;
static int mg_analyze = 1;       /* MPIGRAPH_ANALYZE */
static int mg_python_host;       /* the program itself is a Python interpreter */
static char mg_run_dir[PATH_MAX];
static int32_t mg_next_thread_slot = 1;
static int64_t mg_comm_counter = 1; /* creation counter agreed with other members */
static MPI_Group mg_world_group = MPI_GROUP_NULL;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mpigraph: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- finding the program's MPI library ------------------------------------ */

#define DEFINE_POINTER(n) __typeof__(mg_pmpi_##n) mg_pmpi_##n;
MG_PMPI_NAMES(DEFINE_POINTER)
MG_PMPI_NAMES_LARGE(DEFINE_POINTER)

/* dl_iterate_phdr callback: the first loaded object (or its dependencies)
 * that defines PMPI_Init.  Needed when MPI was loaded with RTLD_LOCAL, as
 * mpi4py does, where RTLD_NEXT cannot see it. */
static int find_mpi_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return 0;
    if (dlsym(h, "PMPI_Init")) {
        *(void **)data = h;
        return 1;
    }
    dlclose(h);
    return 0;
}

/* Bind every PMPI_X pointer to the program's MPI library.  The shim links no
 * MPI itself, so one build serves any library of its ABI, whatever its file
 * name (libmpi.so.12 from the mpich wheel, Debian's libmpich.so.12, ...). */
void mg_resolve_pmpi(void)
{
    static int resolved;
    if (resolved)
        return;
    void *handle = RTLD_NEXT;
    if (!dlsym(RTLD_NEXT, "PMPI_Init")) {
        handle = NULL;
        dl_iterate_phdr(find_mpi_object, &handle);
    }
    if (!handle) {
        say("no MPI library is loaded in this process, yet an MPI function was called");
        abort();
    }
#define RESOLVE(n) mg_pmpi_##n = (__typeof__(mg_pmpi_##n))dlsym(handle, "PMPI_" #n);
    MG_PMPI_NAMES(RESOLVE)
    MG_PMPI_NAMES_LARGE(RESOLVE)
    resolved = 1;
}

void mg_lock(void) { pthread_mutex_lock(&mg.lock); }
void mg_unlock(void) { pthread_mutex_unlock(&mg.lock); }

/* ---- clock ---------------------------------------------------------------- */

static int tsc_is_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000, NULL) < 0x80000007)
        return 0;
    __cpuid(0x80000007, a, b, c, d);
    return (d >> 8) & 1;
#else
    return 0;
#endif
}

static void choose_clock(void)
{
    const char *want = getenv("MPIGRAPH_CLOCK_SOURCE");
    if (want && strcmp(want, "monotonic") == 0)
        mg.use_tsc = 0;
    else if (want && strcmp(want, "tsc") == 0)
        mg.use_tsc = tsc_is_invariant();
    else
        mg.use_tsc = tsc_is_invariant();
}

/* One (ticks, ns) pair; the ns reading is the midpoint of two around the tick
 * read, so the pair is good to a few tens of ns.  ns is this rank's clock:
 * CLOCK_MONOTONIC plus the test-only skew (clock_sync.c). */
static void calibrate(int slot)
{
    int64_t a = mg_clock_ns();
    int64_t t = mg_now();
    int64_t b = mg_clock_ns();
    mg.header->calib_ticks[slot] = t;
    mg.header->calib_ns[slot] = a + (b - a) / 2;
}

/* ---- the log file --------------------------------------------------------- */

static size_t file_size_for(int64_t capacity)
{
    return MG_HEADER_SIZE + (size_t)capacity * sizeof(mg_record);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static int map_log(int64_t capacity)
{
    size_t old_size = mg.header ? file_size_for(mg.capacity) : 0;
    size_t size = file_size_for(capacity);
    /* Allocate the blocks now: a full disk fails here, not as SIGBUS in a wrapper. */
    if (ftruncate(mg.fd, (off_t)size) != 0 || posix_fallocate(mg.fd, (off_t)old_size, (off_t)(size - old_size)) != 0)
        return -1;
    void *base;
    if (mg.header)
        base = mremap(mg.header, old_size, size, MREMAP_MAYMOVE);
    else
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mg.fd, 0);
    if (base == MAP_FAILED)
        return -1;
    /* Fault the new pages in, writable, in one call: a page fault per 4 KiB
     * (64 records) cost 25 ns per record here, 115 ns on fresh memory. */
    madvise((char *)base + old_size, size - old_size, MADV_POPULATE_WRITE);
    mg.header = base;
    mg.records = (mg_record *)((char *)base + MG_HEADER_SIZE);
    mg.capacity = capacity;
    return 0;
}

/* Called with the lock held (threaded) when the mapping is full. */
mg_record *mg_grow_and_reserve(int64_t count)
{
    int64_t want = mg.capacity + (mg.capacity / 2 > CHUNK_RECORDS ? mg.capacity / 2 : CHUNK_RECORDS);
    while (want < mg.n + count)
        want += CHUNK_RECORDS;
    if (map_log(want) != 0) {
        /* Disk full or no address space: stop recording, keep what we have. */
        mg.recording = 0;
        mg.header->flags |= MG_HEADER_RECORDING_DROPPED;
        say("rank %d: cannot grow its log (%s); recording stopped after %lld records", mg.world_rank,
            strerror(errno), (long long)mg.n);
        if (mg.threaded)
            mg_unlock();
        return NULL;
    }
    calibrate(MG_CALIB_LAST);
    return mg.records + mg.n;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return errno = ENAMETOOLONG, -1;
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int dir_has_logs(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "rank-", 5) == 0)
            found = 1;
    closedir(d);
    return found;
}

/* What rank 0 decides and broadcasts at MPI_Init. */
struct run_setup {
    char dir[PATH_MAX];
    char job_id[64];
    char error[PATH_MAX + 256]; /* empty when the directory is ready */
};

static void prepare_run_dir(struct run_setup *s)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(s->job_id, sizeof s->job_id, "%s-%x", stamp, (unsigned)getpid());

    const char *out = getenv("MPIGRAPH_OUT");
    char name[PATH_MAX];
    if (out && *out)
        snprintf(name, sizeof name, "%s", out);
    else
        snprintf(name, sizeof name, "mpigraph-%s", s->job_id);
    char cwd[PATH_MAX] = "";
    if (name[0] != '/' && !getcwd(cwd, sizeof cwd))
        cwd[0] = '\0';
    if (snprintf(s->dir, sizeof s->dir, "%s%s%s", cwd, cwd[0] ? "/" : "", name) >= (int)sizeof s->dir) {
        snprintf(s->error, sizeof s->error, "the output directory name is too long: %.200s...", name);
        return;
    }
    char raw[PATH_MAX + 8];
    snprintf(raw, sizeof raw, "%s/raw", s->dir);
    if (mkdir_p(s->dir, 0755) != 0 || mkdir_p(raw, 0700) != 0)
        snprintf(s->error, sizeof s->error, "cannot create %s: %s", raw, strerror(errno));
    else if (dir_has_logs(raw))
        snprintf(s->error, sizeof s->error, "%s already holds the logs of another run (choose another MPIGRAPH_OUT)",
                 raw);
}

static int open_log(const struct run_setup *s, int thread_level, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/raw/rank-%d.log", s->dir, mg.world_rank);
    /* O_EXCL and O_NOFOLLOW: never overwrite or follow a planted file. */
    mg.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (mg.fd < 0 || map_log(CHUNK_RECORDS) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        if (mg.fd >= 0)
            close(mg.fd), unlink(path);
        mg.fd = -1;
        return -1;
    }
    mg_header *h = mg.header;
    memcpy(h->magic, MG_MAGIC, 8);
    h->version = MG_VERSION;
    h->header_size = MG_HEADER_SIZE;
    h->record_size = sizeof(mg_record);
    h->world_rank = mg.world_rank;
    h->world_size = mg.world_size;
    h->pid = (int32_t)getpid();
    h->thread_level = thread_level;
    h->clock_source = mg.use_tsc ? MG_CLOCK_TSC : MG_CLOCK_MONOTONIC;
    h->n_functions = (uint32_t)mg_n_functions;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_unix_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    gethostname(h->hostname, sizeof h->hostname - 1);
    snprintf(h->job_id, sizeof h->job_id, "%s", s->job_id);
    return 0;
}

static void close_log(void)
{
    calibrate(MG_CALIB_FINAL);
    mg.header->flags |= MG_HEADER_FINALIZED;
    size_t used = file_size_for(mg.n);
    munmap(mg.header, file_size_for(mg.capacity));
    mg.header = NULL;
    mg.records = NULL;
    /* The mapping was sparse and over-sized: leave the file at its real size. */
    if (ftruncate(mg.fd, (off_t)used) != 0)
        say("rank %d: cannot trim its log: %s", mg.world_rank, strerror(errno));
    close(mg.fd);
    mg.fd = -1;
}

/* ---- a small open-addressing map: handle bits -> pointer ------------------- */

typedef struct {
    uint64_t *keys;  /* 0 = empty */
    void **values;
    size_t mask;     /* capacity - 1, capacity a power of two */
    size_t count;
} handle_map;

static size_t slot_of(const handle_map *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 17) & m->mask;
}

static void *map_get(const handle_map *m, uint64_t key)
{
    if (!m->keys)
        return NULL;
    for (size_t i = slot_of(m, key);; i = (i + 1) & m->mask) {
        if (m->keys[i] == key)
            return m->values[i];
        if (m->keys[i] == 0)
            return NULL;
    }
}

static void map_put(handle_map *m, uint64_t key, void *value);

static void map_resize(handle_map *m, size_t capacity)
{
    handle_map old = *m;
    m->keys = calloc(capacity, sizeof *m->keys);
    m->values = calloc(capacity, sizeof *m->values);
    m->mask = capacity - 1;
    m->count = 0;
    for (size_t i = 0; old.keys && i <= old.mask; i++)
        if (old.keys[i])
            map_put(m, old.keys[i], old.values[i]);
    free(old.keys);
    free(old.values);
}

static void map_put(handle_map *m, uint64_t key, void *value)
{
    if (!m->keys || (m->count + 1) * 2 > m->mask + 1)
        map_resize(m, m->keys ? (m->mask + 1) * 2 : 256);
    size_t i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & m->mask;
    if (!m->keys[i])
        m->count++;
    m->keys[i] = key;
    m->values[i] = value;
}

/* Linear probing deletion by backward shift: no tombstones to accumulate. */
static void map_remove(handle_map *m, uint64_t key)
{
    if (!m->keys)
        return;
    size_t i = slot_of(m, key);
    while (m->keys[i] != key) {
        if (!m->keys[i])
            return;
        i = (i + 1) & m->mask;
    }
    for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
        size_t home = slot_of(m, m->keys[j]);
        /* Move j into the hole at i when its home slot is not in (i, j]. */
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->keys[i] = m->keys[j];
            m->values[i] = m->values[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->values[i] = NULL;
    m->count--;
}

#define HANDLE_KEY(h) handle_key(&(h), sizeof(h))
static uint64_t handle_key(const void *handle, size_t size)
{
    uint64_t key = 0;
    memcpy(&key, handle, size < sizeof key ? size : sizeof key);
    return key;
}

/* ---- communicators -------------------------------------------------------- */

static handle_map comm_map;

static int *translate_group(MPI_Group group, int size)
{
    int *ranks = malloc(sizeof(int) * (size_t)size);
    int *world = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    PMPI_Group_translate_ranks(group, size, ranks, mg_world_group, world);
    free(ranks);
    return world;
}

static int min_of(const int *a, int n, int start)
{
    for (int i = 0; i < n; i++)
        if (a[i] < start)
            start = a[i];
    return start;
}

/* Fill in the group tables of c; returns the lowest world rank of all members. */
static int describe_comm(mg_comm *c)
{
    MPI_Group group;
    PMPI_Comm_test_inter(c->handle, &c->is_inter);
    PMPI_Comm_size(c->handle, &c->size);
    PMPI_Comm_rank(c->handle, &c->rank);
    PMPI_Comm_group(c->handle, &group);
    c->world = translate_group(group, c->size);
    PMPI_Group_free(&group);
    int lowest = min_of(c->world, c->size, INT_MAX);
    if (c->is_inter) {
        PMPI_Comm_remote_size(c->handle, &c->remote_size);
        PMPI_Comm_remote_group(c->handle, &group);
        c->remote_world = translate_group(group, c->remote_size);
        PMPI_Group_free(&group);
        lowest = min_of(c->remote_world, c->remote_size, lowest);
    }
    return lowest;
}

/* All members agree on a creation number: each member's counter only grows,
 * so (number, lowest world rank) names one communicator of the whole run. */
static int64_t agree_on_number(const mg_comm *c)
{
    int64_t mine = mg_comm_counter + 1, agreed = mine;
    if (!c->is_inter) {
        PMPI_Allreduce(&mine, &agreed, 1, MPI_INT64_T, MPI_MAX, c->handle);
    } else {
        /* On an intercommunicator an allreduce returns the other group's
         * result: a second round tells each side its own group's maximum. */
        int64_t remote_max, own_max;
        PMPI_Allreduce(&mine, &remote_max, 1, MPI_INT64_T, MPI_MAX, c->handle);
        PMPI_Allreduce(&remote_max, &own_max, 1, MPI_INT64_T, MPI_MAX, c->handle);
        agreed = remote_max > own_max ? remote_max : own_max;
    }
    mg_comm_counter = agreed;
    return agreed;
}

static mg_comm *register_comm(MPI_Comm handle, int agree)
{
    static int64_t unagreed = 0;
    mg_comm *c = calloc(1, sizeof *c);
    c->handle = handle;
    int lowest = describe_comm(c);
    if (agree)
        c->id = (agree_on_number(c) << 32) | (uint32_t)lowest;
    else /* created behind our back: a rank-local id that matches no other rank */
        c->id = ((int64_t)0x7fffffff << 32) | (uint32_t)(mg.world_rank * 4096 + (++unagreed % 4096));
    if (mg.threaded)
        mg_lock();
    map_put(&comm_map, HANDLE_KEY(handle), c);
    if (mg.threaded)
        mg_unlock();
    return c;
}

mg_comm *mg_comm_lookup_slow(MPI_Comm comm)
{
    if (comm == MPI_COMM_SELF)
        return &mg.self;
    if (mg.threaded)
        mg_lock();
    mg_comm *c = map_get(&comm_map, HANDLE_KEY(comm));
    if (mg.threaded)
        mg_unlock();
    return c ? c : register_comm(comm, 0);
}

void mg_comm_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, MPI_Comm newcomm)
{
    mg_comm *p = mg_comm_of(parent);
    uint32_t seq = ++p->seq;
    mg_comm *c = newcomm != MPI_COMM_NULL ? register_comm(newcomm, 1) : NULL;
    mg_record *r = mg_reserve(c ? 2 : 1);
    if (!r)
        return;
    uint16_t err = rc == MPI_SUCCESS ? 0 : MG_ERROR;
    mg_fill(r, func, t0, t1, err);
    r->comm = p->id;
    r->seq = seq;
    if (c) {
        mg_fill(r + 1, func, t0, t1, MG_PART | err);
        r[1].comm = c->id;
        r[1].tag = c->rank;
        r[1].bytes = c->size;
        r[1].peer = c->is_inter ? c->remote_size : MG_PEER_NONE;
    }
    mg_publish(c ? 2 : 1);
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (!mg_should_record())
        return PMPI_Comm_free(comm);
    mg_depth++;
    mg_comm *c = mg_comm_of(*comm);
    uint32_t seq = ++c->seq;
    MPI_Comm handle = *comm;
    int64_t t0 = mg_now();
    int rc = PMPI_Comm_free(comm);
    int64_t t1 = mg_now();
    if (rc == MPI_SUCCESS && c != &mg.world && c != &mg.self) {
        if (mg.threaded)
            mg_lock();
        map_remove(&comm_map, HANDLE_KEY(handle)); /* MPI may reuse the handle */
        if (mg.threaded)
            mg_unlock();
    }
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, FUNC_COMM_FREE, t0, t1, rc == MPI_SUCCESS ? 0 : MG_ERROR);
        r->comm = c->id;
        r->seq = seq;
        mg_publish(1);
    }
    mg_depth--;
    return rc;
}

/* ---- requests ------------------------------------------------------------- */

static handle_map request_map;
static mg_request *free_requests;

static mg_request *request_alloc(void)
{
    if (!free_requests) {
        /* Requests come from slabs and go back to a free list: no malloc per request. */
        mg_request *slab = calloc(1024, sizeof *slab);
        for (int i = 0; i < 1024; i++) {
            slab[i].comm = (mg_comm *)free_requests; /* the free list reuses the comm field */
            free_requests = &slab[i];
        }
    }
    mg_request *q = free_requests;
    free_requests = (mg_request *)q->comm;
    return q;
}

static void request_release(mg_request *q)
{
    map_remove(&request_map, q->key);
    q->comm = (mg_comm *)free_requests;
    free_requests = q;
}

int64_t mg_request_new(MPI_Request req, mg_comm *comm, int32_t peer, int32_t tag, int64_t bytes,
                       uint16_t flags, uint32_t seq)
{
    if (mg.threaded)
        mg_lock();
    uint64_t key = HANDLE_KEY(req);
    mg_request *old = map_get(&request_map, key);
    if (old) /* a request we never saw complete: its handle was reused */
        request_release(old);
    mg_request *q = request_alloc();
    q->key = key;
    q->id = ++mg.next_request_id;
    q->comm = comm;
    q->peer = peer;
    q->tag = tag;
    q->bytes = bytes;
    q->flags = flags;
    q->seq = seq;
    q->active = !(flags & MG_PERSISTENT);
    map_put(&request_map, key, q);
    if (mg.threaded)
        mg_unlock();
    return q->id;
}

mg_request *mg_request_find(MPI_Request req)
{
    if (mg.threaded)
        mg_lock();
    mg_request *q = map_get(&request_map, HANDLE_KEY(req));
    if (mg.threaded)
        mg_unlock();
    return q;
}

void mg_fill_from_status(mg_record *r, const mg_comm *c, const MPI_Status *st)
{
    int count = 0;
    r->peer = mg_world_peer(c, st->MPI_SOURCE);
    r->tag = mg_tag(st->MPI_TAG);
    if (st->MPI_SOURCE == MPI_PROC_NULL) {
        r->tag = MG_TAG_NONE;
        r->bytes = 0;
        return;
    }
#if MPI_VERSION >= 4
    MPI_Count large = 0;
    if (PMPI_Get_count_c(st, MPI_BYTE, &large) == MPI_SUCCESS && large != MPI_UNDEFINED) {
        r->bytes = large;
        return;
    }
#endif
    if (PMPI_Get_count(st, MPI_BYTE, &count) == MPI_SUCCESS && count != MPI_UNDEFINED)
        r->bytes = count;
}

/* One part record per request a Wait/Test call completed.  `done` holds the
 * indices (into saved) of the completed requests; statuses[j] belongs to done[j]. */
static void log_completions(int func, int64_t t0, int64_t t1, int rc, const MPI_Request *saved, int n_done,
                            const int *done, const MPI_Status *statuses)
{
    mg_request *small[SMALL];
    mg_request **found = n_done <= SMALL ? small : malloc(sizeof *found * (size_t)n_done);
    int n_found = 0;
    if (mg.threaded)
        mg_lock();
    for (int j = 0; j < n_done; j++) {
        mg_request *q = map_get(&request_map, HANDLE_KEY(saved[done ? done[j] : j]));
        found[j] = q && q->active ? q : NULL;
        n_found += found[j] != NULL;
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
    for (int j = 0; j < n_done; j++) {
        mg_request *q = found[j];
        if (!q)
            continue;
        q->active = 0;
        if (!(q->flags & MG_PERSISTENT))
            request_release(q);
    }
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
    int rc = PMPI_Wait(request, st);
    int64_t t1 = mg_now();
    log_completions(FUNC_WAIT, t0, t1, rc, &saved, 1, NULL, st);
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
    log_completions(FUNC_TEST, t0, t1, rc, &saved, *flag ? 1 : 0, NULL, st);
    mg_depth--;
    return rc;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    BEGIN_COMPLETION(PMPI_Waitall(count, requests, statuses));
    scratch s;
    scratch_init(&s, count, requests, statuses);
    int64_t t0 = mg_now();
    int rc = PMPI_Waitall(count, requests, s.st);
    int64_t t1 = mg_now();
    log_completions(FUNC_WAITALL, t0, t1, rc, s.saved, count, NULL, s.st);
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
    log_completions(FUNC_TESTALL, t0, t1, rc, s.saved, *flag ? count : 0, NULL, s.st);
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
    int rc = func == FUNC_WAITANY ? PMPI_Waitany(count, requests, index, st)
                                  : PMPI_Testany(count, requests, index, &done_flag, st);
    int64_t t1 = mg_now();
    if (flag)
        *flag = done_flag;
    int completed = done_flag && *index != MPI_UNDEFINED && rc == MPI_SUCCESS;
    log_completions(func, t0, t1, rc, completed ? &s.saved[*index] : s.saved, completed, NULL, st);
    scratch_free(&s, MPI_STATUSES_IGNORE);
    return rc;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    BEGIN_COMPLETION(PMPI_Waitany(count, requests, index, status));
    int rc = any_wrapper(FUNC_WAITANY, count, requests, index, NULL, status);
    mg_depth--;
    return rc;
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    BEGIN_COMPLETION(PMPI_Testany(count, requests, index, flag, status));
    int rc = any_wrapper(FUNC_TESTANY, count, requests, index, flag, status);
    mg_depth--;
    return rc;
}

static int some_wrapper(int func, int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
    scratch s;
    scratch_init(&s, incount, requests, statuses);
    int64_t t0 = mg_now();
    int rc = func == FUNC_WAITSOME ? PMPI_Waitsome(incount, requests, outcount, indices, s.st)
                                   : PMPI_Testsome(incount, requests, outcount, indices, s.st);
    int64_t t1 = mg_now();
    int n = *outcount == MPI_UNDEFINED ? 0 : *outcount;
    log_completions(func, t0, t1, rc, s.saved, n, indices, s.st);
    scratch_free(&s, statuses);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    BEGIN_COMPLETION(PMPI_Waitsome(incount, requests, outcount, indices, statuses));
    int rc = some_wrapper(FUNC_WAITSOME, incount, requests, outcount, indices, statuses);
    mg_depth--;
    return rc;
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    BEGIN_COMPLETION(PMPI_Testsome(incount, requests, outcount, indices, statuses));
    int rc = some_wrapper(FUNC_TESTSOME, incount, requests, outcount, indices, statuses);
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
            mg_request *q = map_get(&request_map, HANDLE_KEY(requests[i]));
            if (!q)
                continue;
            q->active = rc == MPI_SUCCESS;
            mg_record *p = r + 1 + parts++;
            mg_fill(p, func, t0, t1, MG_PART | q->flags | err);
            p->request = q->id;
            p->comm = q->comm->id;
            p->peer = q->peer;
            p->tag = q->tag;
            p->bytes = q->bytes;
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
    log_starts(FUNC_START, t0, t1, rc, 1, request);
    mg_depth--;
    return rc;
}

int MPI_Startall(int count, MPI_Request requests[])
{
    BEGIN_COMPLETION(PMPI_Startall(count, requests));
    int64_t t0 = mg_now();
    int rc = PMPI_Startall(count, requests);
    int64_t t1 = mg_now();
    log_starts(FUNC_STARTALL, t0, t1, rc, count, requests);
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
    mg_request *q = map_get(&request_map, HANDLE_KEY(saved));
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, FUNC_REQUEST_FREE, t0, t1, rc == MPI_SUCCESS ? 0 : MG_ERROR);
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

/* ---- Init: agree on a run directory, open the log --------------------------- */

static int env_is_off(const char *name)
{
    const char *v = getenv(name);
    return v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false"));
}

static void setup_comm_tables(void)
{
    PMPI_Comm_group(MPI_COMM_WORLD, &mg_world_group);
    mg.world = (mg_comm){.handle = MPI_COMM_WORLD, .id = 0, .size = mg.world_size, .rank = mg.world_rank};
    static int self_world[1];
    self_world[0] = mg.world_rank;
    mg.self = (mg_comm){.handle = MPI_COMM_SELF, .id = ((int64_t)1 << 32) | (uint32_t)mg.world_rank,
                        .size = 1, .rank = 0, .world = self_world};
}

static void start_recording(int func, int64_t t0, int64_t t1, int provided)
{
    if (env_is_off("MPIGRAPH_RECORD"))
        return;
    mg_analyze = !env_is_off("MPIGRAPH_ANALYZE");
    PMPI_Comm_rank(MPI_COMM_WORLD, &mg.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &mg.world_size);

    struct run_setup setup = {0};
    if (mg.world_rank == 0)
        prepare_run_dir(&setup);
    PMPI_Bcast(&setup, sizeof setup, MPI_BYTE, 0, MPI_COMM_WORLD);
    char err[PATH_MAX + 600] = "";
    if (setup.error[0])
        snprintf(err, sizeof err, "%s", setup.error);
    else
        open_log(&setup, provided, err, sizeof err);
    /* Record on every rank or on none: a partial set of logs is no report. */
    int ok = err[0] == '\0', all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        /* A directory problem is the same on every rank: say it once. */
        if (!ok && (!setup.error[0] || mg.world_rank == 0))
            say("rank %d: %s; the program runs on without profiling", mg.world_rank, err);
        if (mg.header) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/raw/rank-%d.log", setup.dir, mg.world_rank);
            munmap(mg.header, file_size_for(mg.capacity));
            mg.header = NULL;
            close(mg.fd);
            unlink(path);
        }
        return;
    }
    snprintf(mg_run_dir, sizeof mg_run_dir, "%s", setup.dir);
    mg.threaded = provided >= MPI_THREAD_SERIALIZED;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&mg.lock, &attr);
    mg_thread_slot = 0;
    setup_comm_tables();
    mg_sync_setup();
    mg_sync_measure(&mg.header->sync_init);

    calibrate(MG_CALIB_INIT_A);
    mg_record *r = mg_reserve(1);
    mg_fill(r, func, t0, t1, 0);
    mg_publish(1);
    /* A second calibration pair a millisecond later, so a log that never
     * reaches MPI_Finalize can still convert ticks to ns. */
    int64_t until = mg_monotonic_ns() + 1000000;
    while (mg_monotonic_ns() < until)
        ;
    calibrate(MG_CALIB_INIT_B);
    mg_phase = MG_RECORDING;
    mg.recording = 1;

    /* mpi4py finalises MPI after the interpreter is gone: analyse at exit instead. */
    mg_python_host = Py_IsInitialized();
    if (mg_python_host && mg_analyze && mpigraph_py_register_atexit() != 1)
        say("rank %d: cannot load mpigraph in this Python; raw logs will be left in %s", mg.world_rank,
            mg_run_dir);
}

/* Threads other than the first get their slot when they first log. */
void mg_assign_thread_slot(void)
{
    if (mg_thread_slot < 0)
        mg_thread_slot = __atomic_fetch_add(&mg_next_thread_slot, 1, __ATOMIC_RELAXED);
}

int MPI_Init(int *argc, char ***argv)
{
    choose_clock();
    int64_t t0 = mg_now();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        start_recording(FUNC_INIT, t0, mg_now(), MPI_THREAD_SINGLE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    choose_clock();
    int64_t t0 = mg_now();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        start_recording(FUNC_INIT_THREAD, t0, mg_now(), *provided);
    return rc;
}

/* ---- Finalize: close the log, hand over to Python ------------------------------ */

/* Stop recording and close the log with a Finalize record; 1 if this call did it. */
int mpigraph_close_log(void)
{
    if (mg_phase != MG_RECORDING)
        return 0;
    int64_t t = mg_now();
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, FUNC_FINALIZE, t, t, 0);
        mg_publish(1);
    }
    mg.recording = 0;
    mg_sync_measure(&mg.header->sync_final);
    mg_sync_finish();
    close_log();
    mg_phase = MG_CLOSED;
    return 1;
}

const char *mpigraph_run_dir(void) { return mg_run_dir; }
int mpigraph_analysis_wanted(void) { return mg_analyze && mg_phase == MG_CLOSED; }
void mpigraph_mark_analysed(void) { mg_phase = MG_ANALYSED; }

/* The Python of the environment mpigraph is installed in: MPIGRAPH_PYTHON, or
 * <prefix>/bin/python3 where this library is <prefix>/lib/pythonX.Y/site-packages/mpigraph/. */
static void find_python(char *out, size_t len)
{
    const char *forced = getenv("MPIGRAPH_PYTHON");
    if (forced && *forced) {
        snprintf(out, len, "%s", forced);
        return;
    }
    Dl_info info;
    if (dladdr((void *)find_python, &info) && info.dli_fname) {
        char path[PATH_MAX];
        if (realpath(info.dli_fname, path)) {
            for (int up = 0; up < 5; up++) {
                char *slash = strrchr(path, '/');
                if (slash)
                    *slash = '\0';
            }
            snprintf(out, len, "%s/bin/python3", path);
            if (access(out, X_OK) == 0)
                return;
        }
    }
    snprintf(out, len, "%s", MG_BUILD_PYTHON);
}

static int start_python(void)
{
    if (Py_IsInitialized())
        return 0;
    char program[PATH_MAX];
    find_python(program, sizeof program);
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0; /* the program's handlers stay */
    config.parse_argv = 0;
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, program);
    if (!PyStatus_Exception(status))
        status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        say("rank %d: cannot start Python (%s): %s", mg.world_rank, program,
            status.err_msg ? status.err_msg : "unknown error");
        return -1;
    }
    PyEval_SaveThread(); /* cffi takes the GIL itself for each call */
    return 0;
}

static void analyse_in_job(void)
{
    int ok = start_python() == 0 && mpigraph_py_finalize(mg_run_dir) == 1;
    mg_phase = MG_ANALYSED;
    if (!ok)
        say("rank %d: the analysis did not complete; raw logs are in %s (run: mpigraph analyze %s)",
            mg.world_rank, mg_run_dir, mg_run_dir);
}

int MPI_Finalize(void)
{
    if (mpigraph_close_log() && mg_analyze) {
        /* A Python program that calls MPI_Finalize itself is analysed here,
         * while its interpreter is alive; after interpreter shutdown only the
         * atexit hook could have done it. */
        if (!mg_python_host || Py_IsInitialized())
            analyse_in_job();
    }
    return PMPI_Finalize();
}
