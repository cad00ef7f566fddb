"""Consecutive trace ranks' log records as one table: how the stages take the ranks an analysis
rank owns a batch at a time.

Thousands of ranks of a few hundred records, taken one at a time, cost a stage a few dozen numpy
calls each, more than their records; a batch of consecutive ranks (at most ``BATCH_RECORDS``
records together, a larger rank alone: ``owned_batches``) costs those calls once, and its
temporaries stay bounded however many ranks there are.  A single rank is a batch of one: one
code path, and its columns are its log's own (no copy).

A ``RecordBatch`` holds every record's func and flags end to end and the bounds of each rank's
records.  The other fields are read one of two ways, by what a stage reads of them:
``records``, all the records end to end (copied once, on first use: the match reads most fields
of most records), or ``records_at(rows)`` / ``field(name, rows)``, gathered from the logs that
hold those rows (the traffic tables and the profile read a few fields of some records: a run of
point-to-point records is not copied for its few collectives, a bulk-synchronous run's records
are read once, not copied and then read).
"""

import functools

import numpy as np

from mpigraph.trace import record
from mpigraph.util import arrays

# The records a batch of small ranks holds at most: their records end to end are a copy of 64
# bytes a record, a few MB, while thousands of ranks of a few hundred records each cost a few
# dozen numpy calls per batch instead of per rank.
BATCH_RECORDS = 1 << 18


def owned_batches(sizes, max_rows=None):
    """[(first, stop)] bounds of the owned ranks' batches, `sizes` the rows of each rank (its
    records, or its calls): consecutive ranks of at most max_rows (default BATCH_RECORDS) rows
    together, a larger rank alone."""
    return arrays.batches(sizes, max_rows or BATCH_RECORDS)


def of_ranks(by_rank, make, max_records=None):
    """make([its ranks' values of `by_rank`]) of each batch of the owned ranks ({trace rank:
    anything with ``records``, e.g. a RankLog or match.RankCalls}), in rank order, one at a time
    (the columns of one batch held at once); `make`: a RecordBatch class built from them."""
    ranks = sorted(by_rank)
    for first, stop in owned_batches([len(by_rank[r].records) for r in ranks], max_records):
        yield make([by_rank[r] for r in ranks[first:stop]])


class RecordBatch:
    """Consecutive ranks' log records as one table: a row is a record of the batch, the ranks'
    records one after another.

    ranks          int64 trace ranks, increasing (None where the rows are no whole logs' records)
    flags, func    every record's, rank after rank (a lone rank's: its log's own columns)
    first_record   int64, n_ranks + 1: rank i's records are rows first_record[i]:first_record[i + 1]
    position       per row, the index of its rank (int64; made on first use)
    records        every record (record.RECORD_DTYPE) end to end (copied on first use)
    ``positions``, ``rank_of``, ``local_record`` of some rows; ``records_at``, ``field`` of
    some rows, gathered from their logs; ``per_rank`` splits rows by rank."""

    def __init__(self, records, func, flags, ranks=None):
        """Lists over the consecutive ranks, in rank order: their records (RECORD_DTYPE arrays),
        their contiguous func and flags columns, their trace ranks."""
        self._records = [np.asarray(r) for r in records]
        self.func, self.flags = arrays.end_to_end(func, np.uint16), arrays.end_to_end(flags, np.uint16)
        self.ranks = None if ranks is None else np.array(ranks, np.int64)
        self.first_record = np.concatenate(([0], np.cumsum([len(r) for r in records], dtype=np.int64))).astype(np.int64)

    @classmethod
    def of_logs(cls, logs):
        """The batch of consecutive RankLogs, in rank order."""
        return cls([log.records for log in logs], [log.column("func") for log in logs],
                   [log.column("flags") for log in logs], [log.rank for log in logs])

    @property
    def n_ranks(self):
        return len(self.first_record) - 1

    @property
    def one_rank(self):
        return self.n_ranks == 1

    @functools.cached_property
    def records(self):
        """Every record end to end: a lone rank's own array; else copied as plain bytes (numpy
        concatenates structured arrays taking their dtypes apart in Python at each one, some
        15 us an array against 0.4 us for plain bytes)."""
        if len(self._records) == 1:
            return self._records[0]
        return np.concatenate([np.ascontiguousarray(r).view(_RECORD_BYTES) for r in self._records]
                              ).view(record.RECORD_DTYPE)

    @functools.cached_property
    def position(self):
        """Per row, the index of its rank (int64)."""
        return np.repeat(np.arange(self.n_ranks, dtype=np.int64), np.diff(self.first_record))

    def positions(self, rows):
        """The index of the rank of each of `rows` (an index array, any order)."""
        return np.zeros(len(rows), np.int64) if self.one_rank else self.position[rows]

    def rank_of(self, rows):
        """The trace rank of each of `rows` (int64)."""
        return np.full(len(rows), self.ranks[0]) if self.one_rank else self.ranks[self.position[rows]]

    def local_record(self, rows):
        """Each of `rows` as the index of the record in its own rank's log."""
        return rows if self.one_rank else rows - self.first_record[self.position[rows]]

    def _split(self, rows):
        """(rank index, its rows of `rows` as local records) of each rank that has any of the
        ascending `rows`, in rank order."""
        cut = np.searchsorted(rows, self.first_record)
        return [(i, rows[cut[i]:cut[i + 1]] - self.first_record[i]) for i in np.flatnonzero(np.diff(cut)).tolist()]

    def per_rank(self, rows):
        """{trace rank: the local records of the ascending `rows` that are its}, the ranks that have any."""
        return {int(self.ranks[i]): local for i, local in self._split(np.asarray(rows, np.int64))}

    def records_at(self, rows):
        """The records (RECORD_DTYPE) of the ascending `rows`: one take from each rank's log that
        has some, as plain bytes."""
        rows = np.asarray(rows, np.int64)
        parts = [self._records[i].view(_RECORD_BYTES).take(local) for i, local in self._split(rows)]
        if not parts:
            return np.zeros(0, record.RECORD_DTYPE)
        return (np.concatenate(parts) if len(parts) > 1 else parts[0]).view(record.RECORD_DTYPE)

    def field(self, name, rows=None):
        """A field of the records at the ascending `rows` (None: every row), read from the logs
        that hold any of them (each pass over a field of the 64-byte records reads all of them)."""
        if rows is None:
            return arrays.end_to_end([r[name] for r in self._records], np.int64)
        return arrays.end_to_end([self._records[i][name][_slice_if_consecutive(local)]
                                  for i, local in self._split(rows)], np.int64)


def _slice_if_consecutive(rows):
    """Ascending `rows` as the slice they span where they are all of its indices (a rank's
    records but its first and last: a strided copy of the field, not a gather), else `rows`."""
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


# A record as 64 plain bytes (RecordBatch.records, records_at).
_RECORD_BYTES = np.dtype((np.void, record.RECORD_DTYPE.itemsize))
