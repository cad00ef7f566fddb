/* Call sites: each record carries a rank-local call-site id (record.h: site), an index into
 * this rank's table of return addresses into the program.  The table and the process's load
 * map are written beside the log at MPI_Finalize (raw/rank-N.sites, raw/rank-N.maps), so the
 * analysis turns addresses into function, file and line (mpigraph/callsites/), position-
 * independent executables and shared libraries included.
 *
 * Cost per call (shim.h: MG_SITE): __builtin_return_address(0), two range tests, one hash
 * probe that hits the table (a load and a compare), one thread-local store.  A new address
 * takes a compare-and-swap into an open-addressing table (never rehashed, never freed: ids are
 * slots, stable from the first call).
 *
 * The return address is not the program's where the program did not call the wrapper itself:
 * - the shim's Fortran 2008 bindings call the C wrappers: those keep the site their binding
 *   noted (an address inside the shim never replaces the site);
 * - MPICH's Fortran bindings (libmpifort: mpi_send_ -> MPI_Send): the site is the first frame
 *   outside libmpifort and the shim, found with the unwinder (backtrace(3), about a microsecond:
 *   only Fortran calls through libmpifort pay it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

uintptr_t mg_sites[MG_N_SITES];
uintptr_t mg_self_lo, mg_self_len, mg_fort_lo, mg_fort_len;
/* MPIGRAPH_CALLSITE_DEPTH > 1: a site is a stack of that many frames (the return address and
 * its callers'), found with the unwinder on every call (about a microsecond: opt-in); the key
 * in mg_sites is then the frames' hash and mg_stacks holds the frames. */
int mg_site_depth = 1;
static uintptr_t (*mg_stacks)[MG_MAX_SITE_DEPTH];
__thread uint16_t mg_site __attribute__((tls_model("initial-exec")));

/* The address range of the loaded object holding `addr`: its PT_LOAD segments' span. */
struct range_query {
    uintptr_t addr, lo, hi;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct range_query *q = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + p->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + p->p_memsz > hi)
            hi = a + p->p_memsz;
    }
    if (q->addr >= lo && q->addr < hi) {
        q->lo = lo, q->hi = hi;
        return 1;
    }
    return 0;
}

static void object_range(const void *addr, uintptr_t *lo, uintptr_t *len)
{
    struct range_query q = {(uintptr_t)addr, 0, 0};
    *lo = 0, *len = 0;
    if (addr && dl_iterate_phdr(find_object, &q))
        *lo = q.lo, *len = q.hi - q.lo;
}

void mg_sites_setup_once(void)
{
    static int done;
    if (!__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        mg_sites_setup();
}

void mg_sites_setup(void)
{
    object_range((const void *)&mg_sites_setup, &mg_self_lo, &mg_self_len);
    const char *depth = getenv("MPIGRAPH_CALLSITE_DEPTH");
    int k = depth ? atoi(depth) : 1;
    if (k > MG_MAX_SITE_DEPTH) {
        mg_say("MPIGRAPH_CALLSITE_DEPTH=%s: using the deepest, %d", depth, MG_MAX_SITE_DEPTH);
        k = MG_MAX_SITE_DEPTH;
    }
    if (k > 1 && (mg_stacks = calloc(MG_N_SITES, sizeof *mg_stacks)))
        mg_site_depth = k;
    /* MPICH's Fortran library, whatever its file name: the object defining mpi_send_. */
    void *f = dlsym(RTLD_DEFAULT, "mpi_send_");
    if (f && !mg_in_self((uintptr_t)f))
        object_range(f, &mg_fort_lo, &mg_fort_len);
}

static inline uint16_t lookup_or_insert(uintptr_t pc, const uintptr_t *stack)
{
    uint32_t h = mg_site_hash(pc);
    for (int probe = 0; probe < 64; probe++, h = (h + 1) & (MG_N_SITES - 1)) {
        uintptr_t k = __atomic_load_n(&mg_sites[h], __ATOMIC_ACQUIRE);
        if (k == pc)
            return (uint16_t)(h + 1);
        if (k == 0) {
            uintptr_t expected = 0;
            if (__atomic_compare_exchange_n(&mg_sites[h], &expected, pc, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                if (stack) /* read only at MPI_Finalize */
                    memcpy(mg_stacks[h], stack, sizeof mg_stacks[h]);
                return (uint16_t)(h + 1);
            }
            if (expected == pc)
                return (uint16_t)(h + 1);
        }
    }
    return 0; /* the table is crowded around this slot: unknown site */
}

/* The program's frames, innermost first, past the shim's and libmpifort's (at most `want`,
 * the rest 0); returns how many. */
static int program_frames(uintptr_t *out, int want)
{
    void *frames[MG_MAX_SITE_DEPTH + 8];
    int n = backtrace(frames, MG_MAX_SITE_DEPTH + 8), got = 0;
    memset(out, 0, sizeof(uintptr_t) * MG_MAX_SITE_DEPTH);
    for (int i = 1; i < n && got < want; i++) {
        uintptr_t a = (uintptr_t)frames[i];
        if (got || (!mg_in_self(a) && !mg_in_fortran(a)))
            out[got++] = a;
    }
    return got;
}

uint16_t mg_site_slow(uintptr_t pc)
{
    if (mg_site_depth > 1) {
        uintptr_t stack[MG_MAX_SITE_DEPTH];
        if (!program_frames(stack, mg_site_depth))
            return 0;
        uint64_t key = 0;
        for (int i = 0; i < mg_site_depth; i++)
            key = (key ^ stack[i]) * 0x100000001b3ULL;
        return lookup_or_insert(key | 1, stack);   /* | 1: never 0, the empty slot */
    }
    if (mg_in_fortran(pc)) {
        uintptr_t stack[MG_MAX_SITE_DEPTH];
        if (!program_frames(stack, 1))
            return 0;
        pc = stack[0];
    }
    return lookup_or_insert(pc, NULL);
}

/* A file of the raw directory, private as the logs are (mode 0600, never through a link). */
static FILE *create_private(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    return f;
}

/* raw/rank-N.sites: "id address" per line (hex address), the ids the records carry;
 * raw/rank-N.maps: a copy of /proc/self/maps, to turn an address into (object, offset). */
void mg_write_sites(const char *run_dir, int rank)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/raw/rank-%d.sites", run_dir, rank);
    FILE *out = create_private(path);
    if (!out) {
        mg_say("rank %d: cannot write %s: call sites will be unnamed", rank, path);
        return;
    }
    fprintf(out, "# mpigraph call sites 1: id return-address [callers' return addresses]\n");
    for (uint32_t i = 0; i < MG_N_SITES; i++) {
        if (!mg_sites[i])
            continue;
        if (mg_site_depth == 1) {
            fprintf(out, "%u %lx\n", i + 1, (unsigned long)mg_sites[i]);
            continue;
        }
        fprintf(out, "%u", i + 1);
        for (int j = 0; j < mg_site_depth && mg_stacks[i][j]; j++)
            fprintf(out, " %lx", (unsigned long)mg_stacks[i][j]);
        fprintf(out, "\n");
    }
    fclose(out);
    snprintf(path, sizeof path, "%s/raw/rank-%d.maps", run_dir, rank);
    FILE *in = fopen("/proc/self/maps", "r");
    out = in ? create_private(path) : NULL;
    if (in && out) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, n, out);
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}
