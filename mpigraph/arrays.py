"""Array helpers numpy has, done the way that stays fast on millions of distinct values.

numpy 2.3 made ``np.unique(values)`` (no return_index, _inverse or _counts)
hash-based.  On many distinct int64 values it is far slower than sorting:
2.56 million distinct int64 ids take 3.2 s in numpy 2.4.6, a sort and a
comparison 0.06 s (measured on this project's 2-core AMD EPYC VM).
``unique`` is the sort, whatever numpy's version.
"""

import numpy as np


def unique(values):
    """The sorted distinct values of a 1-d array (np.unique without its hash table)."""
    values = np.sort(np.asarray(values).reshape(-1))
    if len(values) < 2:
        return values
    first = np.empty(len(values), bool)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return values[first]
