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

calls.csv and critical_path.csv (when a run is small enough for them) are single files: each
rank writes the CSV text of its rows beside the report (``writer.csv_part``), then copies it
into the file at its own offset, all ranks at once (``join_csv``): no rank copies another's.
"""

import errno
import os
import shutil

import numpy as np

from mpigraph.comm import owner_exchange as exchange, parallel
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


def write_calls_part(path, linked, queries, csv_path=None, header=False, sites=None):
    """This analysis rank's rows of the calls table (its trace ranks' calls, on_path from the
    path's ``path_queries``) as the part file `path`, a chunk at a time
    (``run_tables.call_chunks``); with `csv_path` their calls.csv text too, from the same chunks
    (``writer.calls_csv_part``, joined by ``join_csv``; `header`: the part that begins the file).
    `sites` (a callsites.stats.Accumulator): gives the callsite column the run's ids (in both) and
    sums the chunks per call site as they pass (the callsites table is made from the analysis
    ranks' sums)."""
    blocks = (linked_tables.call_block(rows) for rows in linked_tables.call_chunks(linked, queries))
    if sites is not None:
        blocks = (sites.add(block) for block in blocks)
    writer.write_calls_blocks(path, blocks, csv_path, header=header)


def write_waitstates_part(path, rows):
    """This analysis rank's rows of the wait-state table (its ``run_tables.waitstate_rows``, named)
    as the part file `path`."""
    writer.write_parquet(path, linked_tables.named_waitstates(rows), linked_tables.WAITSTATE_COLUMNS)


def path_block(comm, part):
    """Analysis rank a's block of the path table: the a-th of K contiguous blocks of the path's
    rows by order, from every rank's `part` of it (rows with their order on the whole path);
    None everywhere when there is no path.  Collective.

    The rows go straight from the rank that made them to the rank writing their block (an
    all-to-all; where the path was found whole, on analysis rank 0, that is a scatter).  A
    names.Labels column travels as codes into the names of every rank's together; an integer
    column in the narrowest integer type that holds every rank's values (``_travel_dtype``)."""
    if part is None:
        return None
    if comm.size == 1:
        return {c.name: part[c.name] for c in cp.SEGMENT_COLUMNS}
    order = np.asarray(part["order"], np.int64)
    n = comm.allreduce(len(order))
    bounds = np.array([n * a // comm.size for a in range(comm.size + 1)], np.int64)
    columns, names = [], []
    for c in cp.SEGMENT_COLUMNS:
        values, column_names = _shared_codes(comm, part[c.name]) if c.kind == "str" else (part[c.name], None)
        columns.append(np.asarray(values).astype(_shared_travel_dtype(comm, np.asarray(values)), copy=False))
        names.append(column_names)
    received = exchange.send_rows(comm, np.searchsorted(bounds, order, "right") - 1, columns)
    at = received[0] - bounds[comm.rank]       # each row's place in the block: no sort
    block = {}
    for c, values, column_names in zip(cp.SEGMENT_COLUMNS, received, names):
        placed = np.empty(len(values), np.int64)
        placed[at] = values
        block[c.name] = Labels(placed, column_names) if column_names is not None else placed
    return block


def _shared_codes(comm, column):
    """(codes, names) of a str column (names.Labels or objects), its codes into the names of every
    rank's column together (the same names everywhere, in the order the ranks list them)."""
    if isinstance(column, Labels):
        codes, names = np.asarray(column.codes, np.int64), np.asarray(column.names, object)
    else:
        names, codes = np.unique(np.asarray(column, object).astype(str), return_inverse=True)
        names, codes = names.astype(object), codes.reshape(-1).astype(np.int64)
    index = {}
    for rank_names in comm.allgather(names.tolist()):
        for name in rank_names:
            index.setdefault(name, len(index))
    lookup = np.array([index[name] for name in names.tolist()], np.int64)
    return lookup[codes] if len(codes) else codes, np.array(list(index), object)


def _shared_travel_dtype(comm, array):
    """``_travel_dtype`` of every rank's `array` together: one dtype on every rank."""
    from mpi4py import MPI

    if array.dtype.kind not in "iu":
        return array.dtype
    bounds = np.array([-int(array.min()) if len(array) else 0, int(array.max()) if len(array) else 0], np.int64)
    comm.Allreduce(MPI.IN_PLACE, bounds, op=MPI.MAX)
    return _travel_dtype(np.array([-bounds[0], bounds[1]], np.int64))


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


def write_path_part(path, block, csv_path=None, header=False):
    """This analysis rank's block of the path table (``path_block``) as the part file `path`, and
    with `csv_path` its CSV text of critical_path.csv (`header`: the part that begins the file)."""
    import pyarrow.parquet as pq

    pq.write_table(writer.arrow_table(block, cp.SEGMENT_COLUMNS), path, **writer._parquet_options(cp.SEGMENT_COLUMNS))
    if csv_path is not None:
        writer.write_csv(csv_path, block, cp.SEGMENT_COLUMNS, header=header)


def write_parts(comm, out_dir, info, linked, waitstates, queries, path_block, calls_csv=False, sites=None,
                path_csv=False):
    """Every analysis rank: its parts of the calls, wait-state (`waitstates`: its
    ``run_tables.waitstate_rows``) and (when `path_block` is not None) critical path datasets, and
    with `calls_csv` its part of calls.csv's text (`sites`: ``write_calls_part``), with `path_csv`
    its part of critical_path.csv's; then those CSV files from the parts (``join_csv``).
    Collective.

    A part that cannot be written (a full disk: every rank may meet it) is one error: analysis
    rank 0 removes the datasets and raises the ReportError of the first rank that failed, naming
    its file; the others raise PeerFailed (they say nothing)."""
    def part(name):       # its path in out_dir: the file an error names, the one written
        return os.path.join(name, part_name(comm.rank, comm.size))

    # Rank 0's CSV parts begin with the header: they become the files, the others' appended.
    first = comm.rank == 0
    calls_csv_part = writer.calls_csv_part(out_dir, comm.rank, comm.size) if calls_csv else None
    path_csv_part = writer.csv_part(out_dir, cp.CSV_NAME, comm.rank, comm.size) if path_csv else None
    # The calls part pulls its blocks (talks MPI) on this thread; its encoder thread is its
    # bottleneck and leaves this thread mostly idle, so the wait states' and the path's parts,
    # ready now, are encoded on other threads meanwhile.
    files = [writer.File(part(CALLS), lambda p: write_calls_part(p, linked, queries, calls_csv_part, first, sites),
                         talks_mpi=True),
             writer.File(part(WAITSTATES), lambda p: write_waitstates_part(p, waitstates))]
    if path_block is not None:
        files.append(writer.File(part(PATH), lambda p: write_path_part(p, path_block, path_csv_part, first)))
    _together(comm, out_dir, info, lambda: writer.write_at_once(out_dir, files))
    joined = ([writer.CALLS_CSV] if calls_csv else []) + ([cp.CSV_NAME] if path_csv and path_block is not None else [])
    if joined:
        join_csv(comm, out_dir, info, joined)


def join_csv(comm, out_dir, info, names):
    """Collective: each file of `names` in out_dir from the analysis ranks' CSV parts of it
    (``writer.csv_part``: rank 0's with the header line).  Rank 0 renames its part to the file
    and makes it as long as all parts together; then every other rank copies its part into it
    at its offset, at once, and removes the part.  Errors as ``write_parts``'."""
    parts = [writer.csv_part(out_dir, name, comm.rank, comm.size) for name in names]
    sizes = [os.path.getsize(part) if os.path.exists(part) else 0 for part in parts]
    offsets = [comm.exscan(size) or 0 for size in sizes]
    totals = [comm.allreduce(size) for size in sizes]
    paths = [os.path.join(out_dir, name) for name in names]

    def start():
        if comm.rank == 0:
            for part, path, total in zip(parts, paths, totals):
                os.replace(part, path)
                os.truncate(path, total)

    def copy():
        if comm.rank != 0:
            for part, path, size, offset in zip(parts, paths, sizes, offsets):
                if size:
                    _copy_at(part, path, offset, size)
                if os.path.exists(part):
                    os.remove(part)

    _together(comm, out_dir, info, start)
    _together(comm, out_dir, info, copy)


def _copy_at(source, target, offset, size):
    """The `size` bytes of file `source` written into file `target` from `offset` on: by the
    kernel (copy_file_range) where it can, else read and written 4 MB at a time."""
    with open(source, "rb") as src, open(target, "r+b") as dst:
        done = 0
        try:
            while done < size:
                copied = os.copy_file_range(src.fileno(), dst.fileno(), size - done, done, offset + done)
                if copied == 0:
                    break
                done += copied
        except (AttributeError, OSError) as e:     # no such call here, or not between these files
            if isinstance(e, OSError) and e.errno not in _NO_COPY_FILE_RANGE:
                raise
        src.seek(done)
        while done < size:
            chunk = src.read(min(size - done, 1 << 22))
            if not chunk:
                raise OSError(errno.EIO, "%s ended early" % source, source)
            done += os.pwrite(dst.fileno(), chunk, offset + done)


# copy_file_range's errors that mean "not here" (an old kernel, another file system), not a failure.
_NO_COPY_FILE_RANGE = (errno.ENOSYS, errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL)


def _together(comm, out_dir, info, work):
    """work() on every analysis rank; a file it cannot write (an OSError: a full disk, which every
    rank may meet) is one error for all: analysis rank 0 removes the datasets and raises the
    ReportError of the first rank that failed, naming its file; the others raise PeerFailed (they
    say nothing).  Collective."""
    failure = None
    try:
        work()
    except OSError as e:
        failure = str(writer.report_error(e, out_dir, info))
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
    """Remove every dataset of an incomplete report, calls.csv and critical_path.csv and their
    CSV parts (what can be removed)."""
    joined = [os.path.join(out_dir, name) for name in (writer.CALLS_CSV, cp.CSV_NAME)]
    for path in [os.path.join(out_dir, name) for name in NAMES] + joined + writer.csv_parts(out_dir):
        try:
            remove(path)
        except OSError:
            pass


def prepare_all(out_dir, info, with_path):
    """Rank 0's ``prepare`` of every dataset (the path's only `with_path`; an old one is removed), and
    no CSV part left by an analysis that stopped (a CSV file joins every part there)."""
    try:
        for part in writer.csv_parts(out_dir):
            os.remove(part)
        remove(os.path.join(out_dir, PATH))
        prepare(out_dir, NAMES if with_path else (CALLS, WAITSTATES))
    except OSError as e:
        raise writer.report_error(e, out_dir, info) from None


def read(path):
    """A dataset (or a plain Parquet file of the same name) as one pyarrow Table, parts in order."""
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").to_table()
