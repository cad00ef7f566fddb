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

    from_bytes      empty on a protocol's row: its straight line over all its sizes (seed
                    003's alpha and beta, what whatif and model read).  B on a piece row: where
                    the protocol's time bends (hinge.py: no jump, a cache level left behind, not
                    a new protocol) its time is pieces, and from B bytes on its messages take
                    this row's alpha + beta N (the piece's own line: intercept at 0 B,
                    continuous with the piece before).  The first piece starts where the
                    protocol does (0, M or S).  A piece row has its protocol, thresholds and host
                    pair like the others and follows its protocol's row.  Optional: a file
                    without the column has none

A message of N bytes takes alpha_p + beta_p N one way, p = rendezvous if N >= S, else
medium if N >= M, else eager; where p has piece rows, those of the row with the largest
from_bytes <= N (p's own row below them all, as in files whose first piece was the protocol's
row).  Without a medium row this is the two-protocol rule, and a reader that knows only eager
and rendezvous still reads S right: the newer columns come last and S keeps its meaning.  A
reader that knows no pieces and takes a protocol's first row gets its straight line.
"""

import csv
import math
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from mpigraph.network import NetworkError

COLUMNS = ["protocol", "latency_s", "per_byte_s", "latency_lo_s", "latency_hi_s", "per_byte_lo_s",
           "per_byte_hi_s", "threshold_bytes", "host_pair", "medium_bytes", "from_bytes"]
REQUIRED = COLUMNS[:-2]      # medium_bytes, from_bytes came later: without them no medium row, no piece
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
    from_bytes: Optional[int] = None      # None: the protocol's row (its straight line); B: a piece row (module doc)


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
            if row.protocol == protocol and row.host_pair == host_pair and row.from_bytes is None:
                return row
        raise KeyError("no %s row for %s" % (protocol, host_pair))

    def pieces(self, protocol: str, host_pair: Optional[str] = None) -> List[ProtocolParams]:
        """protocol's piece rows on host_pair, by where they start (from_bytes)."""
        host_pair = host_pair or self.default_host_pair()
        mine = [r for r in self.rows if r.protocol == protocol and r.host_pair == host_pair and r.from_bytes is not None]
        return sorted(mine, key=lambda r: r.from_bytes)

    def line(self, protocol: str, nbytes, host_pair: Optional[str] = None):
        """(alpha, beta) per size on protocol's time: of its piece row with the largest
        from_bytes <= N, or its own row (its straight line) where it has none."""
        nbytes = np.asarray(nbytes, dtype=float)
        pieces = [self.get(protocol, host_pair)] + self.pieces(protocol, host_pair)
        starts = np.array([-np.inf] + [r.from_bytes for r in pieces[1:]])
        which = np.searchsorted(starts, nbytes, side="right") - 1
        return (np.array([r.latency_s for r in pieces])[which], np.array([r.per_byte_s for r in pieces])[which])

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
        """alpha_p + beta_p N, the one-way time of each message size (s), on the piece of
        protocol p's line that N falls in (line())."""
        nbytes = np.asarray(nbytes, dtype=float)
        protocol = self.protocol_of(nbytes, host_pair)
        alpha, beta = self.line("eager", nbytes, host_pair)   # also where a threshold has no row of its own
        out = alpha + beta * nbytes
        for name in self.protocols(host_pair)[1:]:
            pick = protocol == name
            alpha, beta = self.line(name, nbytes[pick], host_pair)
            out[pick] = alpha + beta * nbytes[pick]
        return out


def write_params(path: str, rows: List[ProtocolParams]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow([r.protocol] + ["%.6g" % v for v in (r.latency_s, r.per_byte_s, r.latency_lo_s,
                                                                 r.latency_hi_s, r.per_byte_lo_s, r.per_byte_hi_s)]
                            + [_blank(r.threshold_bytes), r.host_pair, _blank(r.medium_bytes), _blank(r.from_bytes)])


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
    if not any(r.protocol == "eager" and r.from_bytes is None for r in rows):
        raise NetworkError("%s has no eager row: every calibration has one (mpigraph calibrate)" % path)
    _check_thresholds(rows, path)
    _check_pieces(rows, path)
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


def _check_pieces(rows: List[ProtocolParams], path: str) -> None:
    """A piece row needs its protocol's row on its host pair, and lies inside the protocol:
    from where it starts (0, M or S), below where the next one starts, one row a size."""
    for pair in HOST_PAIRS:
        mine = [r for r in rows if r.host_pair == pair]
        for protocol in PROTOCOLS:
            at = [r.from_bytes for r in mine if r.protocol == protocol and r.from_bytes is not None]
            if not at:
                continue
            lo, hi = _span(mine, protocol)
            if lo is None or len(set(at)) < len(at) or not all(lo <= h and (hi is None or h < hi) for h in at):
                raise NetworkError("%s, %s: the %s rows with from_bytes (pieces from %s B) need a %s row with "
                                   "from_bytes empty, and each a different from_bytes from where %s starts "
                                   "(%s B) to below where the next protocol starts (%s): empty from_bytes is the "
                                   "protocol's line; calibrate again" % (path, pair, protocol, at, protocol, protocol,
                                                                         lo, "%s B" % hi if hi is not None else "none"))


def _span(rows: List[ProtocolParams], protocol: str):
    """(where protocol starts, where the next one starts or None) on one host pair's rows;
    (None, None) without protocol's row."""
    first = [r for r in rows if r.protocol == protocol and r.from_bytes is None]
    eager = [r for r in rows if r.protocol == "eager" and r.from_bytes is None]
    if not first or not eager:
        return None, None
    M, S = eager[0].medium_bytes, eager[0].threshold_bytes
    has = {p for p in PROTOCOLS if any(r.protocol == p for r in rows)}
    start = {"eager": 0, "medium": M, "rendezvous": S}[protocol]
    later = [b for p, b in (("medium", M), ("rendezvous", S)) if p in has and b is not None and b > (start or 0)]
    return start, min(later) if later else None


def _row(r: Dict[str, str], path: str) -> ProtocolParams:
    if r["protocol"] not in PROTOCOLS or r["host_pair"] not in HOST_PAIRS:
        raise NetworkError("%s: protocol must be one of %s and host_pair one of %s, not %r/%r"
                           % (path, PROTOCOLS, HOST_PAIRS, r["protocol"], r["host_pair"]))
    try:
        numbers = [float(r[c]) if r[c] != "" else math.nan for c in COLUMNS[1:7]]
        threshold = _bytes(r["threshold_bytes"])
        medium = _bytes(r.get("medium_bytes"))
        start = _bytes(r.get("from_bytes"))
    except ValueError as error:
        raise NetworkError("%s: %s (numbers in seconds, thresholds in bytes)" % (path, error)) from None
    return ProtocolParams(r["protocol"], *numbers, threshold, r["host_pair"], medium, start)


def _bytes(text: Optional[str]) -> Optional[int]:
    """A threshold column: bytes, or None where empty (or the column is absent)."""
    return int(float(text)) if text is not None and text.strip() else None
