"""Where the installed shim library is."""

import os

LIBRARY_NAME = "libmpigraph.so"
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def library_path():
    """Absolute path of libmpigraph.so, the library to LD_PRELOAD.

    Raises FileNotFoundError with a hint when the package was installed
    without its shim (for instance a source tree that was never built).
    """
    # The library sits at the package's top (setup.py builds it there): one level above this module.
    path = os.path.join(PACKAGE_DIR, LIBRARY_NAME)
    if not os.path.exists(path):
        raise FileNotFoundError(
            "%s is missing: install mpigraph with pip (pip install '.[mpich]'), "
            "or run 'python setup.py build_shim' in a source checkout" % path)
    return path
