/* MPI_Pcontrol: mpiP's phase marker.  A record of its own (tag: the level) that starts a new
 * phase of the rank's calls; the analysis splits per-phase tables on them (mpigraph/phases).
 * Recording never stops at level 0: the matching needs every call. */
#include "shim.h"

int MPI_Pcontrol(const int level, ...)
{
    if (!mg_should_record())
        return PMPI_Pcontrol(level);
    mg_depth++;
    int64_t t0 = mg_now();
    int rc = PMPI_Pcontrol(level);
    int64_t t1 = mg_now();
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, MG_ID_MPI_Pcontrol, t0, t1, rc == MPI_SUCCESS ? 0 : MG_ERROR);
        r->tag = level;
        r->comm = mg.world.id;
        mg_publish(1);
    }
    mg_depth--;
    return rc;
}
