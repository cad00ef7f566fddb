"""The report's call-site files: callsites.csv/.parquet and the summary's call-site section.

The analysis numbers the call sites as the calls table streams to the report (``tracker``:
each block's callsite column becomes the run's ids), and writes the table once it has passed
(``finish``).
"""

import os

from mpigraph import schema
from mpigraph.callsites.stats import Accumulator, Sites, summary_lines
from mpigraph.report import writer

CSV = "callsites.csv"
PARQUET = "callsites.parquet"


def tracker(info) -> Accumulator:
    """An Accumulator over the run's ranks, their sites read from the raw logs' directory."""
    ranks = range(info.world_size)
    return Accumulator(Sites(os.path.join(info.run_dir, "raw"), ranks), info.world_size)


def finish(out_dir: str, acc: Accumulator, text: str) -> str:
    """Write callsites.csv and .parquet, append the call-site section to summary.txt; returns
    the summary text with it."""
    table = acc.table()
    writer.write_csv(os.path.join(out_dir, CSV), table, schema.CALLSITE_COLUMNS)
    writer.write_parquet(os.path.join(out_dir, PARQUET), table, schema.CALLSITE_COLUMNS)
    lines = summary_lines(table)
    if not lines:
        return text
    section = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, writer.SUMMARY), "a") as f:
        f.write(section)
    return (text or "") + section
