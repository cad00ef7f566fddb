"""The traffic stage: on every analysis rank the tables of the trace ranks it owns, summed on
analysis rank 0 (each is small: rank pairs, size bins, communicators).

The point-to-point pairs and sizes come from the match stage (``Linked.traffic``: the messages
each analysis rank matched, on the owner of their receivers, and its operation table);
collectives from the owned ranks' records, a batch of ranks at a time (trace.batches: the
collective calls' records gathered, not all copied);
the communicators from every rank's creation records, gathered to every analysis rank (a
spreading collective's members are needed to apportion it: its calls wait for them summed per
rank and communicator, matrix.spreading).
"""

import numpy as np

from mpigraph import schema
from mpigraph.traffic import communicators as comms
from mpigraph.traffic import matrix, sizes
from mpigraph.match.core import CallBatch
from mpigraph.trace import functions as mf
from mpigraph.trace.batches import of_ranks


def from_match(ops, messages, by_site=False):
    """What the match stage hands on (``Linked.traffic``): the matched messages' (sender, receiver)
    sums and the size histogram of the owned ranks' point-to-point operations, made where the
    operation table and the messages are at hand (no second pass over the logs for them); with
    `by_site` the histogram per call site too ("site_sizes", keyed by sizes.site_key).
    CHUNK_ROWS rows at a time: the keys and sort orders of millions of rows would add to the
    match stage's peak memory."""
    pairs = [matrix.p2p_pairs(_rows(messages, piece)) for piece in _pieces(len(messages["s_rank"]))]
    if not by_site:
        hists = [sizes.p2p_sizes(_rows(ops, piece)) for piece in _pieces(len(ops["side"]))]
        return {"pairs": matrix.concat(pairs), "sizes": sizes.concat(hists)}
    hists = []
    for piece in _pieces(len(ops["side"])):
        rows = _rows(ops, piece)
        hists.append(sizes.p2p_sizes(rows, sizes.p2p_sites(rows)))
    by_site = sizes.concat(hists, with_site=True)
    # Summed over the sites (concat without with_site), the plain histogram: no second pass.
    return {"pairs": matrix.concat(pairs), "sizes": sizes.concat([by_site]), "site_sizes": by_site}


CHUNK_ROWS = 1 << 18


def _pieces(n):
    return [slice(a, a + CHUNK_ROWS) for a in range(0, n, CHUNK_ROWS)]


def _rows(table, piece):
    return {name: col[piece] for name, col in table.items()}


def traffic(comm, linked, world_size, max_records=None):
    """{"matrix", "sizes", "communicators": tables (schema columns)} on analysis rank 0, with
    "names" ({comm id: name}); None elsewhere.  Collective over comm.  The owned ranks are read a
    batch of at most max_records records at a time (trace.batches)."""
    matched = linked.traffic or {"pairs": matrix.empty(), "sizes": sizes.empty()}
    mine, pairs, spreading, collective = [], [matched["pairs"]], [], []
    for b in of_ranks(linked.calls, CallBatch, max_records):
        mine.append(comms.creation_rows(b))
        calls = matrix.collective_calls(b)
        pairs.append(matrix.collective_pairs(calls))
        spreading.append(matrix.spreading(calls))         # apportioned once the communicators are known
        # The per-call-site twin, keyed by (trace rank, shim site): the report stage numbers the sites.
        collective.append(sizes.collective_sizes(calls, by_site=True))
    known = comms.Communicators(comms.concat(comm.allgather(comms.concat(mine))), world_size)
    pairs.append(matrix.spread_pairs(spreading, known))
    local_matrix = matrix.concat(pairs, summed_already=False)
    local_site_sizes = sizes.concat([matched.get("site_sizes", sizes.empty(True))] + collective, with_site=True)
    local_sizes = sizes.concat([matched["sizes"]] + collective)        # summed over the sites
    gathered = comm.gather((local_matrix, local_sizes, local_site_sizes), root=0)
    if comm.rank != 0:
        return None
    whole = matrix.concat([m for m, _, _ in gathered])
    hist = sizes.concat([s for _, s, _ in gathered])
    return {"matrix": matrix_table(whole), "sizes": size_table(hist, known),
            "communicators": known.table(), "names": known, "world_size": int(world_size),
            "site_sizes": sizes.concat([s for _, _, s in gathered], with_site=True)}


def matrix_table(whole):
    """schema.COMM_MATRIX_COLUMNS of the summed pairs."""
    return {"src": whole["src"], "dst": whole["dst"], "messages": whole["messages"], "bytes": whole["bytes"],
            "kind": np.array(matrix.KINDS, object)[whole["kind"]] if len(whole["kind"]) else np.zeros(0, object)}


def size_table(hist, known):
    """schema.SIZE_COLUMNS of the histogram rows, functions and communicators named."""
    return {"function": mf.names_array()[hist["func"]], "comm": known.name_all(hist["comm"]),
            "comm_id": hist["comm"], "bin_lo": hist["bin_lo"], "bin_hi": hist["bin_hi"], "count": hist["count"],
            "bytes": hist["bytes"]}


def callsite_size_table(traffic, sites):
    """schema.CALLSITE_SIZE_COLUMNS (the sizes table per call site) of rank 0's traffic tables,
    once `sites` (callsites.stats.Sites, shared) numbers the run's call sites: the site keys of
    every trace rank relabelled with the run's ids, rows by call site, communicator, function, bin."""
    hist = sizes.relabelled(traffic["site_sizes"], sites.any_rank_ids)
    function = mf.names_array()[hist["func"]]
    return {"callsite": hist["site"], "callsite_name": sites.names(hist["site"], function), "function": function,
            **{k: v for k, v in size_table(hist, traffic["names"]).items() if k != "function"}}


COLUMNS = {"matrix": schema.COMM_MATRIX_COLUMNS, "sizes": schema.SIZE_COLUMNS,
           "communicators": schema.COMMUNICATOR_COLUMNS, "callsite_sizes": schema.CALLSITE_SIZE_COLUMNS}
