"""Which existing directories mpigraph writes into (never over a user's own files), and the
names of what a run directory holds.

A *run directory* is one that mpigraph made: it holds ``raw/``, the directory of the shim's
logs.  The shim (csrc/logfile.c, at MPI_Init) and ``mpigraph run``/``demo`` (before the program
starts) put a run into a directory that does not exist yet, is empty, or is a run directory
(whose raw/ holds no logs yet: the shim refuses to mix two runs' logs).  Any other existing
directory is refused: its summary.txt or ranks.csv may be the user's own.

The report alone (``mpigraph analyze DIR --out OUT``, ``mpigraph.analyze(..., out_dir=OUT)``)
may also go into an earlier report: a directory whose run.json is mpigraph's (it names the
mpigraph_version that wrote it).  The pictures (``mpigraph view DIR --out OUT``) may also go into
a directory holding nothing but pictures (``VIEW_NAMES``).  A report is not told by its file
names: a user's own summary.txt or ranks.csv has the same name.

Standard library only: the launcher checks before it starts the program.
"""

import os

RAW = "raw"
RUN_JSON = "run.json"      # mpigraph.report.writer.RUN_JSON: written by every report
SUMMARY = "summary.txt"    # mpigraph.report.writer.SUMMARY: the report's text

# The files of ``mpigraph view`` (mpigraph.view).
VIEW_NAMES = frozenset(["timeline.html", "ranks.svg", "trace.json"])


class OutputDirError(Exception):
    """An existing directory that is not mpigraph's was named to write into; the message says the fix."""


def read_summary(run_dir):
    """The text of run_dir/summary.txt; FileNotFoundError with a hint when there is none."""
    path = os.path.join(run_dir, SUMMARY)
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError("%s does not exist: analyse the run first (mpigraph analyze %s)"
                                % (path, run_dir)) from None


def _entries(path):
    """The names in `path`, or None when it does not exist (or is not a directory: that is an error below)."""
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OutputDirError("%s is a file, not a directory: name a new or empty directory" % path) from None


def _refuse(path, entries, what, marks, how):
    shown = ", ".join(entries[:5]) + (" and %d more" % (len(entries) - 5) if len(entries) > 5 else "")
    raise OutputDirError("%s is not an mpigraph run directory (it holds %s and no %s): refusing to write %s over "
                         "its files; name a new or empty directory %s" % (path, shown, marks, what, how))


def check_run_dir(path, how="with --out or MPIGRAPH_OUT"):
    """Raise OutputDirError unless a run (raw logs and report) may be written into `path`:
    it does not exist, is empty, or holds raw/.  `how` says how the user names another one."""
    entries = _entries(path)
    if entries and RAW not in entries:
        _refuse(path, entries, "a run", RAW + "/", how)


def check_report_dir(path, how="with --out", also=(), what="a report"):
    """Raise OutputDirError unless report files may be written into `path`: as check_run_dir, or
    it holds an earlier report (an mpigraph run.json), or only files named in `also` (VIEW_NAMES
    for the pictures)."""
    entries = _entries(path)
    if entries and RAW not in entries and not _holds_report(path, entries) and not set(entries) <= set(also):
        _refuse(path, entries, what, "%s/ or mpigraph's %s" % (RAW, RUN_JSON), how)


def _holds_report(path, entries):
    """Whether the directory holds a report: a run.json that mpigraph wrote."""
    import json

    if RUN_JSON not in entries:
        return False
    try:
        with open(os.path.join(path, RUN_JSON)) as f:
            return "mpigraph_version" in json.load(f)
    except (OSError, ValueError, TypeError):
        return False
