"""`mpiexec -n 2 mpigraph calibrate`: ping-pong over message sizes, fitted per protocol.

    pairs     ranks grouped by MPI_Get_processor_name: one pair on one host (same-host)
              and one pair on two hosts (other-host), each where the ranks allow it
    sizes     0 B .. 4 MiB: the powers of two and the midpoints between them (3 * 2^(k-1)),
              so the eager/rendezvous jump is bracketed within a factor 1.5
    repeats   `repeats` timed round trips per size up to 64 KiB, proportionally fewer above
              (at least MIN_REPEATS): the large sizes' times vary less, relatively; spread
              over PASSES sweeps of all sizes
    a sample  one round trip's time / 2 (MPI_Wtime), after WARMUP untimed round trips
    fit       fit.py: one to three protocols (eager, medium, rendezvous) and where each
              starts, from the data; alpha + beta N per protocol, bootstrap intervals; each
              protocol's continuous bends (hinge.py): its time as pieces, a row each;
              written to params.csv (params.py) and printed, per size the mean +- spread
              against the fit
    settings  under the table, the MPI's own protocol limits read through MPI_T (mpit.py)
"""

import os
import re
import sys
from typing import Dict, List, Tuple

import numpy as np

from mpigraph.network import NetworkError, mpit
from mpigraph.network.fit import MAX_HINGES, MAX_SEGMENTS, Fit, fit
from mpigraph.network.params import ProtocolParams, write_params

MAX_SIZE = 4 << 20
FULL_REPEATS_UP_TO = 64 << 10
MIN_REPEATS = 10
WARMUP = 5
PASSES = 3           # sweeps over the sizes (measure())
SETTLE = 500         # untimed 0-byte round trips before the first size
TAG = 11


def default_sizes() -> List[int]:
    """0, 1, 2, 3, 4, 6, 8, 12, ... 3 MiB, 4 MiB."""
    powers = [1 << k for k in range(23)]
    middles = [3 << (k - 1) for k in range(1, 22)]
    return sorted(set([0] + powers + middles))


def parse_sizes(text: str) -> List[int]:
    """'0,8,1K,64K,1M' -> bytes (K = 1024, M = 1024^2)."""
    sizes = []
    for item in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)\s*", item)
        if not match:
            raise NetworkError("--sizes %s: write bytes separated by commas, K and M allowed (0,8,1K,64K,1M)" % text)
        sizes.append(int(match.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20}[match.group(2).lower()])
    if len(set(sizes)) < 2 * 2:
        raise NetworkError("--sizes: give at least 4 different sizes, 6 or more to find the protocols' threshold "
                           "(3 a side)")
    return sorted(set(sizes))


def repeats_for(size: int, repeats: int) -> int:
    return max(MIN_REPEATS, int(repeats * min(1.0, FULL_REPEATS_UP_TO / max(size, 1))))


def choose_pairs(names: List[str]) -> List[Tuple[str, int, int]]:
    """[(host_pair, rank a, rank b)]: the first two ranks sharing a host, and rank 0 with the
    first rank on another host."""
    pairs = []
    seen: Dict[str, int] = {}
    for rank, name in enumerate(names):
        if name in seen:
            pairs.append(("same-host", seen[name], rank))
            break
        seen[name] = rank
    other = [r for r, name in enumerate(names) if name != names[0]]
    if other:
        pairs.append(("other-host", 0, other[0]))
    return pairs


def message_buffer(sizes: List[int]) -> np.ndarray:
    """One buffer for every size, its pages written once.  A buffer allocated per ping-pong
    lets malloc choose the memory each size is timed on (a fresh mapping for some, the reused
    heap for others), and the same size was then timed twice as fast in one sweep as in the
    next ones."""
    return np.ones(max(max(sizes), 1), dtype=np.uint8)


def ping_pong(comm, peer: int, initiator: bool, size: int, count: int, buf: np.ndarray) -> np.ndarray:
    """One-way times (round trip / 2) of `count` timed round trips of buf's first `size`
    bytes, after WARMUP untimed ones."""
    from mpi4py import MPI

    message = [buf, size, MPI.BYTE]
    times = np.empty(count)
    for i in range(WARMUP + count):
        if initiator:
            start = MPI.Wtime()
            comm.Send(message, dest=peer, tag=TAG)
            comm.Recv(message, source=peer, tag=TAG)
            if i >= WARMUP:
                times[i - WARMUP] = (MPI.Wtime() - start) / 2
        else:
            comm.Recv(message, source=peer, tag=TAG)
            comm.Send(message, dest=peer, tag=TAG)
    return times


def measure(comm, sizes: List[int], repeats: int, passes: int = PASSES) -> Dict[str, Dict[int, np.ndarray]]:
    """On rank 0: {host_pair: {size: one-way times}}; {} elsewhere.  The other ranks wait.

    The sizes are swept `passes` times, each time in another order, a share of each size's
    repeats per sweep: a burst of load from other processes then spreads over many sizes a
    little instead of making a run of neighbouring sizes slow, which would look like a
    protocol's jump.
    """
    from mpi4py import MPI

    names = comm.allgather(MPI.Get_processor_name())
    me = comm.Get_rank()
    buf = message_buffer(sizes)
    out: Dict[str, Dict[int, list]] = {}
    for host_pair, a, b in choose_pairs(names):
        if me in (a, b):
            # Both ranks busy for a while before the first timing: the first size must not
            # pay for page faults, connection setup or a rank still being scheduled in.
            ping_pong(comm, b if me == a else a, me == a, 0, SETTLE, buf)
        for sweep in range(passes):
            # Each sweep in its own (seeded, so every rank's same) order: a slow spell of the
            # host then hits scattered sizes, not a run of neighbours that looks like a jump.
            for size in np.random.default_rng(sweep).permutation(sizes):
                size = int(size)
                total = repeats_for(size, repeats)
                count = total // passes + (1 if sweep < total % passes else 0)
                if count == 0:
                    continue
                times = None
                if me in (a, b):
                    times = ping_pong(comm, b if me == a else a, me == a, size, count, buf)
                if a != 0 and me == a:
                    comm.Send(times, dest=0, tag=TAG + 1)
                if me == 0:
                    if a != 0:
                        times = np.empty(count)
                        comm.Recv(times, source=a, tag=TAG + 1)
                    out.setdefault(host_pair, {}).setdefault(size, []).append(times)
                comm.Barrier()
    return {h: {s: np.concatenate(t) for s, t in by_size.items()} for h, by_size in out.items()}


def to_rows(host_pair: str, result: Fit) -> List[ProtocolParams]:
    """One row a protocol (its straight line), followed where it bends by one row a piece of
    its time (from_bytes: ``from_bytes``; the first where the protocol starts)."""
    rows = []
    for line in result.lines:
        for piece in [line] + line.pieces:
            start = None if piece is line else from_bytes(piece)
            rows.append(ProtocolParams(line.protocol, piece.alpha, piece.beta, piece.alpha_lo, piece.alpha_hi,
                                       piece.beta_lo, piece.beta_hi, result.threshold, host_pair, result.medium,
                                       start))
    return rows


def from_bytes(piece) -> int:
    """The first message size a piece of a bent protocol times: the fit takes a piece from where
    it starts (a real number of bytes, between two measured sizes) on, so a message of N bytes
    is on it when N >= start.  Rounded to the nearest byte instead, a bend between 0 and 1 B put
    a 1-byte message on the next piece in params.csv and on this one in the fit, 2 ns apart."""
    return int(np.ceil(piece.start))


def report(host_pair: str, result: Fit, level: float = 0.95) -> str:
    """The table per protocol with intervals (its line, then where it bends its pieces), then
    per size mean +- spread against the fit."""
    lines = ["%s:" % host_pair] + _thresholds(result) + _bends(result)
    lines.append("  %-11s %-12s %-30s %-34s %s" % ("protocol", "from B", "latency us [%d%% interval]" % (level * 100),
                                                   "per-byte ns/B [%d%% interval]" % (level * 100), "bandwidth GB/s"))
    for line in result.lines:
        for piece in [line] + line.pieces:
            lines.append("  %-11s %-12d %-30s %-34s %.3g" % (
                line.protocol if piece is line else "  piece", line.start if piece is line else from_bytes(piece),
                "%.3f [%.3f, %.3f]" % (piece.alpha * 1e6, piece.alpha_lo * 1e6, piece.alpha_hi * 1e6),
                "%.5f [%.5f, %.5f]" % (piece.beta * 1e9, piece.beta_lo * 1e9, piece.beta_hi * 1e9),
                1e-9 / piece.beta if piece.beta > 0 else float("inf")))
    return "\n".join(lines + _sizes(result))


def _sizes(result: Fit) -> List[str]:
    """Per size: the protocol, samples kept, mean +- spread, the fit (the pieces where the
    protocol bends) and whether it lies within one spread; how many sizes do, and how many
    the straight lines alone would."""
    st = result.stats
    fitted = result.predict(st.sizes)
    within = np.abs(fitted - st.mean) <= st.spread
    out = ["  %10s %-10s %5s %12s %10s %12s %10s %s" % ("size B", "protocol", "n", "mean us", "+- spread", "fit us",
                                                       "fit-mean", "within spread")]
    protocol = result.protocol_of(st.sizes)
    for i in range(len(st.sizes)):
        out.append("  %10d %-10s %5d %12.3f %10.3f %12.3f %+10.3f %s" % (
            st.sizes[i], protocol[i], st.n[i], st.mean[i] * 1e6, st.spread[i] * 1e6, fitted[i] * 1e6,
            (fitted[i] - st.mean[i]) * 1e6, "yes" if within[i] else "NO"))
    out.append("  the fit lies within one spread of the mean at %d of %d sizes" % (int(within.sum()), len(within)))
    if any(line.pieces for line in result.lines):
        straight = np.abs(result.predict(st.sizes, lines_only=True) - st.mean) <= st.spread
        out.append("  (the protocols' straight lines alone: at %d of %d)" % (int(straight.sum()), len(straight)))
    return out


def _thresholds(result: Fit) -> List[str]:
    """Where each protocol starts and the bracket its jump lies in."""
    st = result.stats
    if len(result.lines) == 1:
        return ["  one protocol over %d .. %d B (no jump found)" % (st.sizes[0], st.sizes[-1])]
    out = ["  %d protocols (chosen by BIC)" % len(result.lines)]
    if result.medium is not None:
        out.append("  medium from M = %d B (the jump lies in (%d, %d] B)"
                   % (result.medium, result.last_before_medium, result.medium))
    out.append("  rendezvous from S = %d B (the jump lies in (%d, %d] B)"
               % (result.threshold, result.last_eager, result.threshold))
    return out


def _bends(result: Fit) -> List[str]:
    """Where each protocol's per-byte time bends (no jump), with the bootstrap interval."""
    out = []
    for line in result.lines:
        for before, piece in zip(line.pieces, line.pieces[1:]):
            out.append("  bend of %s at H = %.0f B [%.0f, %.0f] (no jump): per-byte %.5f -> %.5f ns/B"
                       % (line.protocol, piece.start, piece.start_lo, piece.start_hi, before.beta * 1e9,
                          piece.beta * 1e9))
    if out:
        out.append("  (bends chosen by BIC over each protocol's sizes.  Per protocol below: its straight line, "
                   "seed 003's latency and per-byte time, which whatif and model take; then its time as pieces, "
                   "which decompose takes and the fit below is)")
    return out


def main(out: str, sizes: List[int], repeats: int, bootstrap: int = 400, seed: int = 1,
         max_protocols: int = MAX_SEGMENTS, max_hinges: int = MAX_HINGES) -> int:
    """The command: measure on every rank, fit (at most max_protocols lines, then at most
    max_hinges bends of each) and write on rank 0."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        raise NetworkError("calibrate needs two ranks or more: mpiexec -n 2 mpigraph calibrate "
                           "(on two nodes for the network, e.g. mpiexec -n 2 -ppn 1)")
    for name, value, least in (("--repeats", repeats, 1), ("--bootstrap", bootstrap, 1), ("--max-hinges", max_hinges, 0)):
        if value < least:
            raise NetworkError("calibrate %s %d: give %d or more" % (name, value, least))
    samples = measure(comm, sizes, repeats)
    if comm.Get_rank() != 0:
        return 0
    rows, texts = [], []
    for host_pair, by_size in samples.items():
        result = fit(by_size, bootstrap=bootstrap, seed=seed, max_segments=max_protocols, max_hinges=max_hinges)
        rows += to_rows(host_pair, result)
        texts.append(report(host_pair, result))
    write_params(out, rows)
    print("\n\n".join(texts))
    # Beside the fit, the switch points the MPI itself was configured with: a fitted jump near
    # one of them is that protocol, one far from all of them more likely a cache step.
    print("\n" + mpit.settings_text())
    print("\nwrote %s (one-way time = latency_s + per_byte_s * bytes, per protocol; where it bends, the row of "
          "the piece with the largest from_bytes <= bytes)" % os.path.abspath(out))
    sys.stdout.flush()
    return 0
