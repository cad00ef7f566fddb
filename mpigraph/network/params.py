"""The calibrated network parameters file (params.csv) that whatif and decompose read.

One row per host-pair class and protocol:

    protocol        eager | rendezvous
    latency_s       alpha: the one-way time of a 0-byte message (s)
    per_byte_s      beta: the time per further byte (s/B); 1/beta is the bandwidth
    latency_lo_s, latency_hi_s, per_byte_lo_s, per_byte_hi_s
                    the bootstrap interval (95% unless the file was made otherwise)
    threshold_bytes S: messages of S bytes or more use rendezvous; empty when the
                    calibration saw one protocol only (then there is no rendezvous row)
    host_pair       same-host | other-host: the two ranks on one node or on two

A message of N bytes takes alpha_p + beta_p N one way, p = rendezvous if N >= S else eager.
"""

import csv
import math
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from mpigraph.network import NetworkError

COLUMNS = ["protocol", "latency_s", "per_byte_s", "latency_lo_s", "latency_hi_s", "per_byte_lo_s",
           "per_byte_hi_s", "threshold_bytes", "host_pair"]
PROTOCOLS = ("eager", "rendezvous")
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
        return self.get("eager", host_pair).threshold_bytes

    def protocol_of(self, nbytes, host_pair: Optional[str] = None) -> np.ndarray:
        """'eager' or 'rendezvous' for each message size."""
        S = self.threshold(host_pair)
        nbytes = np.asarray(nbytes)
        return np.where(nbytes >= S, "rendezvous", "eager") if S is not None else np.full(nbytes.shape, "eager")

    def time(self, nbytes, host_pair: Optional[str] = None) -> np.ndarray:
        """alpha_p + beta_p N, the one-way time of each message size (s)."""
        nbytes = np.asarray(nbytes, dtype=float)
        eager = self.get("eager", host_pair)
        out = eager.latency_s + eager.per_byte_s * nbytes
        S = self.threshold(host_pair)
        if S is not None:
            rdv = self.get("rendezvous", host_pair)
            out = np.where(nbytes >= S, rdv.latency_s + rdv.per_byte_s * nbytes, out)
        return out


def write_params(path: str, rows: List[ProtocolParams]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow([r.protocol] + ["%.6g" % v for v in (r.latency_s, r.per_byte_s, r.latency_lo_s,
                                                                 r.latency_hi_s, r.per_byte_lo_s, r.per_byte_hi_s)]
                            + ["" if r.threshold_bytes is None else r.threshold_bytes, r.host_pair])


def read_params(path: str) -> NetworkParams:
    """A params.csv written by `mpigraph calibrate` (or by hand in the same columns)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise NetworkError("%s lacks the columns %s: make it with mpiexec -n 2 mpigraph calibrate --out %s"
                               % (path, ", ".join(missing), path))
        rows = [_row(r, path) for r in reader]
    if not any(r.protocol == "eager" for r in rows):
        raise NetworkError("%s has no eager row: every calibration has one (mpigraph calibrate)" % path)
    return NetworkParams(rows)


def _row(r: Dict[str, str], path: str) -> ProtocolParams:
    if r["protocol"] not in PROTOCOLS or r["host_pair"] not in HOST_PAIRS:
        raise NetworkError("%s: protocol must be one of %s and host_pair one of %s, not %r/%r"
                           % (path, PROTOCOLS, HOST_PAIRS, r["protocol"], r["host_pair"]))
    try:
        numbers = [float(r[c]) if r[c] != "" else math.nan for c in COLUMNS[1:7]]
        threshold = int(float(r["threshold_bytes"])) if r["threshold_bytes"].strip() else None
    except ValueError as error:
        raise NetworkError("%s: %s (numbers in seconds, threshold in bytes)" % (path, error)) from None
    return ProtocolParams(r["protocol"], *numbers, threshold, r["host_pair"])
