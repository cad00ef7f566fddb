/* The clock and the per-rank log file: choosing and calibrating the clock,
 * agreeing on the run directory, mapping the log and growing it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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

#define CHUNK_RECORDS (1 << 16) /* the file grows by 4 MiB at a time */

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

void mg_choose_clock(void)
{
    const char *want = getenv("MPIGRAPH_CLOCK_SOURCE");
    if (want && strcmp(want, "monotonic") == 0)
        mg.use_tsc = 0;
    else if (want && strcmp(want, "tsc") == 0)
        mg.use_tsc = tsc_is_invariant();
    else
        mg.use_tsc = tsc_is_invariant();
}

#define CALIB_TRIES 5 /* a pair costs ~100 ns; it is taken only at init, growth and exit */

/* One (ticks, ns) pair; the ns reading is the midpoint of two around the tick
 * read, so the pair is good to a few tens of ns.  A try that is interrupted or
 * preempted between its reads is off by up to the delay, so the tightest of a
 * few tries is kept.  ns is this rank's clock: CLOCK_MONOTONIC plus the
 * test-only skew (clock_sync.c). */
void mg_calibrate(int slot)
{
    int64_t tightest = INT64_MAX;
    for (int i = 0; i < CALIB_TRIES; i++) {
        int64_t a = mg_clock_ns();
        int64_t t = mg_now();
        int64_t b = mg_clock_ns();
        if (b - a < tightest) {
            tightest = b - a;
            mg.header->calib_ticks[slot] = t;
            mg.header->calib_ns[slot] = a + (b - a) / 2;
        }
    }
}

/* ---- the log file --------------------------------------------------------- */

static size_t file_size_for(int64_t capacity)
{
    return MG_HEADER_SIZE + (size_t)capacity * sizeof(mg_record);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Address space mapped for the log, reserved once at its opening so that the
 * mapping never moves while a helper thread works on it: 64 GiB (a billion
 * records), less where RLIMIT_AS forbids it; mremap only beyond that. */
#define RESERVE_BYTES ((size_t)64 << 30)
static size_t mapped;

/* Make the file `to` records long with its blocks allocated: a full disk
 * fails here, not as SIGBUS in a wrapper.  Cheap (~50 ns a 4 KiB page). */
static int allocate_file(int64_t from, int64_t to)
{
    size_t old_size = from ? file_size_for(from) : 0, size = file_size_for(to);
    if (ftruncate(mg.fd, (off_t)size) != 0)
        return -1;
    int rc = posix_fallocate(mg.fd, (off_t)old_size, (off_t)(size - old_size));
    if (rc != 0)
        return errno = rc, -1; /* posix_fallocate returns its error, it does not set errno */
    return 0;
}

/* Fault the pages of records from .. to in, writable, in one call (a page
 * fault per 4 KiB costs more).  This is the expensive part, paid once per
 * 4 KiB page (64 records): the kernel allocates, zeroes and maps the page,
 * and a virtual machine's host may have to back it first, which costs the
 * most per record of all the shim does. */
static void populate(char *base, int64_t from, int64_t to)
{
    size_t old_size = from ? file_size_for(from) : 0, size = file_size_for(to);
    madvise(base + old_size, size - old_size, MADV_POPULATE_WRITE);
}

/* The capacity after `capacity`: 4 MiB steps, then half again, up to
 * MAX_STEP_RECORDS a step.  Large steps are cheaper per page (one call
 * faults in many pages), but the wrapper that crosses a step stalls while it
 * is faulted in: without a cap, a step of a large log would stall one wrapper
 * for a long time, time the analysis then sees as that rank's compute. */
#ifndef MAX_STEP_RECORDS
#define MAX_STEP_RECORDS ((int64_t)1 << 20) /* 64 MiB */
#endif
static int64_t next_capacity(int64_t capacity)
{
    int64_t step = capacity / 2 > CHUNK_RECORDS ? capacity / 2 : CHUNK_RECORDS;
    return capacity + (step < MAX_STEP_RECORDS ? step : MAX_STEP_RECORDS);
}

/* ---- the helper thread: the next pages are prepared ahead of the writer ----
 *
 * Faulting pages in (above) was half of what a cheap wrapper cost, paid by
 * whichever wrapper crossed a step.  A helper thread allocates the step after
 * the writer's, then faults it in, while the writer fills the current one.
 * The work is moved, not saved: it runs on another core if one is free
 * (bench_intercept.py shows it in the process's CPU time).
 *
 * The writer waits only for the cheap allocation, never for the faulting:
 * when no core is free for the helper, the writer's stores fault the pages
 * in themselves (what the helper finds done costs it nothing), so a busy
 * machine costs about what the wrappers paid without a helper.
 * So it runs only where the rank has a CPU to spare (MPIGRAPH_LOG_HELPER=auto,
 * the default: a rank on every core has none to lend it); on and off force it.
 *
 * The helper touches only the file beyond `allocated` and the mapping beyond
 * the writer's capacity; the writer never moves the mapping (mremap) or
 * grows the file itself while the helper is busy. */
static struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    pthread_t thread;
    int running;
    int busy;          /* the helper is allocating or faulting in a step */
    int stop;
    int error;         /* errno of the growth that failed (the disk is full): no more growth */
    int64_t allocated; /* records the file holds, blocks allocated */
    int64_t asked;     /* records the writer wants allocated next */
} ahead = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *helper_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&ahead.m);
    for (;;) {
        while (!ahead.stop && !(ahead.asked > ahead.allocated && !ahead.error))
            pthread_cond_wait(&ahead.cv, &ahead.m);
        if (ahead.stop)
            break;
        int64_t from = ahead.allocated, to = ahead.asked;
        char *base = (char *)mg.header;
        ahead.busy = 1;
        pthread_mutex_unlock(&ahead.m);
        int rc = allocate_file(from, to), err = errno;
        pthread_mutex_lock(&ahead.m);
        if (rc != 0)
            ahead.error = err;
        else
            ahead.allocated = to;
        pthread_cond_broadcast(&ahead.cv); /* the writer may use the step now */
        pthread_mutex_unlock(&ahead.m);
        if (rc == 0)
            populate(base, from, to);
        pthread_mutex_lock(&ahead.m);
        ahead.busy = 0;
        pthread_cond_broadcast(&ahead.cv);
    }
    pthread_mutex_unlock(&ahead.m);
    return NULL;
}

/* A child forked after MPI_Init has no helper: it grows its log itself. */
static void helper_forgotten_in_child(void)
{
    pthread_mutex_init(&ahead.m, NULL);
    pthread_cond_init(&ahead.cv, NULL);
    ahead.running = ahead.busy = 0;
}

static void ask_helper(void);

/* MPIGRAPH_LOG_HELPER: on, off, or auto (the default): on when this rank has
 * a CPU to spare (spare_cpu.c). */
void mg_start_log_helper(int spare_cpu)
{
    const char *want = getenv("MPIGRAPH_LOG_HELPER");
    int on = !want || !strcmp(want, "auto") ? spare_cpu : !strcmp(want, "on");
    if (!on)
        return;
    static int atfork_set;
    if (!atfork_set++)
        pthread_atfork(NULL, NULL, helper_forgotten_in_child);
    /* Signals go to the program's threads, never to this one. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    ahead.stop = 0;
    ahead.running = pthread_create(&ahead.thread, NULL, helper_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ahead.running)
        mg.header->flags |= MG_HEADER_LOG_HELPER;
    /* The second step is prepared while the program fills the second half of the
     * first: the writer stops at the half (its capacity halved; the pages beyond are
     * allocated and faulted in already) and asks then.  Not at once: faulting in a
     * step holds the process's mmap lock, and the MPI library maps its own buffers
     * around MPI_Init and the first messages; a run too short to fill half a step
     * never needs the helper at all. */
    pthread_mutex_lock(&ahead.m);
    if (mg.n < mg.capacity / 2)
        mg.capacity /= 2;
    else
        ask_helper();
    pthread_mutex_unlock(&ahead.m);
}

void mg_stop_log_helper(void)
{
    if (!ahead.running)
        return;
    pthread_mutex_lock(&ahead.m);
    ahead.stop = 1;
    pthread_cond_broadcast(&ahead.cv);
    pthread_mutex_unlock(&ahead.m);
    pthread_join(ahead.thread, NULL);
    ahead.running = 0;
}

/* Ask the helper for the step after the writer's capacity (ahead.m held). */
static void ask_helper(void)
{
    int64_t next = next_capacity(mg.capacity);
    if (ahead.running && !ahead.error && next > ahead.asked && file_size_for(next) <= mapped) {
        ahead.asked = next;
        pthread_cond_signal(&ahead.cv);
    }
}

/* Map the new log with its first step of records (no helper yet). */
static int map_first(void)
{
    for (size_t want = RESERVE_BYTES;; want /= 2) {
        if (want <= file_size_for(CHUNK_RECORDS))
            want = file_size_for(CHUNK_RECORDS);
        void *base = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, mg.fd, 0);
        if (base != MAP_FAILED) {
            mg.header = base;
            mapped = want;
            /* No MADV_HUGEPAGE: large page-cache folios come from high-order
             * free blocks, which a virtual machine's guest may have returned to
             * its host, so the host faults on their first touch: more CPU per
             * record, not less. */
            break;
        }
        if (want == file_size_for(CHUNK_RECORDS))
            return -1;
    }
    mg.records = (mg_record *)((char *)mg.header + MG_HEADER_SIZE);
    ahead.allocated = ahead.asked = ahead.error = ahead.busy = 0;
    if (allocate_file(0, CHUNK_RECORDS) != 0) {
        munmap(mg.header, mapped);
        mg.header = NULL;
        return -1;
    }
    populate((char *)mg.header, 0, CHUNK_RECORDS);
    ahead.allocated = ahead.asked = mg.capacity = CHUNK_RECORDS;
    return 0;
}

/* Grow to at least `need` records here, the helper idle (ahead.m held). */
static void grow_here(int64_t need)
{
    int64_t to = next_capacity(ahead.allocated);
    while (to < need)
        to += CHUNK_RECORDS;
    if (file_size_for(to) > mapped) {
        /* Beyond the reservation: the mapping moves (the writer is here, the helper idle). */
        void *base = mremap(mg.header, mapped, file_size_for(to), MREMAP_MAYMOVE);
        if (base == MAP_FAILED) {
            ahead.error = errno;
            return;
        }
        mg.header = base;
        mg.records = (mg_record *)((char *)base + MG_HEADER_SIZE);
        mapped = file_size_for(to);
    }
    if (allocate_file(ahead.allocated, to) != 0) {
        ahead.error = errno;
        return;
    }
    populate((char *)mg.header, ahead.allocated, to);
    ahead.allocated = ahead.asked = to;
}

/* Called (with mg.lock held when threaded) when the writer's capacity is
 * full: adopt what the helper allocated, or grow here, and ask for the next step. */
mg_record *mg_grow_and_reserve(int64_t count)
{
    if (mg.header->flags & MG_HEADER_RECORDING_DROPPED) {
        /* Already failed and said so (the Finalize record comes here after that). */
        if (mg.threaded)
            mg_unlock();
        return NULL;
    }
    int64_t need = mg.n + count;
    pthread_mutex_lock(&ahead.m);
    /* Wait for the helper's allocation if it is under way (not for its faulting in). */
    while (ahead.busy && ahead.asked > ahead.allocated && ahead.allocated < need && !ahead.error)
        pthread_cond_wait(&ahead.cv, &ahead.m);
    if (ahead.allocated < need && !ahead.error) {
        while (ahead.busy) /* never move the mapping or grow the file under the helper */
            pthread_cond_wait(&ahead.cv, &ahead.m);
        grow_here(need);
    }
    if (ahead.allocated < need) {
        int err = ahead.error;
        pthread_mutex_unlock(&ahead.m);
        /* Disk full or no address space: stop recording, keep what we have. */
        mg.recording = 0;
        mg.header->flags |= MG_HEADER_RECORDING_DROPPED;
        mg_say("rank %d: cannot grow its log (%s); recording stopped after %lld records", mg.world_rank,
            strerror(err), (long long)mg.n);
        if (mg.threaded)
            mg_unlock();
        return NULL;
    }
    mg.capacity = ahead.allocated;
    ask_helper();
    pthread_mutex_unlock(&ahead.m);
    mg_calibrate(MG_CALIB_LAST);
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

/* An existing directory that holds files but no raw/ is not a run directory: it may be the
 * user's own (its summary.txt or ranks.csv), and the report must not write over it.
 * mpigraph/report/outdir.py says the same rule for the launcher. */
static int dir_is_foreign(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;  /* missing: mkdir_p creates it (any other problem shows there) */
    int files = 0, raw = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        files = 1;
        raw |= !strcmp(e->d_name, "raw");
    }
    closedir(d);
    return files && !raw;
}

/* raw/ must be a real directory of this user that no one else can write to:
 * a planted symlink or a shared directory would let others redirect or
 * replace the logs.  (O_EXCL | O_NOFOLLOW guard the files themselves.) */
static int raw_dir_is_unsafe(const char *raw, char *err, size_t len)
{
    struct stat st;
    if (lstat(raw, &st) != 0)
        snprintf(err, len, "cannot inspect %s: %s", raw, strerror(errno));
    else if (S_ISLNK(st.st_mode))
        snprintf(err, len, "%s is a symbolic link: refusing to write logs through it", raw);
    else if (!S_ISDIR(st.st_mode))
        snprintf(err, len, "%s is not a directory", raw);
    else if (st.st_uid != geteuid())
        snprintf(err, len, "%s belongs to another user (uid %u)", raw, (unsigned)st.st_uid);
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(err, len, "%s is writable by other users (mode %03o): use a private directory", raw,
            (unsigned)(st.st_mode & 0777));
    else
        return 0;
    return 1;
}

void mg_prepare_run_dir(struct mg_run_setup *s)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    /* `mpigraph run` names the job (MPIGRAPH_JOB_ID) as it names its default run directory,
     * ./mpigraph-<job id>, so the report's job id is the directory's suffix. */
    const char *given = getenv("MPIGRAPH_JOB_ID");
    if (given && *given)
        snprintf(s->job_id, sizeof s->job_id, "%s", given);
    else
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
    if (dir_is_foreign(s->dir))
        snprintf(s->error, sizeof s->error, "%s is not an mpigraph run directory (it holds files and no raw/): "
                 "refusing to write a run over its files (choose a new or empty MPIGRAPH_OUT)", s->dir);
    else if (mkdir_p(s->dir, 0755) != 0 || mkdir_p(raw, 0700) != 0)
        snprintf(s->error, sizeof s->error, "cannot create %s: %s", raw, strerror(errno));
    else if (raw_dir_is_unsafe(raw, s->error, sizeof s->error))
        ;
    else if (dir_has_logs(raw))
        snprintf(s->error, sizeof s->error, "%s already holds the logs of another run (choose another MPIGRAPH_OUT)",
                 raw);
}

int mg_open_log(const struct mg_run_setup *s, int thread_level, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/raw/rank-%d.log", s->dir, mg.world_rank);
    /* O_EXCL and O_NOFOLLOW: never overwrite or follow a planted file. */
    mg.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (mg.fd < 0 || map_first() != 0) {
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
    h->n_functions = MG_N_FUNCTIONS;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_unix_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    mg_host_identity(h->hostname, sizeof h->hostname, h->boot_id, sizeof h->boot_id);
    snprintf(h->job_id, sizeof h->job_id, "%s", s->job_id);
    return 0;
}

void mg_close_log_file(void)
{
    mg_stop_log_helper();
    mg_calibrate(MG_CALIB_FINAL);
    mg.header->flags |= MG_HEADER_FINALIZED;
    size_t used = file_size_for(mg.n);
    munmap(mg.header, mapped);
    mg.header = NULL;
    mg.records = NULL;
    /* The mapping was sparse and over-sized: leave the file at its real size. */
    if (ftruncate(mg.fd, (off_t)used) != 0)
        mg_say("rank %d: cannot trim its log: %s", mg.world_rank, strerror(errno));
    close(mg.fd);
    mg.fd = -1;
}

/* Remove this rank's log: recording was refused on some rank. */
void mg_discard_log(const struct mg_run_setup *s)
{
    if (!mg.header)
        return;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/raw/rank-%d.log", s->dir, mg.world_rank);
    mg_stop_log_helper();
    munmap(mg.header, mapped);
    mg.header = NULL;
    close(mg.fd);
    mg.fd = -1;
    unlink(path);
}
