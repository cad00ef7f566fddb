"""The declarative table of MPI functions mpigraph intercepts.

One table serves both sides: ``csrc/generate.py`` turns it into the shim's C
wrappers at build time, and the analysis uses it to name and classify records.

Each entry gives a stable numeric id (the ``func`` field of a record: never
renumber, only append), the MPI name, its kind, and for generated wrappers the
C parameter list.  The generator reads the parameter *names* to know what to
record, so they follow one convention:

    dest / source          the peer (a rank of ``comm``), for send / receive
    tag, sendtag, recvtag  the message tag
    comm (or comm_old, local_comm, intercomm)   the communicator
    count + datatype       bytes of a point-to-point message or a reduction
    sendcount(s) + sendtype(s)   bytes sent by a collective
    root                   the root of a rooted collective
    request                the new request of a nonblocking or persistent call
    status                 the status of a receive
    newcomm / comm_*       the new communicator of a communicator-creation call

Functions whose ``params`` is None have hand-written wrappers in csrc/shim.c.
Functions with count arguments also get their MPI-4 large-count variant
(``MPI_Send_c``, ...), recorded under the same id with the LARGE_COUNT flag.
"""

from collections import namedtuple

# Kinds.  Point-to-point and request handling:
INIT = "init"
FINALIZE = "finalize"
SEND = "send"                  # blocking send (Send, Ssend, Bsend, Rsend)
RECV = "recv"                  # blocking receive
SENDRECV = "sendrecv"          # Sendrecv, Sendrecv_replace
ISEND = "isend"                # nonblocking send
IRECV = "irecv"                # nonblocking receive
SEND_INIT = "send_init"        # persistent send request
RECV_INIT = "recv_init"        # persistent receive request
START = "start"                # Start, Startall
REQUEST_FREE = "request_free"
COMPLETION = "completion"      # Wait/Test families
PROBE = "probe"                # Probe, Iprobe
# Collectives, by the pattern of who waits for whom (docs/concepts.md, wait states):
N_TO_N = "n_to_n"              # Barrier, Allreduce, Allgather(v), Alltoall(v/w), Reduce_scatter(_block)
ONE_TO_N = "one_to_n"          # Bcast, Scatter(v): the root releases everyone
N_TO_ONE = "n_to_one"          # Reduce, Gather(v): the last member releases the root
SCAN = "scan"                  # Scan, Exscan: rank i waits for ranks < i
COMM_CREATE = "comm_create"    # collective over the parent, writes a part with the new comm
COMM_FREE = "comm_free"

# Recorded for their time (MPI time, named in the report); matched where said:
IO = "io"                      # MPI-IO calls of one rank (read, write, seek, ... on its own)
RMA = "rma"                    # one-sided communication: Put, Get, Accumulate, ... (peer: the target)
RMA_SYNC = "rma_sync"          # passive/general active target synchronisation: lock, flush, post, start, ...
                               # (post/start/complete/wait epochs matched: mpigraph.match.rma)
NEIGHBOR = "neighbor"          # neighbourhood collectives: instances by (comm, seq), each member released by
                               # its in-neighbours (mpigraph.match.neighbors)
COLL_INIT = "coll_init"        # persistent collective initialisation (MPI_Allreduce_init, ...): each MPI_Start
                               # of its request is a member of an instance of its collective
PARTITION = "partition"        # MPI_Pready*, MPI_Parrived
ABORT = "abort"                # MPI_Abort: tag is the error code
PHASE = "phase"                # MPI_Pcontrol: tag is the level; each call starts a phase (mpigraph.phases)
REGION = "region"              # the phase API (mpigraph/include/mpigraph.h): a named region begins or ends; tag is
                               # the name's id in raw/rank-N.names; t_start == t_end (no MPI call: a mark in time)
# Fences, collective file operations, window creation/free and file open/close use the
# collective kinds above (N_TO_N, COMM_CREATE, COMM_FREE) on a pseudo-communicator per
# window or file (csrc/windows.c), so the matcher groups them into instances by (comm, seq).
RECORDED_ONLY_KINDS = (IO, RMA, RMA_SYNC, NEIGHBOR, COLL_INIT, PARTITION, ABORT, PHASE, REGION)

COLLECTIVE_KINDS = frozenset({N_TO_N, ONE_TO_N, N_TO_ONE, SCAN, COMM_CREATE, COMM_FREE})
# Calls numbered on their communicator (seq), in the order MPI requires all members to call them.
SEQUENCED_KINDS = COLLECTIVE_KINDS | {NEIGHBOR, COLL_INIT}

# since: the MPI standard version that introduced the function (the shim wraps it only when
# compiled against an mpi.h of that version or later: Open MPI 4 and 5 say 3.1).
MPIFunction = namedtuple("MPIFunction", "id name kind params nonblocking since")


def _f(id, name, kind, params=None, nonblocking=False, since=3):
    return MPIFunction(id, name, kind, params, nonblocking, since)


_P2P_SEND = "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm"
_P2P_RECV = "void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm"
_REQ = ", MPI_Request *request"

_GATHER = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, "
           "int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm")
_GATHERV = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, "
            "const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm")
_SCATTERV = ("const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, "
             "void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm")
_ALLGATHER = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, "
              "int recvcount, MPI_Datatype recvtype, MPI_Comm comm")
_ALLGATHERV = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, "
               "const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm")
_ALLTOALLV = ("const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, "
              "void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm")
_ALLTOALLW = ("const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], "
              "void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], "
              "MPI_Comm comm")
_BCAST = "void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm"
_REDUCE = "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm"
_ALLREDUCE = "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm"
_REDUCE_SCATTER = ("const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, "
                   "MPI_Op op, MPI_Comm comm")
_REDUCE_SCATTER_BLOCK = ("const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, "
                         "MPI_Op op, MPI_Comm comm")

# (name, kind, params) of the blocking collectives; each also has a nonblocking
# twin "I" + name with a request, listed further down under its own ids.
_COLLECTIVES = [
    ("Barrier", N_TO_N, "MPI_Comm comm"),
    ("Bcast", ONE_TO_N, _BCAST),
    ("Reduce", N_TO_ONE, _REDUCE),
    ("Allreduce", N_TO_N, _ALLREDUCE),
    ("Gather", N_TO_ONE, _GATHER),
    ("Gatherv", N_TO_ONE, _GATHERV),
    ("Scatter", ONE_TO_N, _GATHER),
    ("Scatterv", ONE_TO_N, _SCATTERV),
    ("Allgather", N_TO_N, _ALLGATHER),
    ("Allgatherv", N_TO_N, _ALLGATHERV),
    ("Alltoall", N_TO_N, _ALLGATHER),
    ("Alltoallv", N_TO_N, _ALLTOALLV),
    ("Alltoallw", N_TO_N, _ALLTOALLW),
    ("Reduce_scatter", N_TO_N, _REDUCE_SCATTER),
    ("Reduce_scatter_block", N_TO_N, _REDUCE_SCATTER_BLOCK),
    ("Scan", SCAN, _ALLREDUCE),
    ("Exscan", SCAN, _ALLREDUCE),
]

FUNCTIONS = [
    _f(1, "MPI_Init", INIT),
    _f(2, "MPI_Init_thread", INIT),
    _f(3, "MPI_Finalize", FINALIZE),
    # Blocking point-to-point.
    _f(10, "MPI_Send", SEND, _P2P_SEND),
    _f(11, "MPI_Ssend", SEND, _P2P_SEND),
    _f(12, "MPI_Bsend", SEND, _P2P_SEND),
    _f(13, "MPI_Rsend", SEND, _P2P_SEND),
    _f(14, "MPI_Recv", RECV, _P2P_RECV + ", MPI_Status *status"),
    _f(15, "MPI_Sendrecv", SENDRECV,
       "const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, "
       "void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, "
       "MPI_Comm comm, MPI_Status *status"),
    _f(16, "MPI_Sendrecv_replace", SENDRECV,
       "void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag, "
       "MPI_Comm comm, MPI_Status *status"),
    # Nonblocking and persistent point-to-point.
    _f(20, "MPI_Isend", ISEND, _P2P_SEND + _REQ, True),
    _f(21, "MPI_Issend", ISEND, _P2P_SEND + _REQ, True),
    _f(22, "MPI_Ibsend", ISEND, _P2P_SEND + _REQ, True),
    _f(23, "MPI_Irsend", ISEND, _P2P_SEND + _REQ, True),
    _f(24, "MPI_Irecv", IRECV, _P2P_RECV + _REQ, True),
    _f(25, "MPI_Send_init", SEND_INIT, _P2P_SEND + _REQ, True),
    _f(26, "MPI_Ssend_init", SEND_INIT, _P2P_SEND + _REQ, True),
    _f(27, "MPI_Bsend_init", SEND_INIT, _P2P_SEND + _REQ, True),
    _f(28, "MPI_Rsend_init", SEND_INIT, _P2P_SEND + _REQ, True),
    _f(29, "MPI_Recv_init", RECV_INIT, _P2P_RECV + _REQ, True),
    _f(30, "MPI_Start", START),
    _f(31, "MPI_Startall", START),
    _f(32, "MPI_Request_free", REQUEST_FREE),
    # Matched probe and receive (hand-written: Mrecv names its message, not a
    # communicator).  Mprobe matches like Probe; Mrecv receives like Recv.
    _f(33, "MPI_Mprobe", PROBE),
    _f(34, "MPI_Improbe", PROBE),
    _f(35, "MPI_Mrecv", RECV),
    _f(36, "MPI_Imrecv", IRECV, nonblocking=True),
    # Completion: hand-written, one part record per request completed.
    _f(40, "MPI_Wait", COMPLETION),
    _f(41, "MPI_Waitall", COMPLETION),
    _f(42, "MPI_Waitany", COMPLETION),
    _f(43, "MPI_Waitsome", COMPLETION),
    _f(44, "MPI_Test", COMPLETION),
    _f(45, "MPI_Testall", COMPLETION),
    _f(46, "MPI_Testany", COMPLETION),
    _f(47, "MPI_Testsome", COMPLETION),
    _f(48, "MPI_Probe", PROBE, "int source, int tag, MPI_Comm comm, MPI_Status *status"),
    _f(49, "MPI_Iprobe", PROBE, "int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status"),
    # Communicators: generated; the new communicator gets an id agreed by its members.
    _f(80, "MPI_Comm_split", COMM_CREATE, "MPI_Comm comm, int color, int key, MPI_Comm *newcomm"),
    _f(81, "MPI_Comm_dup", COMM_CREATE, "MPI_Comm comm, MPI_Comm *newcomm"),
    _f(82, "MPI_Comm_create", COMM_CREATE, "MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm"),
    _f(83, "MPI_Comm_free", COMM_FREE),
    _f(84, "MPI_Cart_create", COMM_CREATE,
       "MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *comm_cart"),
    _f(85, "MPI_Graph_create", COMM_CREATE,
       "MPI_Comm comm_old, int nnodes, const int indx[], const int edges[], int reorder, MPI_Comm *comm_graph"),
    _f(86, "MPI_Dist_graph_create", COMM_CREATE,
       "MPI_Comm comm_old, int n, const int sources[], const int degrees[], const int destinations[], "
       "const int weights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph"),
    _f(87, "MPI_Dist_graph_create_adjacent", COMM_CREATE,
       "MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[], int outdegree, "
       "const int destinations[], const int destweights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph"),
    _f(88, "MPI_Intercomm_create", COMM_CREATE,
       "MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag, "
       "MPI_Comm *newintercomm"),
    _f(89, "MPI_Comm_split_type", COMM_CREATE,
       "MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm"),
    _f(90, "MPI_Comm_dup_with_info", COMM_CREATE, "MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm"),
    _f(91, "MPI_Intercomm_merge", COMM_CREATE, "MPI_Comm intercomm, int high, MPI_Comm *newintracomm"),
    _f(92, "MPI_Cart_sub", COMM_CREATE, "MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm"),
]

# Blocking collectives get ids 50.., their nonblocking twins 100..
FUNCTIONS += [_f(50 + i, "MPI_" + name, kind, params) for i, (name, kind, params) in enumerate(_COLLECTIVES)]
FUNCTIONS += [
    _f(100 + i, "MPI_I" + name.lower(), kind, params + _REQ, True)
    for i, (name, kind, params) in enumerate(_COLLECTIVES)
]

# ---- MPI-IO, one-sided, neighbourhood, persistent collectives, partitioned (ids 200..) ----
_FH = "MPI_File fh"
_IO_BUF = "const void *buf, int count, MPI_Datatype datatype"
_IO_RBUF = "void *buf, int count, MPI_Datatype datatype"
_AT = "MPI_Offset offset, "
_ST = ", MPI_Status *status"

# (name, kind, params): individual (IO) and collective (N_TO_N on the file's group) file operations.
_FILE_OPS = [
    ("File_open", COMM_CREATE, "MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh"),
    ("File_close", COMM_FREE, "MPI_File *fh"),
    ("File_delete", IO, "const char *filename, MPI_Info info"),
    ("File_set_view", N_TO_N,
     _FH + ", MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char *datarep, MPI_Info info"),
    ("File_set_size", N_TO_N, _FH + ", MPI_Offset size"),
    ("File_preallocate", N_TO_N, _FH + ", MPI_Offset size"),
    ("File_sync", N_TO_N, _FH),
    ("File_seek", IO, _FH + ", MPI_Offset offset, int whence"),
    ("File_seek_shared", N_TO_N, _FH + ", MPI_Offset offset, int whence"),
    ("File_read", IO, _FH + ", " + _IO_RBUF + _ST),
    ("File_write", IO, _FH + ", " + _IO_BUF + _ST),
    ("File_read_at", IO, _FH + ", " + _AT + _IO_RBUF + _ST),
    ("File_write_at", IO, _FH + ", " + _AT + _IO_BUF + _ST),
    ("File_read_shared", IO, _FH + ", " + _IO_RBUF + _ST),
    ("File_write_shared", IO, _FH + ", " + _IO_BUF + _ST),
    ("File_read_all", N_TO_N, _FH + ", " + _IO_RBUF + _ST),
    ("File_write_all", N_TO_N, _FH + ", " + _IO_BUF + _ST),
    ("File_read_at_all", N_TO_N, _FH + ", " + _AT + _IO_RBUF + _ST),
    ("File_write_at_all", N_TO_N, _FH + ", " + _AT + _IO_BUF + _ST),
    ("File_read_ordered", N_TO_N, _FH + ", " + _IO_RBUF + _ST),
    ("File_write_ordered", N_TO_N, _FH + ", " + _IO_BUF + _ST),
]
# Nonblocking file operations: a request completed by Wait/Test.
_FILE_IOPS = [
    ("File_iread", IO, _FH + ", " + _IO_RBUF + _REQ),
    ("File_iwrite", IO, _FH + ", " + _IO_BUF + _REQ),
    ("File_iread_at", IO, _FH + ", " + _AT + _IO_RBUF + _REQ),
    ("File_iwrite_at", IO, _FH + ", " + _AT + _IO_BUF + _REQ),
    ("File_iread_shared", IO, _FH + ", " + _IO_RBUF + _REQ),
    ("File_iwrite_shared", IO, _FH + ", " + _IO_BUF + _REQ),
    ("File_iread_all", N_TO_N, _FH + ", " + _IO_RBUF + _REQ),
    ("File_iwrite_all", N_TO_N, _FH + ", " + _IO_BUF + _REQ),
    ("File_iread_at_all", N_TO_N, _FH + ", " + _AT + _IO_RBUF + _REQ),
    ("File_iwrite_at_all", N_TO_N, _FH + ", " + _AT + _IO_BUF + _REQ),
]

# Split collective file operations: the _begin call is the collective (N_TO_N on the file's
# group, like MPI_File_read_all: ROMIO does the whole collective in it), the _end call returns
# its status (recorded as IO: MPI time, no instance).
_FILE_SPLIT = [
    ("File_read_all_begin", N_TO_N, _FH + ", " + _IO_RBUF),
    ("File_read_all_end", IO, _FH + ", void *buf" + _ST),
    ("File_write_all_begin", N_TO_N, _FH + ", " + _IO_BUF),
    ("File_write_all_end", IO, _FH + ", const void *buf" + _ST),
    ("File_read_at_all_begin", N_TO_N, _FH + ", " + _AT + _IO_RBUF),
    ("File_read_at_all_end", IO, _FH + ", void *buf" + _ST),
    ("File_write_at_all_begin", N_TO_N, _FH + ", " + _AT + _IO_BUF),
    ("File_write_at_all_end", IO, _FH + ", const void *buf" + _ST),
    ("File_read_ordered_begin", N_TO_N, _FH + ", " + _IO_RBUF),
    ("File_read_ordered_end", IO, _FH + ", void *buf" + _ST),
    ("File_write_ordered_begin", N_TO_N, _FH + ", " + _IO_BUF),
    ("File_write_ordered_end", IO, _FH + ", const void *buf" + _ST),
]

_ORIGIN = "const void *origin_addr, int origin_count, MPI_Datatype origin_datatype"
_TARGET = "int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype"
_RESULT = "void *result_addr, int result_count, MPI_Datatype result_datatype"
_WIN = "MPI_Win win"
_ONE_SIDED = [
    ("Win_create", COMM_CREATE, "void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win"),
    ("Win_allocate", COMM_CREATE, "MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, "
                                  "MPI_Win *win"),
    ("Win_allocate_shared", COMM_CREATE, "MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, "
                                         "void *baseptr, MPI_Win *win"),
    ("Win_create_dynamic", COMM_CREATE, "MPI_Info info, MPI_Comm comm, MPI_Win *win"),
    ("Win_free", COMM_FREE, "MPI_Win *win"),
    ("Win_fence", N_TO_N, "int assert, " + _WIN),
    ("Win_lock", RMA_SYNC, "int lock_type, int rank, int assert, " + _WIN),
    ("Win_unlock", RMA_SYNC, "int rank, " + _WIN),
    ("Win_lock_all", RMA_SYNC, "int assert, " + _WIN),
    ("Win_unlock_all", RMA_SYNC, _WIN),
    ("Win_flush", RMA_SYNC, "int rank, " + _WIN),
    ("Win_flush_all", RMA_SYNC, _WIN),
    ("Win_flush_local", RMA_SYNC, "int rank, " + _WIN),
    ("Win_flush_local_all", RMA_SYNC, _WIN),
    ("Win_sync", RMA_SYNC, _WIN),
    ("Win_post", RMA_SYNC, "MPI_Group group, int assert, " + _WIN),
    ("Win_start", RMA_SYNC, "MPI_Group group, int assert, " + _WIN),
    ("Win_complete", RMA_SYNC, _WIN),
    ("Win_wait", RMA_SYNC, _WIN),
    ("Put", RMA, _ORIGIN + ", " + _TARGET + ", " + _WIN),
    ("Get", RMA, _ORIGIN.replace("const void", "void") + ", " + _TARGET + ", " + _WIN),
    ("Accumulate", RMA, _ORIGIN + ", " + _TARGET + ", MPI_Op op, " + _WIN),
    ("Get_accumulate", RMA, _ORIGIN + ", " + _RESULT + ", " + _TARGET + ", MPI_Op op, " + _WIN),
    ("Fetch_and_op", RMA, "const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank, "
                          "MPI_Aint target_disp, MPI_Op op, " + _WIN),
    ("Compare_and_swap", RMA, "const void *origin_addr, const void *compare_addr, void *result_addr, "
                              "MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, " + _WIN),
    ("Rput", RMA, _ORIGIN + ", " + _TARGET + ", " + _WIN + _REQ),
    ("Rget", RMA, _ORIGIN.replace("const void", "void") + ", " + _TARGET + ", " + _WIN + _REQ),
    ("Raccumulate", RMA, _ORIGIN + ", " + _TARGET + ", MPI_Op op, " + _WIN + _REQ),
    ("Rget_accumulate", RMA, _ORIGIN + ", " + _RESULT + ", " + _TARGET + ", MPI_Op op, " + _WIN + _REQ),
    ("Win_test", RMA_SYNC, _WIN + ", int *flag"),     # tag: the flag (csrc/generate.py)
]

_NEIGHBOR = [
    ("Neighbor_allgather", _ALLGATHER),
    ("Neighbor_allgatherv", _ALLGATHERV),
    ("Neighbor_alltoall", _ALLGATHER),
    ("Neighbor_alltoallv", _ALLTOALLV),
    ("Neighbor_alltoallw", _ALLTOALLW.replace("const int sdispls[]", "const MPI_Aint sdispls[]")
     .replace("const int rdispls[]", "const MPI_Aint rdispls[]")),
]
_INFO = ", MPI_Info info"

FUNCTIONS += [_f(200 + i, "MPI_" + name, kind, params) for i, (name, kind, params) in enumerate(_FILE_OPS)]
FUNCTIONS += [_f(230 + i, "MPI_" + name, kind, params, True) for i, (name, kind, params) in enumerate(_FILE_IOPS)]
FUNCTIONS += [_f(350 + i, "MPI_" + name, kind, params) for i, (name, kind, params) in enumerate(_FILE_SPLIT)]
FUNCTIONS += [_f(250 + i, "MPI_" + name, kind, params, name.startswith("R"))
              for i, (name, kind, params) in enumerate(_ONE_SIDED)]
FUNCTIONS += [_f(290 + i, "MPI_" + name, NEIGHBOR, params) for i, (name, params) in enumerate(_NEIGHBOR)]
FUNCTIONS += [_f(295 + i, "MPI_I" + name.lower(), NEIGHBOR, params + _REQ, True)
              for i, (name, params) in enumerate(_NEIGHBOR)]
# Persistent collectives (MPI-4): "<collective>_init"; each MPI_Start of one is an instance.
FUNCTIONS += [_f(300 + i, "MPI_%s_init" % name, COLL_INIT, params + _INFO + _REQ, True, since=4)
              for i, (name, _, params) in enumerate(_COLLECTIVES)]
FUNCTIONS += [_f(320 + i, "MPI_%s_init" % name, COLL_INIT, params + _INFO + _REQ, True, since=4)
              for i, (name, params) in enumerate(_NEIGHBOR)]
FUNCTIONS += [
    # Partitioned communication (MPI-4): one message per activation, like a persistent send/receive.
    _f(330, "MPI_Psend_init", SEND_INIT, "const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, "
                                         "int dest, int tag, MPI_Comm comm" + _INFO + _REQ, True, since=4),
    _f(331, "MPI_Precv_init", RECV_INIT, "void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, "
                                         "int source, int tag, MPI_Comm comm" + _INFO + _REQ, True, since=4),
    _f(332, "MPI_Pready", PARTITION, "int partition, MPI_Request request", since=4),
    _f(333, "MPI_Pready_range", PARTITION, "int partition_low, int partition_high, MPI_Request request", since=4),
    _f(334, "MPI_Pready_list", PARTITION, "int length, const int array_of_partitions[], MPI_Request request",
       since=4),
    _f(335, "MPI_Parrived", PARTITION, "MPI_Request request, int partition, int *flag", since=4),
    _f(340, "MPI_Abort", ABORT),
    _f(341, "MPI_Pcontrol", PHASE),
    # The phase API (csrc/regions.c): not MPI functions, records of their own.
    _f(342, "mpigraph_phase_begin", REGION),
    _f(343, "mpigraph_phase_end", REGION),
]

# Kinds whose calls may block: their wrappers show the call in the header's in-flight slot
# while it runs (mpigraph.trace.inflight).  Nonblocking functions and polls never block.
BLOCKING_KINDS = frozenset({SEND, RECV, SENDRECV, PROBE, COMPLETION, N_TO_N, ONE_TO_N, N_TO_ONE, SCAN,
                            COMM_CREATE, COMM_FREE, IO, RMA_SYNC, NEIGHBOR, FINALIZE, ABORT})

BY_ID = {f.id: f for f in FUNCTIONS}
BY_NAME = {f.name: f for f in FUNCTIONS}
MAX_ID = max(BY_ID)
assert len(BY_ID) == len(FUNCTIONS), "function ids must be unique"


def name_of(func_id):
    """The MPI name of a function id (``"unknown(<id>)"`` for ids this version does not know)."""
    f = BY_ID.get(int(func_id))
    return f.name if f else "unknown(%d)" % func_id


def names_array():
    """A numpy array mapping id -> name, for vectorised lookups (``names_array()[func]``)."""
    import numpy as np

    names = np.array(["unknown(%d)" % i for i in range(MAX_ID + 1)], dtype=object)
    for f in FUNCTIONS:
        names[f.id] = f.name
    return names
