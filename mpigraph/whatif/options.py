"""The what-if model's choices and its error for bad input: what the command line needs to
register `mpigraph whatif`, without numpy (``mpigraph lib`` builds the same parser)."""

MODELS = ("delta", "loggps")
COLLECTIVE_ALGORITHMS = ("recdoub", "ring", "dissemination")


class WhatifError(ValueError):
    """Bad input that the user can fix (the message says how)."""
