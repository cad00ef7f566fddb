"""The traffic stage: on every analysis rank the tables of the trace ranks it owns, summed on
analysis rank 0 (each is small: rank pairs, size bins, communicators).

The point-to-point pairs come from the match stage (``Linked.p2p_pairs``: the messages each
analysis rank matched, on the owner of their receivers); collectives and sizes from the owned
ranks' records; the communicators from every rank's creation records, gathered to every
analysis rank first (a collective's members are needed to apportion it).
"""

import numpy as np

from mpigraph import schema
from mpigraph.traffic import communicators as comms
from mpigraph.traffic import matrix, sizes
from mpigraph.trace import functions as mf


def traffic(comm, linked, world_size):
    """{"matrix", "sizes", "communicators": tables (schema columns)} on analysis rank 0, with
    "names" ({comm id: name}); None elsewhere.  Collective over comm."""
    mine = comms.concat([comms.creation_rows(c) for c in linked.calls.values()])
    known = comms.Communicators(comms.concat(comm.allgather(mine)), world_size)
    local_matrix = matrix.concat([linked.p2p_pairs or matrix.empty()] + [matrix.collective_pairs(c, known)
                                                       for c in linked.calls.values()])
    local_sizes = sizes.concat([sizes.rank_sizes(c) for c in linked.calls.values()])
    gathered = comm.gather((local_matrix, local_sizes), root=0)
    if comm.rank != 0:
        return None
    whole = matrix.concat([m for m, _ in gathered])
    hist = sizes.concat([s for _, s in gathered])
    return {"matrix": matrix_table(whole), "sizes": size_table(hist, known),
            "communicators": known.table(), "names": known, "world_size": int(world_size)}


def matrix_table(whole):
    """schema.COMM_MATRIX_COLUMNS of the summed pairs."""
    return {"src": whole["src"], "dst": whole["dst"], "messages": whole["messages"], "bytes": whole["bytes"],
            "kind": np.array(matrix.KINDS, object)[whole["kind"]] if len(whole["kind"]) else np.zeros(0, object)}


def size_table(hist, known):
    """schema.SIZE_COLUMNS of the histogram rows, functions and communicators named."""
    return {"function": mf.names_array()[hist["func"]], "comm": known.name_all(hist["comm"]),
            "comm_id": hist["comm"], "bin_lo": hist["bin_lo"], "bin_hi": hist["bin_hi"], "count": hist["count"],
            "bytes": hist["bytes"]}


COLUMNS = {"matrix": schema.COMM_MATRIX_COLUMNS, "sizes": schema.SIZE_COLUMNS,
           "communicators": schema.COMMUNICATOR_COLUMNS}
