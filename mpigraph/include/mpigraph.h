/* mpigraph's phase API for C and C++ programs: name the regions of a run.
 *
 *     #include <mpigraph.h>             cc -I"$(mpigraph include)" app.c
 *
 *     mpigraph_phase_begin("solve");
 *     ...                               MPI calls and compute of the region "solve"
 *     mpigraph_phase_end("solve");
 *
 * Under mpigraph (its shim LD_PRELOADed: mpigraph run) each begin and end is a record of its
 * own; the report's phases.csv, phase_functions.csv and the critical path's share are per
 * region (docs/outputs.md).  Regions nest ("solve/halo"); an end closes the innermost open
 * region of its name (with the regions opened inside it); mpigraph_phase_end(NULL) closes the
 * innermost one.  A region still open at MPI_Finalize ends there.
 *
 * Without the shim the calls do nothing: nothing to link.  The functions are looked up once
 * (dlsym in the process's global scope, where LD_PRELOAD puts the shim); glibc before 2.34
 * needs -ldl at link time.  Calls before MPI_Init and after MPI_Finalize are not recorded. */
#ifndef MPIGRAPH_H
#define MPIGRAPH_H

#include <dlfcn.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*mpigraph_phase_fn)(const char *name);

/* The shim's function `symbol`, or a no-op when the shim is not loaded. */
static inline void mpigraph__none(const char *name) { (void)name; }

static inline mpigraph_phase_fn mpigraph__resolve(const char *symbol)
{
    mpigraph_phase_fn f;
    /* POSIX's way to turn dlsym's void * into a function pointer (ISO C has no cast for it). */
#ifdef RTLD_DEFAULT
    *(void **)(&f) = dlsym(RTLD_DEFAULT, symbol);
#else
    *(void **)(&f) = dlsym((void *)0, symbol); /* glibc's RTLD_DEFAULT, without _GNU_SOURCE */
#endif
    return f ? f : mpigraph__none;
}

/* The shim's begin and end, looked up once per file that calls them. */
static inline mpigraph_phase_fn mpigraph__begin(void)
{
    static mpigraph_phase_fn f;
    if (!f)
        f = mpigraph__resolve("mpigraph_phase_begin");
    return f;
}

static inline mpigraph_phase_fn mpigraph__end(void)
{
    static mpigraph_phase_fn f;
    if (!f)
        f = mpigraph__resolve("mpigraph_phase_end");
    return f;
}

/* Begin the region `name` on this rank; end the region `name` (NULL: the innermost open one).
 * Macros, so that the call into the shim is made from the program's own line: the mark's call
 * site (callsites.csv) is that line, not this header's. */
#define mpigraph_phase_begin(name) (mpigraph__begin()(name))
#define mpigraph_phase_end(name) (mpigraph__end()(name))

#ifdef __cplusplus
}
#endif

#endif
