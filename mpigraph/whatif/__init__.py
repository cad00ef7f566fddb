"""What if the network were slower: latency and bandwidth sensitivity and tolerance (seed 000, LLAMP).

``whatif(run_dir, ...)`` (api.py) builds the run's model graph (build.py) and computes T
against the network latency exactly as an envelope of lines (envelope.py); lp.py keeps
LLAMP's linear program as the reference; pairs.py gives each message its host pair's latency
(``--pairs``: netprobe's pairs.csv).  See docs/whatif.md.
"""

from mpigraph.whatif.api import Result, load_params, whatif  # noqa: F401
from mpigraph.whatif.build import WhatifError  # noqa: F401
