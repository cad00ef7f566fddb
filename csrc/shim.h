/* mpigraph shim: state shared by the hand-written core (shim.c) and the
 * wrappers generated from mpigraph/trace/functions.py (wrappers.c).
 *
 * The hot path of a wrapper is: test the recording flag, read the clock
 * twice around the PMPI call, reserve a slot in the mmap'ed log, fill it,
 * publish it.  Everything else (communicator tables, request ids) lives in
 * hash tables that are touched only by the calls that need them. */
#ifndef MPIGRAPH_SHIM_H
#define MPIGRAPH_SHIM_H

#include <mpi.h>
#include <stdint.h>
#include <time.h>
#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "record.h"
#include "pmpi.h" /* generated: PMPI_X calls go through resolved pointers */
#include "ids.h"  /* generated: MG_ID_<MPI name> */

/* A communicator the shim knows: its agreed id and how to turn its ranks
 * into world ranks.  Never freed (requests may outlive their communicator),
 * only unlinked from the handle table by MPI_Comm_free. */
typedef struct mg_comm {
    MPI_Comm handle;
    int64_t id;
    int size;            /* local group size */
    int rank;            /* this process's rank in the local group */
    int *world;          /* local rank -> world rank; NULL means identity */
    int is_inter;
    int remote_size;
    int *remote_world;   /* remote rank -> world rank (intercommunicators) */
    uint32_t seq;        /* collectives called on it so far */
} mg_comm;

/* What the shim remembers of a request between its start and completion. */
typedef struct mg_request {
    uint64_t key;        /* the MPI_Request handle's bits */
    const void *slot;    /* the program's MPI_Request variable that received the handle */
    struct mg_request *next; /* next request with the same handle, or next free */
    int64_t id;
    mg_comm *comm;
    int64_t bytes;
    int32_t peer;        /* world rank, or MG_PEER_* */
    int32_t tag;
    uint32_t seq;        /* collective sequence number for nonblocking collectives */
    uint16_t flags;      /* MG_SEND | MG_RECV | MG_PERSISTENT */
    uint16_t active;     /* started and not yet completed */
} mg_request;

struct mg_state {
    volatile int recording;   /* 1 while calls are being logged */
    int use_tsc;
    int threaded;             /* MPI_THREAD_MULTIPLE: appends take the lock */
    int world_rank, world_size;
    mg_header *header;        /* the mapped file: header, then records */
    mg_record *records;
    int64_t n;                /* records published */
    int64_t capacity;         /* records the writer may fill: allocated and faulted in (logfile.c) */
    int fd;
    pthread_mutex_t lock;
    mg_comm world;
    mg_comm self;
    int64_t next_request_id;
    /* Polling compaction (mg_poll_repeat): the last unsuccessful poll's record. */
    int64_t poll_gap_ticks;   /* the largest gap between two polls merged; 0: never merge */
    int64_t poll_index;       /* its index, -1 for none */
    uint64_t poll_args;       /* its arguments, hashed */
};

extern struct mg_state mg;

/* One message on stderr, prefixed "mpigraph: ". */
void mg_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern __thread int mg_depth __attribute__((tls_model("initial-exec")));
extern __thread int32_t mg_thread_slot __attribute__((tls_model("initial-exec")));

static inline int64_t mg_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t mg_now(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (mg.use_tsc)
        return (int64_t)__rdtsc();
#endif
    return mg_monotonic_ns();
}

/* ---- call sites (callsites.c) ----------------------------------------------------
 * mg_site: the rank-local call-site id of this thread's current call, an index into
 * mg_sites (the return addresses into the program seen so far, id = slot + 1, 0 = unknown).
 * MG_SITE() notes it from the wrapper's return address; mg_fill copies it into the record. */
#define MG_SITE_BITS 15
#define MG_N_SITES (1u << MG_SITE_BITS)
#define MG_MAX_SITE_DEPTH 8
extern uintptr_t mg_sites[MG_N_SITES];
extern int mg_site_depth; /* MPIGRAPH_CALLSITE_DEPTH: frames per site, 1 = the return address */
extern uintptr_t mg_self_lo, mg_self_len, mg_fort_lo, mg_fort_len;
extern __thread uint16_t mg_site __attribute__((tls_model("initial-exec")));
void mg_sites_setup(void);
void mg_sites_setup_once(void); /* at the first MPI_Init (C or Fortran) */
uint16_t mg_site_slow(uintptr_t pc);
void mg_write_sites(const char *run_dir, int rank);

static inline int mg_in_self(uintptr_t pc) { return pc - mg_self_lo < mg_self_len; }
static inline int mg_in_fortran(uintptr_t pc) { return pc - mg_fort_lo < mg_fort_len; }

/* Fibonacci hashing: the top MG_SITE_BITS bits of pc times 2^64 / phi. */
static inline uint32_t mg_site_hash(uintptr_t pc)
{
    return (uint32_t)(((uint64_t)pc * 0x9E3779B97F4A7C15ull) >> (64 - MG_SITE_BITS));
}

static inline void mg_note_site(uintptr_t pc)
{
    /* Called from inside the shim (its Fortran 2008 bindings): the binding noted the site. */
    if (mg_in_self(pc))
        return;
    uint32_t h = mg_site_hash(pc);
    mg_site = __builtin_expect(mg_sites[h] == pc, 1) ? (uint16_t)(h + 1) : mg_site_slow(pc);
    /* With a stack depth above 1 the slots hold stacks' hashes, which a return address
     * matches with odds of 2^-64: every call takes mg_site_slow and unwinds. */
}

/* A macro, not a function: the return address must be the wrapper's own. */
#define MG_SITE() mg_note_site((uintptr_t)__builtin_return_address(0))

/* True when this call should be logged: recording is on and we are not
 * already inside another wrapper (MPI calling MPI, Fortran calling C).
 * Every wrapper asks first: a call that is logged notes its call site here. */
#define mg_should_record() (mg.recording && !mg_depth && (MG_SITE(), 1))

mg_record *mg_grow_and_reserve(int64_t count);
void mg_assign_thread_slot(void);
void mg_lock(void);
void mg_unlock(void);

/* Reserve `count` consecutive records; mg_publish(count) makes them visible.
 * The call record and its parts are reserved together so they stay adjacent. */
static inline mg_record *mg_reserve(int64_t count)
{
    if (mg.threaded) {
        mg_lock();
        if (mg_thread_slot < 0)
            mg_assign_thread_slot();
    }
    if (__builtin_expect(mg.n + count > mg.capacity, 0))
        return mg_grow_and_reserve(count);
    return mg.records + mg.n;
}

static inline void mg_publish(int64_t count)
{
    mg.n += count;
    /* A plain store is enough: a crash loses at most the unpublished record. */
    mg.header->n_records = mg.n;
    if (mg.threaded)
        mg_unlock();
}

static inline void mg_fill(mg_record *r, int func, int64_t t0, int64_t t1, uint16_t flags)
{
    /* One assignment: the compiler writes the 64 bytes with a few wide stores. */
    *r = (mg_record){.t_start = t0, .t_end = t1, .peer = MG_PEER_NONE, .tag = MG_TAG_NONE,
                     .root = MG_ROOT_NONE, .func = (uint16_t)func, .flags = flags,
                     .thread = (uint16_t)mg_thread_slot, .site = mg_site};
}

/* ---- in-flight calls ----------------------------------------------------------
 * A blocking call's start goes into the header's slot of its thread before the
 * call, and is cleared after: a run that hangs or is killed shows where each
 * rank was.  The header, not the next record slot, because the record stream
 * stays append-only (the reader needs no rule for a half-written record) and
 * a thread's slot is its own (no lock held across a call that blocks).  Cost:
 * one 64-byte store before and one 2-byte store after, in a page the call
 * touches anyway. */
static inline int mg_begin(int func, int64_t t0, int32_t peer, int32_t tag, int64_t comm, uint32_t seq,
                           int32_t root, int64_t bytes)
{
    int slot = mg_thread_slot;
    if (__builtin_expect(slot < 0, 0)) {
        mg_assign_thread_slot();
        slot = mg_thread_slot;
    }
    if ((unsigned)slot >= MG_N_INFLIGHT)
        return -1;
    mg.header->inflight[slot] = (mg_record){.t_start = t0, .bytes = bytes, .comm = comm, .peer = peer, .tag = tag,
                                            .root = root, .seq = seq, .func = (uint16_t)func,
                                            .thread = (uint16_t)slot, .site = mg_site};
    return slot;
}

static inline void mg_end(int slot)
{
    if (slot >= 0 && mg.header)
        mg.header->inflight[slot].func = 0;
}

/* ---- polling compaction -------------------------------------------------------
 * An unsuccessful poll (Iprobe or Test* that found nothing) with the same
 * arguments as the unsuccessful poll just before it, no record in between and
 * a gap below poll_gap_ticks since it ended, extends that poll's record
 * instead of writing one: its end moves to t1 and its count (seq, with flag
 * MG_REPEAT) grows by one.  A polling loop costs a few records instead of one
 * per call; the gaps merged (under MPIGRAPH_POLL_GAP_NS each) count as MPI
 * time.  Returns 1 when merged. */
static inline int mg_poll_repeat(int func, uint64_t args, int64_t t0, int64_t t1)
{
    if (mg.threaded)
        mg_lock();
    int merged = 0;
    if (mg.poll_index == mg.n - 1 && mg.poll_args == args) {
        mg_record *r = mg.records + mg.poll_index;
        if (r->func == func && r->thread == (uint16_t)mg_thread_slot && r->site == mg_site && t0 - r->t_end <= mg.poll_gap_ticks
            && t0 >= r->t_end && r->seq < UINT32_MAX) {
            r->t_end = t1;
            r->seq = (r->flags & MG_REPEAT) ? r->seq + 1 : 2;
            r->flags |= MG_REPEAT;
            merged = 1;
        }
    }
    if (mg.threaded)
        mg_unlock();
    return merged;
}

/* The record just published (at index n - 1) is an unsuccessful poll of `args`. */
static inline void mg_poll_note(uint64_t args)
{
    mg.poll_index = mg.n - 1;
    mg.poll_args = args;
}

static inline uint64_t mg_hash_args(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL;
}

/* ---- device buffers (gpu.c) ------------------------------------------------------
 * MG_DEVICE on a record whose buffer the CUDA driver says is device memory; the driver's
 * cuPointerGetAttribute is looked up at MPI_Init and is NULL without a CUDA driver loaded. */
typedef int (*mg_cu_pointer_attr_fn)(void *data, int attribute, unsigned long long ptr);
extern mg_cu_pointer_attr_fn mg_cu_pointer_attr;
void mg_gpu_setup(void);
uint16_t mg_device_flag_slow(const void *buf);

static inline uint16_t mg_device_flag(const void *buf)
{
    return __builtin_expect(mg_cu_pointer_attr == 0, 1) ? 0 : mg_device_flag_slow(buf);
}

mg_comm *mg_comm_lookup_slow(MPI_Comm comm);
void mg_comms_setup(void);
void mg_comm_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, MPI_Comm newcomm);

static inline mg_comm *mg_comm_of(MPI_Comm comm)
{
    if (comm == MPI_COMM_WORLD)
        return &mg.world;
    if (comm == MPI_COMM_SELF)
        return &mg.self;
    return mg_comm_lookup_slow(comm);
}

/* A rank of `c` (remote group for intercommunicators) as a world rank. */
static inline int32_t mg_world_peer(const mg_comm *c, int r)
{
    if (r >= 0) {
        if (c->is_inter)
            return r < c->remote_size ? c->remote_world[r] : MG_PEER_NONE;
        if (r >= c->size)
            return MG_PEER_NONE;
        return c->world ? c->world[r] : r;
    }
    if (r == MPI_PROC_NULL)
        return MG_PEER_PROC_NULL;
    if (r == MPI_ANY_SOURCE)
        return MG_PEER_ANY;
    return MG_PEER_NONE;
}

static inline int32_t mg_tag(int tag)
{
    return tag == MPI_ANY_TAG ? MG_TAG_ANY : tag;
}

/* The root of a rooted collective as a world rank (intercommunicators use
 * MPI_ROOT for the root itself and MPI_PROC_NULL for the rest of its group). */
static inline int32_t mg_world_root(const mg_comm *c, int root)
{
    if (c->is_inter) {
        if (root == MPI_ROOT)
            return mg.world_rank;
        if (root == MPI_PROC_NULL)
            return MG_ROOT_NONE;
    }
    return mg_world_peer(c, root);
}

static inline int mg_is_root(const mg_comm *c, int root)
{
    return c->is_inter ? root == MPI_ROOT : root == c->rank;
}

int64_t mg_type_size_slow(MPI_Datatype type);

/* The sizes of the predefined datatypes programs use most, filled in at
 * MPI_Init (types.c): a hit costs a few compares instead of a call into MPI
 * (PMPI_Type_size).  Predefined handles are never freed, so it cannot go stale. */
#define MG_N_KNOWN_TYPES 8
extern MPI_Datatype mg_known_types[MG_N_KNOWN_TYPES];
extern int64_t mg_known_sizes[MG_N_KNOWN_TYPES];

static inline int64_t mg_type_size(MPI_Datatype type)
{
    for (int i = 0; i < MG_N_KNOWN_TYPES; i++)
        if (mg_known_types[i] == type)
            return mg_known_sizes[i];
    return mg_type_size_slow(type);
}

/* Sums of per-rank counts for the v/w collectives (recorded as bytes sent). */
static inline int64_t mg_sum_counts(const int counts[], int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += counts[i];
    return s;
}

static inline int64_t mg_sum_counts_types(const int counts[], const MPI_Datatype types[], int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += (int64_t)counts[i] * mg_type_size(types[i]);
    return s;
}

#if MPI_VERSION >= 4
static inline int64_t mg_sum_counts_c(const MPI_Count counts[], int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += counts[i];
    return s;
}

static inline int64_t mg_sum_counts_types_c(const MPI_Count counts[], const MPI_Datatype types[], int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += counts[i] * mg_type_size(types[i]);
    return s;
}
#endif

/* The clock and the log file (logfile.c). */
#include <limits.h>
struct mg_run_setup {  /* what rank 0 decides at MPI_Init and broadcasts */
    char dir[PATH_MAX];
    char job_id[64];
    char error[PATH_MAX + 256]; /* empty when the directory is ready */
};
void mg_choose_clock(void);
void mg_calibrate(int slot);
void mg_prepare_run_dir(struct mg_run_setup *s);
int mg_open_log(const struct mg_run_setup *s, int thread_level, char *err, size_t errlen);
void mg_discard_log(const struct mg_run_setup *s);
void mg_close_log_file(void);
/* The thread that prepares the log's next pages (logfile.c); stop is idempotent. */
int mg_rank_has_spare_cpu(void);
/* The world ranks that analyse a run of `total` records at MPI_Finalize, in order, *k of them
 * (analysis_ranks.c). */
int *mg_choose_analysis_ranks(long long total, int *k);
void mg_start_log_helper(int spare_cpu);
void mg_stop_log_helper(void);

void *mg_mpi_symbol(const char *name);

/* MPI_Init and MPI_Finalize (shim.c), shared with the Fortran bindings. */
/* Called once MPI is initialised; writes the Init record (t0 .. now) last. */
void mg_start_recording(int func, int64_t t0, int provided);
void mg_finalize_handover(void);

/* Clock synchronisation samples (clock_sync.c). */
int64_t mg_clock_ns(void);
void mg_sync_setup(void);
void mg_host_identity(char *hostname, size_t hostname_len, char *boot_id, size_t boot_id_len);
void mg_sync_measure(mg_sync *s);
void mg_sync_finish(void);
int mg_sync_all_arrived(void);  /* 0: some rank did not reach MPI_Finalize in time (said on stderr) */
const char *mpigraph_run_dir(void);

/* Requests. */
/* Remember a new request, `handle` as stored in the program's variable `slot`;
 * returns its id (0 for MPI_REQUEST_NULL). */
int64_t mg_request_new(MPI_Request handle, const void *slot, mg_comm *comm, int32_t peer, int32_t tag,
                       int64_t bytes, uint16_t flags, uint32_t seq);

void mg_types_setup(void);

/* The peer, tag and communicator of an active request, for the in-flight slot
 * of a Wait; 0 when the shim does not know the request. */
int mg_request_describe(MPI_Request handle, const void *slot, int32_t *peer, int32_t *tag, int64_t *comm);

/* Windows and files (windows.c): a pseudo-communicator per window or file,
 * with an id agreed by its members, so fences and collective file operations
 * are grouped into collective instances like any collective. */
mg_comm *mg_comm_of_win(MPI_Win win);
mg_comm *mg_comm_of_file(MPI_File fh);
void mg_win_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, MPI_Win win);
void mg_file_created(int func, int64_t t0, int64_t t1, int rc, MPI_Comm parent, MPI_File fh);
void mg_win_freed(MPI_Win win);
void mg_file_freed(MPI_File fh);
/* A new communicator-like group of `parent`'s members with an id they agree on (comms.c). */
mg_comm *mg_comm_derived(mg_comm *parent);

/* Status of a receive: the real source, tag and byte count. */
void mg_fill_from_status(mg_record *r, const mg_comm *c, const MPI_Status *st);

#endif
