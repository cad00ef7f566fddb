"""Small C kernels compiled on first use, opened through cffi or ctypes (ABI mode).

A kernel is C source and its declarations.  It is compiled with the system's C compiler ($CC,
else cc) into a cache directory ($XDG_CACHE_HOME or ~/.cache, /mpigraph), named by a hash of
its text, so a changed kernel is compiled again and the analysis ranks of one node share one
file.  Where there is no compiler the caller does the same work with numpy or scipy instead: a
kernel is only ever a faster way to the same numbers.

cffi parses the declarations (pycparser) each time a process opens a kernel: 30 ms and more of
CPU, which a kernel used in every analysis, however small, should not cost; ctypes opens one in
about a millisecond from a table of its functions' argument types.
"""

import ctypes
import hashlib
import os
import re
import subprocess
import tempfile


def declarations(source):
    """The declarations of `source`'s functions that are not static: their definitions' heads
    (a function returning int64_t or void, its head at a line's start), so each signature is
    written once."""
    return "\n".join(head + ";" for head in re.findall(r"^(?:int64_t|void) \w+\([^)]*\)", source, re.M))


class Kernel:
    """`name`'s C `source` with its `cdef` (its functions' declarations); off (load() gives None)
    where it cannot be compiled or the environment variable `off_variable` equals `off_value`
    (a test setting)."""

    def __init__(self, name, source, cdef, off_variable, off_value):
        self.name, self.source, self.cdef = name, source, cdef
        self.off_variable, self.off_value = off_variable, off_value
        self._loaded = None

    def load(self):
        """(ffi, lib) through cffi, or None."""
        return self._open(self._cffi)

    def load_ctypes(self, functions):
        """The ctypes library with `functions` ({name: (restype, argtypes)}) declared, or None."""
        return self._open(lambda path: _ctypes_library(path, functions))

    def _open(self, opener):
        if os.environ.get(self.off_variable, "").lower() == self.off_value:
            return None
        if self._loaded is None:
            try:
                self._loaded = opener(self._compiled())
            except (OSError, subprocess.SubprocessError, ImportError):
                self._loaded = False
        return self._loaded or None

    def _compiled(self):
        """The path of the compiled kernel, compiled now unless it is in the cache."""
        tag = hashlib.sha256((self.source + self.cdef).encode()).hexdigest()[:16]
        cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mpigraph")
        path = os.path.join(cache, "%s-%s.so" % (self.name, tag))
        if not os.path.exists(path):
            os.makedirs(cache, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as tmp:
                src = os.path.join(tmp, "kernel.c")
                with open(src, "w") as f:
                    f.write(self.source)
                built = os.path.join(tmp, "kernel.so")
                subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", built, src],
                               check=True, capture_output=True)
                os.replace(built, path)      # atomic: a parallel first use sees it whole or not at all
        return path

    def _cffi(self, path):
        from cffi import FFI

        ffi = FFI()
        ffi.cdef(self.cdef)
        return ffi, ffi.dlopen(path)


def _ctypes_library(path, functions):
    library = ctypes.CDLL(path)
    for name, (restype, argtypes) in functions.items():
        function = getattr(library, name)
        function.restype, function.argtypes = restype, argtypes
    return library
