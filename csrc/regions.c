/* The phase API: mpigraph_phase_begin(name) / mpigraph_phase_end(name), declared for programs in
 * mpigraph/include/mpigraph.h (C), mpigraph.f90 (Fortran) and called by mpigraph.phases.api
 * (Python, ctypes).  Each call writes one record of its own (func mpigraph_phase_begin or _end,
 * t_start == t_end: a mark in time, not a call into MPI; tag: the name's id, -1 for an end
 * without a name); the analysis turns the marks into named regions (mpigraph/phases).
 *
 * Names are interned per rank: the first mark of a name appends "id<TAB>name\n" to
 * <run>/raw/rank-<r>.names with one write(2), so a run that crashes keeps the names of the
 * marks its log holds.  Ids count from 0 in the order names first appear on the rank. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

#define MG_MAX_NAMES 4096    /* distinct names per rank; later ones are recorded as id -1 */
#define MG_NAME_MAX 255      /* longer names are cut */
#define MG_NAME_SLOTS 8192   /* open addressing, twice MG_MAX_NAMES */

static struct { char *name; int32_t id; } names[MG_NAME_SLOTS];
static int32_t n_names;
static int names_fd = -1;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Appends the name's line to raw/rank-N.names; 0 on success. */
static int write_name(int32_t id, const char *name)
{
    if (names_fd < 0) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/raw/rank-%d.names", mpigraph_run_dir(), mg.world_rank);
        names_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (names_fd < 0) {
            mg_say("rank %d: cannot write %s: phase names are lost", mg.world_rank, path);
            return -1;
        }
    }
    char line[MG_NAME_MAX + 32];
    int n = snprintf(line, sizeof line, "%d\t%s\n", (int)id, name);
    return write(names_fd, line, (size_t)n) == n ? 0 : -1;
}

/* The rank's id of `name` (interned at its first use), -1 when no more fit. */
static int32_t intern(const char *name)
{
    size_t len = strnlen(name, MG_NAME_MAX);
    char clean[MG_NAME_MAX + 1];
    /* One name per line of the .names file: control characters become '?'. */
    for (size_t i = 0; i < len; i++)
        clean[i] = (unsigned char)name[i] < 32 ? '?' : name[i];
    clean[len] = '\0';
    pthread_mutex_lock(&names_lock);
    uint32_t slot = name_hash(clean, len) & (MG_NAME_SLOTS - 1);
    int32_t id = -1;
    while (names[slot].name && strcmp(names[slot].name, clean) != 0)
        slot = (slot + 1) & (MG_NAME_SLOTS - 1);
    if (names[slot].name)
        id = names[slot].id;
    else if (n_names < MG_MAX_NAMES && (names[slot].name = strdup(clean)) != NULL) {
        id = names[slot].id = n_names++;
        write_name(id, clean);
    }
    pthread_mutex_unlock(&names_lock);
    return id;
}

/* Inlined into the two entry points: a wrapper's bookkeeping (mg_should_record) that looks at
 * its caller's return address sees the program's call, not this file's. */
static inline __attribute__((always_inline)) void mark(int func, const char *name)
{
    if (!mg_should_record())
        return;
    mg_depth++;
    int32_t id = name ? intern(name) : -1;
    int64_t t = mg_now();
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, func, t, t, 0);
        r->tag = id;
        r->comm = mg.world.id;
        mg_publish(1);
    }
    mg_depth--;
}

void mpigraph_phase_begin(const char *name)
{
    mark(MG_ID_mpigraph_phase_begin, name && *name ? name : "unnamed");
}

/* `name` NULL or "": the innermost open region ends. */
void mpigraph_phase_end(const char *name)
{
    mark(MG_ID_mpigraph_phase_end, name && *name ? name : NULL);
}
