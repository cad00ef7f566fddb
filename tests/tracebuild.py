"""Build raw logs by hand for the analysis tests, written with mpigraph.trace.record.write_log.

A record is given as a dict of the fields that matter; the others get the
values the shim's mg_fill gives them (no peer, no tag, no root, ...).
"""

import os

import numpy as np

from mpigraph.trace import functions as mpi_functions
from mpigraph.trace import record

FID = {f.name: f.id for f in mpi_functions.FUNCTIONS}


def rec(name, t_start, t_end, flags=0, **fields):
    """One record of function `name` (e.g. "MPI_Send") as a dict."""
    return dict(func=FID[name], t_start=t_start, t_end=t_end, flags=flags, **fields)


def part(call, flags=0, **fields):
    """A part record of the call record `call` (same function and times)."""
    return dict(func=call["func"], t_start=call["t_start"], t_end=call["t_end"],
                flags=record.PART | flags, **fields)


def records(rows):
    """An array of RECORD_DTYPE from a list of dicts."""
    out = np.zeros(len(rows), record.RECORD_DTYPE)
    out["peer"] = record.PEER_NONE
    out["tag"] = record.TAG_NONE
    out["root"] = record.ROOT_NONE
    for i, row in enumerate(rows):
        for name, value in row.items():
            out[name][i] = value
    return out


def header(rank, world_size, job_id="job-1", host="node0", finalized=True, clock_source=record.CLOCK_MONOTONIC,
           calib=None, pid=1000):
    """A header as the shim fills it; `calib` is a list of (slot, ticks, ns)."""
    h = record.empty_header(rank, world_size)
    h["job_id"] = job_id.encode()
    h["hostname"] = host.encode()
    h["pid"] = pid + rank
    h["clock_source"] = clock_source
    h["n_functions"] = len(mpi_functions.FUNCTIONS)
    h["flags"] = record.HEADER_FINALIZED if finalized else 0
    for slot, ticks, ns in calib or []:
        h["calib_ticks"][slot] = ticks
        h["calib_ns"][slot] = ns
    return h


def write_rank(run_dir, rank, world_size, rows, **header_fields):
    """Write run_dir/raw/rank-<rank>.log; returns its path."""
    raw = os.path.join(str(run_dir), "raw")
    os.makedirs(raw, exist_ok=True)
    path = os.path.join(raw, "rank-%d.log" % rank)
    record.write_log(path, header(rank, world_size, **header_fields), records(rows))
    return path


def simple_rank(t0=0, finalize_at=10_000):
    """Init, one Barrier, Finalize: the smallest complete log."""
    return [rec("MPI_Init", t0, t0 + 100), rec("MPI_Barrier", t0 + 1000, t0 + 2000, seq=1),
            rec("MPI_Finalize", finalize_at, finalize_at)]


def write_simple_run(run_dir, world_size, **header_fields):
    return [write_rank(run_dir, r, world_size, simple_rank(t0=r * 10), **header_fields) for r in range(world_size)]
