"""Modules kept from being imported while the in-job analysis runs at the end of a program
(mpigraph.shim.embedded): pyarrow imports them, when they are installed, only to recognise their
objects among its inputs, and the analysis never passes it any.

pandas: 0.15 s of CPU on an idle core (0.5 s with Python's import log on a busy machine), at
the first pa.array, pa.scalar or compute call with a Python value; pyarrow tries twice in a
small run.  Without it those checks answer "not a pandas object", which is what the analysis's
numpy arrays and Python values are: the report is the same.
Not dateutil (its relativedelta, 3-14 ms): pyarrow tries it again at every Python value whose
type it infers, 0.14 ms a failed try, and a small run has dozens: as much as the import.
"""

import contextlib
import sys

LEFT_OUT = ("pandas",)


class _LeftOut:
    """An import finder that answers "not installed" for the modules of LEFT_OUT."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in LEFT_OUT:
            raise ModuleNotFoundError("mpigraph's analysis leaves %s out" % name, name=name)
        return None


@contextlib.contextmanager
def left_out():
    """No import of the modules of LEFT_OUT in the block.

    One imported before stays usable: sys.modules answers before any finder.  After the block
    they import again (pyarrow tries pandas again when it needs it: to_pandas).  Not for a
    process that goes on with other work: pyarrow's own checks that found no pandas in the block
    answer so from then on (a DataFrame given to pa.array would be taken for a sequence).
    """
    sys.meta_path.insert(0, _LeftOut)
    try:
        yield
    finally:
        sys.meta_path.remove(_LeftOut)
