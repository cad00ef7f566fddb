"""The latest of several releasing calls, looked up by key across analysis ranks.

Neighbourhood collectives (match/neighbors.py) and one-sided epochs (match/rma.py) release a
call when the last of a few known partners arrived: not the whole communicator, so the
instance partials of collectives.py do not apply.  Both say it as two tables:

    have  (k0, k1, k2, k3, rank, call, start)   a partner's arrival, its key unique in the run
    want  (k0, k1, k2, k3, row)                 "row waits for the partner with this key"

Both travel to the analysis rank chosen by a hash of the key (the same on every rank), meet
there (a sorted search, no loop), and each want row's partner (rank, call, start) travels
back to the analysis rank that asked; there every row keeps its latest partner (the last
among equal starts, as collectives.py's last arriver).  A key without a partner releases
nothing (-1).
"""

import numpy as np

from mpigraph.match.core import packed_keys, route

KEYS = ("k0", "k1", "k2", "k3")
_HAVE = KEYS + ("rank", "call", "start")
_WANT = KEYS + ("row", "src")


def key_owner(columns, n_owners):
    """Analysis rank of each row's key: a multiplicative hash of the four key columns."""
    h = np.zeros(len(columns["k0"]), np.uint64)
    with np.errstate(over="ignore"):
        for name in KEYS:
            h = h * np.uint64(0x9E3779B97F4A7C15) + columns[name].astype(np.int64).view(np.uint64)
        h ^= h >> np.uint64(29)
    return (h % np.uint64(n_owners)).astype(np.int64)


def _as_int64(columns, names, n):
    return {name: np.asarray(columns.get(name, np.zeros(n)), np.int64) for name in names}


def _join(have, want):
    """Per want row: the index of the have row with its key, -1 where none."""
    if not len(want["k0"]) or not len(have["k0"]):
        return np.full(len(want["k0"]), -1, np.int64)
    kh, kw = packed_keys([[have[k] for k in KEYS], [want[k] for k in KEYS]]) or (None, None)
    if kh is None:              # keys too wide to pack: rank the rows together
        rows = np.concatenate([np.stack([have[k] for k in KEYS], 1), np.stack([want[k] for k in KEYS], 1)])
        code = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
        kh, kw = code[:len(have["k0"])], code[len(have["k0"]):]
    order = np.argsort(kh, kind="stable")
    at = np.minimum(np.searchsorted(kh[order], kw), len(kh) - 1)
    found = kh[order][at] == kw
    return np.where(found, order[at], -1)


def latest(comm, have, want, n_rows, codec=None):
    """(release_rank, release_call, release_start) per asking row 0..n_rows-1 of this analysis
    rank: the latest-starting partner among its want rows' keys (-1 where it has none)."""
    me, size = comm.Get_rank(), comm.Get_size()
    have = _as_int64(have, _HAVE, len(have["k0"]))
    want = dict(_as_int64(want, KEYS + ("row",), len(want["k0"])), src=np.full(len(want["k0"]), me, np.int64))
    if size > 1:
        have = route(comm, have, key_owner(have, size), codec)
        want = route(comm, want, key_owner(want, size), codec)
    at = _join(have, want)
    hit = at >= 0
    reply = {"row": want["row"][hit], "src": want["src"][hit]}
    reply.update({name: have[name][at[hit]] for name in ("rank", "call", "start")})
    if size > 1:
        reply = route(comm, reply, reply["src"], codec)
    out = tuple(np.full(n_rows, -1, np.int64) for _ in range(3))
    if len(reply["row"]):
        # The latest partner per row: sorted by (row, start, rank), the last of each row wins.
        order = np.lexsort((reply["rank"], reply["start"], reply["row"]))
        row = reply["row"][order]
        last = order[np.r_[row[1:] != row[:-1], True]]
        for column, name in zip(out, ("rank", "call", "start")):
            column[reply["row"][last]] = reply[name][last]
    return out
