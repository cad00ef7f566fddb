/* The raw log format: the C side of mpigraph/trace/record.py.  Change both together
 * (tests/test_record.py checks every offset against the Python dtypes). */
#ifndef MPIGRAPH_RECORD_H
#define MPIGRAPH_RECORD_H

#include <stdint.h>

#define MG_MAGIC "MPIGRAPH"
#define MG_VERSION 2 /* 2: thread became 16 bits, site the other 16 */
#define MG_HEADER_SIZE 4096

/* Record flags. */
#define MG_PART 0x0001
#define MG_LARGE_COUNT 0x0002
#define MG_SEND 0x0004
#define MG_RECV 0x0008
#define MG_PERSISTENT 0x0010
#define MG_FORTRAN 0x0020
#define MG_ERROR 0x0040
#define MG_REPEAT 0x0080     /* one record for `seq` consecutive unsuccessful polls (shim.h) */
#define MG_COLLECTIVE 0x0100 /* a request of a persistent collective (MPI_Allreduce_init, ...) */
#define MG_MATCHED 0x0200 /* a probe found a message: peer, tag, bytes are its status's */
#define MG_DEVICE 0x0400  /* a buffer of the call is device (GPU) memory, says the CUDA driver (gpu.c) */

/* Special field values. */
#define MG_PEER_NONE (-1)
#define MG_PEER_PROC_NULL (-2)
#define MG_PEER_ANY (-3)
#define MG_TAG_NONE (-1)
#define MG_TAG_ANY (-2)
#define MG_ROOT_NONE (-1)

/* Header flags. */
#define MG_HEADER_FINALIZED 0x1
#define MG_HEADER_RECORDING_DROPPED 0x2
#define MG_HEADER_LOG_HELPER 0x4
#define MG_HEADER_ABORTED 0x8 /* the rank called MPI_Abort (error code in abort_code) */

/* Threads whose blocking call in progress the header shows (the first ones to call MPI). */
#define MG_N_INFLIGHT 8

/* Clock sources. */
#define MG_CLOCK_MONOTONIC 0
#define MG_CLOCK_TSC 1

/* Calibration slots. */
#define MG_CALIB_INIT_A 0
#define MG_CALIB_INIT_B 1
#define MG_CALIB_LAST 2
#define MG_CALIB_FINAL 3
#define MG_N_CALIB 4

/* Clock synchronisation samples (csrc/clock_sync.c). */
#define MG_N_BARRIER_SAMPLES 8
typedef struct mg_sync {
    int64_t offset_ns;
    int64_t rtt_ns;
    int64_t local_ns;
    int64_t barrier_ns[MG_N_BARRIER_SAMPLES][2];
} mg_sync;

typedef struct mg_record {
    int64_t t_start;
    int64_t t_end;
    int64_t bytes;
    int64_t request;
    int64_t comm;
    int32_t peer;
    int32_t tag;
    int32_t root;
    uint32_t seq;
    uint16_t func;
    uint16_t flags;
    uint16_t thread; /* thread slot */
    uint16_t site;   /* call-site id within the rank (callsites.c), 0 = unknown */
} mg_record;

typedef struct mg_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;
    uint32_t record_size;
    uint32_t flags;
    int32_t world_rank;
    int32_t world_size;
    int32_t pid;
    int32_t thread_level;
    uint32_t clock_source;
    uint32_t n_functions;
    int64_t n_records;
    int64_t calib_ticks[MG_N_CALIB];
    int64_t calib_ns[MG_N_CALIB];
    int64_t start_unix_ns;
    char hostname[64];
    char job_id[64];
    int32_t sync_parent;
    int32_t sync_pingpongs;
    mg_sync sync_init;
    mg_sync sync_final;
    int32_t abort_code;     /* MPI_Abort's error code (MG_HEADER_ABORTED) */
    int32_t n_inflight;     /* MG_N_INFLIGHT: slots below */
    /* Per thread slot: the blocking call it is in, written before the call
     * blocks and cleared (func = 0) when it returns, so a run that hangs or is
     * killed shows where each rank was (t_end is 0). */
    mg_record inflight[MG_N_INFLIGHT];
    char boot_id[40]; /* /proc/sys/kernel/random/boot_id: with hostname, which ranks share a clock */
} mg_header;

_Static_assert(sizeof(mg_record) == 64, "record must be 64 bytes");
_Static_assert(sizeof(mg_header) <= MG_HEADER_SIZE, "header must fit its page");

#endif
