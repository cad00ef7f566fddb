"""Integer columns to owner ranks and back: the per-round traffic of the path algorithms.

The path algorithms move many small batches (one per bucket phase) of integer
columns, so they use one Alltoall of counts and one Alltoallv per column: no
encoding, no pickles.  The big one-time moves
(gathering a graph to one rank) go through ``mpigraph.comm.shuffle`` instead.
"""

import numpy as np

from mpigraph.comm import meter
from mpigraph.comm.parallel import wait_idly
from mpigraph.util import arrays


def send_rows(comm, dest, columns, with_source=False):
    """Send row i of `columns` (a list of equal-length arrays) to rank dest[i].

    Each column travels and arrives in its own dtype: the graph's vertex ids are int32 where
    they fit, half the bytes of int64.

    Collective over comm.  Returns the received columns (same count), rows
    grouped by source rank in rank order, each source's rows in their order;
    with_source: (columns, source rank of each received row).
    """
    size = comm.Get_size()
    dest = np.asarray(dest)          # in its own dtype: a copy to int64 of millions of rows is not needed
    if size == 1:
        received = [np.asarray(c) for c in columns]
        return (received, np.zeros(len(dest), np.int64)) if with_source else received
    if len(dest) and (dest.min() < 0 or dest.max() >= size):
        raise ValueError("a destination rank is not a rank of the communicator (0 to %d)" % (size - 1))
    return send_grouped(comm, *arrays.grouped(dest, size), columns, with_source)


def send_grouped(comm, order, send_counts, columns, with_source=False):
    """send_rows, where the rows' grouping by destination is known: `order` puts them in rank
    order (None: they are in it), send_counts[r] of them for rank r.  A caller that sends the
    same rows twice groups them once (``paths.relay``: a slab's distances go back as blocks)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    send_counts = np.ascontiguousarray(send_counts, np.int64)
    recv_counts = np.empty(size, np.int64)
    # The counts' exchange is where a rank done early waits for the others: without spinning.
    wait_idly(comm.Ialltoall(send_counts, recv_counts))
    send_displ, recv_displ = _displacements(send_counts), _displacements(recv_counts)
    result = []
    for column in columns:      # one Alltoallv per column: no row-major table to build and take apart
        column = np.asarray(column)
        outgoing = np.ascontiguousarray(column if order is None else column[order])
        incoming = np.empty(int(recv_counts.sum()), outgoing.dtype)
        comm.Alltoallv([outgoing, (send_counts, send_displ)], [incoming, (recv_counts, recv_displ)])
        meter.count((send_counts.sum() - send_counts[rank]) * outgoing.itemsize,
                      (recv_counts.sum() - recv_counts[rank]) * outgoing.itemsize)
        result.append(incoming)
    if with_source:
        return result, np.repeat(np.arange(size, dtype=np.int64), recv_counts)
    return result


def keep_or_send(comm, owner, columns):
    """Rows of `columns` gathered on their owner ranks, where rows owned here skip the exchange.

    Collective over comm.  Returns the columns of the rows this rank owns:
    its own rows first, in their order, then the received ones (``send_rows``).
    """
    here = np.asarray(owner) == comm.Get_rank()
    away = ~here
    received = send_rows(comm, owner[away], [np.asarray(c)[away] for c in columns])
    return [np.concatenate((np.asarray(c)[here], r)) for c, r in zip(columns, received)]


def _displacements(counts):
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)


def ask_owners(comm, owner, queries, answer):
    """Look values up on the ranks that own them.

    Row i of `queries` (integer columns) goes to rank owner[i]; there
    `answer(query_columns)` returns a list of int64 answer columns for the
    rows it received; the answers come back in the order of `queries`.
    Collective over comm.
    """
    owner = np.asarray(owner, np.int64)
    if comm.Get_size() == 1:
        return answer([np.asarray(q, np.int64) for q in queries])
    # The rows this rank owns (most, where each asks about its own trace ranks' calls) do not
    # travel: they are answered here, in the same call as the received ones.  The others go
    # grouped by owner, and each owner answers its askers' rows in the order they came, grouped
    # by asker: the answers come back in the order they were sent, and no row's position travels.
    size = comm.Get_size()
    here = owner == comm.Get_rank()
    mine, away = np.flatnonzero(here), np.flatnonzero(~here)
    del here
    order, counts = arrays.grouped(owner[away], size)
    sent = away if order is None else away[order]         # the rows asked of others, as they go
    received, source = send_grouped(comm, sent, counts, [np.asarray(q) for q in queries], with_source=True)
    answers = answer([np.concatenate((np.asarray(q)[mine], r)) for q, r in zip(queries, received)])
    back = send_rows(comm, source, [a[len(mine):] for a in answers])
    result = [np.empty(len(owner), np.int64) for _ in answers]
    for column, values, back_values in zip(result, answers, back):
        column[mine] = values[:len(mine)]
        column[sent] = back_values
    return result
