"""summary.txt's phases section: a line per phase (its time, MPI time and critical path share)."""

import numpy as np

MAX_ROWS = 20


def _seconds(ns):
    return "%.6f" % (ns / 1e9)


def _label(phase, level, name):
    """A phase in words: its region path, and its Pcontrol phase when there is one."""
    if not name:
        return "(outside regions)" if phase == 0 else "pcontrol %d (level %d)" % (phase, level)
    return name if phase == 0 else "%s (pcontrol %d)" % (name, phase)


def section(phases, text_table):
    """The section's lines ([] when the run marked no phase); `text_table(header, rows)` lays a
    table out as the rest of the summary does."""
    if not phases:
        return []
    table, notes = phases["phases"], phases["notes"]
    path_total = notes.get("path_total", 0)
    selected = notes.get("selected")
    title = ("Phase %s (--phase; its rows only in phases.csv, phase_functions.csv and phase_callsites.csv)"
             % selected if selected
             else "Phases (named regions and MPI_Pcontrol; all in phases.csv, per function in phase_functions.csv, "
                  "per call site in phase_callsites.csv)")
    order = np.argsort(-table["time"], kind="stable")[:MAX_ROWS]
    header = ["phase", "ranks", "time s", "MPI s", "calls", "critical path s", "% path"]
    rows = [[_label(table["phase"][i], table["level"][i], table["name"][i]), table["ranks"][i],
             _seconds(table["time"][i]), _seconds(table["time_total"][i]), table["calls"][i],
             _seconds(table["critical_path"][i]),
             "%.1f%%" % (100.0 * table["critical_path"][i] / path_total) if path_total else "-"]
            for i in order]
    lines = [title] + text_table(header, rows)
    if notes["unmatched_ends"]:
        lines.append("note: %d mpigraph_phase_end call%s closed no open region of their name (ignored)"
                     % (notes["unmatched_ends"], "s" if notes["unmatched_ends"] > 1 else ""))
    if notes["unclosed"]:
        lines.append("note: %d region%s still open at the end of a rank's log (they end there)"
                     % (notes["unclosed"], "s were" if notes["unclosed"] > 1 else " was"))
    return lines
