"""``python -m mpigraph``: the same as the ``mpigraph`` command."""

import sys

from mpigraph.cli import main

sys.exit(main())
