"""Sections that other commands add to a report's summary.txt (``mpigraph model``,
``mpigraph decompose``), so that ``mpigraph report DIR`` shows them with the analysis's text.

A section is a paragraph: its header line, the lines after it, and a blank line or the file's
end.  A command that runs again replaces its own section; the analysis's text and the other
commands' sections stay, and the new section goes last.
"""

import os

from mpigraph.report.outdir import SUMMARY
from mpigraph.util.atomic import atomic_write


def add_section(run_dir: str, header: str, text: str) -> list:
    """`text` (a paragraph whose first line is `header`) as the last section of run_dir's
    summary.txt, in place of an earlier section with that header.  Returns [the summary's
    path], or [] where run_dir has no summary.txt (no report to add to)."""
    path = os.path.join(run_dir, SUMMARY)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        old = f.read()
    at = _line_starting(old, header)
    if at >= 0:
        stop = old.find("\n\n", at)
        old = old[:at] + (old[stop + 2:] if stop >= 0 else "")
    with atomic_write(path) as f:
        f.write(old.rstrip("\n") + "\n\n" + text)
    return [path]


def _line_starting(text: str, header: str) -> int:
    """Where the first line of `text` that starts with `header` starts, or -1."""
    if text.startswith(header):
        return 0
    at = text.find("\n" + header)
    return at + 1 if at >= 0 else -1
