"""Timestamps: a rank's raw ticks to nanoseconds.

The shim stamps records with ticks of a fast clock (``clock_source`` in the
header).  For CLOCK_MONOTONIC the ticks are already nanoseconds.  For the TSC
the header holds up to four calibration pairs (ticks, CLOCK_MONOTONIC ns)
taken at MPI_Init, when the log grows and at MPI_Finalize; the conversion is
the straight line through the earliest and the latest pair that were set
(``calib_ns`` 0 means unset), so a log cut short by a crash still converts with
the pairs it has (the shim always sets two at MPI_Init, a millisecond apart).

Cross-rank alignment (docs/design.md, "Clock alignment") works on those ns: the
header's sync samples (csrc/clock_sync.c) give each rank's offset to rank 0
at MPI_Init and at MPI_Finalize, and ``Lines`` holds, per rank, the straight
line through both (offset plus drift); ``to_global`` subtracts it.

Hosts, not ranks, are aligned: ranks with the same hostname and kernel boot id
(header fields; ``host_index``) read one CLOCK_MONOTONIC (an invariant TSC is
converted to it by the calibration pairs above), so they get one line, their
host's: the line of the host's lowest rank (its *leader*), which each method
estimates against another host.  On a single host every offset and drift is
exactly 0; estimating them per rank would only add the estimate's noise
(milliseconds and thousands of ppm on a busy node: false receive-before-send
violations).  A rank whose header names no host is a host of its own.  Methods:

- pingpong: each host leader's best ping-pong against its parent in a binomial
  tree (always a lower rank, so on another host), the lines composed from the
  leaves up to rank 0 (exactly, as lines);
- barrier: the seed-004 baseline (section 5.4): the exit times of N barriers
  compared with rank 0's, differences smaller than the barrier's duration
  nullified, the median taken;
- none: the clocks are trusted.
"""

from collections import namedtuple

import numpy as np

from mpigraph.trace import record

# ns = ns0 + (ticks - ticks0) * ns_per_tick
Conversion = namedtuple("Conversion", "ticks0 ns0 ns_per_tick")

IDENTITY = Conversion(0, 0, 1.0)


class ClockError(ValueError):
    """The header cannot convert ticks to ns (the message does not name the file: the caller does)."""


def conversion_from_header(header):
    """The ticks -> ns line of one log header.

    CLOCK_MONOTONIC ticks go through the calibration pairs too when the shim
    set two or more: the pairs' ns are the rank's clock as the sync samples
    see it (with the test-only skew of csrc/clock_sync.c), and the records
    must be on the same clock as those samples.  Without pairs: identity.
    """
    source = int(header["clock_source"])
    if source not in (record.CLOCK_MONOTONIC, record.CLOCK_TSC):
        raise ClockError("unknown clock source %d (known: %d monotonic, %d tsc)"
                         % (source, record.CLOCK_MONOTONIC, record.CLOCK_TSC))
    # Python ints, not numpy: four pairs, read once per log (thousands of logs).
    pairs = [(t, n) for t, n in zip(header["calib_ticks"].tolist(), header["calib_ns"].tolist()) if n != 0]
    if source == record.CLOCK_MONOTONIC and len(pairs) < 2:
        return IDENTITY
    if len(pairs) < 2:
        raise ClockError("TSC clock with %d calibration pair(s) set: at least 2 are needed" % len(pairs))
    ticks = [t for t, _ in pairs]
    first, last = ticks.index(min(ticks)), ticks.index(max(ticks))     # the first of equals, as argmin
    (ticks_first, ns_first), (ticks_last, ns_last) = pairs[first], pairs[last]
    span = ticks_last - ticks_first
    if span <= 0:
        raise ClockError("TSC calibration pairs do not span any ticks")
    slope = (ns_last - ns_first) / span
    if not slope > 0:
        raise ClockError("TSC calibration gives a non-increasing clock (%g ns per tick)" % slope)
    return Conversion(ticks_first, ns_first, slope)


def convert(conversion, ticks):
    """Apply a Conversion to an array of ticks; int64 ns.

    The product is taken on the difference to ticks0 in float64: a run of
    10^4 s at 3 GHz spans 3e13 ticks, far inside float64's exact range, so the
    error stays well under a nanosecond.
    """
    ticks = np.asarray(ticks)
    if conversion is IDENTITY or conversion == IDENTITY:
        return ticks.astype(np.int64, copy=False)
    return _converted(ticks, np.int64(conversion.ticks0), np.int64(conversion.ns0), conversion.ns_per_tick)


def _converted(ticks, ticks0, ns0, ns_per_tick):
    """ns0 + rint((ticks - ticks0) * ns_per_tick), int64; the line's terms scalars or one per tick."""
    out = np.subtract(ticks, ticks0, dtype=np.int64)
    ns = np.multiply(out, ns_per_tick)                  # float64
    np.rint(ns, out=ns)
    np.copyto(out, ns, casting="unsafe")                # astype(np.int64)'s cast, into the difference's buffer
    out += ns0
    return out


class RowConversions:
    """The Conversions of several logs as columns over their records end to end (log i's
    repeated lengths[i] times): ``to_ns`` converts each record's ticks by its own log's line in
    one pass, where a pass per log costs a few numpy calls per log (thousands of small logs)."""

    def __init__(self, logs, lengths):
        conversions = [log.clock for log in logs]
        identity = np.array([c is IDENTITY or c == IDENTITY for c in conversions], bool)
        self.identity = None if not identity.any() else np.repeat(identity, lengths)
        self.all_identity = bool(identity.all())
        columns = zip(*conversions) if conversions else ((), (), ())
        self.ticks0, self.ns0, self.ns_per_tick = (np.repeat(np.array(c, dtype), lengths) for c, dtype in
                                                   zip(columns, (np.int64, np.int64, np.float64)))

    def to_ns(self, ticks):
        """int64 ns of the rows' ticks (convert's operations, each row by its own log's line)."""
        if self.all_identity:
            return ticks.astype(np.int64, copy=False)
        out = _converted(ticks, self.ticks0, self.ns0, self.ns_per_tick)
        return out if self.identity is None else np.where(self.identity, ticks, out)


def to_ns(log, ticks):
    """Ticks of rank log `log` (a trace.RankLog) as int64 ns on that rank's CLOCK_MONOTONIC."""
    return convert(log.clock, ticks)


# ---- cross-rank alignment ---------------------------------------------------------

METHODS = ("pingpong", "barrier", "none")

# One row per trace rank: what its header says about its clock against the others.
SAMPLES_DTYPE = np.dtype([("rank", "<i4"), ("parent", "<i4"), ("init", record.SYNC_DTYPE),
                          ("final", record.SYNC_DTYPE), ("hostname", "S64"), ("boot_id", "S40")])


def samples_of(logs):
    """SAMPLES_DTYPE rows of the logs (a {rank: RankLog}), in rank order."""
    ranks = sorted(logs)
    # The headers side by side, each field taken once for all: a field of one header read at a
    # time costs microseconds, and a run has thousands of ranks.
    headers = np.array([logs[rank].header for rank in ranks], record.HEADER_DTYPE)
    rows = np.zeros(len(ranks), SAMPLES_DTYPE)
    rows["rank"] = ranks
    rows["parent"] = headers["sync_parent"]
    rows["init"], rows["final"] = headers["sync_init"], headers["sync_final"]
    rows["hostname"], rows["boot_id"] = headers["hostname"], headers["boot_id"]
    return rows


def host_index(samples):
    """Per rank (samples in rank order), the index of its host: equal hostname and boot id.

    Both must be equal: a hostname alone can be shared by different machines
    (cloned VMs, containers named "localhost"), a boot id alone by nothing
    else, but logs written without one have it empty.  A rank with no hostname
    is its own host: nothing says which clock it shares."""
    samples = np.sort(samples, order="rank")
    # The key: (hostname, boot id, the rank where there is no hostname, else -1), compared as
    # bytes.  Not numpy's string functions: numpy.char's import is a few ms of every analysis rank.
    keys = np.empty(len(samples), [("host", samples.dtype["hostname"]), ("boot", samples.dtype["boot_id"]),
                                   ("rank", np.int64)])
    keys["host"], keys["boot"] = samples["hostname"], samples["boot_id"]
    keys["rank"] = np.where(samples["hostname"] == b"", samples["rank"], -1)
    _, first, index = np.unique(keys.view(np.dtype((np.void, keys.dtype.itemsize))), return_index=True,
                                return_inverse=True)
    # Numbered by each host's lowest rank, so host 0 is rank 0's.
    order = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    return order[index.reshape(-1)]


def host_leaders(samples):
    """Per rank, the lowest rank on its host (its leader; the rank itself for a leader)."""
    host = host_index(samples)
    leader_of_host = np.full(host.max() + 1 if len(host) else 0, len(host), np.int64)
    np.minimum.at(leader_of_host, host, np.arange(len(host)))
    return leader_of_host[host]


class Lines:
    """Per rank r: its clock minus rank 0's is offset[r] + drift[r] * (t - ref[r]), t in r's ns."""

    def __init__(self, ref, offset, drift):
        self.ref = np.asarray(ref, np.int64)
        self.offset = np.asarray(offset, np.float64)
        self.drift = np.asarray(drift, np.float64)

    def at(self, rank, t):
        """The offset (float ns) of `rank` at its local times t."""
        return self.offset[rank] + self.drift[rank] * (np.asarray(t, np.int64) - self.ref[rank]).astype(np.float64)

    def to_global(self, rank, ns):
        """Local int64 ns of one `rank` on rank 0's clock (vectorised over ns): ns - rint(at(ns)).

        A rank on rank 0's line (offset and drift 0: every rank of a single host) gets `ns`
        itself, not a copy: at() is 0.0 there."""
        ns = np.asarray(ns, np.int64)
        offset, drift = self.offset[rank], self.drift[rank]
        if offset == 0 and drift == 0:
            return ns
        return _on_rank0(ns, self.ref[rank], offset, drift)

    def rows_to_global(self, ranks, lengths, ns):
        """to_global of the local int64 ns of several ranks end to end (rank i's lengths[i] rows),
        each row by its own rank's line, in one pass; `ns` itself where every one of the ranks is
        on rank 0's line."""
        ranks = np.asarray(ranks, np.int64)
        if not self.offset[ranks].any() and not self.drift[ranks].any():
            return ns
        return _on_rank0(ns, *(np.repeat(column[ranks], lengths) for column in (self.ref, self.offset, self.drift)))


def _on_rank0(ns, ref, offset, drift):
    """ns - rint(offset + drift * (ns - ref)): at(), in place in one float buffer, the same
    operations; the line's terms scalars or one per row."""
    shift = np.subtract(ns, ref, dtype=np.int64).astype(np.float64)
    shift *= drift
    shift += offset
    np.rint(shift, out=shift)
    return ns - shift.astype(np.int64)


def _line_through(local_a, offset_a, local_b, offset_b):
    """(ref, offset, drift) through two samples; the second missing (local 0): no drift."""
    span = (local_b - local_a).astype(np.float64)
    usable = (local_b != 0) & (span > 0)
    drift = np.where(usable, (offset_b - offset_a) / np.where(usable, span, 1.0), 0.0)
    return local_a, offset_a.astype(np.float64), drift


def pingpong_lines(samples):
    """Lines from the ping-pong tree: each host leader's line to its parent, composed up to rank 0.

    A parent always has a lower rank than its child (csrc/clock_sync.c), so
    one pass in rank order composes the lines; a rank that is not its host's
    leader takes its leader's line (a lower rank: already made), whatever its
    own ping-pong said.  A leader's parent is on another host (the leader is
    its host's lowest rank).  With o(t) = a + b (t - L) the
    child's line to its parent and O(u) = A + B (u - L') the parent's line to
    rank 0 at the parent's time u = t - o(t), the child's line to rank 0 is
    o(t) + O(t - o(t)) = [a + A + B (L - a - L')] + [b + B (1 - b)] (t - L).
    """
    samples = np.sort(samples, order="rank")
    init, final = samples["init"], samples["final"]
    ref, a, b = _line_through(init["local_ns"], init["offset_ns"], final["local_ns"], final["offset_ns"])
    ref = ref.copy()
    offset, drift = a.copy(), b.copy()
    offset[0], drift[0] = 0.0, 0.0
    leader = host_leaders(samples)
    for r in range(1, len(samples)):        # a loop over ranks, not records
        if leader[r] != r:
            ref[r], offset[r], drift[r] = ref[leader[r]], offset[leader[r]], drift[leader[r]]
            continue
        p = int(samples["parent"][r])
        if not 0 <= p < r:
            raise ClockError("rank %d: ping-pong parent %d is not a lower rank" % (r, p))
        offset[r] = a[r] + offset[p] + drift[p] * (ref[r] - a[r] - ref[p])
        drift[r] = b[r] + drift[p] * (1.0 - b[r])
    return Lines(ref, offset, drift)


def per_host(lines, samples):
    """`lines` with every rank on its host leader's line (one clock per host: see the module doc)."""
    leader = host_leaders(samples)
    return Lines(lines.ref[leader], lines.offset[leader], lines.drift[leader])


def _barrier_offsets(sync):
    """(local time, offset to rank 0) per rank from one end's barrier samples (seed 004, 5.4)."""
    before = sync["barrier_ns"][:, :, 0]
    after = sync["barrier_ns"][:, :, 1]
    diff = (after - after[0]).astype(np.float64)
    diff[np.abs(diff) < (after - before)] = 0.0     # the paper: within one barrier's time is no offset
    measured = (after != 0).all(axis=1)
    offset = np.where(measured, np.median(diff, axis=1), 0.0)
    local = np.where(measured, np.median(after, axis=1), 0).astype(np.int64)
    return local, offset


def barrier_lines(samples):
    """Lines from the barrier-and-median estimates at MPI_Init and MPI_Finalize."""
    samples = np.sort(samples, order="rank")
    local_a, offset_a = _barrier_offsets(samples["init"])
    local_b, offset_b = _barrier_offsets(samples["final"])
    return per_host(Lines(*_line_through(local_a, offset_a, local_b, offset_b)), samples)


def no_lines(n_ranks):
    return Lines(np.zeros(n_ranks, np.int64), np.zeros(n_ranks), np.zeros(n_ranks))


def lines_for(method, samples):
    """The Lines of `method` (pingpong | barrier | none) from all ranks' samples."""
    if method == "pingpong":
        return pingpong_lines(samples)
    if method == "barrier":
        return barrier_lines(samples)
    if method == "none":
        return no_lines(len(samples))
    raise ValueError("unknown clock method %r (known: %s)" % (method, ", ".join(METHODS)))


def offsets_at_samples(lines, samples):
    """(offset at the MPI_Init sample, offset at the MPI_Finalize sample) per rank, float ns.

    Taken at each rank's ping-pong sample times, so methods compare at the same instants.
    """
    samples = np.sort(samples, order="rank")
    ranks = np.arange(len(samples))
    init = lines.at(ranks, samples["init"]["local_ns"])
    final_local = samples["final"]["local_ns"]
    final = np.where(final_local != 0, lines.at(ranks, final_local), np.nan)
    return init, final
