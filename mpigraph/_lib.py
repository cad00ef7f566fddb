"""Where the installed shim library is."""

import os

LIBRARY_NAME = "libmpigraph.so"


def library_path():
    """Absolute path of libmpigraph.so, the library to LD_PRELOAD.

    Raises FileNotFoundError with a hint when the package was installed
    without its shim (for instance a source tree that was never built).
    """
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
    if not os.path.exists(path):
        raise FileNotFoundError(
            "%s is missing: install mpigraph with pip (pip install '.[mpich]'), "
            "or run 'python setup.py build_shim' in a source checkout" % path)
    return path
