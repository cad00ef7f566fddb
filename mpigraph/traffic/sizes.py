"""Message-size histograms per MPI function and communicator, in powers of two (mpiP -y, TAU).

A point-to-point message counts once under the function that posted it on each side: a send
under MPI_Send/Isend/... with the bytes sent, a receive under MPI_Recv/Irecv/... with the bytes
its status says arrived (match/p2p.py's operations).  A collective call counts once per member
under its function with the bytes the member passed (the shim's ``bytes``, as in ranks.csv's
bytes_collective).

Bins: 0 bytes is a bin of its own [0, 0]; b >= 1 falls in [2**k, 2**(k+1) - 1], k = floor(log2 b).
"""

import numpy as np

from mpigraph.match import p2p
from mpigraph.match.core import kind_is
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.traffic.matrix import RULE_CODE

_DATA_COLLECTIVE = (mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN)


def bins(nbytes):
    """(bin_lo, bin_hi) of each size: [0, 0] for 0, else the power-of-two range holding it."""
    nbytes = np.asarray(nbytes, np.int64)
    # frexp: b = m * 2**e with 0.5 <= m < 1, so floor(log2 b) = e - 1, exact for b < 2**53.
    k = np.frexp(np.maximum(nbytes, 1).astype(np.float64))[1].astype(np.int64) - 1
    lo = np.where(nbytes > 0, np.left_shift(np.int64(1), k), 0)
    hi = np.where(nbytes > 0, np.left_shift(np.int64(1), k + 1) - 1, 0)
    return lo, hi


def histogram(func, comm, nbytes):
    """Rows (func, comm, bin_lo, bin_hi, count, bytes) of the sizes, one per non-empty bin."""
    func, comm, nbytes = (np.asarray(a, np.int64) for a in (func, comm, nbytes))
    if not len(func):
        return empty()
    lo, hi = bins(nbytes)
    unique, inverse = np.unique(np.stack([func, comm, lo]), axis=1, return_inverse=True)
    inverse = inverse.ravel()
    totals = np.zeros(unique.shape[1], np.int64)
    np.add.at(totals, inverse, nbytes)
    _, hi = bins(unique[2])
    return {"func": unique[0], "comm": unique[1], "bin_lo": unique[2], "bin_hi": hi,
            "count": np.bincount(inverse, minlength=unique.shape[1]).astype(np.int64), "bytes": totals}


COLUMNS = ("func", "comm", "bin_lo", "bin_hi", "count", "bytes")


def empty():
    return {name: np.zeros(0, np.int64) for name in COLUMNS}


def concat(tables):
    """Tables of several ranks as one, equal bins added."""
    tables = [t for t in tables if len(t["func"])]
    if not tables:
        return empty()
    rows = {c: np.concatenate([t[c] for t in tables]) for c in COLUMNS}
    unique, inverse = np.unique(np.stack([rows["func"], rows["comm"], rows["bin_lo"]]), axis=1, return_inverse=True)
    inverse = inverse.ravel()
    out = {"func": unique[0], "comm": unique[1], "bin_lo": unique[2], "bin_hi": bins(unique[2])[1]}
    for name in ("count", "bytes"):
        out[name] = np.zeros(unique.shape[1], np.int64)
        np.add.at(out[name], inverse, rows[name])
    return out


def rank_sizes(rank_calls):
    """The histogram rows of one rank: its point-to-point operations and collective calls."""
    ops, _ = p2p.operations(rank_calls)
    # A receive never completed has no size yet (its status never came): left out.
    done = (ops["side"] == p2p.SEND_SIDE) | (ops["done_call"] >= 0)
    records = np.asarray(rank_calls.records)
    flags, func = rank_calls.field("flags"), rank_calls.field("func")
    coll = np.flatnonzero(((flags & (record.PART | record.ERROR)) == 0) & kind_is(func, *_DATA_COLLECTIVE)
                          & (records["seq"] > 0))
    # Barrier and the window/file pseudo-collectives move no message data: only the collectives
    # whose bytes the shim records as message data (matrix.RULE_CODE knows them).
    coll = coll[RULE_CODE[func[coll]] >= 0]
    return histogram(np.concatenate([ops["func"][done], func[coll]]),
                     np.concatenate([ops["comm"][done], records["comm"][coll]]),
                     np.concatenate([ops["bytes"][done], records["bytes"][coll]]))
