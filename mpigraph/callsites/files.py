"""The shim's call-site files beside each rank's log (csrc/callsites.c)."""

import os

import numpy as np


def sites_path(raw_dir: str, rank: int) -> str:
    return os.path.join(raw_dir, "rank-%d.sites" % rank)


def maps_path(raw_dir: str, rank: int) -> str:
    return os.path.join(raw_dir, "rank-%d.maps" % rank)


def read_sites(raw_dir: str, rank: int):
    """(ids, return addresses, callers) of a rank's call sites: uint64 arrays, and per site the
    list of its callers' return addresses (innermost first; empty unless MPIGRAPH_CALLSITE_DEPTH
    > 1).  Empty when the rank wrote none (a log of an older shim, a rank killed before
    MPI_Finalize)."""
    try:
        with open(sites_path(raw_dir, rank)) as f:
            rows = [line.split() for line in f if line.strip() and not line.startswith("#")]
    except OSError:
        rows = []
    ids = np.array([int(r[0]) for r in rows], np.uint64)
    addrs = np.array([int(r[1], 16) for r in rows], np.uint64)
    callers = [[int(a, 16) for a in r[2:]] for r in rows]
    return ids, addrs, callers


class LoadMap:
    """The file-backed mappings of a process (/proc/PID/maps): address ranges, file offsets,
    paths, sorted by start address."""

    def __init__(self, lo, hi, offset, paths):
        order = np.argsort(lo, kind="stable")
        self.lo, self.hi, self.offset = lo[order], hi[order], offset[order]
        self.paths = [paths[i] for i in order]

    def locate(self, addrs):
        """For each address: (index of its mapping or -1, the offset into that mapping's file)."""
        addrs = np.asarray(addrs, np.uint64)
        at = np.searchsorted(self.lo, addrs, side="right") - 1
        inside = (at >= 0) & (addrs < self.hi[np.maximum(at, 0)]) if len(self.lo) else np.zeros(len(addrs), bool)
        at = np.where(inside, at, -1)
        safe = np.maximum(at, 0)
        file_offset = np.where(inside, addrs - self.lo[safe] + self.offset[safe], 0) if len(self.lo) else addrs * 0
        return at, file_offset


def read_maps(raw_dir: str, rank: int) -> LoadMap:
    """The rank's load map; the mappings backed by a file ("/..." paths) only."""
    lo, hi, offset, paths = [], [], [], []
    try:
        with open(maps_path(raw_dir, rank)) as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) < 6 or not fields[5].startswith("/"):
                    continue
                a, b = fields[0].split("-")
                lo.append(int(a, 16)), hi.append(int(b, 16)), offset.append(int(fields[2], 16))
                paths.append(fields[5].strip())
    except OSError:
        pass
    return LoadMap(np.array(lo, np.uint64), np.array(hi, np.uint64), np.array(offset, np.uint64), paths)
