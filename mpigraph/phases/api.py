"""The phase API for Python programs: name the regions of a run (mpi4py programs under mpigraph).

    import mpigraph
    with mpigraph.phase("solve"):
        ...                              # MPI calls and compute of the region "solve"
    mpigraph.phase_begin("io"); ...; mpigraph.phase_end("io")

The calls go to the shim's mpigraph_phase_begin/_end (csrc/regions.c), the same functions the C
header (mpigraph/include/mpigraph.h) and the Fortran module call, found with ctypes in the
process's global scope (where LD_PRELOAD puts the shim: ``mpigraph run``).  Without the shim
they do nothing.  Importing this module loads nothing but ctypes: it is imported with the
package.
"""

import contextlib
import ctypes
from typing import Iterator, Optional

_SYMBOLS = ("mpigraph_phase_begin", "mpigraph_phase_end")
_functions = None      # (begin, end) of the shim, () when it is not loaded, None before the first look


def _shim():
    """(begin, end) ctypes functions of the loaded shim, or () when the process has none."""
    global _functions
    if _functions is None:
        try:
            process = ctypes.CDLL(None)     # dlopen(NULL): the global scope, LD_PRELOAD included
            found = tuple(getattr(process, name) for name in _SYMBOLS)
        except (AttributeError, OSError):
            found = ()
        for f in found:
            f.argtypes, f.restype = [ctypes.c_char_p], None
        _functions = found
    return _functions


def _encoded(name: Optional[str]) -> Optional[bytes]:
    return None if name is None else str(name).encode("utf-8", "replace")


def phase_begin(name: str) -> None:
    """Begin the region `name` on this rank (a record of its own under mpigraph; else nothing)."""
    shim = _shim()
    if shim:
        shim[0](_encoded(name))


def phase_end(name: Optional[str] = None) -> None:
    """End the region `name`, with the regions opened inside it; None ends the innermost open one."""
    shim = _shim()
    if shim:
        shim[1](_encoded(name))


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """``with mpigraph.phase("solve"):`` the block is the region `name` (ended on an exception too)."""
    phase_begin(name)
    try:
        yield
    finally:
        phase_end(name)
