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
from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.util import arrays
from mpigraph.traffic.matrix import RULE_CODE, int_sums


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
    lo, _ = bins(nbytes)
    return _summed(func, comm, lo, np.ones(len(func), np.int64), nbytes)


def _summed(func, comm, lo, count, nbytes):
    """Rows with the same (func, comm, bin_lo) added up.  The communicators (a few ids of up to 64
    bits) are numbered first, so the three keys pack into one int64: one sort of integers."""
    comms, _, comm_code = arrays.unique_inverse(comm)
    k = np.where(lo > 0, np.frexp(np.maximum(lo, 1).astype(np.float64))[1], 0).astype(np.int64)   # 0..63
    key = (comm_code * (mf.MAX_ID + 1) + func) * 64 + k
    unique, _, inverse = arrays.unique_inverse(key)
    n = len(unique)
    totals = int_sums(inverse, nbytes, n)
    bin_k = unique % 64
    lo = np.where(bin_k > 0, np.left_shift(np.int64(1), np.maximum(bin_k - 1, 0)), 0)
    return {"func": (unique // 64) % (mf.MAX_ID + 1), "comm": comms[unique // 64 // (mf.MAX_ID + 1)],
            "bin_lo": lo, "bin_hi": bins(lo)[1], "count": np.bincount(inverse, count, n).astype(np.int64),
            "bytes": totals}


COLUMNS = ("func", "comm", "bin_lo", "bin_hi", "count", "bytes")


def empty():
    return {name: np.zeros(0, np.int64) for name in COLUMNS}


def concat(tables):
    """Tables of several ranks as one, equal bins added."""
    tables = [t for t in tables if len(t["func"])]
    if not tables:
        return empty()
    rows = {c: np.concatenate([t[c] for t in tables]) for c in COLUMNS}
    return _summed(rows["func"], rows["comm"], rows["bin_lo"], rows["count"], rows["bytes"])


def p2p_sizes(ops):
    """The histogram rows of an operation table (match.p2p.OP_DTYPES): each send, and each
    receive that completed (one never completed has no size yet: its status never came)."""
    done = (ops["side"] == p2p.SEND_SIDE) | (ops["done_call"] >= 0)
    return histogram(ops["func"][done], ops["comm"][done], ops["bytes"][done])


def collective_sizes(rank_calls):
    """The histogram rows of one rank's collective calls that move message data: Barrier and the
    window/file pseudo-collectives do not (matrix.RULE_CODE knows the ones that do)."""
    records = np.asarray(rank_calls.records)
    flags, func = rank_calls.field("flags"), rank_calls.field("func")
    coll = np.flatnonzero(((flags & (record.PART | record.ERROR)) == 0) & (RULE_CODE[func] >= 0)
                          & (records["seq"] > 0))
    return histogram(func[coll], records["comm"][coll], records["bytes"][coll])
