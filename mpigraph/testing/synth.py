"""Synthetic runs with a known critical path, for tests and benchmarks.

One generator, three outputs:

- raw logs, written exactly as the shim writes them (structures ``bsp`` and
  ``halo``, ``generate``; below), for every stage of the analysis;
- raw logs of a noisy run (``write_noisy``): no known path, but times drawn
  with realistic entropy (not round numbers), for what measures compression
  and sizes (the view, self-profiling);
- the path stage's input in memory (structure ``ring``, ``ring_run`` and
  ``path_input``; at the end of this module), the calls and dependency edges
  the match stage would give, for the path algorithms alone.

Both speak of *phases* (one repeat of the program's pattern), each with a *slow
rank* that computes longer and so is on the path, of ``compute_ns`` (the base
compute of a phase) and of ``seed``.

    python -m mpigraph.testing.synth OUT --ranks 64 --calls 10000 --structure halo

writes OUT/raw/rank-<r>.log for every trace rank, OUT/synth.json (what the
analysis must find: calls and times per function and per rank, the slow rank
of every phase, the critical path's length) and OUT/synth-path.npz (the
critical path segment by segment, in the columns of mpigraph.paths.segments).

Structures (one *phase* repeats until the calls per rank are used up):

- ``bsp``: compute, then a collective on MPI_COMM_WORLD (Allreduce on even
  phases, Barrier on odd).  One rank per phase, the *slow rank*, computes
  ``slow_ns`` longer and arrives last.  1 call per phase.
- ``halo``: compute, a halo exchange with both ring neighbours (Irecv left,
  Irecv right, Isend right, Isend left, Waitall with one completion part per
  request), compute, Allreduce.  The *late sender* of the phase (the slow
  rank's right neighbour) computes ``late_ns`` longer before its sends, so its
  left neighbour, the slow rank, waits in Waitall for it (late sender); the
  slow rank then computes ``slow_ns`` longer and arrives last at the Allreduce.
  6 calls (10 records) per phase.

Every rank also calls MPI_Init first and MPI_Finalize last; calls per rank is
rounded down to whole phases (``Expected.calls_per_rank`` says the count).

Times come from one global timeline (true ns).  Compute times have a
per-(rank, phase) jitter drawn from a hash, so any rank's times can be made
without the others: the generator first computes the phase lengths from the
slow ranks alone, then writes the logs one rank at a time (memory is one
rank's records).  Every assumption behind the known path (the slow rank
arrives last, the late sender's message is what the slow rank waits for) is
checked on the generated times, so bad parameters raise instead of writing a
run whose "known" path is wrong.

The critical path (docs/design.md's graph: compute, call and dependency edges, all
zero-slack on this perfect data) goes, phase by phase:

- bsp:  message (the previous slow rank's collective start releases this
  phase's slow rank) -> compute on the slow rank -> ...
- halo: message (previous slow rank -> late sender's Allreduce end) -> compute
  on the late sender -> its Irecv, Irecv, Isend (right) calls and the gaps
  between them -> message (its Isend to the left starts -> the slow rank's
  Waitall ends) -> compute on the slow rank -> ...

and ends with a message from the last slow rank to the *final rank* (the one
that reaches MPI_Finalize last) and that rank's compute up to MPI_Finalize.
It starts at the end of MPI_Init on its first rank.  Segment times are ns
from the run's start (the earliest end of MPI_Init), as the path algorithms
return them.
"""

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from collections import namedtuple

import numpy as np

from mpigraph.comm.parallel import Ownership
from mpigraph.paths import graph
from mpigraph.util import arrays
from mpigraph.trace import functions as mpi_functions
from mpigraph.trace import record

FID = {f.name: f.id for f in mpi_functions.FUNCTIONS}
STRUCTURES = ("bsp", "halo")
CALLS_PER_PHASE = {"bsp": 1, "halo": 6}
RECORDS_PER_PHASE = {"bsp": 1, "halo": 10}
MIN_RANKS = {"bsp": 2, "halo": 3}

T0_NS = 10**12           # the global release time of MPI_Init (true ns, CLOCK_MONOTONIC-like)
INIT_NS = 200_000        # MPI_Init lasts about this long
RANKS_PER_HOST = 32
HALO_TAG = 7
ALLREDUCE_BYTES = 8

# Salts of the jitter hash: one per kind of random duration.
_SALT_EXIT, _SALT_COMPUTE1, _SALT_COMPUTE2, _SALT_FINAL, _SALT_INIT = 1, 2, 3, 4, 5


@dataclasses.dataclass(frozen=True)
class Params:
    ranks: int = 4
    calls: int = 1000               # calls per rank, Init and Finalize included (rounded down to phases)
    structure: str = "bsp"
    seed: int = 1
    compute_ns: int = 20_000        # base compute time before each collective / halo
    jitter_ns: int = 2_000          # compute times vary by [0, jitter_ns) per rank and phase
    slow_ns: int = 10_000           # extra compute of the slow rank of a phase
    late_ns: int = 8_000            # extra compute of the late sender (halo)
    exec_ns: int = 1_500            # collective: last arrival to release
    exit_ns: int = 300              # ranks leave a collective up to this much after its release
    call_ns: int = 250              # duration of Irecv / Isend / an uncontended Waitall
    gap_ns: int = 100               # program time between the calls of a halo exchange
    latency_ns: int = 1_200         # message: send start to the receiver's completion
    message_bytes: int = 4096
    clock_source: str = "tsc"       # "tsc" (3 ticks per ns, calibration pairs) or "monotonic"
    ticks_per_ns: int = 3

    def check(self):
        if self.structure not in STRUCTURES:
            raise ValueError("structure %r: one of %s" % (self.structure, ", ".join(STRUCTURES)))
        if self.ranks < MIN_RANKS[self.structure]:
            raise ValueError("structure %s needs at least %d ranks" % (self.structure, MIN_RANKS[self.structure]))
        if self.phases < 1:
            raise ValueError("%d calls per rank: %s needs at least %d (Init, one phase, Finalize)"
                             % (self.calls, self.structure, 2 + CALLS_PER_PHASE[self.structure]))
        if self.clock_source not in ("tsc", "monotonic"):
            raise ValueError("clock_source: tsc or monotonic")
        if min(self.jitter_ns, self.exit_ns) < 1:
            raise ValueError("jitter_ns and exit_ns must be >= 1")

    @property
    def phases(self):
        return (self.calls - 2) // CALLS_PER_PHASE[self.structure]

    @property
    def calls_per_rank(self):
        return 2 + self.phases * CALLS_PER_PHASE[self.structure]

    @property
    def records_per_rank(self):
        return 2 + self.phases * RECORDS_PER_PHASE[self.structure]


# ---- deterministic jitter -------------------------------------------------------

_U = np.uint64


def _mix(x):
    """splitmix64's finaliser on a uint64 array."""
    x = x ^ (x >> _U(30))
    x = x * _U(0xBF58476D1CE4E5B9)
    x = x ^ (x >> _U(27))
    x = x * _U(0x94D049BB133111EB)
    return x ^ (x >> _U(31))


def jitter(seed, salt, rank, phase, span):
    """A pseudo-random int64 in [0, span) for each (rank, phase): the same every time it is asked."""
    rank = np.asarray(rank, np.int64).astype(np.uint64)
    phase = np.asarray(phase, np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        key = (rank * _U(0x9E3779B97F4A7C15)) ^ (phase * _U(0xC2B2AE3D27D4EB4F)) \
            ^ _U((seed * 0x165667B1 + salt * 0x27D4EB2F) & 0xFFFFFFFFFFFFFFFF)
        return (_mix(key) % _U(span)).astype(np.int64)


# ---- the global timeline ------------------------------------------------------------

class Timeline:
    """Per-phase facts every rank's log is made from: slow rank, late sender, release times.

    ``release[k]`` is the instant collective k-1 releases (``release[0]``: MPI_Init's), so
    collective k ends on rank r at ``release[k + 1] + exit``; all per-rank times of phase k are
    ``release[k]`` plus a rank-local offset (``Generator.phase_offsets``).
    """

    def __init__(self, params, slow_ranks=None):
        params.check()
        self.params = params
        self.slow = self._slow_ranks(slow_ranks)
        self.late = (self.slow + 1) % params.ranks if params.structure == "halo" else None
        self.final_rank = int((self.slow[-1] + 1) % params.ranks)

    def _slow_ranks(self, given):
        p = self.params
        # The path needs the release message to cross ranks: bsp S_k != S_k-1; halo also S_k != S_k-1 - 1.
        top = p.ranks - 1 if p.structure == "bsp" else p.ranks - 2
        if given is None:
            rng = np.random.default_rng(p.seed)
            steps = rng.integers(1, top + 1, p.phases)
            return (np.int64(rng.integers(p.ranks)) + np.cumsum(steps)) % p.ranks
        slow = np.asarray(given, np.int64)
        if slow.shape != (p.phases,) or slow.min() < 0 or slow.max() >= p.ranks:
            raise ValueError("slow_ranks: %d ranks in [0, %d) needed" % (p.phases, p.ranks))
        steps = (slow[1:] - slow[:-1]) % p.ranks
        if ((steps == 0) | (steps > top)).any():
            raise ValueError("slow_ranks: consecutive phases need different slow ranks%s"
                             % ("" if p.structure == "bsp" else ", and not the previous one's left neighbour"))
        return slow

    def set_release(self, slow_arrival):
        """release times from the slow ranks' arrival offsets at each phase's collective."""
        self.release = np.empty(self.params.phases + 1, np.int64)
        self.release[0] = T0_NS
        self.release[1:] = T0_NS + np.cumsum(slow_arrival + self.params.exec_ns)


class Generator:
    """Writes a synthetic run; ``expected()`` describes what the analysis must find."""

    def __init__(self, params, slow_ranks=None, clock_offsets_ns=None):
        self.p = params
        self.timeline = Timeline(params, slow_ranks)
        self.phase = np.arange(params.phases, dtype=np.int64)
        self.offsets = (np.zeros(params.ranks, np.int64) if clock_offsets_ns is None
                        else np.asarray(clock_offsets_ns, np.int64))
        self.slow_arrival = self._arrival(self.timeline.slow)
        self.timeline.set_release(self.slow_arrival)
        self._check_slow_arrival()
        self.totals = _FunctionTotals()

    # -- rank-local offsets from release[k], vectorised over phases; `rank` is a scalar or per-phase array

    def _exit(self, rank, phase):
        """Offset at which `rank` left collective phase-1 (phase 0: MPI_Init)."""
        return jitter(self.p.seed, _SALT_EXIT, rank, phase, self.p.exit_ns)

    def _compute(self, rank, salt, extra_rank, extra_ns, phase=None):
        phase = self.phase if phase is None else phase
        c = self.p.compute_ns + jitter(self.p.seed, salt, rank, phase, self.p.jitter_ns)
        return c + np.where(np.asarray(rank) == extra_rank, extra_ns, 0) if extra_rank is not None else c

    def _halo_start(self, rank):
        """Offset of the first Irecv of the halo exchange."""
        t = self.timeline
        return self._exit(rank, self.phase) + self._compute(rank, _SALT_COMPUTE1, t.late, self.p.late_ns)

    def phase_offsets(self, rank):
        """{event: offset from release[k]} of `rank` in every phase k."""
        p, t = self.p, self.timeline
        if p.structure == "bsp":
            arrival = self._exit(rank, self.phase) + self._compute(rank, _SALT_COMPUTE1, t.slow, p.slow_ns)
            return {"arrival": arrival}
        step = p.call_ns + p.gap_ns
        a0 = self._halo_start(rank)
        from_left = self._halo_start((rank - 1) % p.ranks) + 2 * step + p.latency_ns   # its Isend right
        from_right = self._halo_start((rank + 1) % p.ranks) + 3 * step + p.latency_ns  # its Isend left
        wait_start = a0 + 4 * step
        wait_end = np.maximum(wait_start + p.call_ns, np.maximum(from_left, from_right))
        arrival = wait_end + self._compute(rank, _SALT_COMPUTE2, t.slow, p.slow_ns)
        return {"halo_start": a0, "wait_start": wait_start, "wait_end": wait_end, "arrival": arrival,
                "from_left": from_left, "from_right": from_right}

    def _arrival(self, rank):
        return self.phase_offsets(rank)["arrival"]

    def _check_slow_arrival(self):
        if self.p.structure == "halo":
            o = self.phase_offsets(self.timeline.slow)
            if not (o["from_right"] > np.maximum(o["from_left"], o["wait_start"] + self.p.call_ns)).all():
                raise ValueError("late_ns too small: the slow rank's Waitall does not wait for the late sender")

    # -- one rank's log

    def rank_times(self, rank):
        """True ns of one rank: Init (start, end), per phase offsets + release, Finalize."""
        p, t = self.p, self.timeline
        offsets = self.phase_offsets(rank)
        others = t.slow != rank
        if not (offsets["arrival"][others] < self.slow_arrival[others]).all():
            raise ValueError("slow_ns too small: rank %d arrives at a collective after the slow rank" % rank)
        final = (t.release[-1] + self._exit(rank, p.phases)
                 + self._compute(rank, _SALT_FINAL, t.final_rank, p.slow_ns, phase=p.phases))
        init_end = T0_NS + self._exit(rank, 0)
        init_start = T0_NS - INIT_NS - jitter(p.seed, _SALT_INIT, rank, 0, p.jitter_ns)
        coll_end = t.release[1:] + self._exit(rank, self.phase + 1)
        return offsets, init_start, int(init_end), coll_end, int(final)

    def rank_records(self, rank):
        """(header, records) of one rank, exactly as the shim writes them."""
        p, t = self.p, self.timeline
        offsets, init_start, init_end, coll_end, final = self.rank_times(rank)
        body = (self._bsp_records if p.structure == "bsp" else self._halo_records)(rank, offsets, coll_end)
        records = np.empty(p.records_per_rank, record.RECORD_DTYPE)
        records[0] = _blank(1)[0]
        records[1:-1] = body
        records[-1] = _blank(1)[0]
        records["func"][[0, -1]] = FID["MPI_Init"], FID["MPI_Finalize"]
        records["t_start"][[0, -1]] = init_start, final
        records["t_end"][[0, -1]] = init_end, final
        self.totals.add(records)
        header = self._header(rank, init_start, init_end, final)
        self._to_ticks(rank, records)
        return header, records

    def _bsp_records(self, rank, offsets, coll_end):
        p, t = self.p, self.timeline
        out = _blank(p.phases)
        even = self.phase % 2 == 0
        out["func"] = np.where(even, FID["MPI_Allreduce"], FID["MPI_Barrier"])
        out["bytes"] = np.where(even, ALLREDUCE_BYTES, 0)
        out["t_start"] = t.release[:-1] + offsets["arrival"]
        out["t_end"] = coll_end
        out["seq"] = self.phase + 1
        return out

    def _halo_records(self, rank, offsets, coll_end):
        p, t = self.p, self.timeline
        left, right = (rank - 1) % p.ranks, (rank + 1) % p.ranks
        base = t.release[:-1]
        out = _blank(p.phases * 10).reshape(p.phases, 10)
        step = p.call_ns + p.gap_ns
        first_request = 4 * self.phase + 1
        # The four posts: Irecv left, Irecv right, Isend right, Isend left.
        for j, (name, peer, flag) in enumerate([("MPI_Irecv", left, record.RECV), ("MPI_Irecv", right, record.RECV),
                                               ("MPI_Isend", right, record.SEND), ("MPI_Isend", left, record.SEND)]):
            col = out[:, j]
            col["func"], col["peer"], col["tag"], col["flags"] = FID[name], peer, HALO_TAG, flag
            col["t_start"] = base + offsets["halo_start"] + j * step
            col["t_end"] = col["t_start"] + p.call_ns
            col["bytes"], col["request"] = p.message_bytes, first_request + j
        wait = out[:, 4:9]
        wait["func"] = FID["MPI_Waitall"]
        wait["t_start"] = (base + offsets["wait_start"])[:, None]
        wait["t_end"] = (base + offsets["wait_end"])[:, None]
        parts = out[:, 5:9]
        parts["flags"] = record.PART | out[:, 0:4]["flags"]
        for name in ("peer", "tag", "bytes", "request"):
            parts[name] = out[:, 0:4][name]
        coll = out[:, 9]
        coll["func"], coll["bytes"], coll["seq"] = FID["MPI_Allreduce"], ALLREDUCE_BYTES, self.phase + 1
        coll["t_start"] = base + offsets["arrival"]
        coll["t_end"] = coll_end
        return out.reshape(-1)

    # -- header and clock

    def _local(self, rank, true_ns):
        return np.asarray(true_ns, np.int64) + self.offsets[rank]

    def _tick0(self, rank):
        return 5 * 10**11 + rank * 1_000_003

    def _to_ticks(self, rank, records):
        for name in ("t_start", "t_end"):
            records[name] = self._ticks(rank, self._local(rank, records[name]))

    def _ticks(self, rank, local_ns):
        if self.p.clock_source == "monotonic":
            return local_ns
        return (local_ns - T0_NS) * self.p.ticks_per_ns + self._tick0(rank)

    def _header(self, rank, init_start, init_end, final):
        p = self.p
        h = record.empty_header(rank, p.ranks)
        h["flags"] = record.HEADER_FINALIZED
        h["pid"] = 10_000 + rank
        h["clock_source"] = record.CLOCK_TSC if p.clock_source == "tsc" else record.CLOCK_MONOTONIC
        h["n_functions"] = len(mpi_functions.FUNCTIONS)
        h["hostname"] = ("synth%03d" % (rank // RANKS_PER_HOST)).encode()
        h["job_id"] = ("synth-%s-%dx%d-s%d" % (p.structure, p.ranks, p.calls, p.seed)).encode()
        h["start_unix_ns"] = 1_700_000_000 * 10**9
        h["sync_parent"] = -1 if rank == 0 else rank - (rank & -rank)
        h["sync_pingpongs"] = 10
        if p.clock_source == "tsc":
            for slot, when in ((record.CALIB_INIT_A, init_start), (record.CALIB_INIT_B, init_end),
                               (record.CALIB_FINAL, final + 1_000)):
                local = int(self._local(rank, when))
                h["calib_ns"][slot] = local
                h["calib_ticks"][slot] = int(self._ticks(rank, local))
        self._sync_samples(h["sync_init"], rank, T0_NS - INIT_NS // 2)
        self._sync_samples(h["sync_final"], rank, int(self.timeline.release[-1]) + 10 * p.compute_ns)
        return h

    def _sync_samples(self, sync, rank, when):
        """Clock samples as csrc/clock_sync.c leaves them, taken around true time `when`."""
        p = self.p
        parent = rank - (rank & -rank)
        rtt = 2 * p.latency_ns
        if rank:
            sync["offset_ns"] = self.offsets[rank] - self.offsets[parent]
            sync["rtt_ns"] = rtt
        sync["local_ns"] = self._local(rank, when)
        leave = when + 5_000 * (1 + np.arange(record.N_BARRIER_SAMPLES))
        sync["barrier_ns"][:, 0] = self._local(rank, leave - 3_000 - jitter(p.seed, 6, rank, 0, p.exit_ns))
        sync["barrier_ns"][:, 1] = self._local(rank, leave + jitter(p.seed, 7, rank, 0, p.exit_ns))

    # -- writing and the expected results

    def write(self, out_dir, progress=None):
        """Write every rank's log into out_dir/raw, then synth.json and synth-path.npz."""
        raw = os.path.join(out_dir, "raw")
        os.makedirs(raw, exist_ok=True)
        for rank in range(self.p.ranks):
            header, records = self.rank_records(rank)
            record.write_log(os.path.join(raw, "rank-%d.log" % rank), header, records)
            if progress:
                progress(rank)
        expected = self.expected()
        expected.save(out_dir)
        return expected

    def expected(self):
        """The Expected facts of this run (function totals need every rank written or made first)."""
        return Expected(self.p, self.timeline, self.totals, self.path())

    def path(self):
        """The critical path as critical_path.segments columns (ns from the run's start)."""
        return _path_segments(self)


def _blank(n):
    """n records with the fields the shim leaves unset for a call without peer, tag or root."""
    out = np.zeros(n, record.RECORD_DTYPE)
    out["peer"] = record.PEER_NONE
    out["tag"] = record.TAG_NONE
    out["root"] = record.ROOT_NONE
    return out


class _FunctionTotals:
    """calls, total / min / max duration (true ns) per function over the ranks written so far."""

    def __init__(self):
        self.by_name = {}
        self.ranks = {}

    def add(self, records):
        calls = records[(records["flags"] & record.PART) == 0]
        duration = calls["t_end"] - calls["t_start"]
        for func in arrays.unique(calls["func"]):
            d = duration[calls["func"] == func]
            name = mpi_functions.name_of(func)
            old = self.by_name.get(name, {"calls": 0, "time_total": 0, "time_min": d.min(), "time_max": d.max()})
            self.by_name[name] = {"calls": old["calls"] + len(d), "time_total": old["time_total"] + int(d.sum()),
                                  "time_min": int(min(old["time_min"], d.min())),
                                  "time_max": int(max(old["time_max"], d.max()))}
        rank = len(self.ranks)
        self.ranks[rank] = {"program_start": int(records["t_end"][0]), "program_end": int(records["t_start"][-1]),
                            "mpi_time": int(duration[1:-1].sum())}


def _path_segments(gen):
    """Segments (rank, kind, function, peer, start, end) of the known path, vectorised over phases."""
    p, t = gen.p, gen.timeline
    release = t.release
    k = gen.phase
    rows = []   # (rank, kind, function, peer, start, end), each a per-phase array or scalar

    def add(rank, kind, function, peer, start, end):
        rows.append([np.broadcast_to(np.asarray(v), k.shape) for v in (rank, kind, function, peer, start, end)])

    first = t.slow if p.structure == "bsp" else t.late
    prev_slow = np.roll(t.slow, 1)
    coll_name = np.where(k % 2 == 1, "MPI_Allreduce", "MPI_Barrier") if p.structure == "bsp" else "MPI_Allreduce"
    prev_arrival = release[:-1] - p.exec_ns
    compute_start = release[:-1] + gen._exit(first, k)
    add(first, "message", coll_name, prev_slow, prev_arrival, compute_start)
    slow = gen.phase_offsets(t.slow)
    if p.structure == "bsp":
        add(t.slow, "compute", "", -1, compute_start, release[:-1] + slow["arrival"])
    else:
        a0 = release[:-1] + gen.phase_offsets(t.late)["halo_start"]
        add(t.late, "compute", "", -1, compute_start, a0)
        step = p.call_ns + p.gap_ns
        for j, name in enumerate(["MPI_Irecv", "MPI_Irecv", "MPI_Isend"]):
            add(t.late, "mpi", name, -1, a0 + j * step, a0 + j * step + p.call_ns)
            add(t.late, "compute", "", -1, a0 + j * step + p.call_ns, a0 + (j + 1) * step)
        add(t.slow, "message", "MPI_Waitall", t.late, a0 + 3 * step, release[:-1] + slow["wait_end"])
        add(t.slow, "compute", "", -1, release[:-1] + slow["wait_end"], release[:-1] + slow["arrival"])
    table = [np.stack(col, axis=1).reshape(-1) for col in zip(*rows)]   # phase-major order
    table = [col[1:] for col in table]                                   # phase 0 starts at Init's end
    final_rank, final = t.final_rank, gen.rank_times(t.final_rank)
    last_end = int(release[-1] + gen._exit(final_rank, p.phases))
    last_name = "MPI_Allreduce" if p.structure == "halo" or (p.phases - 1) % 2 == 0 else "MPI_Barrier"
    tail = [np.array(v) for v in zip((final_rank, "message", last_name, t.slow[-1], release[-1] - p.exec_ns, last_end),
                                     (final_rank, "compute", "", -1, last_end, final[4]))]
    table = [np.concatenate([col, extra]) for col, extra in zip(table, tail)]
    rank, kind, function, peer, start, end = table
    run_start = T0_NS + int(gen._exit(np.arange(p.ranks), 0).min())
    return {"rank": rank.astype(np.int64), "kind": kind.astype(object), "function": function.astype(object),
            "peer": peer.astype(np.int64), "start": start.astype(np.int64) - run_start,
            "end": end.astype(np.int64) - run_start}


class Expected:
    """What the analysis of a synthetic run must find.

    Attributes: params, slow_ranks, late_ranks (halo, else None), final_rank,
    functions ({name: calls, time_total, time_min, time_max}), ranks ({rank:
    program_start, program_end (true ns), mpi_time}), path (segment columns),
    path_length_ns, run_start_ns.
    """

    def __init__(self, params, timeline, totals, path):
        self.params = params
        self.slow_ranks = timeline.slow
        self.late_ranks = timeline.late
        self.final_rank = timeline.final_rank
        self.functions = totals.by_name
        self.ranks = totals.ranks
        self.path = path
        self.path_length_ns = int(path["end"][-1] - path["start"][0])

    def summary(self):
        p = self.params
        return {
            "params": dataclasses.asdict(p),
            "phases": p.phases, "calls_per_rank": p.calls_per_rank, "records_per_rank": p.records_per_rank,
            "records": p.records_per_rank * p.ranks, "final_rank": self.final_rank,
            "path_length_ns": self.path_length_ns, "path_segments": len(self.path["rank"]),
            "functions": self.functions,
            "slow_ranks_first": self.slow_ranks[:16].tolist(),
        }

    def save(self, out_dir):
        with open(os.path.join(out_dir, "synth.json"), "w") as f:
            json.dump(self.summary(), f, indent=1, default=int)
        np.savez_compressed(os.path.join(out_dir, "synth-path.npz"), slow_ranks=self.slow_ranks,
                            late_ranks=self.late_ranks if self.late_ranks is not None else np.zeros(0, np.int64),
                            **{k: (v.astype(str) if v.dtype == object else v) for k, v in self.path.items()})


def generate(out_dir, ranks, calls, structure="bsp", slow_ranks=None, clock_offsets_ns=None, **params):
    """Write a synthetic run into out_dir; returns its Expected."""
    gen = Generator(Params(ranks=ranks, calls=calls, structure=structure, **params), slow_ranks, clock_offsets_ns)
    return gen.write(out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m mpigraph.testing.synth", description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--calls", type=int, default=1000, help="calls per rank")
    parser.add_argument("--structure", choices=STRUCTURES, default="bsp")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    if os.path.exists(args.out):
        if not args.force:
            parser.error("%s exists (--force replaces it)" % args.out)
        shutil.rmtree(args.out)
    started = time.perf_counter()
    gen = Generator(Params(ranks=args.ranks, calls=args.calls, structure=args.structure, seed=args.seed))
    step = max(1, args.ranks // 10)
    expected = gen.write(args.out, progress=lambda r: (r + 1) % step or print(
        "  %d/%d ranks, %.1f s" % (r + 1, args.ranks, time.perf_counter() - started), file=sys.stderr))
    size = sum(e.stat().st_size for e in os.scandir(os.path.join(args.out, "raw")))
    print("%s: %d ranks x %d calls (%d records, %.2f GB on disk) in %.1f s; path %.6f s in %d segments"
          % (args.out, args.ranks, gen.p.calls_per_rank, gen.p.records_per_rank * args.ranks, size / 1e9,
             time.perf_counter() - started, expected.path_length_ns / 1e9, len(expected.path["rank"])))
    return 0


# ---- a noisy run: raw logs with realistic entropy, no known path -------------------------
#
# Each phase every rank computes (a per-rank load times log-normal noise, ns times), calls
# MPI_Allreduce (everybody leaves after the last one arrived), then exchanges halos with
# MPI_Sendrecv to the right and to the left (each ends after its partner arrived plus a
# transfer time).  Made phase by phase with numpy over the ranks (the dependencies run along
# time); each rank's records are then filled column by column.

NOISY_CALLS_PER_PHASE = 3      # Allreduce, Sendrecv right, Sendrecv left
NOISY_RECORDS_PER_PHASE = 5    # the two Sendrecvs each have a receive part


def noisy_times(ranks: int, phases: int, seed: int = 1) -> tuple:
    """(start, end) arrays [phase, call in phase, rank] of int64 ns of a noisy run."""
    rng = np.random.default_rng(seed)
    load = 150_000 * (1 + 0.5 * rng.random(ranks))          # ns of compute per phase, per rank
    start = np.zeros((phases, NOISY_CALLS_PER_PHASE, ranks), np.int64)
    end = np.zeros_like(start)
    t = np.full(ranks, 1_000_000, np.int64) + rng.integers(0, 5000, ranks)
    right, left = np.roll(np.arange(ranks), -1), np.roll(np.arange(ranks), 1)
    noise = rng.lognormal(0.0, 0.15, (phases, ranks))
    small = rng.integers(300, 3000, (phases, 4, ranks))
    for it in range(phases):
        arrive = t + (load * noise[it]).astype(np.int64)
        start[it, 0] = arrive
        end[it, 0] = arrive.max() + 15_000 + small[it, 0]
        a = end[it, 0] + small[it, 1]
        start[it, 1] = a
        end[it, 1] = np.maximum(a, a[right]) + 2_000 + small[it, 2] // 4      # partner: the right neighbour
        b = end[it, 1] + small[it, 3] // 2
        start[it, 2] = b
        end[it, 2] = np.maximum(b, b[left]) + 2_000 + small[it, 2] // 3
        t = end[it, 2]
    return start, end


def write_noisy(run_dir, ranks: int = 64, calls: int = 100_000, seed: int = 1, job_id: str = "synthetic") -> int:
    """Write run_dir/raw/rank-<r>.log of a noisy run for every rank; returns the calls per
    rank (`calls`, Init and Finalize included, rounded down to whole phases; one phase at least)."""
    phases = max(1, (calls - 2) // NOISY_CALLS_PER_PHASE)
    start, end = noisy_times(ranks, phases, seed)
    raw = os.path.join(str(run_dir), "raw")
    os.makedirs(raw, exist_ok=True)
    n = 2 + phases * NOISY_RECORDS_PER_PHASE
    right, left = np.roll(np.arange(ranks), -1), np.roll(np.arange(ranks), 1)
    for r in range(ranks):
        recs = _blank(n)
        recs[0]["func"], recs[0]["t_start"], recs[0]["t_end"] = FID["MPI_Init"], 0, 900_000
        body = recs[1:-1].reshape(phases, NOISY_RECORDS_PER_PHASE)
        it = np.arange(phases)
        # 0: Allreduce
        body["func"][:, 0] = FID["MPI_Allreduce"]
        body["t_start"][:, 0], body["t_end"][:, 0] = start[:, 0, r], end[:, 0, r]
        body["bytes"][:, 0] = 8
        body["seq"][:, 0] = it + 1
        # 1, 2: Sendrecv to the right (send to right, receive from left), its receive part
        # 3, 4: Sendrecv to the left (send to left, receive from right), its receive part
        for k, (call, dest, source, tag) in enumerate(((1, right[r], left[r], 1), (2, left[r], right[r], 2))):
            c, p = 1 + 2 * k, 2 + 2 * k
            for j in (c, p):
                body["func"][:, j] = FID["MPI_Sendrecv"]
                body["t_start"][:, j], body["t_end"][:, j] = start[:, call, r], end[:, call, r]
                body["tag"][:, j] = tag
                body["bytes"][:, j] = 4096
            body["peer"][:, c], body["flags"][:, c] = dest, record.SEND
            body["peer"][:, p], body["flags"][:, p] = source, record.RECV | record.PART
        recs[-1]["func"] = FID["MPI_Finalize"]
        recs[-1]["t_start"] = recs[-1]["t_end"] = end[-1, 2, r] + 10_000
        header = record.empty_header(r, ranks)
        header["job_id"] = job_id.encode()
        header["hostname"] = b"synth%d" % (r // 16)
        header["pid"] = 1000 + r
        header["clock_source"] = record.CLOCK_MONOTONIC
        header["n_functions"] = len(mpi_functions.FUNCTIONS)
        header["flags"] = record.HEADER_FINALIZED
        record.write_log(os.path.join(raw, "rank-%d.log" % r), header, recs)
    return 2 + phases * NOISY_CALLS_PER_PHASE


# ---- structure ring: the path stage's input, in memory ------------------------------
#
# Each phase every rank computes (the phase's slow rank compute_ns longer), sends to its
# right neighbour and receives from its left (blocking, eager: a late sender makes the
# receive wait), and every `sync_every` phases all ranks meet in an MPI_Allreduce.  The run
# starts with MPI_Init and ends with a barrier and MPI_Finalize.  Times are exact (every wait
# explained by a dependency) unless `clock_noise_ns` moves them.  No log is written: the
# calls and edges are the match stage's output for the run (graph.RankCalls, Dependencies).

RingRun = namedtuple("RingRun", "start end func deps slow_ranks")   # (ranks, calls) arrays; slow rank per phase
RING_LATENCY_NS = 1_000    # from a send's start to the receive's end, at the earliest
RING_CALL_NS = 200         # how long a call takes when it does not wait


class _RingRecorder:
    """Calls per rank as growing lists of arrays (one entry per simulated step)."""

    def __init__(self, ranks):
        self.n = ranks
        self.start, self.end, self.func = [], [], []
        self.deps = []          # (src_rank, src_call, src_vertex, dst_rank, dst_call, kind) arrays
        self.count = 0          # calls so far on every rank (all ranks make the same number)

    def call(self, name, start, end):
        self.start.append(np.asarray(start, np.int64))
        self.end.append(np.asarray(end, np.int64))
        self.func.append(np.full(self.n, FID[name], np.int64))
        self.count += 1
        return self.count - 1

    def dep(self, src_rank, src_call, dst_rank, dst_call, kind):
        n = len(dst_rank)
        self.deps.append([np.broadcast_to(np.asarray(v, np.int64), n) for v in
                          (src_rank, src_call, np.zeros(n), dst_rank, dst_call, np.full(n, kind))])


def _ring_collective(rec, name, t):
    """All ranks enter at t; all leave RING_CALL_NS after the last arrival."""
    last = int(np.lexsort((np.arange(rec.n), -t))[0])
    end = np.full(rec.n, t[last] + RING_CALL_NS)
    call = rec.call(name, t, end)
    rec.dep(last, call, np.arange(rec.n), call, graph.N_TO_N)
    return end


def ring_run(ranks: int, phases: int, sync_every: int = 1, seed: int = 0, clock_noise_ns: int = 0,
             compute_ns: int = 100_000) -> RingRun:
    """A RingRun: start, end, func as (ranks, calls) arrays, the Dependencies of all ranks, and
    the slow rank of each phase.  A phase's compute is U[compute_ns / 2, compute_ns) per rank,
    plus compute_ns on its slow rank."""
    rng = np.random.default_rng(seed)
    rec = _RingRecorder(ranks)
    every = np.arange(ranks)
    t = rng.integers(0, 1000, ranks)
    rec.call("MPI_Init", t, t + 5 * RING_CALL_NS)
    t = t + 5 * RING_CALL_NS
    slow = rng.integers(0, ranks, phases)
    for i in range(phases):
        work = rng.integers(compute_ns // 2, compute_ns, ranks)
        work[slow[i]] += compute_ns
        t = t + work
        if ranks > 1:
            send = rec.call("MPI_Send", t, t + RING_CALL_NS)
            t = t + 2 * RING_CALL_NS
            left = (every - 1) % ranks
            arrival = np.asarray(rec.start[send])[left] + RING_LATENCY_NS
            recv_end = np.maximum(t + RING_CALL_NS, arrival)
            recv = rec.call("MPI_Recv", t, recv_end)
            rec.dep(left, send, every, recv, graph.LATE_SENDER)
            t = recv_end
        if (i + 1) % sync_every == 0:
            t = _ring_collective(rec, "MPI_Allreduce", t + RING_CALL_NS)
    t = _ring_collective(rec, "MPI_Barrier", t + RING_CALL_NS)
    t = t + RING_CALL_NS
    rec.call("MPI_Finalize", t, t + RING_CALL_NS)
    start, end, func = (np.stack(c, axis=1) for c in (rec.start, rec.end, rec.func))
    if clock_noise_ns:
        start, end = _clock_noise(rng, start, end, clock_noise_ns)
    deps = graph.Dependencies(*(np.concatenate(c) for c in zip(*rec.deps))) if rec.deps \
        else graph.Dependencies.empty()
    return RingRun(start, end, func, deps, slow)


def _clock_noise(rng, start, end, noise_ns):
    """Noisy clocks: every time moved by up to noise_ns, then kept in order on each rank."""
    times = np.empty((start.shape[0], 2 * start.shape[1]), np.int64)
    times[:, 0::2], times[:, 1::2] = start, end
    times = np.sort(times + rng.integers(-noise_ns, noise_ns + 1, times.shape), axis=1)
    return times[:, 0::2], times[:, 1::2]


def path_input(run: RingRun, n_analysis: int = 1, me: int = 0) -> graph.PathInput:
    """The PathInput analysis rank `me` of `n_analysis` would hold of a RingRun."""
    start, end, func, deps = run[:4]
    n_ranks = start.shape[0]
    mine = Ownership(n_ranks, n_analysis).ranks_of(me)
    calls = {r: graph.RankCalls(func[r], start[r], end[r]) for r in mine}
    owned = (deps.dst_rank >= mine.start) & (deps.dst_rank < mine.stop)
    return graph.PathInput(n_ranks, calls, graph.Dependencies(
        deps.src_rank[owned], deps.src_call[owned], deps.src_vertex[owned], deps.dst_rank[owned],
        deps.dst_call[owned], deps.kind[owned]))


if __name__ == "__main__":
    sys.exit(main())
