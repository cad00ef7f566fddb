/* Binding the shim to the program's own MPI library at run time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include "shim.h"


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
static void *mpi_handle; /* RTLD_NEXT, or the loaded MPI library */

/* A symbol of the program's MPI library (data such as MPI_F08_STATUS_IGNORE). */
void *mg_mpi_symbol(const char *name)
{
    mg_resolve_pmpi();
    return dlsym(mpi_handle, name);
}

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
        mg_say("no MPI library is loaded in this process, yet an MPI function was called");
        abort();
    }
#define RESOLVE(n) mg_pmpi_##n = (__typeof__(mg_pmpi_##n))dlsym(handle, "PMPI_" #n);
    MG_PMPI_NAMES(RESOLVE)
    MG_PMPI_NAMES_LARGE(RESOLVE)
    mpi_handle = handle;
    resolved = 1;
}
