/* Datatype sizes and the byte count of a receive's status, the two things a
 * message wrapper asks MPI for, answered without a call into MPI when the
 * answer is known: these calls cost as much as the rest of the record. */
#include "shim.h"

MPI_Datatype mg_known_types[MG_N_KNOWN_TYPES];
int64_t mg_known_sizes[MG_N_KNOWN_TYPES];

int64_t mg_type_size_slow(MPI_Datatype type)
{
    int size = 0;
    if (type == MPI_DATATYPE_NULL)
        return 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size == MPI_UNDEFINED)
        return 0;
    return size;
}

/* Called once MPI is initialised (Open MPI's handles are addresses known only then). */
void mg_types_setup(void)
{
    const MPI_Datatype common[MG_N_KNOWN_TYPES] = {MPI_DOUBLE, MPI_BYTE, MPI_INT, MPI_CHAR,
                                                   MPI_FLOAT, MPI_LONG, MPI_LONG_LONG, MPI_INT64_T};
    for (int i = 0; i < MG_N_KNOWN_TYPES; i++) {
        mg_known_sizes[i] = mg_type_size_slow(common[i]);
        mg_known_types[i] = common[i];
    }
}

/* The byte count a receive's status holds.  MPICH and Open MPI keep it in
 * bytes in the status itself; elsewhere MPI_Get_count(MPI_BYTE) asks. */
static int64_t status_bytes(const MPI_Status *st)
{
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 30000000
    /* MPICH's MPIR_STATUS_GET_COUNT: the low 32 bits, then the high bits above the cancel bit. */
    return (int64_t)((((uint64_t)((unsigned)st->count_hi_and_cancelled >> 1)) << 32) + (unsigned)st->count_lo);
#elif defined(OPEN_MPI)
    return (int64_t)st->_ucount;
#else
    int count = 0;
#if MPI_VERSION >= 4
    MPI_Count large = 0;
    if (PMPI_Get_count_c(st, MPI_BYTE, &large) == MPI_SUCCESS && large != MPI_UNDEFINED)
        return large;
#endif
    if (PMPI_Get_count(st, MPI_BYTE, &count) == MPI_SUCCESS && count != MPI_UNDEFINED)
        return count;
    return 0;
#endif
}

void mg_fill_from_status(mg_record *r, const mg_comm *c, const MPI_Status *st)
{
    r->peer = mg_world_peer(c, st->MPI_SOURCE);
    r->tag = mg_tag(st->MPI_TAG);
    if (st->MPI_SOURCE == MPI_PROC_NULL) {
        r->tag = MG_TAG_NONE;
        r->bytes = 0;
        return;
    }
    r->bytes = status_bytes(st);
}
