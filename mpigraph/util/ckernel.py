"""Small C kernels compiled on first use, opened through cffi (ABI mode).

A kernel is C source and its cdef.  It is compiled with the system's C compiler ($CC, else cc)
into a cache directory ($XDG_CACHE_HOME or ~/.cache, /mpigraph), named by a hash of its text,
so a changed kernel is compiled again and the analysis ranks of one node share one file.  Where
there is no compiler the caller does the same work with numpy or scipy instead: a kernel is
only ever a faster way to the same numbers.
"""

import hashlib
import os
import subprocess
import tempfile


class Kernel:
    """`name`'s C `source` with its `cdef`; load() gives (ffi, lib), or None where it cannot be
    compiled or the environment variable `off_variable` equals `off_value` (a test setting)."""

    def __init__(self, name, source, cdef, off_variable, off_value):
        self.name, self.source, self.cdef = name, source, cdef
        self.off_variable, self.off_value = off_variable, off_value
        self._loaded = None

    def load(self):
        if os.environ.get(self.off_variable, "").lower() == self.off_value:
            return None
        if self._loaded is None:
            try:
                self._loaded = self._compile_and_open()
            except (OSError, subprocess.SubprocessError, ImportError):
                self._loaded = False
        return self._loaded or None

    def _compile_and_open(self):
        from cffi import FFI

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
        ffi = FFI()
        ffi.cdef(self.cdef)
        return ffi, ffi.dlopen(path)
