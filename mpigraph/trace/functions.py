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

COLLECTIVE_KINDS = frozenset({N_TO_N, ONE_TO_N, N_TO_ONE, SCAN, COMM_CREATE, COMM_FREE})

MPIFunction = namedtuple("MPIFunction", "id name kind params nonblocking")


def _f(id, name, kind, params=None, nonblocking=False):
    return MPIFunction(id, name, kind, params, nonblocking)


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
