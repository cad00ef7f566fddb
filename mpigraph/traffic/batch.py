"""The owned trace ranks a batch at a time: their records' func and flags end to end.

The traffic tables are sums over the records of the trace ranks an analysis rank owns.  Thousands
of ranks of a few hundred records, taken one at a time, cost a few dozen numpy calls each, more
than their rows; a batch (consecutive ranks of at most MAX_ROWS records together, a larger rank
alone: arrays.batches) costs those calls once, and its columns stay small, so the peak memory
does not grow with the number of ranks owned.  A single rank is a batch of one: one code path.

Each rank's log is a map of its own: the fields past "func" and "flags" (the logs' contiguous
copies) are read only at the rows a table needs, one gather per rank that has some (``gathered``),
and the rank of a row is found from the ranks' first rows (``Batch.position``).
"""

import numpy as np

from mpigraph.trace import record
from mpigraph.util import arrays

MAX_ROWS = 1 << 18


class Batch:
    """Consecutive ranks' records as one table (match.RankCalls of each, in order).

    ``func``, ``flags``: every record's, rank after rank (a single rank's are its log's own
    columns, not copies); ``ranks``: the trace ranks; ``first``: each rank's first row;
    ``position(rows)``: the index in ``ranks`` of some rows' rank; ``records(rows)``: their log
    records."""

    def __init__(self, rank_calls):
        self.calls = list(rank_calls)
        self.ranks = np.array([c.rank for c in self.calls], np.int64)
        self.func, self.flags = (_end_to_end([c.field(name) for c in self.calls]) for name in ("func", "flags"))
        lengths = np.array([len(c.records) for c in self.calls], np.int64)
        self.first = np.cumsum(lengths) - lengths

    def __len__(self):
        return len(self.func)

    def position(self, rows):
        """The index in ``ranks`` of the rank of each row of `rows` (ascending): where each rank's
        rows begin among them, then repeated (no column of a rank per record)."""
        begin = np.searchsorted(rows, self.first)
        return np.repeat(np.arange(len(self.ranks)), np.diff(begin, append=len(rows)))

    def rank_of(self, rows):
        """The trace rank of each row of `rows` (ascending)."""
        return self.ranks[self.position(rows)]

    def records(self, rows):
        """The log records (record.RECORD_DTYPE) of the batch rows `rows`, ascending."""
        position = self.position(rows)
        return gathered([c.records for c in self.calls], position, rows - self.first[position])


def _end_to_end(columns):
    return columns[0] if len(columns) == 1 else np.concatenate(columns)


def batches(rank_calls, max_rows=MAX_ROWS):
    """The Batches of a sequence of match.RankCalls, in order, one at a time (the columns of one
    batch held at once): at most max_rows records each, a larger rank alone."""
    rank_calls = list(rank_calls)
    for a, b in arrays.batches([len(c.records) for c in rank_calls], max_rows):
        yield Batch(rank_calls[a:b])


def gathered(records, owner, rows, field=None):
    """records[o][rows[i]] (its `field` only, when given) for each i with o = owner[i]; `owner` in
    runs of equal values (sorted, say), `records` indexable by them (a list, a dict of ranks): one
    gather per run, from the logs' separate maps."""
    owner, rows = np.asarray(owner), np.asarray(rows)
    if not len(owner):
        return np.zeros(0, record.RECORD_DTYPE if field is None else record.RECORD_DTYPE[field])
    starts, lengths = arrays.runs(owner)
    parts = []
    for o, a, n in zip(owner[starts].tolist(), starts.tolist(), lengths.tolist()):
        parts.append((records[o].view(_RECORD_BYTES) if field is None else records[o][field]).take(rows[a:a + n]))
    whole = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return whole if field is not None else whole.view(record.RECORD_DTYPE)


# A record as 64 plain bytes: numpy concatenates structured arrays taking their dtypes apart in
# Python at each one (some 15 us an array, against 0.4 us for plain bytes).
_RECORD_BYTES = np.dtype((np.void, record.RECORD_DTYPE.itemsize))
