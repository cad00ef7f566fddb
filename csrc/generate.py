"""Generate the shim's C wrappers from the declarative table.

    python csrc/generate.py OUT_DIR

reads mpigraph/trace/functions.py and writes OUT_DIR/wrappers.c, one C wrapper
per function that has a parameter list (the others are hand-written in
csrc/) plus the MPI-4 large-count variant of every function with count
arguments, OUT_DIR/pmpi.h, the table of PMPI function pointers, and
OUT_DIR/ids.h, the function ids as C macros.  What a wrapper
records follows from its kind and its parameter names (see the table's
docstring).  Run by setup.py at build time; the output is a build product.
"""

import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_table():
    path = os.path.join(HERE, os.pardir, "mpigraph", "trace", "functions.py")
    spec = importlib.util.spec_from_file_location("functions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


T = load_table()

# Large-count (MPI-4 "_c") variants: which parameters change type.
_LARGE_COUNT_TYPES = {
    "count": "MPI_Count", "sendcount": "MPI_Count", "recvcount": "MPI_Count",
    "sendcounts": "MPI_Count", "recvcounts": "MPI_Count",
    "displs": "MPI_Aint", "sdispls": "MPI_Aint", "rdispls": "MPI_Aint",
    "origin_count": "MPI_Count", "target_count": "MPI_Count", "result_count": "MPI_Count",
}


def parse_params(params):
    """'const int x[], MPI_Comm comm' -> [(c_declaration, name), ...]."""
    out = []
    for decl in params.split(","):
        decl = decl.strip()
        name = re.search(r"(\w+)\s*(\[\])?$", decl).group(1)
        out.append((decl, name))
    return out


def large_count_params(params):
    """The parameter list of the _c variant, or None when the function has no counts."""
    changed = False
    out = []
    for decl, name in params:
        if name in _LARGE_COUNT_TYPES:
            new = re.sub(r"\bint\b", _LARGE_COUNT_TYPES[name], decl, count=1)
            changed |= new != decl     # MPI_Psend_init's count is an MPI_Count already: no _c twin
            decl = new
        out.append((decl, name))
    return out if changed else None


# --- what each kind records ---------------------------------------------------

def _bytes_p2p(names):
    if "partitions" in names:
        return "(int64_t)partitions * count * mg_type_size(datatype)"
    if "count" in names:
        return "(int64_t)count * mg_type_size(datatype)"
    return "(int64_t)sendcount * mg_type_size(sendtype)"


def _group_size():
    return "(c->is_inter ? c->remote_size : c->size)"


_COLLECTIVE_NAMES = {name for name, _, _ in T._COLLECTIVES}


def collective_base(name):
    """'MPI_Iallreduce' -> 'allreduce', 'MPI_Allreduce' -> 'allreduce', 'MPI_Allreduce_init' -> 'allreduce'."""
    short = name[len("MPI_"):]
    if short.endswith("_init"):
        short = short[:-len("_init")]
    if short not in _COLLECTIVE_NAMES and short.startswith("I"):
        short = short[1:]
    return short.lower()


def _polls(f, names):
    """An Iprobe-like call: unsuccessful calls in a row are merged into one record (shim.h)."""
    return f.kind == T.PROBE and "flag" in names


def _blocks(f, names):
    """The call may block: its start goes into the in-flight slot while it runs."""
    return f.kind in T.BLOCKING_KINDS and not f.nonblocking and "flag" not in names


def _requests(f, names):
    return "request" in names and f.kind in (T.IO, T.RMA, T.NEIGHBOR, T.COLL_INIT, T.N_TO_N)


def _seq_counted(f):
    """Calls that take a sequence number on their communicator (the collectives' order)."""
    return f.kind in T.SEQUENCED_KINDS and f.kind != T.COMM_CREATE


def body(f, names, large):
    """(statements before the record, flags, statements filling `r`, records) after the PMPI call."""
    k = f.kind
    lines = []
    if k in (T.SEND, T.ISEND, T.SEND_INIT):
        lines += [
            "int32_t peer = mg_world_peer(c, dest);",
            "int64_t bytes = %s;" % _bytes_p2p(names),
        ]
        flags = "MG_SEND" + (" | MG_PERSISTENT" if k == T.SEND_INIT else "")
        if k != T.SEND:
            lines.append("int64_t req = rc == MPI_SUCCESS ? mg_request_new(*request, request, c, peer, tag, bytes, %s | dev, 0) : 0;"
                         % flags)
        rec = ["r->peer = peer;", "r->tag = tag;", "r->bytes = bytes;"]
        if k != T.SEND:
            rec.append("r->request = req;")
        return lines, flags, rec, 1
    if k in (T.IRECV, T.RECV_INIT):
        flags = "MG_RECV" + (" | MG_PERSISTENT" if k == T.RECV_INIT else "")
        lines += [
            "int32_t peer = mg_world_peer(c, source);",
            "int64_t bytes = %s;" % _bytes_p2p(names),
            "int64_t req = rc == MPI_SUCCESS ? mg_request_new(*request, request, c, peer, mg_tag(tag), bytes, %s | dev, 0) : 0;"
            % flags,
        ]
        rec = ["r->peer = peer;", "r->tag = mg_tag(tag);", "r->bytes = bytes;", "r->request = req;"]
        return lines, flags, rec, 1
    if k == T.RECV:
        rec = ["if (rc == MPI_SUCCESS) mg_fill_from_status(r, c, st);",
               "else { r->peer = mg_world_peer(c, source); r->tag = mg_tag(tag); }"]
        return lines, "MG_RECV", rec, 1
    if k == T.SENDRECV:
        send_bytes = _bytes_p2p(names) if "sendcount" in names else "(int64_t)count * mg_type_size(datatype)"
        rec = ["r->peer = mg_world_peer(c, dest);", "r->tag = sendtag;", "r->bytes = %s;" % send_bytes,
               "mg_fill(r + 1, MG_ID_%s, t0, t1, MG_PART | MG_RECV | extra_flags);" % f.name,
               "r[1].comm = c->id;",
               "if (rc == MPI_SUCCESS) mg_fill_from_status(r + 1, c, st);",
               "else { r[1].peer = mg_world_peer(c, source); r[1].tag = mg_tag(recvtag); }"]
        return lines, "MG_SEND", rec, 2
    if k == T.PROBE:
        cond = "rc == MPI_SUCCESS && *flag" if "flag" in names else "rc == MPI_SUCCESS"
        rec = ["if (%s) { r->flags |= MG_MATCHED; mg_fill_from_status(r, c, st); }" % cond,
               "else { r->peer = mg_world_peer(c, source); r->tag = mg_tag(tag); }"]
        return lines, "0", rec, 1
    if k in (T.N_TO_N, T.ONE_TO_N, T.N_TO_ONE, T.SCAN, T.NEIGHBOR, T.COLL_INIT, T.COMM_FREE):
        lines.append("int64_t bytes = %s;" % _bytes_collective_for(f, names, large))
        rec = ["r->seq = seq;", "r->bytes = bytes;"]
        if "root" in names:
            rec.append("r->root = mg_world_root(c, root);")
        if "request" in names:
            flags = "MG_PERSISTENT | MG_COLLECTIVE" if k == T.COLL_INIT else "0"
            lines.append("int64_t req = rc == MPI_SUCCESS ? "
                         "mg_request_new(*request, request, c, MG_PEER_NONE, MG_TAG_NONE, bytes, %s | dev, %s) : 0;"
                         % (flags, "0" if k == T.COLL_INIT else "seq"))
            rec.append("r->request = req;")
        return lines, "0", rec, 1
    if k in (T.IO, T.RMA, T.RMA_SYNC, T.PARTITION):
        lines.append("int32_t peer = %s;" % _peer_before(f, names))
        lines.append("int64_t bytes = %s;" % _bytes_other(names))
        rec = ["r->peer = peer;", "r->bytes = bytes;"]
        if k == T.RMA_SYNC and "lock_type" in names:
            # MPI_Win_lock: tag 1 exclusive, 2 shared (match.rma: only exclusive locks exclude)
            rec.append("r->tag = lock_type == MPI_LOCK_EXCLUSIVE ? 1 : 2;")
        if k == T.RMA_SYNC and "flag" in names:
            # MPI_Win_test: tag is the flag (1: the exposure epoch completed in this call)
            rec.append("r->tag = rc == MPI_SUCCESS && *flag ? 1 : 0;")
        if _requests(f, names):
            lines.append("int64_t req = rc == MPI_SUCCESS ? "
                         "mg_request_new(*request, request, c, peer, MG_TAG_NONE, bytes, 0, 0) : 0;")
            rec.append("r->request = req;")
        return lines, "0", rec, 1
    raise ValueError("no generated wrapper for kind %r (%s)" % (k, f.name))


# Calls whose buffers the shim asks the CUDA driver about (gpu.c): messages and collectives, not
# file or one-sided operations.  Asked after the call, so the query is not counted as MPI time.
_DEVICE_KINDS = frozenset({T.SEND, T.RECV, T.SENDRECV, T.ISEND, T.IRECV, T.SEND_INIT, T.RECV_INIT, T.N_TO_N,
                           T.ONE_TO_N, T.N_TO_ONE, T.SCAN, T.NEIGHBOR, T.COLL_INIT, T.COMM_FREE})


def _device_flag(f, names):
    """The C expression of MG_DEVICE for the call's buffers ("0" without any), None for other kinds.
    The flag goes into the call's record and its request's (so the parts of the Wait that
    completes it carry it too)."""
    if f.kind not in _DEVICE_KINDS:
        return None
    buffers = [n for n in ("buf", "sendbuf", "recvbuf", "buffer") if n in names and "fh" not in names]
    return "(uint16_t)(%s)" % " | ".join("mg_device_flag(%s)" % b for b in buffers) if buffers else "0"


def _bytes_other(names):
    """Bytes of a file or one-sided operation: the origin's (or the file buffer's) data."""
    if "origin_count" in names:
        return "(int64_t)origin_count * mg_type_size(origin_datatype)"
    if "count" in names and "datatype" in names:
        return "(int64_t)count * mg_type_size(datatype)"
    if "datatype" in names:       # Fetch_and_op, Compare_and_swap: one element
        return "mg_type_size(datatype)"
    return "0"


def _peer_before(f, names):
    """The call's peer as a world rank, computable before the call (for the in-flight slot)."""
    for name in ("source", "target_rank", "rank", "dest"):
        if name in names and (name != "rank" or "win" in names):
            return "mg_world_peer(c, %s)" % name
    return "MG_PEER_NONE"


def _tag_before(names):
    for name in ("tag", "recvtag"):
        if name in names:
            return "mg_tag(%s)" % name
    return "MG_TAG_NONE"


def _bytes_collective_for(f, names, large):
    if f.kind == T.NEIGHBOR or (f.kind == T.COLL_INIT and "Neighbor" in f.name):
        # The neighbours' number is not known without a topology query per call: not recorded.
        return "0"
    if f.kind in (T.N_TO_N, T.COMM_FREE) and collective_base(f.name) not in _BYTES_OF_BASE:
        # Fences, window free, file operations: the data of a collective file access
        return "(int64_t)count * mg_type_size(datatype)" if "count" in names else "0"
    n = _group_size()
    sum_counts = "mg_sum_counts_c" if large else "mg_sum_counts"
    sum_w = "mg_sum_counts_types_c" if large else "mg_sum_counts_types"
    not_in_place = "sendbuf == MPI_IN_PLACE ? 0 : "
    count_bytes = "(int64_t)count * mg_type_size(datatype)"
    send_bytes = "(int64_t)sendcount * mg_type_size(sendtype)"
    return {
        "barrier": "0",
        "bcast": count_bytes,
        "reduce": count_bytes,
        "allreduce": count_bytes,
        "scan": count_bytes,
        "exscan": count_bytes,
        "reduce_scatter": "%s(recvcounts, c->size) * mg_type_size(datatype)" % sum_counts,
        "reduce_scatter_block": "(int64_t)recvcount * c->size * mg_type_size(datatype)",
        "gather": not_in_place + send_bytes,
        "gatherv": not_in_place + send_bytes,
        "allgather": not_in_place + send_bytes,
        "allgatherv": not_in_place + send_bytes,
        "scatter": "mg_is_root(c, root) ? %s * %s : 0" % (send_bytes, n),
        "scatterv": "mg_is_root(c, root) ? %s(sendcounts, %s) * mg_type_size(sendtype) : 0" % (sum_counts, n),
        "alltoall": not_in_place + "%s * %s" % (send_bytes, n),
        "alltoallv": not_in_place + "%s(sendcounts, %s) * mg_type_size(sendtype)" % (sum_counts, n),
        "alltoallw": not_in_place + "%s(sendcounts, sendtypes, %s)" % (sum_w, n),
    }[collective_base(f.name)]


_BYTES_OF_BASE = {name.lower() for name in _COLLECTIVE_NAMES}


def comm_param(names):
    for candidate in ("comm", "comm_old", "local_comm", "intercomm"):
        if candidate in names:
            return candidate
    raise ValueError("no communicator parameter in %s" % names)


def comm_of(params):
    """The C expression of the call's mg_comm (before the call), or None when it has none."""
    decls = dict((n, d) for d, n in params)
    if "win" in decls:
        return "mg_comm_of_win(%swin)" % ("*" if "*" in decls["win"] else "")
    if "fh" in decls and "MPI_Comm comm" not in decls.values():
        return "mg_comm_of_file(%sfh)" % ("*" if "*" in decls["fh"] else "")
    names = list(decls)
    if any(n in names for n in ("comm", "comm_old", "local_comm", "intercomm")):
        return "mg_comm_of(%s)" % comm_param(names)
    if "filename" in names:
        return "&mg.self"           # MPI_File_delete: no communicator
    return None


def _group_create(f, params, plain):
    """Win_create, File_open, ...: a collective over comm that makes a window's or file's group."""
    names = [n for _, n in params]
    is_file = "fh" in names
    handle = "fh" if is_file else "win"
    return [
        "    mg_depth++;",
        "    int64_t t0 = mg_now();",
        "    mg_comm *pc = mg_comm_of(comm); /* its call takes the parent's next number */",
        "    int fl = mg_begin(MG_ID_%s, t0, MG_PEER_NONE, MG_TAG_NONE, pc->id, pc->seq + 1, MG_ROOT_NONE, 0);"
        % f.name,
        "    int rc = %s;" % plain,
        "    mg_end(fl);",
        "    int64_t t1 = mg_now();",
        "    mg_%s_created(MG_ID_%s, t0, t1, rc, comm, rc == MPI_SUCCESS ? *%s : %s);"
        % ("file" if is_file else "win", f.name, handle, "MPI_FILE_NULL" if is_file else "MPI_WIN_NULL"),
        "    mg_depth--;", "    return rc;", "}", ""]


def wrapper(f, params, large):
    name = f.name + ("_c" if large else "")
    names = [n for _, n in params]
    decl = ", ".join(d for d, _ in params)
    # A receive's status is always asked for, even when the caller ignores it,
    # because the real source, tag and size come from it.
    has_status = "status" in names
    call_args = ", ".join("st" if n == "status" else n for n in names)
    pcall = "P%s(%s)" % (name, call_args)
    plain = "P%s(%s)" % (name, ", ".join(names))
    extra = "MG_LARGE_COUNT" if large else "0"
    out = ["int %s(%s)" % (name, decl), "{",
           "    if (!mg_should_record())", "        return %s;" % plain]
    comm = comm_of(params)
    if f.kind == T.COMM_CREATE and ("win" in names or "fh" in names):
        return "\n".join(out + _group_create(f, params, plain))
    if f.kind == T.COMM_CREATE:
        newcomm = [n for d, n in params if d.startswith("MPI_Comm *")][-1]
        out += [
            "    mg_depth++;",
            "    int64_t t0 = mg_now();",
            "    mg_comm *pc = mg_comm_of(%s); /* its call takes the parent's next number */" % comm_param(names),
            "    int fl = mg_begin(MG_ID_%s, t0, MG_PEER_NONE, MG_TAG_NONE, pc->id, pc->seq + 1, MG_ROOT_NONE, 0);"
            % f.name,
            "    int rc = %s;" % plain,
            "    mg_end(fl);",
            "    int64_t t1 = mg_now();",
            "    mg_comm_created(MG_ID_%s, t0, t1, rc, %s, rc == MPI_SUCCESS ? *%s : MPI_COMM_NULL);"
            % (f.name, comm_param(names), newcomm),
            "    mg_depth--;", "    return rc;", "}", ""]
        return "\n".join(out)
    out.append("    mg_depth++;")
    if has_status:
        out += ["    MPI_Status st_local;",
                "    MPI_Status *st = status == MPI_STATUS_IGNORE ? &st_local : status;"]
    if comm:
        out.append("    mg_comm *c = %s;" % comm)
    if _seq_counted(f):
        out.append("    uint32_t seq = ++c->seq;")
    if f.kind == T.COMM_FREE:     # the handle is gone after the call: remember it
        handle = "fh" if "fh" in names else "win"
        out.append("    %s saved = *%s;" % ("MPI_File" if handle == "fh" else "MPI_Win", handle))
    out.append("    int64_t t0 = mg_now();")
    blocks = _blocks(f, names)
    if blocks:
        out.append("    int fl = mg_begin(MG_ID_%s, t0, %s, %s, %s, %s, %s, 0);"
                   % (f.name, _peer_before(f, names) if comm else "MG_PEER_NONE", _tag_before(names),
                      "c->id" if comm else "0", "seq" if _seq_counted(f) else "0",
                      "mg_world_root(c, root)" if "root" in names else "MG_ROOT_NONE"))
    out.append("    int rc = %s;" % pcall)
    if blocks:
        out.append("    mg_end(fl);")
    out.append("    int64_t t1 = mg_now();")
    if f.kind == T.COMM_FREE:
        out.append("    if (rc == MPI_SUCCESS) mg_%s_freed(saved);" % ("file" if "fh" in names else "win"))
    if f.kind == T.RMA_SYNC and "group" in names:
        # MPI_Win_post / MPI_Win_start: a part per member of the group (topology.c), so the
        # analysis pairs the epochs of origins and targets (mpigraph/match/rma.py).
        out += ["    mg_group_call(MG_ID_%s, t0, t1, rc, c, group);" % f.name,
                "    mg_depth--;", "    return rc;", "}", ""]
        return "\n".join(out)
    if _polls(f, names):
        # The arguments of a poll: source, tag and communicator.
        out += ["    uint64_t args = mg_hash_args(mg_hash_args(mg_hash_args(0, (uint64_t)source), (uint64_t)tag), "
                "(uint64_t)c->id);",
                "    int missed = rc == MPI_SUCCESS && !*flag;",
                "    if (missed && mg_poll_repeat(MG_ID_%s, args, t0, t1)) {" % f.name,
                "        mg_depth--;", "        return rc;", "    }"]
    pre, flags, rec, n_records = body(f, names, large)
    dev = _device_flag(f, names)
    if dev:
        out.append("    uint16_t dev = %s;" % dev)
    out += ["    " + line for line in pre]
    out += ["    uint16_t extra_flags = %s%s | (rc == MPI_SUCCESS ? 0 : MG_ERROR);" % (extra, " | dev" if dev else ""),
            "    mg_record *r = mg_reserve(%d);" % n_records,
            "    if (r) {",
            "        mg_fill(r, MG_ID_%s, t0, t1, %s | extra_flags);" % (f.name, flags)]
    if comm:
        out.append("        r->comm = c->id;")
    out += ["        " + line for line in rec]
    out += ["        mg_publish(%d);" % n_records]
    if _polls(f, names):
        out.append("        if (missed) mg_poll_note(args);")
    out += ["    }", "    mg_depth--;", "    return rc;", "}", ""]
    return "\n".join(out)


# PMPI functions the hand-written core calls besides the wrapped ones.
_CORE_PMPI = [
    "Init", "Init_thread", "Finalize", "Finalized", "Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall",
    "Testany", "Testsome", "Start", "Startall", "Request_free", "Comm_free",
    "Comm_rank", "Comm_size", "Comm_group", "Comm_test_inter", "Comm_remote_size", "Comm_remote_group",
    "Group_translate_ranks", "Group_free", "Type_size", "Get_count", "Allreduce", "Bcast",
    "Mprobe", "Improbe", "Mrecv", "Imrecv", "Abort", "Pcontrol",
    # topology.c: a topology communicator's in-neighbours, the groups of MPI_Win_post/start
    "Topo_test", "Cartdim_get", "Cart_shift", "Graph_neighbors_count", "Graph_neighbors",
    "Dist_graph_neighbors_count", "Dist_graph_neighbors", "Group_size",
]
# MPI-4 functions: the large-count variants and the f08 status conversions.
_CORE_PMPI_MPI4 = ["Get_count_c", "Mrecv_c", "Imrecv_c", "Status_f082c", "Status_c2f08"]


def pmpi_names():
    """(names, MPI-4 names) of every PMPI function the shim calls, without the prefix."""
    names, large = list(_CORE_PMPI), list(_CORE_PMPI_MPI4)
    for f in T.FUNCTIONS:
        if f.params is None:
            continue
        short = f.name[len("MPI_"):]
        if short not in names and short not in large:
            (names if f.since < 4 else large).append(short)
        if large_count_params(parse_params(f.params)) is not None:
            large.append(short + "_c")
    return names, large


def generate_pmpi_header():
    """pmpi.h: every PMPI_X becomes a call through a pointer resolved at run time.

    The shim links no MPI library: it finds the program's own (whatever its
    file name: libmpi.so.12, libmpich.so.12, ...) when MPI is initialised, so
    one build serves every library of the ABI it was compiled for.
    """
    names, large = pmpi_names()

    def block(ns):
        out = ["extern __typeof__(PMPI_%s) *mg_pmpi_%s;" % (n, n) for n in ns]
        out += ["#define PMPI_%s (*MG_PMPI(%s))" % (n, n) for n in ns]
        return out

    lines = ["/* Generated by csrc/generate.py: do not edit. */",
             "#ifndef MPIGRAPH_PMPI_H", "#define MPIGRAPH_PMPI_H", "",
             "void mg_resolve_pmpi(void);",
             "#define MG_PMPI(n) (__builtin_expect(mg_pmpi_##n != 0, 1) ? mg_pmpi_##n : (mg_resolve_pmpi(), mg_pmpi_##n))",
             ""]
    lines += block(names)
    lines += ["#define MG_PMPI_NAMES(X) " + " ".join("X(%s)" % n for n in names), ""]
    lines += ["#if MPI_VERSION >= 4"] + block(large)
    lines += ["#define MG_PMPI_NAMES_LARGE(X) " + " ".join("X(%s)" % n for n in large),
              "#else", "#define MG_PMPI_NAMES_LARGE(X)", "#endif", "", "#endif", ""]
    return "\n".join(lines)


def generate_ids_header():
    """ids.h: MG_ID_<MPI name> for every function of the table."""
    lines = ["/* Generated by csrc/generate.py from mpigraph/trace/functions.py: do not edit. */",
             "#ifndef MPIGRAPH_IDS_H", "#define MPIGRAPH_IDS_H"]
    lines += ["#define MG_ID_%s %d" % (f.name, f.id) for f in T.FUNCTIONS]
    lines += ["#define MG_N_FUNCTIONS %d" % len(T.FUNCTIONS), "#endif", ""]
    return "\n".join(lines)


def generate():
    chunks = ["/* Generated by csrc/generate.py from mpigraph/trace/functions.py: do not edit. */",
              '#include "shim.h"', '#include "groups.h"', ""]
    large = []
    for f in T.FUNCTIONS:
        if f.params is None:
            continue
        params = parse_params(f.params)
        (chunks if f.since < 4 else large).append(wrapper(f, params, False))
        lc = large_count_params(params)
        if lc is not None:
            large.append(wrapper(f, lc, True))
    chunks += ["#if MPI_VERSION >= 4", ""] + large + ["#endif /* MPI_VERSION >= 4 */", ""]
    return "\n".join(chunks)


if __name__ == "__main__":
    out_dir = sys.argv[1]
    with open(os.path.join(out_dir, "wrappers.c"), "w") as out:
        out.write(generate())
    with open(os.path.join(out_dir, "pmpi.h"), "w") as out:
        out.write(generate_pmpi_header())
    with open(os.path.join(out_dir, "ids.h"), "w") as out:
        out.write(generate_ids_header())
