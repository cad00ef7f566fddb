"""A run's call sites: numbered, named, and their calls summed (mpiP's call-site statistics).

A call site is a call instruction of the program (its return address, as an object and an
offset: the same on every rank, whatever address the object was loaded at), with its callers
when MPIGRAPH_CALLSITE_DEPTH > 1.  ``Sites`` reads the sites of an analysis rank's trace ranks
before the calls pass, the analysis ranks share them, and they are numbered from 1 in the order
of (object, file, line, function, offset), so the ids depend on the program alone, not on how
the calls are cut into blocks or analysis ranks; 0 is a call whose site is unknown (a rank that
wrote no .sites file).  Each analysis rank's ``Accumulator`` relabels the blocks of its part of
the calls table as it writes them (report.datasets: the callsite column holds the run's ids)
and sums per call site, MPI function and trace rank; ``combined`` adds the analysis ranks' sums
on analysis rank 0 (a row per (site, function, trace rank): small), which makes the table:

    count = sum of calls, time = sum of (end - start), wait = sum of (wait_before + wait_after),
    bytes = sum of bytes, path_time = sum of (end - start) over the calls on the critical path,
    time_cov = std / mean over the ranks that called it of each rank's time there (mpiP's COV;
    0 for one rank): from the per-trace-rank time sums t_r, sqrt(mean((t_r - mean t)^2)) / mean t.

A call site calls one MPI function; the table has a row per (call site, MPI function), so the
unknown site 0 has a row per function.
"""

import os

import numpy as np

from mpigraph.callsites import files, resolve
from mpigraph.comm.parallel import barrier_idly
from mpigraph.metrics import call_kernel
from mpigraph.trace import functions as mf
from mpigraph.util import arrays

UNKNOWN = ("", "", "", 0, "")     # object, caller, file, line, stack of a site nothing is known of
N_SHIM_IDS = 1 << 16          # the record's site field is 16 bits


class Sites:
    """Each rank's shim site ids -> call-site ids (lut[rank], 0: unknown); places[id] = (object,
    caller, file, line, stack): stack names the callers (MPIGRAPH_CALLSITE_DEPTH > 1), innermost
    first.

    A site is first known by its raw key, (object, offset, callers: each caller's (object,
    offset), or (None, address) outside any object); resolving it reads the objects' symbols and
    DWARF and names it by (object, offset, stack)."""

    def __init__(self, raw_dir: str, ranks, resolved=True):
        """`ranks`: the trace ranks whose sites to read (an analysis rank's own); ``share`` numbers
        them together with the other analysis ranks'.  `resolved`: resolve them here (False:
        ``share`` resolves every analysis rank's together, each object's sites on one rank)."""
        self._raw = {rank: self._read_rank(raw_dir, rank) for rank in ranks}   # rank -> (shim ids, raw keys)
        self._named = {}        # raw key -> (object, offset, stack)
        self._found = {}        # (object, offset, stack) -> (object, caller, file, line, stack)
        if resolved:
            self._add(_resolved(self._raw_keys()))
            self._number()

    def share(self, comm) -> "Sites":
        """Resolve and number every analysis rank's sites together (collective over comm): each
        analysis rank's ids are then the run's, the same for every number of analysis ranks.

        The ranks of a program mostly share their sites and objects: each distinct object's
        sites are resolved on one analysis rank (from the last: rank 0 writes the small tables),
        not its symbols and DWARF read and held on every rank (a big program's debug sections
        are hundreds of MB, K times over on a node); objects of their own go to different ranks."""
        if comm.size > 1:
            asked = set()
            for keys in comm.allgather(self._raw_keys() - self._named.keys()):
                asked |= keys
            objects = sorted({key[0] for key in asked})
            owner = {path: comm.size - 1 - i % comm.size for i, path in enumerate(objects)}
            self._add(_resolved({key for key in asked if owner[key[0]] == comm.rank}))
            barrier_idly(comm)      # the ranks with no object to read wait without spinning
            for named, found in comm.allgather((self._named, self._found)):
                self._named.update(named)
                self._found.update(found)
            self._number()
            parts = comm.allgather(self._pairs)
            self._pairs = tuple(np.concatenate([p[i] for p in parts]) for i in range(2))
            order = np.argsort(self._pairs[0], kind="stable")
            self._pairs = (self._pairs[0][order], self._pairs[1][order])
        else:
            self._add(_resolved(self._raw_keys() - self._named.keys()))
            self._number()
        return self

    def any_rank_ids(self, ranks, shim_ids) -> np.ndarray:
        """The run's ids of (trace rank, shim id) pairs of any rank (after ``share``; 0 unknown):
        for the few calls rank 0 names of ranks it does not own (the communicators' creators)."""
        key = np.asarray(ranks, np.int64) * N_SHIM_IDS + np.asarray(shim_ids, np.int64)
        keys, ids = self._pairs
        if not len(keys):
            return np.zeros(len(key), np.int64)
        at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
        return np.where(keys[at] == key, ids[at], 0)

    def _raw_keys(self):
        return {key for _, keys in self._raw.values() for key in keys}

    def _add(self, resolved):
        """Take in resolved sites ({raw key: (named key, place)})."""
        for raw, (named, place) in resolved.items():
            self._named[raw] = named
            self._found[named] = place

    def _number(self):
        found = self._found
        keys = sorted(found, key=lambda k: (found[k][0], found[k][2], found[k][3], found[k][1], k[1], k[2]))
        number = {k: i + 1 for i, k in enumerate(keys)}
        self.places = [UNKNOWN] + [found[k] for k in keys]
        self.lut = {}
        keys, ids_of = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for rank, (ids, rank_keys) in self._raw.items():
            # As long as the rank's largest id, and a 0 after it for any id past that (run_ids):
            # 2**16 entries a rank would be 0.5 MB each, zeroed, at thousands of ranks.
            lut = np.zeros(int(ids.max(initial=-1)) + 2, np.int64)
            lut[ids] = [number[self._named[k]] for k in rank_keys]
            self.lut[rank] = lut
            keys.append(rank * N_SHIM_IDS + np.asarray(ids, np.int64))
            ids_of.append(lut[ids])
        # (rank * N_SHIM_IDS + shim id, run id) of the sites read here, sorted: ``any_rank_ids``.
        keys, ids_of = np.concatenate(keys), np.concatenate(ids_of)
        order = np.argsort(keys, kind="stable")
        self._pairs = (keys[order], ids_of[order])

    def names(self, ids, functions) -> np.ndarray:
        """site_name of each (call-site id, MPI function name) pair, as an object array."""
        return np.array([site_name(f, self.places[i]) for i, f in zip(np.asarray(ids).tolist(), functions)], object)

    def run_ids(self, rank: int, shim_ids) -> np.ndarray:
        """The run's call-site ids of a trace rank's shim ids (0 where the rank wrote no sites)."""
        lut = self.lut.get(int(rank))
        if lut is None:
            return np.zeros(len(shim_ids), np.int64)
        return lut[np.minimum(np.asarray(shim_ids, np.int64), len(lut) - 1)]     # past its ids: its last, 0

    @staticmethod
    def _read_rank(raw_dir, rank):
        """(the rank's shim ids, their raw keys): no object is read."""
        ids, addrs, callers = files.read_sites(raw_dir, rank)
        if not len(ids):
            return np.zeros(0, np.int64), []
        load_map = files.read_maps(raw_dir, rank)
        at, offset = load_map.locate(addrs)
        keep, keys = [], []
        for i in range(len(ids)):       # per site: a rank has a few dozen
            if at[i] < 0:
                continue
            keep.append(int(ids[i]))
            keys.append((load_map.paths[at[i]], int(offset[i]), tuple(_frame(load_map, a) for a in callers[i])))
        return np.array(keep, np.int64), keys


def _resolved(raw_keys):
    """{raw key: ((object, offset, stack), (object, caller, file, line, stack))} of the sites."""
    out = {}
    with resolve.batch():   # each object's DWARF read once for all the sites
        for raw in raw_keys:
            path, offset, callers = raw
            stack = " < ".join(_frame_name(frame) for frame in callers)
            out[raw] = ((path, offset, stack), (path,) + _where(path, offset) + (stack,))
    return out


def _where(path, offset):
    """(caller, file, line) of a return address at offset in path; the object and offset name
    a caller without a symbol."""
    caller, file, line = resolve.locate(path, offset)
    if not caller and not line:
        caller = "%s+0x%x" % (os.path.basename(path), offset)
    return caller, file, line


def _frame(load_map, addr):
    """A caller's return address as (object, offset), or (None, address) outside every object."""
    at, offset = load_map.locate([addr])
    return (None, int(addr)) if at[0] < 0 else (load_map.paths[at[0]], int(offset[0]))


def _frame_name(frame):
    """A caller's frame in a stack: "file.c:40" with debug information, else its function."""
    path, offset = frame
    if path is None:
        return "0x%x" % offset
    caller, file, line = _where(path, offset)
    return "%s:%d" % (os.path.basename(file), line) if line else caller


def site_name(function: str, place) -> str:
    """"MPI_Allreduce at solver.c:212", "MPI_Send in exchange" (no -g), "MPI_Send at an unknown site"."""
    path, caller, file, line, stack = place
    via = " < " + stack if stack else ""
    if line:
        return "%s at %s:%d%s" % (function, os.path.basename(file), line, via)
    if caller:
        return "%s in %s%s" % (function, caller, via)
    return "%s at an unknown site" % function


SUMS = ("count", "time", "wait", "bytes", "path_time")     # a calls-table block's sums (KeyedSums.add)
WAIT_SUMS = ("calls", "time")       # the wait-state charges' sums (Accumulator.waitstate_sums)


class KeyedSums:
    """Named int64 values summed per int64 key, a block of rows at a time: a calls-table block's
    count, time, wait, bytes and path_time (``add``; the keys: call site, function and trace
    rank for callsites.csv, with the phase for its per-phase twin), or any other `names`."""

    def __init__(self, names=SUMS, parts=()):
        self.names = names
        self._parts = [(keys, sums) for keys, sums in parts if len(keys)]     # per block: (keys, sums)

    def add(self, block: dict, keys) -> None:
        """Sums a calls-table block's rows per key (`keys`: one per row)."""
        summed = call_kernel.call_sums(keys, block) if self.names == SUMS else None
        if summed is not None:      # one pass in C, int64
            self.add_summed(*summed)
            return
        duration = np.asarray(block["end"], np.int64) - np.asarray(block["start"], np.int64)
        self.add_values(keys, {"count": np.asarray(block["calls"], np.int64), "time": duration,
                               "wait": np.asarray(block["wait_before"], np.int64)
                               + np.asarray(block["wait_after"], np.int64),
                               "bytes": np.asarray(block["bytes"], np.int64),
                               "path_time": np.where(np.asarray(block["on_path"], bool), duration, 0)})

    def add_values(self, keys, values: dict) -> None:
        """Sums values[name] (one per key; None: 1 each, a count) per key, for every name."""
        uniq, inverse = arrays.unique_codes(keys)
        self._parts.append((uniq, {n: np.bincount(inverse, values[n], len(uniq)).astype(np.int64) for n in self.names}))

    def add_summed(self, keys, sums: dict) -> None:
        """Adds sums made elsewhere: {name: int64 sums} per key of `keys` (distinct)."""
        self._parts.append((keys, sums))

    def totals(self):
        """(sorted unique keys, {name: int64 sums}) over every block added."""
        if not self._parts:
            return np.zeros(0, np.int64), {n: np.zeros(0, np.int64) for n in self.names}
        keys = np.concatenate([k for k, _ in self._parts])
        uniq, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        sums = {n: np.bincount(inverse, np.concatenate([s[n] for _, s in self._parts]), len(uniq)).astype(np.int64)
                for n in self.names}
        return uniq, sums

    def gathered(self, comm):
        """``totals`` over every analysis rank's blocks on analysis rank 0 (None elsewhere). Collective."""
        return gathered_totals(comm, self.totals(), self.names)


def gathered_totals(comm, totals, names=SUMS):
    """Every analysis rank's KeyedSums ``totals`` added on analysis rank 0 (None elsewhere).
    Collective.  Small: a row per key, and the keys carry the trace rank, so those of two
    analysis ranks never meet (each trace rank has one owner)."""
    parts = comm.gather(totals, root=0) if comm.size > 1 else [totals]
    return KeyedSums(names, parts).totals() if comm.rank == 0 else None


class Accumulator:
    """Relabels calls-table blocks with the run's call-site ids and sums their calls."""

    def __init__(self, sites: Sites, n_ranks: int):
        self.sites, self.n_ranks = sites, n_ranks
        self.n_functions = len(mf.names_array())
        self.sums = KeyedSums()     # keys = (callsite * n_functions + function) * n_ranks + rank
        self.wait_sums = KeyedSums(WAIT_SUMS)   # keys = (callsite * n_functions + function) * n_states + kind
        # Sums by a finer key (the per-phase twin, phases.callsites): each is given every relabelled block.
        self.twins = []

    def add(self, block: dict) -> dict:
        """Sets block["callsite"] (the shim's ids in, the run's out) and sums it; returns block."""
        rank = np.asarray(block["rank"], np.int64)
        func = np.asarray(block["function"].codes if hasattr(block["function"], "codes") else block["function"],
                          np.int64)
        ids = np.zeros(len(rank), np.int64)
        local = np.asarray(block["callsite"], np.int64)
        # Per run of one rank's rows (a block holds whole ranks, or pieces of one, in order): a
        # slice each, not a pass over the block's ranks per rank.
        for a, n in zip(*(x.tolist() for x in arrays.runs(rank))) if len(rank) else ():
            ids[a:a + n] = self.sites.run_ids(rank[a], local[a:a + n])
        block["callsite"] = ids
        site_function = ids * self.n_functions + func
        self.sums.add(block, site_function * self.n_ranks + rank)
        self._sum_waits(block, site_function)
        for twin in self.twins:
            twin.add(block)
        return block

    def _sum_waits(self, block, site_function):
        """The block's wait-state charges per (call site, function, kind), as
        metrics.run_tables.waitstate_rows counts them per rank (a point-to-point call whose wait is
        charged to both kinds counts under each, with its part).  Summed from the blocks as they
        pass, which carry the run's call-site ids already: no second pass over the calls."""
        from mpigraph.metrics import waits

        state = block["wait_state"]       # run_tables.call_block's Labels: code 0 is "no state"
        summed = call_kernel.charge_sums(site_function, *((state.codes, 1) if hasattr(state, "codes") else (state, 0)),
                                         block["wait_state_time"], block["other_state_time"],
                                         (len(waits.WAIT_STATES), waits.LATE_SENDER, waits.LATE_RECEIVER))
        if summed is not None:      # one pass in C
            self.wait_sums.add_summed(summed[0], dict(zip(WAIT_SUMS, summed[1])))
            return
        kind, time = waits.charged_states({"wait_state": state.codes - 1 if hasattr(state, "codes") else state,
                                           "wait_state_time": block["wait_state_time"],
                                           "other_state_time": block["other_state_time"]})
        has = kind >= 0
        keys = np.tile(site_function, 2)[has] * len(waits.WAIT_STATES) + kind[has]
        self.wait_sums.add_values(keys, {"calls": None, "time": np.asarray(time, np.int64)[has]})

    def waitstate_sums(self):
        """This analysis rank's wait-state sums per (call site, function, kind) of the blocks added:
        (keys = (site * n_functions + function) * n_states + kind, {"calls", "time"}), for
        ``combined_waitstates``."""
        return self.wait_sums.totals()

    def table(self, totals=None) -> dict:
        """The callsites table (schema.CALLSITE_COLUMNS) of per (call site, function, trace rank)
        sums (``KeyedSums.totals``; default: the blocks added here), rows by time, longest first."""
        keys, sums = self.sums.totals() if totals is None else totals
        pair_of_key = keys // self.n_ranks
        pairs, row = np.unique(pair_of_key, return_inverse=True)
        row = row.reshape(-1)
        n = len(pairs)
        out = {name: np.bincount(row, sums[name], n).astype(np.int64) for name in SUMS}
        out["ranks"] = np.bincount(row, None, n).astype(np.int64)
        out["time_cov"] = cov(row, sums["time"], n)
        ids = pairs // self.n_functions
        out["callsite"] = ids
        out["function"] = np.asarray(mf.names_array(), object)[pairs % self.n_functions]
        places = [self.sites.places[i] for i in ids.tolist()]       # per call site
        out["caller"] = np.array([p[1] for p in places], object)
        out["file"] = np.array([p[2] for p in places], object)
        out["line"] = np.array([p[3] for p in places], np.int64)
        out["object"] = np.array([p[0] for p in places], object)
        out["stack"] = np.array([p[4] for p in places], object)
        out["name"] = self.sites.names(ids, out["function"])
        order = np.lexsort((pairs, -out["time"]))
        return {k: np.asarray(v)[order] for k, v in out.items()}

    def combined(self, comm):
        """The callsites table of the whole run on analysis rank 0 (None elsewhere), from every
        analysis rank's sums per (call site, function, trace rank).  Collective.  The table is
        made from the per-trace-rank sums alone (the COV too), so it is the same for every number
        of analysis ranks."""
        whole = self.sums.gathered(comm)
        return None if whole is None else self.table(whole)


def with_creating_sites(communicators, sites) -> dict:
    """The communicators table (traffic.communicators) with the call site of each communicator's
    creating call (that of its rank 0: its creator and creator_site columns, the shim's id):
    callsite and callsite_name; 0 and "" for world and where unknown."""
    out = {k: v for k, v in communicators.items() if k not in ("creator", "creator_site")}
    creator = np.asarray(communicators["creator"], np.int64)
    known = creator >= 0
    ids = np.zeros(len(creator), np.int64)
    ids[known] = sites.any_rank_ids(creator[known], np.asarray(communicators["creator_site"], np.int64)[known])
    out["callsite"] = ids
    out["callsite_name"] = np.where(ids > 0, sites.names(ids, communicators["function"]), "").astype(object)
    return out


def combined_waitstates(comm, sums, sites: Sites):
    """The callsite_waitstates table (schema.CALLSITE_WAITSTATE_COLUMNS) on analysis rank 0 from
    every analysis rank's ``waitstate_sums`` (None elsewhere): the wait-state table's per-call-site
    twin, rows by time, longest first.  Collective."""
    from mpigraph.metrics import waits

    whole = gathered_totals(comm, sums, WAIT_SUMS)
    if whole is None:
        return None
    uniq, summed = whole
    calls, time = summed["calls"], summed["time"]
    n_functions, n_states = len(mf.names_array()), len(waits.WAIT_STATES)
    site, func, kind = uniq // n_states // n_functions, uniq // n_states % n_functions, uniq % n_states
    function = np.asarray(mf.names_array(), object)[func]
    order = np.lexsort((uniq, -time))
    out = {"callsite": site, "name": sites.names(site, function), "function": function,
           "kind": np.asarray(waits.WAIT_STATES, object)[kind], "calls": calls, "time": time}
    return {k: np.asarray(v)[order] for k, v in out.items()}


def cov(site, time, n):
    """Per call site: population std / mean of its ranks' times (0 where the mean is 0)."""
    count = np.bincount(site, None, n)
    mean = np.bincount(site, time, n) / np.maximum(count, 1)
    var = np.bincount(site, (time - mean[site]) ** 2, n) / np.maximum(count, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mean > 0, np.sqrt(var) / np.where(mean > 0, mean, 1), 0.0)


def summary_lines(table: dict, limit: int = 10) -> list:
    """The summary's call-site section: the longest call sites and those on the critical path."""
    # The phase API's marks (kind region) are no MPI calls: phases.csv shows them.
    marks = [f.name for f in mf.BY_NAME.values() if f.kind == mf.REGION]
    rows = np.flatnonzero(~np.isin(np.asarray(table["function"], object), marks))
    if not len(rows):
        return []
    # phase_callsites.csv is named by the phases section: only a run with phases has it.
    lines = ["", "Call sites (callsites.csv; per wait state and message size: callsite_waitstates.csv, "
                 "callsite_sizes.csv), by time:"]
    for i in rows[:limit]:
        lines.append("  %3d  %-50s %8d calls %12.6f s  wait %12.6f s  COV %.2f"
                     % (table["callsite"][i], table["name"][i], table["count"][i], table["time"][i] / 1e9,
                        table["wait"][i] / 1e9, table["time_cov"][i]))
    on_path = rows[table["path_time"][rows] > 0]
    if len(on_path):
        on_path = on_path[np.argsort(-table["path_time"][on_path], kind="stable")][:limit]
        lines.append("Call sites on the critical path (time of their calls on it):")
        lines += ["  %3d  %-50s %12.6f s" % (table["callsite"][i], table["name"][i], table["path_time"][i] / 1e9)
                  for i in on_path]
    return lines


def tracker(info, ranks=None, resolved=True) -> Accumulator:
    """An Accumulator of an analysis rank (info: trace.RunInfo; `ranks`: the trace ranks it owns,
    default all), their sites read beside the raw logs (`resolved`: see Sites); call
    ``sites.share(comm)`` before its part of the calls table passes through it (report.datasets),
    ``combined`` sums the parts."""
    ranks = range(info.world_size) if ranks is None else ranks
    return Accumulator(Sites(os.path.join(info.run_dir, "raw"), ranks, resolved), info.world_size)
