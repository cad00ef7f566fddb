"""Pictures of a run: ``mpigraph view DIR`` (see mpigraph.view.data for what is read).

- timeline.html (timeline.py): the interactive timeline, one self-contained page;
- ranks.svg (svg.py): a bar per rank, compute / MPI execution / wait, time on the critical path;
- trace.json (perfetto.py, with --perfetto): the Chrome trace event format for Perfetto UI.
"""

import os
import time


def write_views(run_dir, perfetto=False, html=True, level=6):
    """Write the views into run_dir; returns [(path, note)] of the files written, and the RunData's notes."""
    from mpigraph.view import data as view_data, svg, timeline

    started = time.perf_counter()
    data = view_data.load(run_dir)
    written = []
    if html:
        path, stats = timeline.write(data, level=level)
        written.append((path, "%.1f MB, %d ranks, %d calls, %d messages"
                        % (stats["file_bytes"] / 1e6, data.world_size, data.n_calls, len(data.messages["send"]))))
    written.append((svg.write_rank_chart(data.run_dir, data.per_rank()), "per-rank bar chart"))
    if perfetto:
        from mpigraph.view import perfetto as chrome_trace

        path, events = chrome_trace.write(data)
        written.append((path, "%d events, %.1f MB: open in https://ui.perfetto.dev or chrome://tracing"
                        % (events, os.path.getsize(path) / 1e6)))
    return written, data.notes, time.perf_counter() - started
