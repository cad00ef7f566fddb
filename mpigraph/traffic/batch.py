"""The owned trace ranks a batch at a time: their records' columns end to end, a rank per row.

The traffic tables are sums over the records of the trace ranks an analysis rank owns.  Thousands
of ranks of a few hundred records, taken one at a time, cost a few dozen numpy calls each, more
than their rows; a batch (consecutive ranks of at most MAX_ROWS records together, a larger rank
alone: arrays.batches) costs those calls once, and its columns stay small, so the peak memory
does not grow with the number of ranks owned.  A single rank is a batch of one: one code path.

Each rank's log is a map of its own: the fields past "func" and "flags" (the logs' contiguous
copies) are read only at the rows a table needs, one gather per rank that has some (``gathered``).
"""

import numpy as np

from mpigraph.trace import record
from mpigraph.util import arrays

MAX_ROWS = 1 << 18


class Batch:
    """Consecutive ranks' records as one table (match.RankCalls of each, in order).

    ``func``, ``flags``: every record's, rank after rank; ``position``: the index in ``ranks``
    (the trace ranks) of each row's rank; ``first``: each rank's first row; ``records(rows)``:
    the log records of some rows."""

    def __init__(self, rank_calls):
        self.calls = list(rank_calls)
        self.ranks = np.array([c.rank for c in self.calls], np.int64)
        self.func, self.position, self.first = arrays.stacked([c.field("func") for c in self.calls], np.uint16)
        self.flags = arrays.stacked([c.field("flags") for c in self.calls], np.uint16)[0]

    def __len__(self):
        return len(self.func)

    def rank_of(self, rows):
        """The trace rank of each row of `rows`."""
        return self.ranks[self.position[rows]]

    def local(self, rows):
        """Each row's index among its rank's records."""
        return rows - self.first[self.position[rows]]

    def records(self, rows):
        """The log records (record.RECORD_DTYPE) of the batch rows `rows`, ascending."""
        return gathered([c.records for c in self.calls], self.position[rows], self.local(rows))


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
        parts.append((_words(records[o]) if field is None else records[o][field]).take(rows[a:a + n], axis=0))
    whole = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return whole if field is not None else whole.view(record.RECORD_DTYPE).reshape(-1)


_WORDS = record.RECORD_DTYPE.itemsize // 8


def _words(records):
    """A log's records as rows of int64 words: gathered and put end to end as plain numbers, where
    numpy takes a structured array's dtype apart in Python at each (several times the cost)."""
    return np.ascontiguousarray(records).view(np.int64).reshape(-1, _WORDS)
