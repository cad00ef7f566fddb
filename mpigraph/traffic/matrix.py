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


def concat(tables, summed_already=True):
    """The tables as one, equal rows added (``summed``); `summed_already`: each table's rows are
    distinct and in order (a lone table is then its own sum)."""
    tables = [t for t in tables if len(t["src"])]
    if not tables:
        return empty()
    if len(tables) == 1 and summed_already:
        return tables[0]
    return summed(*(np.concatenate([t[c] for t in tables]) for c in ("src", "dst", "kind", "messages", "bytes")))


def p2p_pairs(messages):
    """The matched messages' (sender, receiver) sums: one message each, the bytes received."""
    n = len(messages["s_rank"])
    return summed(messages["s_rank"], messages["r_rank"], np.full(n, P2P), np.ones(n, np.int64), messages["bytes"])


def collective_calls(batch):
    """The columns the tables read of the collective calls that move message data (a RULE_CODE;
    not a part record, not failed) of a batch of owned ranks (match.core.CallBatch): per call
    its rank's "position" in the batch and trace "rank", "func", "rule", "comm", "root", "bytes",
    "site", "seq"; "ranks": the batch's trace ranks."""
    flags, func = batch.flags, batch.func
    rows = np.flatnonzero(((flags & (record.PART | record.ERROR)) == 0) & (RULE_CODE[func] >= 0))
    records = batch.records_at(rows)
    position = batch.positions(rows)
    return {"position": position, "rank": batch.ranks[position], "func": func[rows],
            "rule": RULE_CODE[func[rows]].astype(np.int64), "comm": records["comm"],
            "root": records["root"].astype(np.int64), "bytes": records["bytes"], "site": records["site"],
            "seq": records["seq"], "ranks": batch.ranks}


def collective_pairs(calls):
    """The pairs of a batch's collective calls (``collective_calls``) that need no communicator's
    members, by the rules of the module doc, summed: the rooted ones, and a row per rank of its
    unpaired calls.  The spreading calls are ``spreading``'s, then ``spread_pairs``'."""
    rank, rule, root, nbytes = calls["rank"], calls["rule"], calls["root"], calls["bytes"]
    parts = [_unpaired(calls, rule == RULES.index("unpaired"))]
    # The rooted pairs only where the batch has calls of them: most programs' collectives are
    # reductions (unpaired), and their steps would cost more than the rows.
    rooted = _ROOTED[rule] & (root >= 0) & (root != rank)
    if rooted.any():
        to_root = rule[rooted] == RULES.index("to_root")
        member, the_root = rank[rooted], root[rooted]
        parts.append(summed(np.where(to_root, member, the_root), np.where(to_root, the_root, member),
                            np.full(len(member), COLLECTIVE), 1, nbytes[rooted]))
    return concat(parts)


def _unpaired(calls, unpaired):
    """The unpaired calls' rows, one per rank of the batch that has some: (rank, NO_PEER), its
    calls and their bytes.  Added up per rank here, by the rank's position in the batch, not by a
    sort among all the pairs: a reduction-only program has a call per row."""
    position, n_ranks = calls["position"][unpaired], len(calls["ranks"])
    counts = np.bincount(position, minlength=n_ranks)
    has = np.flatnonzero(counts)
    return summed(calls["ranks"][has], np.full(len(has), NO_PEER), np.full(len(has), COLLECTIVE), counts[has],
                  int_sums(position, calls["bytes"][unpaired], n_ranks)[has])


SPREADING_COLUMNS = ("rank", "comm", "rule", "calls", "bytes")


def spreading(calls):
    """A batch's spreading calls (scatter from its root, to_all, exchange: ``collective_calls``)
    summed per (rank, comm, rule): {SPREADING_COLUMNS}, a few rows per rank.  Each goes to every
    other member of its communicator (``spread_pairs``), so the pairs are the members of the few
    communicators per rank, not calls x members; and these rows, not the calls, wait for the
    run's communicators, which the stage gathers once it has read all its batches."""
    rank, rule, root = calls["rank"], calls["rule"], calls["root"]
    spread = np.flatnonzero(_SPREAD[rule] & ((rule != RULES.index("scatter")) | (root == rank)))
    if not len(spread):
        return {name: np.zeros(0, np.int64) for name in SPREADING_COLUMNS}
    position, comm, rule = calls["position"][spread], calls["comm"][spread], rule[spread]
    comms, comm_code = arrays.unique_codes(comm)
    keys, group = arrays.unique_codes((position * len(comms) + comm_code) * len(RULES) + rule)
    return {"rank": calls["ranks"][keys // len(RULES) // len(comms)], "comm": comms[keys // len(RULES) % len(comms)],
            "rule": keys % len(RULES), "calls": np.bincount(group, minlength=len(keys)).astype(np.int64),
            "bytes": int_sums(group, calls["bytes"][spread], len(keys))}


def spread_pairs(groups, communicators):
    """The pair rows of spreading groups (``spreading``'s rows, of any ranks), not yet summed
    (``concat(..., summed_already=False)`` adds them up with the other tables, one sort for all
    the rows: the members of a world-wide Allgather are ranks x ranks rows): each group's calls
    from its rank to each other member of its communicator (to_all: its bytes, scatter and
    exchange: its bytes / n); a group of a communicator whose members are unknown keeps its calls
    and bytes its rank's, unpaired (dst NO_PEER)."""
    groups = {name: np.concatenate([g[name] for g in groups]) for name in SPREADING_COLUMNS} if groups else {}
    if not groups or not len(groups["rank"]):
        return empty()
    comms, comm_code = arrays.unique_codes(groups["comm"])
    members = [communicators.members(c) for c in comms.tolist()]
    lost = np.array([m is None for m in members])[comm_code]
    members = [np.zeros(0, np.int64) if m is None else np.asarray(m, np.int64) for m in members]
    member_list, _, member_first = arrays.stacked(members, np.int64)
    size = np.array([len(m) for m in members], np.int64)[comm_code]
    totals = groups["bytes"]
    shares = np.where(groups["rule"] == RULES.index("to_all"), totals, totals // np.maximum(size, 1))
    # A row per (group, member of its communicator), then the rank's own part left out.
    src = np.repeat(groups["rank"], size)
    dst = member_list[arrays.ranges(member_first[comm_code], member_first[comm_code] + size - 1)]
    other = dst != src
    src = np.concatenate([src[other], groups["rank"][lost]])
    dst = np.concatenate([dst[other], np.full(int(lost.sum()), NO_PEER)])
    return {"src": src, "dst": dst, "kind": np.full(len(src), COLLECTIVE),
            "messages": np.concatenate([np.repeat(groups["calls"], size)[other], groups["calls"][lost]]),
            "bytes": np.concatenate([np.repeat(shares, size)[other], totals[lost]])}


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
