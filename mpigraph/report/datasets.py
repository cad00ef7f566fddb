"""The report's big tables as Parquet datasets: every analysis rank writes its own share.

calls.parquet, critical_path.parquet and waitstates.parquet are directories of part files,
``part-0000.parquet`` to ``part-<K-1>.parquet``, one per analysis rank (K of them): the part of
analysis rank a holds the rows of the trace ranks it owns (calls, wait states) or the a-th of K
contiguous blocks of the path's segments.  The parts in name order are the table in row order,
so pyarrow.dataset, pandas.read_parquet, pyarrow.parquet.read_table, DuckDB's
read_parquet('calls.parquet/*.parquet') and Spark read one table, the same for every K.

Why: one rank pulling every rank's calls, decoding and writing them was the analysis's rank-0
funnel (the report stage did not get faster with more ranks).  Each rank writes what it already
holds; rank 0 writes the small tables (CSV and Parquet files) and summary.txt.
"""

import os
import shutil

import numpy as np

from mpigraph.comm import meter, parallel
from mpigraph.metrics import run_tables as linked_tables
from mpigraph.paths import segments as cp
from mpigraph.report import writer
from mpigraph.util.names import Labels

CALLS = writer.CALLS_PARQUET
WAITSTATES = writer.WAITSTATES_PARQUET
PATH = cp.PARQUET_NAME
NAMES = (CALLS, WAITSTATES, PATH)


def part_name(analysis_rank: int, n_analysis_ranks: int) -> str:
    """part-0003.parquet: zero-padded to one width for all K parts, so name order is rank order."""
    width = max(4, len(str(n_analysis_ranks - 1)))
    return "part-%0*d.parquet" % (width, analysis_rank)


def prepare(out_dir: str, names=NAMES) -> None:
    """On analysis rank 0, before any rank writes: each dataset an empty directory (what an
    earlier analysis left there, a file or parts of another K, removed)."""
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        path = os.path.join(out_dir, name)
        remove(path)
        os.mkdir(path)


def remove(path: str) -> None:
    """Remove a dataset directory or a file of that name, if any."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def write_calls_part(out_dir, rank, size, linked, queries, with_csv=False, sites=None):
    """This analysis rank's rows of the calls table (its trace ranks' calls, on_path from the
    path's ``path_queries``), a chunk at a time (``run_tables.call_chunks``); with `with_csv`
    their calls.csv text too, from the same chunks (``writer.calls_csv_part``, which rank 0 joins).
    `sites` (a callsites.stats.Accumulator): gives the callsite column the run's ids (in both) and
    sums the chunks per call site as they pass (the callsites table is made from the analysis
    ranks' sums)."""
    blocks = (linked_tables.call_block(rows) for rows in linked_tables.call_chunks(linked, queries))
    if sites is not None:
        blocks = (sites.add(block) for block in blocks)
    csv_path = writer.calls_csv_part(out_dir, rank, size) if with_csv else None
    # Rank 0's CSV part begins with the header: it becomes calls.csv, the others appended to it.
    writer.write_calls_blocks(_part(out_dir, CALLS, rank, size), blocks, csv_path, header=rank == 0)


def write_waitstates_part(out_dir, rank, size, rows):
    """This analysis rank's rows of the wait-state table (its ``run_tables.waitstate_rows``, named)."""
    named = linked_tables.named_waitstates(rows)
    writer.write_parquet(_part(out_dir, WAITSTATES, rank, size), named, linked_tables.WAITSTATE_COLUMNS)


def scatter_path(comm, path):
    """Analysis rank a's block of the path table (rank 0's `path`, a segments table; None when
    there is no path): the a-th of K contiguous row blocks, as a pyarrow Table; None everywhere
    when there is no path.

    A Scatterv per column of rank 0's arrays (a names.Labels: its codes, its few names sent to
    all), every rank making the Arrow table of its own block.  Making the whole table on rank 0
    was a funnel, and so was a pickled scatter of the blocks: a pipelined program's path has a
    row per call (6 M on 16 ranks of PRK p2p), which pickling copied on rank 0 while the other
    ranks waited.  They wait idly for rank 0's path, then the scatter moves bytes only."""
    parallel.barrier_idly(comm)
    n = comm.bcast(len(path[cp.SEGMENT_COLUMNS[0].name]) if comm.rank == 0 and path is not None else None, root=0)
    if n is None:
        return None
    counts = np.diff([n * a // comm.size for a in range(comm.size + 1)])
    block = {c.name: _scatter_column(comm, path[c.name] if comm.rank == 0 else None, counts)
             for c in cp.SEGMENT_COLUMNS}
    return writer.arrow_table(block, cp.SEGMENT_COLUMNS)


def _scatter_column(comm, values, counts):
    """This rank's counts[rank] rows of rank 0's column `values`, in rank order; a column of
    Python objects (no fixed width) by a pickled scatter of its blocks.  An integer column travels
    in the narrowest integer type that holds it (``_travel_dtype``) and arrives in its own."""
    head = None
    if comm.rank == 0:
        names = values.names if isinstance(values, Labels) else None
        array = np.asarray(values.codes if names is not None else values)
        head = (names, None, None) if array.dtype == object else (names, array.dtype.str, _travel_dtype(array).str)
    names, dtype, travel = comm.bcast(head, root=0)
    if dtype is None:
        bounds = np.concatenate(([0], np.cumsum(counts)))
        here = comm.scatter([array[bounds[a]:bounds[a + 1]] for a in range(comm.size)] if comm.rank == 0 else None,
                            root=0)
    else:
        here = np.empty(counts[comm.rank], travel)
        comm.Scatterv([array.astype(travel, copy=False), counts] if comm.rank == 0 else None, here, root=0)
    if comm.rank == 0:
        meter.count(sent=sum(int(counts[a]) for a in range(1, comm.size)) * here.itemsize)
    else:
        meter.count(received=here.nbytes)
    here = here if dtype is None else here.astype(dtype, copy=False)
    return Labels(here, names) if names is not None else here


def _travel_dtype(array):
    """The narrowest of int8, int16, int32 and int64 holding an integer array's values (a path's
    ranks, codes and call sites: one or two bytes, not eight, per row on the wire); another
    array's own dtype."""
    if array.dtype.kind not in "iu" or not len(array):
        return array.dtype
    lo, hi = int(array.min()), int(array.max())
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        if np.iinfo(dtype).min <= lo and hi <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return array.dtype       # uint64 values past int64's range


def write_path_part(out_dir, rank, size, block):
    """This analysis rank's block of the path table (``scatter_path``) as its part."""
    import pyarrow.parquet as pq

    pq.write_table(block, _part(out_dir, PATH, rank, size), **writer._parquet_options(cp.SEGMENT_COLUMNS))


def _part(out_dir, name, rank, size):
    return os.path.join(out_dir, name, part_name(rank, size))


def write_parts(comm, out_dir, info, linked, waitstates, queries, path_block, calls_csv=False, sites=None):
    """Every analysis rank: its parts of the calls, wait-state (`waitstates`: its
    ``run_tables.waitstate_rows``) and (when `path_block` is not None) critical path datasets, and
    with `calls_csv` its part of calls.csv's text (`sites`: ``write_calls_part``).  Collective.

    A part that cannot be written (a full disk: every rank may meet it) is one error: analysis
    rank 0 removes the datasets and raises the ReportError of the first rank that failed, naming
    its file; the others raise PeerFailed (they say nothing)."""
    failure = None
    steps = [(CALLS, lambda p: write_calls_part(out_dir, comm.rank, comm.size, linked, queries, calls_csv, sites)),
             (WAITSTATES, lambda p: write_waitstates_part(out_dir, comm.rank, comm.size, waitstates))]
    if path_block is not None:
        steps.append((PATH, lambda p: write_path_part(out_dir, comm.rank, comm.size, path_block)))
    for name, step in steps:
        target = _part(out_dir, name, comm.rank, comm.size)
        try:
            step(target)
        except OSError as e:
            e.filename = e.filename or target      # pyarrow's errors name no file
            failure = str(writer.report_error(e, out_dir, info))
            break
    parallel.barrier_idly(comm)      # the ranks done first leave the cores to those still writing
    failures = comm.allgather(failure)
    failed = [rank for rank, f in enumerate(failures) if f]
    if not failed:
        return
    if comm.rank == 0:
        remove_all(out_dir)
        raise writer.ReportError(failures[failed[0]])
    raise parallel.PeerFailed(failed[0], "ReportError", failures[failed[0]])


def remove_all(out_dir):
    """Remove every dataset of an incomplete report, and the CSV parts of calls.csv (what can be removed)."""
    for path in [os.path.join(out_dir, name) for name in NAMES] + writer.calls_csv_parts(out_dir):
        try:
            remove(path)
        except OSError:
            pass


def prepare_all(out_dir, info, with_path):
    """Rank 0's ``prepare`` of every dataset (the path's only `with_path`; an old one is removed), and
    no CSV part of calls.csv left by an analysis that stopped (calls.csv joins every one there)."""
    try:
        for part in writer.calls_csv_parts(out_dir):
            os.remove(part)
        remove(os.path.join(out_dir, PATH))
        prepare(out_dir, NAMES if with_path else (CALLS, WAITSTATES))
    except OSError as e:
        raise writer.report_error(e, out_dir, info) from None


def read(path):
    """A dataset (or a plain Parquet file of the same name) as one pyarrow Table, parts in order."""
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").to_table()
