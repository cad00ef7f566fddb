"""Times, sizes and bandwidths as users write them on command lines: '100us', '64KiB', '10GB/s'.

One reader for every command that takes them (whatif, model), so that '2.5 ms' or '1GiB/s'
means the same everywhere.  A bare number takes the caller's default unit.
"""

import math
import re

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
PREFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
            "ki": 2.0 ** 10, "mi": 2.0 ** 20, "gi": 2.0 ** 30, "ti": 2.0 ** 40}

_NUMBER = r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?)"


class UnitError(ValueError):
    """A quantity that cannot be read; the message says how to write it."""


def parse_time(text, default_unit: str = "s", signed: bool = False) -> float:
    """'100us', '2.5 ms', '300ns', '1e-6' (in default_unit) -> seconds.

    signed: negative times are allowed (a latency taken away: whatif's dL < 0)."""
    m = re.fullmatch(r"\s*%s\s*([a-zµ]*)\s*" % _NUMBER, str(text), re.I)
    unit = (m.group(2) or default_unit).lower() if m else None
    if unit not in TIME_UNITS:
        raise UnitError("%r: write a time like 100us, 2.5ms, 300ns or 0 (a bare number is %s)" % (text, default_unit))
    return _number(m.group(1), text, signed) * TIME_UNITS[unit]


def parse_size(text) -> float:
    """'65536', '64KiB', '256KB', '1MiB' -> bytes (K = 1000, Ki = 1024)."""
    m = re.fullmatch(r"\s*%s\s*(?:([kmgt]i?)?b?)\s*" % _NUMBER, str(text), re.I)
    if not m:
        raise UnitError("%r: write a size like 65536, 64KiB or 256KB" % text)
    return _number(m.group(1), text) * PREFIXES[(m.group(2) or "").lower()]


def parse_bandwidth(text) -> float:
    """'10GB/s', '1.25 GiB/s', '100Gb/s' (bits), '1e10' (bytes/s) -> bytes per second (> 0)."""
    m = re.fullmatch(r"\s*%s\s*(?:([kmgt]i?)?([Bb])(?:/s|ps)?)?\s*" % _NUMBER, str(text), re.I)
    if not m:
        raise UnitError("%r: write a bandwidth like 10GB/s, 1.25GiB/s, 100Gb/s or 1e10 (bytes/s)" % text)
    value = _number(m.group(1), text) * PREFIXES[(m.group(2) or "").lower()]
    if m.group(3) == "b":
        value /= 8.0    # bits
    if value <= 0:
        raise UnitError("%r: a bandwidth must be > 0" % text)
    return value


def is_bandwidth(text) -> bool:
    """Whether text names a rate ('10GB/s', '100Gbps') rather than a time per byte."""
    return bool(re.search(r"(/s|ps)\s*$", str(text), re.I))


def _number(text, whole, signed=False):
    value = float(text)
    if not math.isfinite(value) or (value < 0 and not signed):
        raise UnitError("%r must be a finite number%s" % (whole, "" if signed else " >= 0"))
    return value
