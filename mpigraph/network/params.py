"""The calibrated network parameters file (params.csv) that whatif and decompose read.

One row per host-pair class and protocol:

    protocol        eager | medium | rendezvous (seed 003's three: mailbox eager, eager
                    RDMA through an intermediate buffer, zero-copy rendezvous)
    latency_s       alpha: the one-way time of a 0-byte message (s)
    per_byte_s      beta: the time per further byte (s/B); 1/beta is the bandwidth
    latency_lo_s, latency_hi_s, per_byte_lo_s, per_byte_hi_s
                    the bootstrap interval (95% unless the file was made otherwise)
    threshold_bytes S: messages of S bytes or more use rendezvous; empty when the
                    calibration saw no rendezvous (then there is no rendezvous row)
    host_pair       same-host | other-host: the two ranks on one node or on two
    medium_bytes    M: messages of M bytes or more (and below S) use the medium protocol;
                    empty, or the column absent (files before it existed), where there is
                    no medium row

A message of N bytes takes alpha_p + beta_p N one way, p = rendezvous if N >= S, else
medium if N >= M, else eager.  Without a medium row this is the two-protocol rule, and a
reader that knows only eager and rendezvous still reads S right: the medium column comes
last and S keeps its meaning.
"""

import csv
import math
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from mpigraph.network import NetworkError

COLUMNS = ["protocol", "latency_s", "per_byte_s", "latency_lo_s", "latency_hi_s", "per_byte_lo_s",
           "per_byte_hi_s", "threshold_bytes", "host_pair", "medium_bytes"]
REQUIRED = COLUMNS[:-1]      # medium_bytes came later: a file without it has no medium row
PROTOCOLS = ("eager", "medium", "rendezvous")
HOST_PAIRS = ("same-host", "other-host")


@dataclass
class ProtocolParams:
    protocol: str
    latency_s: float
    per_byte_s: float
    latency_lo_s: float
    latency_hi_s: float
    per_byte_lo_s: float
    per_byte_hi_s: float
    threshold_bytes: Optional[int]
    host_pair: str
    medium_bytes: Optional[int] = None


@dataclass
class NetworkParams:
    """Every row of a params file, by host pair and protocol."""

    rows: List[ProtocolParams]

    def host_pairs(self) -> List[str]:
        return [h for h in HOST_PAIRS if any(r.host_pair == h for r in self.rows)]

    def get(self, protocol: str, host_pair: Optional[str] = None) -> ProtocolParams:
        """The row of `protocol` for `host_pair` (default: other-host when measured, else same-host)."""
        host_pair = host_pair or self.default_host_pair()
        for row in self.rows:
            if row.protocol == protocol and row.host_pair == host_pair:
                return row
        raise KeyError("no %s row for %s" % (protocol, host_pair))

    def default_host_pair(self) -> str:
        pairs = self.host_pairs()
        return "other-host" if "other-host" in pairs else pairs[0]

    def threshold(self, host_pair: Optional[str] = None) -> Optional[int]:
        """S: where rendezvous starts (bytes); None without a rendezvous row."""
        return self.get("eager", host_pair).threshold_bytes

    def medium_threshold(self, host_pair: Optional[str] = None) -> Optional[int]:
        """M: where the medium protocol starts (bytes); None without a medium row."""
        return self.get("eager", host_pair).medium_bytes

    def protocols(self, host_pair: Optional[str] = None) -> List[str]:
        """The protocols of host_pair's rows, smallest messages first."""
        host_pair = host_pair or self.default_host_pair()
        return [p for p in PROTOCOLS if any(r.protocol == p and r.host_pair == host_pair for r in self.rows)]

    def protocol_of(self, nbytes, host_pair: Optional[str] = None) -> np.ndarray:
        """'eager', 'medium' or 'rendezvous' for each message size (the module doc's rule)."""
        nbytes = np.asarray(nbytes)
        out = np.full(nbytes.shape, "eager", dtype=object)
        for name, start in (("medium", self.medium_threshold(host_pair)), ("rendezvous", self.threshold(host_pair))):
            if start is not None:
                out[nbytes >= start] = name
        return out.astype(str)

    def time(self, nbytes, host_pair: Optional[str] = None) -> np.ndarray:
        """alpha_p + beta_p N, the one-way time of each message size (s)."""
        nbytes = np.asarray(nbytes, dtype=float)
        protocol = self.protocol_of(nbytes, host_pair)
        eager = self.get("eager", host_pair)
        out = eager.latency_s + eager.per_byte_s * nbytes
        for name in self.protocols(host_pair)[1:]:
            row = self.get(name, host_pair)
            pick = protocol == name
            out[pick] = row.latency_s + row.per_byte_s * nbytes[pick]
        return out


def write_params(path: str, rows: List[ProtocolParams]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow([r.protocol] + ["%.6g" % v for v in (r.latency_s, r.per_byte_s, r.latency_lo_s,
                                                                 r.latency_hi_s, r.per_byte_lo_s, r.per_byte_hi_s)]
                            + [_blank(r.threshold_bytes), r.host_pair, _blank(r.medium_bytes)])


def _blank(value: Optional[int]) -> str:
    return "" if value is None else str(value)


def read_params(path: str) -> NetworkParams:
    """A params.csv written by `mpigraph calibrate` (or by hand in the same columns)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise NetworkError("%s lacks the columns %s: make it with mpiexec -n 2 mpigraph calibrate --out %s"
                               % (path, ", ".join(missing), path))
        rows = [_row(r, path) for r in reader]
    if not any(r.protocol == "eager" for r in rows):
        raise NetworkError("%s has no eager row: every calibration has one (mpigraph calibrate)" % path)
    _check_thresholds(rows, path)
    return NetworkParams(rows)


def _check_thresholds(rows: List[ProtocolParams], path: str) -> None:
    """A medium row needs M on its host pair's eager row, and M < S where both are given.
    (A threshold without its row is allowed, as S always was: that protocol then takes the
    eager row.)"""
    for pair in HOST_PAIRS:
        mine = [r for r in rows if r.host_pair == pair]
        eager = [r for r in mine if r.protocol == "eager"]
        if not eager:
            continue
        M, S = eager[0].medium_bytes, eager[0].threshold_bytes
        if (M is None and any(r.protocol == "medium" for r in mine)) or (M is not None and S is not None and M >= S):
            raise NetworkError("%s, %s: a medium row needs medium_bytes (where medium starts, in bytes) below "
                               "threshold_bytes (where rendezvous starts), not %s and %s: write both on every row, "
                               "or calibrate again" % (path, pair, M, S))


def _row(r: Dict[str, str], path: str) -> ProtocolParams:
    if r["protocol"] not in PROTOCOLS or r["host_pair"] not in HOST_PAIRS:
        raise NetworkError("%s: protocol must be one of %s and host_pair one of %s, not %r/%r"
                           % (path, PROTOCOLS, HOST_PAIRS, r["protocol"], r["host_pair"]))
    try:
        numbers = [float(r[c]) if r[c] != "" else math.nan for c in COLUMNS[1:7]]
        threshold = _bytes(r["threshold_bytes"])
        medium = _bytes(r.get("medium_bytes"))
    except ValueError as error:
        raise NetworkError("%s: %s (numbers in seconds, thresholds in bytes)" % (path, error)) from None
    return ProtocolParams(r["protocol"], *numbers, threshold, r["host_pair"], medium)


def _bytes(text: Optional[str]) -> Optional[int]:
    """A threshold column: bytes, or None where empty (or the column is absent)."""
    return int(float(text)) if text is not None and text.strip() else None
