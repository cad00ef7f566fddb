"""The raw log format written by the shim, one file per MPI rank.

This module is the single Python description of ``csrc/record.h``: the two
must change together (``tests/test_record.py`` compiles a probe against the C
header and checks every offset).

A log file is ``<out>/raw/rank-<world rank>.log``::

    [ header: HEADER_SIZE bytes ][ record 0 ][ record 1 ] ... [ zero padding ]

The header holds ``n_records``, the count of complete records.  The shim
writes a record first and bumps ``n_records`` after, so a crash loses at most
the record being written; bytes past ``n_records`` records are ignored.

Times in records are raw ticks of the clock named by ``clock_source``; the
header's calibration pairs (ticks, ns) convert them to CLOCK_MONOTONIC ns.

One MPI call writes one *call record*.  Some calls also write *part records*
right after it (flag ``PART``), which share the call's func and times:

- Wait/Test families, Start, Startall: one part per request the call
  completed (or started), with the request id, and for a receive the real
  source, tag and byte count from its status;
- Sendrecv / Sendrecv_replace: one part for the receive half (RECV), the call
  record itself describes the send half (SEND);
- communicator creation: one part per new communicator, with ``comm`` the new
  communicator's id, ``tag`` this rank's rank in it and ``bytes`` its size.

One-sided call records keep their target in ``peer``; MPI_Win_lock's ``tag`` is its lock
type (1 exclusive, 2 shared), MPI_Win_test's its flag (1: the exposure epoch completed).

Counting the records without ``PART`` gives the number of calls per function,
once ``REPEAT`` records are weighed by their count (``call_counts``): the shim
writes one record with flag ``REPEAT`` for a run of consecutive unsuccessful
polls (MPI_Iprobe, MPI_Test*) of the same arguments with gaps below
MPIGRAPH_POLL_GAP_NS between them; it spans the first call's start to the last
call's end, and its ``seq`` is the number of calls it stands for.

The header's ``inflight`` slots show the blocking call each thread is in while
it is in it (a run that hangs or is killed keeps them): see
``mpigraph.trace.inflight``.
"""

import numpy as np

MAGIC = b"MPIGRAPH"
VERSION = 2             # 2: the record's thread is 16 bits, site the other 16
OLD_VERSIONS = (1,)     # readable: version 1's thread (< 2**16) leaves site 0 (unknown)
HEADER_SIZE = 4096
RECORD_SIZE = 64

# Record flags (bit mask).
PART = 0x0001          # part of the preceding call record (see module doc)
LARGE_COUNT = 0x0002   # the MPI-4 large-count variant (MPI_Send_c, ...) was called
SEND = 0x0004          # this record describes data this rank sent
RECV = 0x0008          # this record describes data this rank received
PERSISTENT = 0x0010    # the request is persistent (Send_init, Recv_init, ...)
FORTRAN = 0x0020       # the call came through a Fortran binding wrapper
ERROR = 0x0040         # the MPI call returned an error code
REPEAT = 0x0080        # one call record for `seq` consecutive unsuccessful polls (see module doc)
COLLECTIVE = 0x0100    # a request of a persistent collective (MPI_Allreduce_init, ...)
MATCHED = 0x0200       # a probe found a message: peer, tag and bytes are its status's (Iprobe flag 1, Probe)
DEVICE = 0x0400        # a buffer of the call is device (GPU) memory, as the CUDA driver says (csrc/gpu.c)

# Special values of the peer field (world ranks are >= 0).
PEER_NONE = -1         # the call has no peer
PEER_PROC_NULL = -2    # MPI_PROC_NULL
PEER_ANY = -3          # MPI_ANY_SOURCE, not yet resolved (call record of Irecv, Probe...)
# Special values of the tag field (tags are >= 0).
TAG_NONE = -1          # no tag, or MPI_ANY_TAG not yet resolved
TAG_ANY = -2
# Special value of the root field.
ROOT_NONE = -1

# Header flags.
HEADER_FINALIZED = 0x1   # the rank reached MPI_Finalize and closed its log
HEADER_RECORDING_DROPPED = 0x2  # the shim could not grow the file: records were dropped
HEADER_LOG_HELPER = 0x4   # a helper thread prepared the log's pages (MPIGRAPH_LOG_HELPER)
HEADER_ABORTED = 0x8     # the rank called MPI_Abort (its error code: abort_code)

N_INFLIGHT = 8           # thread slots whose blocking call in progress the header shows

# Clock sources.
CLOCK_MONOTONIC = 0      # ticks are CLOCK_MONOTONIC nanoseconds
CLOCK_TSC = 1            # ticks are rdtsc cycles, calibrated against CLOCK_MONOTONIC

# Clock synchronisation samples (see csrc/clock_sync.c): taken at MPI_Init and
# at MPI_Finalize, in this rank's clock (CLOCK_MONOTONIC ns, plus any test skew).
N_BARRIER_SAMPLES = 8    # barriers timed for the barrier-and-median baseline
SYNC_DTYPE = np.dtype(
    [
        ("offset_ns", "<i8"),  # this rank's clock minus its tree parent's, best ping-pong
        ("rtt_ns", "<i8"),     # round trip of that best ping-pong
        ("local_ns", "<i8"),   # this rank's clock at the middle of that ping-pong; 0 = not measured
        ("barrier_ns", "<i8", (N_BARRIER_SAMPLES, 2)),  # (before, after) each barrier
    ]
)

# Calibration pair slots.
CALIB_INIT_A = 0         # taken in MPI_Init
CALIB_INIT_B = 1         # taken in MPI_Init, a few ms after A
CALIB_LAST = 2           # refreshed every time the file grows
CALIB_FINAL = 3          # taken in MPI_Finalize
N_CALIB = 4

RECORD_DTYPE = np.dtype(
    [
        ("t_start", "<i8"),   # ticks when the call began
        ("t_end", "<i8"),     # ticks when the call returned
        ("bytes", "<i8"),     # bytes sent (SEND) or received (RECV); see module doc
        ("request", "<i8"),   # request id (rank-local, from 1), 0 for none
        ("comm", "<i8"),      # communicator id, the same on every member; 0 = MPI_COMM_WORLD
        ("peer", "<i4"),      # partner as a world rank, or a PEER_* value
        ("tag", "<i4"),       # message tag, or a TAG_* value
        ("root", "<i4"),      # root of a rooted collective as a world rank, or ROOT_NONE
        ("seq", "<u4"),       # collective sequence number on comm (from 1), 0 for none
        ("func", "<u2"),      # function id, see mpigraph.trace.functions
        ("flags", "<u2"),     # PART | LARGE_COUNT | SEND | RECV | ...
        ("thread", "<u2"),    # thread index within the rank (0 = the thread that called Init)
        ("site", "<u2"),      # call-site id within the rank (raw/rank-N.sites), 0 = unknown
    ]
)
assert RECORD_DTYPE.itemsize == RECORD_SIZE

HEADER_DTYPE = np.dtype(
    [
        ("magic", "S8"),
        ("version", "<u4"),
        ("header_size", "<u4"),
        ("record_size", "<u4"),
        ("flags", "<u4"),
        ("world_rank", "<i4"),
        ("world_size", "<i4"),
        ("pid", "<i4"),
        ("thread_level", "<i4"),   # MPI thread level provided
        ("clock_source", "<u4"),
        ("n_functions", "<u4"),    # size of the shim's function table (a sanity check)
        ("n_records", "<i8"),      # complete records in the file
        ("calib_ticks", "<i8", (N_CALIB,)),
        ("calib_ns", "<i8", (N_CALIB,)),   # CLOCK_MONOTONIC ns of the same instant; 0 = unset
        ("start_unix_ns", "<i8"),  # CLOCK_REALTIME at MPI_Init, for humans
        ("hostname", "S64"),
        ("job_id", "S64"),         # the run's id, the same on every rank
        ("sync_parent", "<i4"),    # parent in the ping-pong tree (-1 on rank 0)
        ("sync_pingpongs", "<i4"), # ping-pongs per measurement (at least; csrc/clock_sync.c)
        ("sync_init", SYNC_DTYPE),
        ("sync_final", SYNC_DTYPE),
        ("abort_code", "<i4"),     # MPI_Abort's error code (HEADER_ABORTED)
        ("n_inflight", "<i4"),     # N_INFLIGHT
        # Per thread slot: the blocking call in progress (func 0: none), written before the call
        # blocks, cleared when it returns; t_end is 0.  Logs of older shims hold zeros here.
        ("inflight", RECORD_DTYPE, (N_INFLIGHT,)),
        # The kernel's boot id (/proc/sys/kernel/random/boot_id, empty where unreadable): ranks
        # with the same hostname and boot id read one CLOCK_MONOTONIC (mpigraph.clock.models).
        ("boot_id", "S40"),
    ]
)
assert HEADER_DTYPE.itemsize <= HEADER_SIZE


def empty_header(world_rank, world_size, n_records=0):
    """A header array (shape ()) filled as the shim fills it, for writers and tests."""
    header = np.zeros((), HEADER_DTYPE)
    header["magic"] = MAGIC
    header["version"] = VERSION
    header["header_size"] = HEADER_SIZE
    header["record_size"] = RECORD_SIZE
    header["world_rank"] = world_rank
    header["world_size"] = world_size
    header["n_records"] = n_records
    return header


def write_log(path, header, records):
    """Write one raw log file exactly as the shim leaves it after MPI_Finalize.

    ``header`` is an array of HEADER_DTYPE (shape ()), ``records`` an array of
    RECORD_DTYPE; ``n_records`` is set from ``records``.
    """
    header = header.copy()
    header["n_records"] = len(records)
    page = np.zeros(HEADER_SIZE, np.uint8)
    page[: HEADER_DTYPE.itemsize] = np.frombuffer(header.tobytes(), np.uint8)
    with open(path, "wb") as f:
        f.write(page.tobytes())
        f.write(np.ascontiguousarray(records, RECORD_DTYPE).tobytes())


def call_counts(flags, seq):
    """Calls each record stands for: 0 for a part, ``seq`` for a REPEAT record, else 1 (int64)."""
    flags = np.asarray(flags)
    return np.where((flags & PART) != 0, 0, np.where((flags & REPEAT) != 0, np.asarray(seq, np.int64), 1))
