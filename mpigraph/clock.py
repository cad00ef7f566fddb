"""Timestamps: a rank's raw ticks to nanoseconds.

The shim stamps records with ticks of a fast clock (``clock_source`` in the
header).  For CLOCK_MONOTONIC the ticks are already nanoseconds.  For the TSC
the header holds up to four calibration pairs (ticks, CLOCK_MONOTONIC ns)
taken at MPI_Init, when the log grows and at MPI_Finalize; the conversion is
the straight line through the earliest and the latest pair that were set
(``calib_ns`` 0 means unset), so a log cut short by a crash still converts with
the pairs it has (the shim always sets two at MPI_Init, a millisecond apart).

A later step adds cross-rank offsets and drift (DESIGN.md, clock alignment):
``to_ns(log, ticks)`` stays the one entry point and grows with it.
"""

from collections import namedtuple

import numpy as np

from mpigraph import record

# ns = ns0 + (ticks - ticks0) * ns_per_tick
Conversion = namedtuple("Conversion", "ticks0 ns0 ns_per_tick")

IDENTITY = Conversion(0, 0, 1.0)


class ClockError(ValueError):
    """The header cannot convert ticks to ns (the message does not name the file: the caller does)."""


def conversion_from_header(header):
    """The ticks -> ns line of one log header."""
    source = int(header["clock_source"])
    if source == record.CLOCK_MONOTONIC:
        return IDENTITY
    if source != record.CLOCK_TSC:
        raise ClockError("unknown clock source %d (known: %d monotonic, %d tsc)"
                         % (source, record.CLOCK_MONOTONIC, record.CLOCK_TSC))
    ticks = np.asarray(header["calib_ticks"], np.int64)
    ns = np.asarray(header["calib_ns"], np.int64)
    is_set = ns != 0
    if is_set.sum() < 2:
        raise ClockError("TSC clock with %d calibration pair(s) set: at least 2 are needed" % is_set.sum())
    ticks, ns = ticks[is_set], ns[is_set]
    first, last = np.argmin(ticks), np.argmax(ticks)
    span = int(ticks[last]) - int(ticks[first])
    if span <= 0:
        raise ClockError("TSC calibration pairs do not span any ticks")
    slope = (int(ns[last]) - int(ns[first])) / span
    if not slope > 0:
        raise ClockError("TSC calibration gives a non-increasing clock (%g ns per tick)" % slope)
    return Conversion(int(ticks[first]), int(ns[first]), slope)


def convert(conversion, ticks):
    """Apply a Conversion to an array of ticks; int64 ns.

    The product is taken on the difference to ticks0 in float64: a run of
    10^4 s at 3 GHz spans 3e13 ticks, far inside float64's exact range, so the
    error stays well under a nanosecond.
    """
    ticks = np.asarray(ticks)
    if conversion is IDENTITY or conversion == IDENTITY:
        return ticks.astype(np.int64, copy=False)
    ns = np.multiply(ticks - np.int64(conversion.ticks0), conversion.ns_per_tick)   # float64, one pass
    np.rint(ns, out=ns)
    out = ns.astype(np.int64)
    out += np.int64(conversion.ns0)
    return out


def to_ns(log, ticks):
    """Ticks of rank log `log` (a trace.RankLog) as int64 ns on that rank's CLOCK_MONOTONIC."""
    return convert(log.clock, ticks)
