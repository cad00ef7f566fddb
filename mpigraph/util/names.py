"""String columns with a few distinct values (function names, wait states, path segment kinds),
held as codes into those names: a table with a row per call never makes a Python string per row."""

import numpy as np


def rows_of(column, rows):
    """A column's `rows` (indices, a mask or a slice): a Labels' as Labels of the same names, an
    array's (or sequence's) as an array; a slice of either is a view."""
    return column.take(rows) if isinstance(column, Labels) else np.asarray(column)[rows]


class Labels:
    """A str column: names[codes[i]] is row i.  Reads like an object array where the tables'
    readers need it (len, rows by index, == a name, in, tolist, numpy.asarray)."""

    def __init__(self, codes, names):
        self.codes, self.names = codes, np.asarray(names, object)

    def __len__(self):
        return len(self.codes)

    def __getitem__(self, i):
        return self.names[self.codes[i]]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.names[self.codes], dtype)

    def __eq__(self, other):
        """Rows equal to `other`: a name (compared by code, not per row) or a column."""
        if isinstance(other, str):
            return np.isin(self.codes, np.flatnonzero(self.names == other))
        return np.asarray(self, object) == np.asarray(other, object)

    __hash__ = None

    def __contains__(self, name):
        return bool(np.isin(np.flatnonzero(self.names == name), self.codes).any())

    def tolist(self):
        return self.names[self.codes].tolist()

    def take(self, rows):
        """The column's `rows` (indices, a mask or a slice), as Labels of the same names."""
        return Labels(np.asarray(self.codes)[rows], self.names)

    def sums(self, values):
        """{name: the sum of values over its rows}, for the names some row has."""
        counts = np.bincount(self.codes, minlength=len(self.names))
        sums = np.bincount(self.codes, weights=values, minlength=len(self.names))
        totals = {}
        for name, total in zip(self.names[counts > 0].tolist(), sums[counts > 0].tolist()):
            totals[name] = totals.get(name, 0) + int(total)      # a name listed twice counts once
        return totals
