"""Moving columnar batches between analysis ranks (mpi4py, buffers, never pickles).

Three layers, each usable on its own:

``exchange(comm, batches_by_dest, codec)``
    every rank hands one batch (or None) per destination and gets back the
    batches addressed to it, by source.  The sizes go first in one Alltoall;
    then rounds k = 1..K-1 in which rank r sends to (r+k) % K and receives from
    (r-k) % K, so no rank is hammered by all the others at once.  Empty pairs
    post no request at all.  ``order="naive"`` is the baseline of seed 004:
    everyone sends to rank 0, then everyone to rank 1, ...

``balanced_partition(comm, keys, sample_size)``
    a destination per row so that every rank receives about the same number
    of rows (by count, not by key range) and rank i's keys all come before
    rank i+1's.  Ties are broken by (source rank, position), so even a column
    of equal keys spreads evenly.

``shuffle_by_key(comm, columns, key, codec)``
    partition + exchange + merge: rank i ends up with a contiguous, sorted
    run of the global order by key, runs increasing with i.

``gather(comm, columns, root, codec)`` sends everything to one rank (for the
sequential algorithms) and ``split_by_dest`` groups rows by any destination
array (matching sends by a hash of their key, for instance).

``RootPull`` / ``serve_root`` stream every rank's rows to one rank a chunk at
a time, each chunk sent when that rank asks for it: for a table it writes out
and must never hold whole (the report's calls table).  Their rows come as an
iterable of chunks (``row_chunks`` cuts columns already in memory), so a rank
may also make each chunk only when it is its turn.

Every rank of `comm` must call these functions together, with columns of the
same names and dtypes (an empty rank passes zero-length arrays).
"""

import dataclasses
import time

import numpy as np
from mpi4py import MPI

from mpigraph.comm.codec import Codec, CodecError, decode
from mpigraph.comm import meter
from mpigraph.comm.parallel import wait_idly
from mpigraph.util import arrays

ORDERS = ("rounds", "naive")
TAG = 0x6D67                    # "mg": our point-to-point messages on the analysis comm
PULL_TAG = TAG + 1              # RootPull's asks and answers
DEFAULT_SAMPLE_SIZE = 1024      # per rank; see balance_bound


# ---------------------------------------------------------------------------
# Statistics.

@dataclasses.dataclass
class ShuffleStats:
    """One rank's share of one shuffle (bytes and rows it sent, kept, received; seconds)."""

    rows_kept: int = 0            # rows whose destination was this rank: never encoded
    rows_sent: int = 0
    rows_received: int = 0
    raw_bytes_sent: int = 0       # column bytes of the sent rows, before encoding
    wire_bytes_sent: int = 0      # encoded bytes of the sent batches
    wire_bytes_received: int = 0
    messages_sent: int = 0
    partition_seconds: float = 0.0
    encode_seconds: float = 0.0
    exchange_seconds: float = 0.0
    decode_seconds: float = 0.0
    merge_seconds: float = 0.0

    @property
    def rows_before(self):
        return self.rows_kept + self.rows_sent

    @property
    def rows_after(self):
        return self.rows_kept + self.rows_received

    @property
    def seconds(self):
        return (self.partition_seconds + self.encode_seconds + self.exchange_seconds
                + self.decode_seconds + self.merge_seconds)


_FIELDS = [f.name for f in dataclasses.fields(ShuffleStats)]


@dataclasses.dataclass
class ShuffleSummary:
    """A shuffle over all ranks: what the report prints.  Built by `summarize`."""

    per_rank: list                # ShuffleStats of every rank, by rank

    @property
    def ranks(self):
        return len(self.per_rank)

    def total(self, field):
        return sum(getattr(s, field) for s in self.per_rank)

    def slowest(self, field="seconds"):
        return max(getattr(s, field) for s in self.per_rank)

    @property
    def rows_per_rank(self):
        return [s.rows_after for s in self.per_rank]

    @property
    def compression_ratio(self):
        """Raw column bytes over encoded bytes of everything that crossed the network."""
        wire = self.total("wire_bytes_sent")
        return self.total("raw_bytes_sent") / wire if wire else 1.0

    @property
    def imbalance(self):
        """Most rows on one rank over the mean (1.0 = perfect balance)."""
        rows = self.rows_per_rank
        mean = sum(rows) / len(rows)
        return max(rows) / mean if mean else 1.0

    def format(self):
        rows = self.rows_per_rank
        return "\n".join([
            "shuffle over %d ranks: %d rows, %d sent in %d messages"
            % (self.ranks, sum(rows), self.total("rows_sent"), self.total("messages_sent")),
            "  bytes: %d raw, %d on the wire (%.1fx smaller)"
            % (self.total("raw_bytes_sent"), self.total("wire_bytes_sent"), self.compression_ratio),
            "  seconds (slowest rank): %.4f total; partition %.4f, encode %.4f, exchange %.4f, "
            "decode %.4f, merge %.4f" % tuple(self.slowest(f) for f in (
                "seconds", "partition_seconds", "encode_seconds", "exchange_seconds",
                "decode_seconds", "merge_seconds")),
            "  rows per rank: min %d, max %d, max/mean %.3f" % (min(rows), max(rows), self.imbalance),
        ])


def summarize(comm, stats):
    """The ShuffleSummary of every rank's `stats` (collective: one small Allgather)."""
    mine = np.array([getattr(stats, f) for f in _FIELDS], np.float64)
    everyone = np.empty((comm.Get_size(), len(_FIELDS)), np.float64)
    comm.Allgather(mine, everyone)
    types = [type(getattr(ShuffleStats(), f)) for f in _FIELDS]
    return ShuffleSummary([ShuffleStats(**{f: t(v) for f, t, v in zip(_FIELDS, types, row)})
                           for row in everyone])


# ---------------------------------------------------------------------------
# Batches as column dicts.

def batch_rows(batch):
    """Row count of a batch (None counts as empty)."""
    if not batch:
        return 0
    return len(next(iter(batch.values())))


def split_by_dest(columns, dest, n_parts):
    """A list of n_parts batches: rows with dest == i, in their original order, go to batch i."""
    order, counts = arrays.grouped(dest, n_parts)      # None: often grouped already (owned-rank order)
    cuts = np.concatenate(([0], np.cumsum(counts)))
    return _slices({name: np.asarray(c) if order is None else np.asarray(c)[order] for name, c in columns.items()},
                   cuts)


def _slices(columns, cuts):
    """Batches of the rows cuts[i]:cuts[i+1] (views, no copies)."""
    return [{name: c[a:b] for name, c in columns.items()} for a, b in zip(cuts[:-1], cuts[1:])]


def concat_batches(batches, like):
    """One batch of the batches' rows in list order; `like` gives names and dtypes (and
    is the answer's schema when `batches` is empty)."""
    check_schema(batches, like)
    return {name: np.concatenate([b[name] for b in batches]) if batches
            else np.asarray(col)[:0].copy() for name, col in like.items()}


def check_schema(batches, like):
    """CodecError unless every batch has the columns and dtypes of `like`."""
    for batch in batches:
        if list(batch) != list(like) or any(batch[n].dtype != np.asarray(like[n]).dtype for n in like):
            raise CodecError("received batch has columns %s, expected %s"
                             % (_schema(batch), _schema(like)))


def _schema(batch):
    return ", ".join("%s:%s" % (n, np.asarray(c).dtype) for n, c in batch.items())


# ---------------------------------------------------------------------------
# Exchange.

def exchange(comm, batches_by_dest, codec=None, order="rounds"):
    """Send batches_by_dest[d] to rank d for every d; returns ({source: batch}, ShuffleStats).

    `batches_by_dest` is a list of K batches (dicts of columns, or None), or a
    dict {dest: batch}.  Empty batches are not sent and sources that sent
    nothing are absent from the answer; this rank's own batch is handed over
    without encoding.  `codec` defaults to Codec() (compressed).  A batch is let
    go once it is encoded: a caller that holds no other reference to it (say, it
    passes a generator) gets that memory back before the receives.
    """
    if order not in ORDERS:
        raise ValueError("order must be one of %s, got %r" % (", ".join(ORDERS), order))
    codec = codec or Codec()
    rank, size = comm.Get_rank(), comm.Get_size()
    batches = _by_dest(batches_by_dest, size)
    stats = ShuffleStats()

    t = time.perf_counter()
    own = batches[rank]
    outgoing = _encode_outgoing(batches, rank, codec, stats)
    stats.encode_seconds = time.perf_counter() - t

    t = time.perf_counter()
    send_sizes = np.array([len(outgoing.get(d, b"")) for d in range(size)], np.int64)
    recv_sizes = np.empty(size, np.int64)
    wait_idly(comm.Ialltoall(send_sizes, recv_sizes))     # a rank done early waits without spinning
    meter.count(send_sizes.sum(), recv_sizes.sum())     # own batch: never encoded, size 0 here
    plan = _rounds if order == "rounds" else _naive
    received = plan(comm, outgoing, recv_sizes)
    stats.exchange_seconds = time.perf_counter() - t

    t = time.perf_counter()
    result = _decode_incoming(received, stats)
    if batch_rows(own):
        result[rank] = own
        stats.rows_kept = batch_rows(own)
    stats.decode_seconds = time.perf_counter() - t
    return dict(sorted(result.items())), stats


def _by_dest(batches_by_dest, size):
    if isinstance(batches_by_dest, dict):
        if any(not 0 <= d < size for d in batches_by_dest):
            raise ValueError("destinations must be ranks 0..%d, got %s" % (size - 1, sorted(batches_by_dest)))
        return [batches_by_dest.get(d) for d in range(size)]
    batches = list(batches_by_dest)
    if len(batches) != size:
        raise ValueError("need one batch per rank (%d), got %d" % (size, len(batches)))
    return batches


def _encode_outgoing(batches, rank, codec, stats):
    outgoing = {}
    for dest, batch in enumerate(batches):
        rows = batch_rows(batch)
        if dest == rank or not rows:
            continue
        outgoing[dest] = codec.encode(batch)
        stats.rows_sent += rows
        stats.raw_bytes_sent += sum(np.asarray(c).nbytes for c in batch.values())
        stats.wire_bytes_sent += len(outgoing[dest])
        stats.messages_sent += 1
        batches[dest] = batch = None
    return outgoing


def _post(comm, outgoing, recv_sizes, received, dest, source, requests):
    """Post the receive from `source` and the send to `dest` of one round, if not empty."""
    if source is not None and recv_sizes[source]:
        received[source] = np.empty(recv_sizes[source], np.uint8)
        requests.append(comm.Irecv([received[source], MPI.BYTE], source, TAG))
    if dest is not None and dest in outgoing:
        requests.append(comm.Isend([outgoing[dest], MPI.BYTE], dest, TAG))


def _rounds(comm, outgoing, recv_sizes):
    """Round k: send to r+k, receive from r-k; each round completes before the next."""
    rank, size = comm.Get_rank(), comm.Get_size()
    received = {}
    for k in range(1, size):
        requests = []
        _post(comm, outgoing, recv_sizes, received, (rank + k) % size, (rank - k) % size, requests)
        if requests:
            MPI.Request.Waitall(requests)
    return received


def _naive(comm, outgoing, recv_sizes):
    """Round k: everyone sends to rank k (seed 004's first version, kept to compare)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    received = {}
    for k in range(size):
        requests = []
        if rank == k:
            for source in range(size):
                if source != rank:
                    _post(comm, outgoing, recv_sizes, received, None, source, requests)
        else:
            _post(comm, outgoing, recv_sizes, received, k, None, requests)
        if requests:
            MPI.Request.Waitall(requests)
    return received


def _decode_incoming(received, stats):
    result = {}
    for source, buf in sorted(received.items()):
        try:
            result[source] = decode(buf)
        except CodecError as e:
            raise CodecError("batch from rank %d: %s" % (source, e)) from None
        stats.wire_bytes_received += len(buf)
        stats.rows_received += batch_rows(result[source])
    return result


# ---------------------------------------------------------------------------
# Balanced partition by key.

def regular_sample(sorted_keys, sample_size):
    """Positions of `sample_size` evenly spaced rows of a sorted array (all rows if fewer),
    each in the middle of the block of rows it stands for."""
    n = len(sorted_keys)
    if n <= sample_size:
        return np.arange(n, dtype=np.int64)
    return ((np.arange(sample_size) + 0.5) * (n / sample_size)).astype(np.int64)


def choose_splitters(keys, ranks, positions, weights, n_parts):
    """The first row of each part 1..n_parts-1, as (key, rank, position) arrays.

    The samples of all ranks, each standing for `weights` rows of its rank,
    are put in global order (key, rank, position).  The rows before a sample
    are estimated as: its own position on its rank (exact) plus the weight of
    the other ranks' samples before it.  Splitter i is the sample whose
    estimate is nearest to i/n_parts of all rows (when every row is a sample,
    the estimates are exact and so is the split).
    """
    if not len(keys):           # no rows anywhere: every part starts at row 0
        zeros = np.zeros(n_parts - 1, np.int64)
        return np.zeros(n_parts - 1, keys.dtype), zeros, zeros
    order = np.lexsort((positions, ranks, keys))
    w, r = weights[order], ranks[order]
    before = np.cumsum(w) - w                                 # all samples' weight before
    own_before = _count_within_group(r) * w                   # this rank's samples' weight before
    estimate = positions[order] + before - own_before
    # The estimate can step back by under a row where the rank changes; the
    # running maximum keeps it sorted for searchsorted.
    estimate = np.maximum.accumulate(estimate)
    targets = weights.sum() * np.arange(1, n_parts) / n_parts
    above = np.clip(np.searchsorted(estimate, targets), 0, len(w) - 1)
    below = np.clip(above - 1, 0, len(w) - 1)
    nearest = np.where(np.abs(estimate[below] - targets) <= np.abs(estimate[above] - targets), below, above)
    chosen = order[nearest]
    return keys[chosen], ranks[chosen], positions[chosen]


def _count_within_group(groups):
    """For each element, how many earlier elements have the same group: [5,3,5,5] -> [0,0,1,2]."""
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.searchsorted(sorted_groups, sorted_groups, "left")
    counts = np.empty(len(groups), np.int64)
    counts[order] = np.arange(len(groups)) - starts
    return counts


def cut_points(sorted_keys, rank, splitters):
    """Where the parts start in this rank's sorted keys: n_parts + 1 row indices.

    A row (k, rank, p) belongs to part i or later if it is not before splitter
    i = (sk, sr, sp) in (key, rank, position) order.
    """
    split_keys, split_ranks, split_pos = splitters
    left = np.searchsorted(sorted_keys, split_keys, "left")      # rows with key < sk
    right = np.searchsorted(sorted_keys, split_keys, "right")    # rows with key <= sk
    cuts = np.where(split_ranks > rank, right, np.where(split_ranks < rank, left, split_pos))
    return np.concatenate(([0], cuts, [len(sorted_keys)])).astype(np.int64)


def _allgather_sample(comm, sorted_keys, sample_size):
    """Every rank's sample: (keys, ranks, positions, weights), the same on all ranks."""
    size = comm.Get_size()
    dtypes = comm.allgather(sorted_keys.dtype.str)       # a few bytes; a clear error beats garbage
    if len(set(dtypes)) > 1:
        raise TypeError("key dtypes differ between ranks: %s" % dtypes)
    positions = regular_sample(sorted_keys, sample_size)
    counts = np.empty((size, 2), np.int64)
    comm.Allgather(np.array([len(sorted_keys), len(positions)], np.int64), counts)
    n_rows, n_samples = counts[:, 0], counts[:, 1]
    all_positions = np.empty(n_samples.sum(), np.int64)
    comm.Allgatherv(positions, [all_positions, n_samples])
    all_keys = np.empty(n_samples.sum(), sorted_keys.dtype)
    itemsize = sorted_keys.dtype.itemsize
    comm.Allgatherv(np.ascontiguousarray(sorted_keys[positions]).view(np.uint8),
                    [all_keys.view(np.uint8), n_samples * itemsize, MPI.BYTE])
    ranks = np.repeat(np.arange(size), n_samples)
    weights = np.repeat(n_rows / np.maximum(n_samples, 1), n_samples)
    return all_keys, ranks, all_positions, weights


def _partition(comm, keys, sample_size):
    """(stable sort order of keys, cut points of the K parts in that order)."""
    keys = np.asarray(keys)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    sample = _allgather_sample(comm, sorted_keys, sample_size)
    splitters = choose_splitters(*sample, comm.Get_size())
    return order, cut_points(sorted_keys, comm.Get_rank(), splitters)


def balanced_partition(comm, keys, sample_size=DEFAULT_SAMPLE_SIZE):
    """The destination rank of each row: about equal row counts, key ranges increasing
    with rank (each rank gets within `balance_bound` rows of the mean)."""
    order, cuts = _partition(comm, keys, sample_size)
    dest = np.empty(len(order), np.int64)
    dest[order] = np.repeat(np.arange(comm.Get_size()), np.diff(cuts))
    return dest


def balance_bound(total_rows, n_parts, sample_size):
    """Most a part's row count can differ from total_rows / n_parts (a proven bound).

    A sample stands for w_q = n_q / sample_size rows of its rank q.  For a
    splitter, its own rank's rows before it are known exactly; another rank's
    are estimated within w_q / 2 + 1, so the estimate is within
    E = total_rows / (2 sample_size) + n_parts of the truth.  Between two
    consecutive samples lie at most total_rows / sample_size + n_parts rows,
    so the nearest sample to a target is within half of that plus E.  A
    splitter is thus within 1.5 total_rows / sample_size + 2.5 n_parts rows
    of its target, and a part, bounded by two splitters, within twice that.
    """
    return 3 * total_rows / sample_size + 5 * n_parts


def shuffle_by_key(comm, columns, key, codec=None, sample_size=DEFAULT_SAMPLE_SIZE, order="rounds"):
    """Redistribute rows so rank i holds the i-th run of the global (key, rank, position)
    order, sorted, with about equal counts; returns (columns, ShuffleStats)."""
    if key not in columns:
        raise KeyError("key column %r not in %s" % (key, list(columns)))
    t = time.perf_counter()
    perm, cuts = _partition(comm, columns[key], sample_size)
    # Each destination's rows are their own copy, made in a generator: exchange holds the only
    # reference and lets a batch go once it is encoded.
    batches = ({name: np.asarray(c)[perm[a:b]] for name, c in columns.items()} for a, b in zip(cuts[:-1], cuts[1:]))
    received, stats = exchange(comm, batches, codec, order)
    del perm
    # The batches are made as exchange takes them: their copying is the partition's time.
    stats.partition_seconds = time.perf_counter() - t - stats.seconds

    t = time.perf_counter()
    result = _merge_sorted_runs(list(received.values()), key, like=columns)
    stats.merge_seconds = time.perf_counter() - t
    return result, stats


def _merge_sorted_runs(runs, key, like):
    """The rows of `runs` (batches each sorted by key, in source order) in one batch sorted by key.

    A stable sort by key is then a merge and gives the (key, source, position) order.  The runs'
    columns are let go one at a time as the answer's are made: at most one column is held twice.
    """
    check_schema(runs, like)
    if not runs:
        return concat_batches([], like)
    order = np.argsort(np.concatenate([run[key] for run in runs]), kind="stable")
    return {name: np.concatenate([run.pop(name) for run in runs])[order] for name in like}


def gather(comm, columns, root=0, codec=None, order="rounds"):
    """Every rank's rows on `root`, in rank order (others get empty columns);
    returns (columns, ShuffleStats)."""
    size = comm.Get_size()
    received, stats = exchange(comm, [columns if d == root else None for d in range(size)], codec, order)
    return concat_batches(list(received.values()), like=columns), stats


# ---------------------------------------------------------------------------
# Streaming to one rank.

class RootPull:
    """On root: every rank's rows in rank order, a chunk at a time (``chunks()``), the next chunk
    asked for only once the previous one has been used; root's own are `own_chunks` (an
    iterable of column batches, taken in turn).

    The other ranks run ``serve_root`` meanwhile.  Always ``close()`` it (in a finally): it
    tells the ranks root did not drain (root stopped early, say on a full disk) to stop.
    """

    def __init__(self, comm, own_chunks, root=0):
        self.comm, self.own_chunks, self.root = comm, own_chunks, root
        self.pending = set(range(comm.Get_size())) - {root}

    def chunks(self):
        for source in range(self.comm.Get_size()):
            if source == self.root:
                yield from self.own_chunks
            while source in self.pending:
                buf = self._ask(source)
                if buf is None:
                    self.pending.discard(source)
                    break
                try:
                    yield decode(buf)
                except CodecError as e:
                    raise CodecError("chunk from rank %d: %s" % (source, e)) from None

    def _ask(self, source):
        """The next chunk of `source`, encoded; None when it has sent them all."""
        self.comm.Send([np.ones(1, np.int64), MPI.INT64_T], source, PULL_TAG)
        size = np.empty(1, np.int64)
        self.comm.Recv([size, MPI.INT64_T], source, PULL_TAG)
        if size[0] < 0:
            return None
        buf = np.empty(size[0], np.uint8)
        self.comm.Recv([buf, MPI.BYTE], source, PULL_TAG)
        meter.count(received=len(buf))
        return buf

    def close(self):
        for source in sorted(self.pending):
            self.comm.Send([np.zeros(1, np.int64), MPI.INT64_T], source, PULL_TAG)
        self.pending.clear()


def serve_root(comm, chunks, root=0, codec=None):
    """The other side of ``RootPull``: this rank's rows to root, one of `chunks` (an iterable
    of column batches) each time root asks.

    Returns when root has had them all or told it to stop.  `codec` defaults to Codec().
    """
    codec = codec or Codec()
    ask = np.empty(1, np.int64)
    for chunk in chunks:
        # Made and encoded before root asks for it: while root still uses the previous chunk.
        data = np.frombuffer(codec.encode(chunk), np.uint8)
        wait_idly(comm.Irecv([ask, MPI.INT64_T], root, PULL_TAG))
        if not ask[0]:
            return
        comm.Send([np.array([len(data)], np.int64), MPI.INT64_T], root, PULL_TAG)
        comm.Send([data, MPI.BYTE], root, PULL_TAG)
        meter.count(sent=len(data))
    wait_idly(comm.Irecv([ask, MPI.INT64_T], root, PULL_TAG))
    if ask[0]:
        comm.Send([np.full(1, -1, np.int64), MPI.INT64_T], root, PULL_TAG)     # "that was all"


def row_chunks(columns, chunk_rows):
    """Views of at most chunk_rows rows of `columns`, in order (none when there are no rows)."""
    n = batch_rows(columns)
    for start in range(0, n, chunk_rows):
        yield {name: np.asarray(c)[start:start + chunk_rows] for name, c in columns.items()}
