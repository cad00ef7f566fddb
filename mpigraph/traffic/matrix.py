"""The communication matrix: rank x rank messages and bytes.

Point-to-point: every matched message (match/p2p.py's ``messages``, on the owner of its
receiver) is one message from its sender to its receiver of the bytes the receiver got.

Collectives are apportioned by what the MPI standard says moves where, never by how an MPI
library implements it (no tree or ring is assumed).  From the record of the member that knows
the size (docs/concepts.md, "The communication matrix"):

  rule        functions (and their I-twins)   pairs (one message each per call)
  to_root     Gather, Gatherv, Reduce          each non-root member -> root: its bytes
  from_root   Bcast                            root -> each non-root member: the member's bytes
  scatter     Scatter                          root -> each other member: root's bytes / n
  to_all      Allgather, Allgatherv            each member -> each other member: its bytes
  exchange    Alltoall                         each member -> each other member: its bytes / n
  unpaired    Allreduce, Reduce_scatter(_block), Scan, Exscan, Scatterv, Alltoallv, Alltoallw
                                               no pairs: a row (rank, dst -1) of the bytes passed
  ignored     Barrier (no data), neighbourhood collectives and file/window collectives

A reduction has no sender-receiver pairs without an algorithm (who adds what where is the
library's choice); Scatterv and Alltoall(v/w) have per-member counts the shim does not keep
(only their sum).  The root's own block and a member's own part of an exchange move no message.
"""

import numpy as np

from mpigraph.trace import functions as mf
from mpigraph.trace import record
from mpigraph.util import arrays

KINDS = ("p2p", "collective")
P2P, COLLECTIVE = 0, 1
NO_PEER = -1                   # dst of a collective's unpaired bytes

_RULE_OF_BASE = {"gather": "to_root", "gatherv": "to_root", "reduce": "to_root", "bcast": "from_root",
                 "scatter": "scatter", "allgather": "to_all", "allgatherv": "to_all", "alltoall": "exchange",
                 "allreduce": "unpaired", "reduce_scatter": "unpaired", "reduce_scatter_block": "unpaired",
                 "scan": "unpaired", "exscan": "unpaired", "scatterv": "unpaired", "alltoallv": "unpaired",
                 "alltoallw": "unpaired"}
RULES = ("to_root", "from_root", "scatter", "to_all", "exchange", "unpaired")


def _base(f):
    """A collective's blocking name, lower case: MPI_Ibcast -> bcast."""
    name = f.name[len("MPI_"):].lower()
    return name[1:] if f.nonblocking and name.startswith("i") else name


def _rule_codes():
    """rule code (index into RULES, -1: none) per function id."""
    codes = np.full(mf.MAX_ID + 1, -1, np.int8)
    for f in mf.FUNCTIONS:
        if f.kind in (mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN) and _base(f) in _RULE_OF_BASE:
            codes[f.id] = RULES.index(_RULE_OF_BASE[_base(f)])
    return codes


RULE_CODE = _rule_codes()
# Per rule code: the rooted rules (a pair with the root), the spreading ones (pairs with every other member).
_ROOTED = np.isin(np.arange(len(RULES)), [RULES.index("to_root"), RULES.index("from_root")])
_SPREAD = np.isin(np.arange(len(RULES)), [RULES.index(r) for r in ("scatter", "to_all", "exchange")])
RULE_NAMES = {f.name: _RULE_OF_BASE[_base(f)] for f in mf.FUNCTIONS if RULE_CODE[f.id] >= 0}


def summed(src, dst, kind, messages, nbytes):
    """Rows with the same (src, dst, kind) added up, in (src, dst, kind) order.

    The three keys are packed into one int64, (src + 1, dst + 1, kind) in 31, 30 and 2 bits (ranks
    below 2**29): one sort of integers, where np.unique(axis=1) sorts rows as byte strings."""
    src, dst, kind = (np.asarray(a, np.int64) for a in (src, dst, kind))
    if not len(src):
        return empty()
    key = (((src + 1) << 32) | ((dst + 1) << 2)) | kind
    unique, _, inverse = arrays.unique_inverse(key)
    n = len(unique)
    return {"src": (unique >> 32) - 1, "dst": ((unique >> 2) & ((1 << 30) - 1)) - 1, "kind": unique & 3,
            "messages": int_sums(inverse, messages, n), "bytes": int_sums(inverse, nbytes, n)}


def int_sums(inverse, values, n):
    """Exact int64 sums per group (bincount's float64 loses bytes past 2**53)."""
    values = np.broadcast_to(np.asarray(values, np.int64), inverse.shape)
    if len(values) and int(values.max(initial=0)) * len(values) < 2**53:
        return np.bincount(inverse, values, n).astype(np.int64)    # exact below 2**53, and fast
    sums = np.zeros(n, np.int64)
    np.add.at(sums, inverse, values)
    return sums


def empty():
    return {name: np.zeros(0, np.int64) for name in ("src", "dst", "kind", "messages", "bytes")}


def concat(tables):
    tables = [t for t in tables if len(t["src"])]
    if not tables:
        return empty()
    if len(tables) == 1:        # summed already: its rows are distinct and in order
        return tables[0]
    return summed(*(np.concatenate([t[c] for t in tables]) for c in ("src", "dst", "kind", "messages", "bytes")))


def p2p_pairs(messages):
    """The matched messages' (sender, receiver) sums: one message each, the bytes received."""
    n = len(messages["s_rank"])
    return summed(messages["s_rank"], messages["r_rank"], np.full(n, P2P), np.ones(n, np.int64), messages["bytes"])


def collective_pairs(rank_calls, communicators):
    """One rank's collective calls apportioned by the rules of the module doc."""
    records = np.asarray(rank_calls.records)
    flags, func = rank_calls.field("flags"), rank_calls.field("func")
    rows = np.flatnonzero(((flags & (record.PART | record.ERROR)) == 0) & (RULE_CODE[func] >= 0))
    rank = rank_calls.rank
    rule = RULE_CODE[func[rows]].astype(np.int64)
    comm, root, nbytes = records["comm"][rows], records["root"][rows].astype(np.int64), records["bytes"][rows]
    parts = []
    # Each kind of pair only where the rank has calls of it: most programs' collectives are
    # reductions (unpaired), and the steps of the others cost a rank more than its rows.
    rooted = _ROOTED[rule] & (root >= 0) & (root != rank)
    if rooted.any():
        to_root = rooted & (rule == RULES.index("to_root"))
        parts.append(summed(np.where(to_root, rank, root)[rooted], np.where(to_root, root, rank)[rooted],
                            np.full(rooted.sum(), COLLECTIVE), np.ones(rooted.sum()), nbytes[rooted]))
    unpaired = rule == RULES.index("unpaired")
    spread = _SPREAD[rule] & ((rule != RULES.index("scatter")) | (root == rank))
    spread_parts, lost = (_spread_pairs(rank, comm[spread], rule[spread], nbytes[spread], communicators)
                          if spread.any() else ([], []))
    parts += spread_parts
    n_unpaired = int(unpaired.sum()) + sum(n for n, _ in lost)
    unpaired_bytes = int(nbytes[unpaired].sum()) + sum(b for _, b in lost)
    if n_unpaired:
        parts.append(summed([rank], [NO_PEER], [COLLECTIVE], [n_unpaired], [unpaired_bytes]))
    return concat(parts)


def _spread_pairs(rank, comm, rule, nbytes, communicators):
    """(pair tables, lost) of one rank's spreading calls (scatter from it, to_all, exchange): lost
    holds the (calls, bytes) of each communicator whose members are unknown."""
    # Each spreading call goes to every other member of its communicator: summed per (comm, rule)
    # first, so the rows are the members of the few communicators, not calls x members.
    keys, inverse = np.unique(np.stack([comm, rule]), axis=1, return_inverse=True)
    inverse = inverse.ravel()
    calls = np.bincount(inverse, minlength=keys.shape[1])
    sums = int_sums(inverse, nbytes, keys.shape[1])
    parts, lost = [], []
    for (c, r), n_calls, total in zip(keys.T.tolist(), calls.tolist(), sums.tolist()):
        members = communicators.members(c)
        if members is None:        # members unknown: its bytes stay the rank's, unpaired
            lost.append((n_calls, total))
            continue
        others = members[members != rank]
        share = total if r == RULES.index("to_all") else total // max(len(members), 1)
        parts.append(summed(np.full(len(others), rank), others, np.full(len(others), COLLECTIVE),
                            np.full(len(others), n_calls), np.full(len(others), share)))
    return parts, lost


def dense(table, world_size, kind=None):
    """(messages, bytes) world_size x world_size arrays of the pairs (unpaired rows left out)."""
    pick = table["dst"] >= 0
    if kind is not None:
        pick &= table["kind"] == KINDS.index(kind)
    messages = np.zeros((world_size, world_size), np.int64)
    nbytes = np.zeros((world_size, world_size), np.int64)
    np.add.at(messages, (table["src"][pick], table["dst"][pick]), table["messages"][pick])
    np.add.at(nbytes, (table["src"][pick], table["dst"][pick]), table["bytes"][pick])
    return messages, nbytes
