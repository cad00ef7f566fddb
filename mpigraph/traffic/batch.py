"""The owned trace ranks a batch at a time, for the traffic tables: their records' func and flags
end to end, the other fields gathered at the rows a table reads.

Thousands of ranks of a few hundred records, taken one at a time, cost the tables a few dozen
numpy calls each, more than their rows; a batch (consecutive ranks of at most
match.core.BATCH_RECORDS records together, a larger rank alone: arrays.batches) costs those
calls once.  A single rank is a batch of one: one code path.

The match stage's match.core.RecordBatch copies the batch's records end to end: the match reads
most of them.  The traffic tables read the records of the collective calls and communicator
creations only, so a Batch gathers those, one take per rank from its log's map: a run of
point-to-point records is not copied for its few collectives, and a bulk-synchronous run's
records are read once, not copied and then read.
"""

import numpy as np

from mpigraph.match import core
from mpigraph.trace import record
from mpigraph.util import arrays


class Batch:
    """Consecutive owned ranks' records as one table (match.RankCalls of each, in rank order).

    ranks          int64 trace ranks
    flags, func    every record's, rank after rank (a lone rank's: its log's own columns)
    first_record   int64, len(ranks) + 1: rank i's records are rows first_record[i]:first_record[i + 1]
    ``positions(rows)``, ``rank_of(rows)``, ``records_at(rows)``: of some rows, ascending."""

    def __init__(self, calls):
        self.calls = calls
        self.ranks = np.array([c.rank for c in calls], np.int64)
        self.flags, self.func = (_end_to_end([c.field(name) for c in calls]) for name in ("flags", "func"))
        self.first_record = np.concatenate([[0], np.cumsum([len(c.records) for c in calls], dtype=np.int64)])

    def __len__(self):
        return len(self.func)

    def positions(self, rows):
        """The index in ``ranks`` of the rank of each row of `rows` (ascending): where each rank's
        rows begin among them, then repeated (no column of a rank per record)."""
        begin = np.searchsorted(rows, self.first_record)
        return np.repeat(np.arange(len(self.ranks)), np.diff(begin))

    def rank_of(self, rows):
        """The trace rank of each row of `rows` (ascending)."""
        return self.ranks[self.positions(rows)]

    def records_at(self, rows):
        """The log records (record.RECORD_DTYPE) of the rows `rows` (ascending): one take from each
        rank's log that has some."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return np.zeros(0, record.RECORD_DTYPE)
        position = self.positions(rows)
        local = rows - self.first_record[position]
        starts, lengths = arrays.runs(position)
        parts = [self.calls[p].records.view(_RECORD_BYTES).take(local[a:a + n])
                 for p, a, n in zip(position[starts].tolist(), starts.tolist(), lengths.tolist())]
        return (np.concatenate(parts) if len(parts) > 1 else parts[0]).view(record.RECORD_DTYPE)


def _end_to_end(columns):
    return columns[0] if len(columns) == 1 else np.concatenate(columns)


# A record as 64 plain bytes: numpy concatenates structured arrays taking their dtypes apart in
# Python at each one (some 15 us an array, against 0.4 us for plain bytes).
_RECORD_BYTES = np.dtype((np.void, record.RECORD_DTYPE.itemsize))


def batches(calls_by_rank, max_records=None):
    """The Batches of the owned ranks ({trace rank: match.RankCalls}), in rank order, one at a time
    (the columns of one batch held at once): consecutive ranks of at most max_records (default
    match.core.BATCH_RECORDS) records together, a larger rank alone."""
    ranks = sorted(calls_by_rank)
    sizes = [len(calls_by_rank[r].records) for r in ranks]
    for first, stop in arrays.batches(sizes, max_records or core.BATCH_RECORDS):
        yield Batch([calls_by_rank[r] for r in ranks[first:stop]])
