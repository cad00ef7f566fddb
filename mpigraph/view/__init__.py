"""Pictures of a run: ``mpigraph view DIR`` (see mpigraph.view.data for what is read).

- timeline.html (timeline.py): the interactive timeline, one self-contained page;
- ranks.svg (svg.py): a bar per rank, compute / MPI execution / wait, time on the critical path;
- trace.json (perfetto.py, with --perfetto): the Chrome trace event format for Perfetto UI.
"""

import os
import time


class ViewError(Exception):
    """The pictures cannot be written where asked; the message names the directory and the fix."""


def writable_dir(out_dir, run_dir):
    """Check before the work that the views can go into out_dir (created if missing).

    Raises ViewError naming the directory and the way out (--out), or outdir.OutputDirError
    for an --out directory holding the user's own files."""
    from mpigraph.report import outdir

    if out_dir != run_dir:
        outdir.check_report_dir(out_dir, also=outdir.VIEW_NAMES, what="pictures")
    import tempfile

    try:
        os.makedirs(out_dir, exist_ok=True)
        # A file made and removed, not os.access: that is True for root on any file system, and
        # the error says why (read-only file system, permission denied, disk full).
        tempfile.TemporaryFile(dir=out_dir).close()
    except OSError as e:
        raise _cannot_write(out_dir, run_dir, e) from None


def _cannot_write(out_dir, run_dir, error):
    return ViewError("cannot write the views into %s: %s (write them elsewhere: mpigraph view %s --out "
                     "<another directory>)" % (out_dir, getattr(error, "strerror", None) or error, run_dir))


def write_views(run_dir, perfetto=False, html=True, level=6, out_dir=None):
    """Write the views into out_dir (default run_dir); returns [(path, note)] of the files written,
    and the RunData's notes.  Raises ViewError when out_dir cannot be written."""
    from mpigraph.view import data as view_data, svg, timeline

    started = time.perf_counter()
    out = os.path.abspath(out_dir or run_dir)
    writable_dir(out, os.path.abspath(run_dir))
    data = view_data.load(run_dir)
    written = []
    try:
        if html:
            path, stats = timeline.write(data, out, level=level)
            written.append((path, "%.1f MB, %d ranks, %d calls, %d messages"
                            % (stats["file_bytes"] / 1e6, data.world_size, data.n_calls,
                               len(data.messages["send"]))))
        written.append((svg.write_rank_chart(out, data.per_rank()), "per-rank bar chart"))
        if perfetto:
            from mpigraph.view import perfetto as chrome_trace

            path, events = chrome_trace.write(data, out)
            written.append((path, "%d events, %.1f MB: open in https://ui.perfetto.dev or chrome://tracing"
                            % (events, os.path.getsize(path) / 1e6)))
    except OSError as e:       # a read-only file system, or a full disk
        raise _cannot_write(out, os.path.abspath(run_dir), e) from None
    return written, data.notes, time.perf_counter() - started
