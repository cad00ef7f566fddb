"""Message-size histograms per MPI function and communicator, in powers of two (mpiP -y, TAU).

A point-to-point message counts once under the function that posted it on each side: a send
under MPI_Send/Isend/... with the bytes sent, a receive under MPI_Recv/Irecv/... with the bytes
its status says arrived (match/p2p.py's operations).  A collective call counts once per member
under its function with the bytes the member passed (the shim's ``bytes``, as in ranks.csv's
bytes_collective).

Bins: 0 bytes is a bin of its own [0, 0]; b >= 1 falls in [2**k, 2**(k+1) - 1], k = floor(log2 b).

The per-call-site twin (callsite_sizes.csv) is the same rows with one more key, the call site of
the call that posted the operation (the Isend/Irecv/Start/Send..., or the collective call): rows
carry ``site`` = trace rank * 2**16 + the shim's site id (``site_key``), a key that needs no
call-site numbering, so the traffic stage can sum them before the report stage numbers the
run's call sites (``relabelled`` then turns them into the run's ids).  Every operation has one
call site, so summed over the call sites the twin is the sizes table.
"""

import numpy as np

from mpigraph.match import p2p
from mpigraph.trace import functions as mf
from mpigraph.util import arrays
from mpigraph.traffic.matrix import int_sums


def bins(nbytes):
    """(bin_lo, bin_hi) of each size: [0, 0] for 0, else the power-of-two range holding it."""
    nbytes = np.asarray(nbytes, np.int64)
    # frexp: b = m * 2**e with 0.5 <= m < 1, so floor(log2 b) = e - 1, exact for b < 2**53.
    k = np.frexp(np.maximum(nbytes, 1).astype(np.float64))[1].astype(np.int64) - 1
    lo = np.where(nbytes > 0, np.left_shift(np.int64(1), k), 0)
    hi = np.where(nbytes > 0, np.left_shift(np.int64(1), k + 1) - 1, 0)
    return lo, hi


def histogram(func, comm, nbytes, site=None):
    """Rows (func, comm, bin_lo, bin_hi, count, bytes) of the sizes, one per non-empty bin; with
    `site` (a key per size) one per (site, func, comm, bin), with a "site" column."""
    func, comm, nbytes = (np.asarray(a, np.int64) for a in (func, comm, nbytes))
    if not len(func):
        return empty(site is not None)
    return _summed(func, comm, nbytes, None, nbytes, site)


def _summed(func, comm, size, count, nbytes, site=None):
    """Rows with the same (func, comm, bin) added up (and site, when given); `size`: a size in
    each row's bin (its bytes, or the bin's low end); `count`: each row's count (None: one each).
    The communicators (a few ids of up to 64 bits) and the sites are numbered first, so the keys
    pack into one int64 of a small span: numbered by a table over it (arrays.unique_codes), not
    sorted."""
    comms, comm_code = arrays.unique_codes(comm)
    # The bin's number, 0 for 0 bytes, else floor(log2 size) + 1: frexp's exponent (frexp(0) is 0).
    k = np.frexp(np.asarray(size, np.float64))[1].astype(np.int64)      # 0..63
    key = (comm_code * (mf.MAX_ID + 1) + func) * 64 + k
    stride = len(comms) * (mf.MAX_ID + 1) * 64
    if site is not None:
        # Site major: rows come out by site, then communicator, function and bin.
        sites, site_code = arrays.unique_codes(np.asarray(site, np.int64))
        key = site_code * stride + key
    unique, inverse = arrays.unique_codes(key)
    n = len(unique)
    totals = int_sums(inverse, nbytes, n)
    bin_k = unique % 64
    lo = np.where(bin_k > 0, np.left_shift(np.int64(1), np.maximum(bin_k - 1, 0)), 0)
    counts = np.bincount(inverse, minlength=n) if count is None else int_sums(inverse, count, n)
    out = {"func": (unique // 64) % (mf.MAX_ID + 1), "comm": comms[unique % stride // 64 // (mf.MAX_ID + 1)],
           "bin_lo": lo, "bin_hi": bins(lo)[1], "count": counts, "bytes": totals}
    if site is not None:
        out["site"] = sites[unique // stride]
    return out


COLUMNS = ("func", "comm", "bin_lo", "bin_hi", "count", "bytes")
SITE_BITS = 16          # the record's site field: a rank's shim ids are below 2**16


def empty(with_site=False):
    return {name: np.zeros(0, np.int64) for name in COLUMNS + (("site",) if with_site else ())}


def concat(tables, with_site=False):
    """Tables of several ranks as one, equal bins added (`with_site`: tables with a "site" column,
    kept apart by it)."""
    tables = [t for t in tables if len(t["func"])]
    if not tables:
        return empty(with_site)
    names = COLUMNS + (("site",) if with_site else ())
    rows = {c: np.concatenate([t[c] for t in tables]) for c in names}
    return _summed(rows["func"], rows["comm"], rows["bin_lo"], rows["count"], rows["bytes"], rows.get("site"))


def site_key(rank, shim_site):
    """The key of a trace rank's shim call-site id, unique in the run: rank * 2**16 + id."""
    return (np.asarray(rank, np.int64) << SITE_BITS) + np.asarray(shim_site, np.int64)


def relabelled(table, run_ids):
    """A site-keyed table (``site_key`` keys) with the keys replaced by `run_ids(ranks, shim ids)`
    (callsites.stats.Sites.any_rank_ids: the run's call-site ids) and equal rows added."""
    key = np.asarray(table["site"], np.int64)
    ids = run_ids(key >> SITE_BITS, key & ((1 << SITE_BITS) - 1))
    return _summed(table["func"], table["comm"], table["bin_lo"], table["count"], table["bytes"], ids)


def p2p_sizes(ops, site=None):
    """The histogram rows of an operation table (match.p2p.OP_DTYPES): each send, and each
    receive that completed (one never completed has no size yet: its status never came).
    `site`: each operation's site key (``p2p_sites``): rows per call site too."""
    done = (ops["side"] == p2p.SEND_SIDE) | (ops["done_call"] >= 0)
    return histogram(ops["func"][done], ops["comm"][done], ops["bytes"][done],
                     None if site is None else site[done])


def p2p_sites(ops):
    """The site key of each operation of an operation table: that of the record that posted it
    (its "site": a part record has its call's site, csrc/shim.h)."""
    return site_key(ops["rank"], ops["site"])


def collective_sizes(calls, by_site=False):
    """The histogram rows of a batch's collective calls (matrix.collective_calls: the ones that
    move message data; Barrier and the window/file pseudo-collectives do not) with a sequence
    number; `by_site`: per call site too (site keys of ``site_key``)."""
    numbered = calls["seq"] > 0
    site = site_key(calls["rank"][numbered], calls["site"][numbered]) if by_site else None
    return histogram(calls["func"][numbered], calls["comm"][numbered], calls["bytes"][numbered], site)
