"""What if the network were slower: latency and bandwidth sensitivity and tolerance (seed 000, LLAMP).

``whatif(run_dir, ...)`` (api.py) builds the run's model graph (build.py) and computes T
against the network latency exactly as an envelope of lines (envelope.py); lp.py keeps
LLAMP's linear program as the reference; pairs.py gives each message its host pair's latency
(``--pairs``: netprobe's pairs.csv).  See docs/whatif.md.
"""

from mpigraph.whatif.options import WhatifError  # noqa: F401

__all__ = ["Result", "load_params", "whatif", "WhatifError"]


def __getattr__(name):
    """whatif, load_params and Result from mpigraph.whatif.api, imported on first use: the CLI imports
    this package to register `mpigraph whatif`, and `mpigraph lib` must not pay for numpy."""
    if name in ("Result", "load_params", "whatif"):
        from mpigraph.whatif import api

        return getattr(api, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
