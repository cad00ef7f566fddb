"""The switch delay per message, D_sw = Lat + L / BW [paper], and where Lat and BW come from.

Sources, first found wins:

1. ``--params params.csv``: the CSV ``mpigraph calibrate`` writes, columns
   ``protocol, latency_s, per_byte_s, latency_lo_s, latency_hi_s, per_byte_lo_s,
   per_byte_hi_s, threshold_bytes, host_pair``.  Only ``latency_s`` and
   ``per_byte_s`` (seconds per byte, = 1 / BW) are required; the row whose
   protocol is ``eager`` is used, else the first row.  (Eager: the model's mean
   message is small; one row because the single-class model has one D_sw.)
2. ``--latency 1us --bandwidth 10GB/s`` (either may be given alone).
3. Defaults: on one host Lat = 0 and BW = infinite, so T_sw = 0: shared-memory
   transfers happen inside the MPI calls and are already in the measured
   execution time.  On several hosts Lat = 1 us and BW = 10 GB/s (a generic
   modern interconnect), with a warning to measure them.
"""

import csv
import math
from dataclasses import dataclass

from mpigraph.model.mva import ModelError
from mpigraph.util import units

DEFAULT_MULTIHOST_LATENCY_S = 1e-6
DEFAULT_MULTIHOST_BANDWIDTH = 10e9


@dataclass(frozen=True)
class Network:
    """Lat (s) and per-byte time (s/B, = 1/BW) of the switch, and where they came from."""

    latency_s: float
    per_byte_s: float
    source: str

    def delay(self, mean_bytes):
        """D_sw = Lat + L * per_byte (s per message)."""
        return self.latency_s + mean_bytes * self.per_byte_s

    def describe(self) -> str:
        bandwidth = "infinite" if self.per_byte_s == 0 else "%.3g GB/s" % (1e-9 / self.per_byte_s)
        return "latency %.3g us, bandwidth %s (%s)" % (self.latency_s * 1e6, bandwidth, self.source)


def read_params(path: str) -> Network:
    """Lat and per-byte time from a params.csv (see the module docstring for its columns)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"latency_s", "per_byte_s"} <= set(rows[0]):
        raise ModelError("%s needs a header with latency_s and per_byte_s and at least one row "
                         "(as mpigraph calibrate writes it)" % path)
    # from_bytes marks a piece past a bend (network/params.py): the eager line itself is the row without it.
    row = next((r for r in rows if (r.get("protocol") or "").strip().lower() == "eager"
                and not (r.get("from_bytes") or "").strip()), rows[0])
    where = "%s, %s row" % (path, (row.get("protocol") or "first").strip() or "first")
    return Network(_number(row["latency_s"], path), _number(row["per_byte_s"], path), where)


def network(params=None, latency=None, bandwidth=None, hosts: int = 1) -> tuple:
    """(Network, warnings) from the sources above, in their order."""
    if params:
        return read_params(params), []
    if latency is not None or bandwidth is not None:
        lat = units.parse_time(latency) if isinstance(latency, str) else float(latency or 0.0)
        bw = units.parse_bandwidth(bandwidth) if isinstance(bandwidth, str) else bandwidth
        return Network(lat, 0.0 if bw is None else 1.0 / float(bw), "given"), []
    if hosts <= 1:
        return Network(0.0, 0.0, "default for one host: transfers are inside the measured MPI execution"), []
    warn = ("the runs span %d hosts and no --params, --latency or --bandwidth was given: switch delay from "
            "assumed 1 us and 10 GB/s; measure them (mpigraph calibrate) and pass --params" % hosts)
    return Network(DEFAULT_MULTIHOST_LATENCY_S, 1.0 / DEFAULT_MULTIHOST_BANDWIDTH, "assumed"), [warn]


def _number(text, path):
    try:
        value = float(text)
    except ValueError:
        raise ModelError("%s: cannot read the number %r" % (path, text)) from None
    if not math.isfinite(value) or value < 0:
        raise ModelError("%s: %r must be a finite number >= 0" % (path, text))
    return value
