"""Exact single-class mean value analysis of seed 002's wall-clock model.

The closed network [recon, specs/model.md]: N = P customers (one per rank),
one cycle per message through three centres:

    compute delay centre     Z    = T_comp / M   (no queue: each rank its own CPU)
    switch delay centre      D_sw = Lat + L / BW (no queue: a non-blocking switch)
    MPI queueing centre(s)   shared: one centre of demand S = T_svc / M;
                             per-rank: P centres, each of demand S / P

Exact MVA (Reiser and Lavenberg; Lazowska et al., Quantitative System
Performance, ch. 6), for n = 1..P with Q_k(0) = 0:

    R_k(n) = D_k (1 + Q_k(n-1))
    X(n)   = n / (Z + D_sw + sum_k R_k(n))
    Q_k(n) = X(n) R_k(n)

and the four parts of the modelled run time of one rank [paper]:

    T_sw   = M D_sw
    T_svc  = M S
    T_cont = M (sum_k R_k(P) - S)            (time queued, not served)
    T_comp = M Z
    T_model = T_comp + T_sw + T_svc + T_cont = M (Z + D_sw + sum_k R_k(P))

Little's law N = X (Z + D_sw + R) holds at every n by the X(n) step.

Calibrated service (the paper's literal, circular definition T_svc = T_mpi -
T_cont): S is the root of M R(P; S) = T_mpi, found by bisection; R(P; S) is
increasing in S (more demand never shortens a queue), and R >= S puts the root
in [0, T_mpi / M].
"""

from dataclasses import dataclass

import numpy as np

SHARED, PER_RANK = "shared", "per-rank"
LAYOUTS = (SHARED, PER_RANK)


class ModelError(ValueError):
    """The model cannot be built from these inputs; the message says what to change."""


@dataclass(frozen=True)
class MVAResult:
    """The network at population P: per-message times (s) and throughput (messages/s)."""

    population: int
    think: float            # Z
    switch: float           # D_sw
    service: float          # S, the total MPI demand per message
    response: float         # sum_k R_k(P): time in the MPI centre(s) per message, queue included
    throughput: float       # X(P), messages per second over all ranks
    queue: float            # sum_k Q_k(P): messages in the MPI centre(s)

    @property
    def contention(self) -> float:
        """Queueing time per message: R - S."""
        return self.response - self.service

    @property
    def cycle(self) -> float:
        """One message's cycle: Z + D_sw + R."""
        return self.think + self.switch + self.response


def _per_centre(service, population: int, layout: str):
    """(demand of one centre, number of identical centres) for the layout."""
    if layout == SHARED:
        return service, 1
    if layout == PER_RANK:
        # P identical centres share one queue length by symmetry: one recursion serves them all.
        return service / population, population
    raise ModelError("unknown centre layout %r: use one of %s" % (layout, ", ".join(LAYOUTS)))


def solve_many(population: int, think, switch, service, layout: str = SHARED):
    """Exact MVA at N = population for arrays of (Z, D_sw, S), all solved at once.

    Returns (response, throughput, queue) arrays: sum_k R_k(P), X(P), sum_k Q_k(P).
    """
    if population < 1:
        raise ModelError("the model needs at least one rank, got P = %d" % population)
    think, switch, service = np.broadcast_arrays(*(np.asarray(v, float) for v in (think, switch, service)))
    if (think < 0).any() or (switch < 0).any() or (service < 0).any():
        raise ModelError("negative model input: Z, D_sw and S must be >= 0")
    demand, copies = _per_centre(service, population, layout)
    queue = np.zeros_like(demand)
    response = demand.copy()
    throughput = np.zeros_like(demand)
    delay = think + switch
    for n in range(1, population + 1):   # the recursion is sequential in n; vectorised across inputs
        response = demand * (1.0 + queue)
        cycle = delay + copies * response
        # An empty cycle (Z = D_sw = S = 0) has no throughput to speak of and no queue.
        throughput = np.divide(n, cycle, out=np.full_like(cycle, np.inf), where=cycle > 0)
        queue = np.where(cycle > 0, throughput * response, 0.0)
    return copies * response, throughput, copies * queue


def solve(population: int, think: float, switch: float, service: float, layout: str = SHARED) -> MVAResult:
    """Exact MVA of the network above at N = population customers (see the module docstring)."""
    response, throughput, queue = solve_many(population, think, switch, service, layout)
    return MVAResult(population, float(think), float(switch), float(service), float(response),
                     float(throughput), float(queue))


@dataclass(frozen=True)
class Breakdown:
    """The four parts of modelled run time (s) [paper], per rank or for the run (arrays or 0-d
    arrays), and the MPI centre's response time and throughput behind them."""

    compute: np.ndarray
    switch: np.ndarray
    service: np.ndarray
    contention: np.ndarray
    response: np.ndarray      # sum_k R_k(P) per message
    throughput: np.ndarray    # X(P), messages per second over all ranks

    @property
    def total(self) -> np.ndarray:
        return self.compute + self.switch + self.service + self.contention

    @property
    def mpi(self) -> np.ndarray:
        """Modelled MPI time: service + contention (switch delay is its own part in the paper)."""
        return self.service + self.contention


def breakdown(population: int, messages, compute, switch_delay, service, layout: str = SHARED) -> Breakdown:
    """The parts from M messages, T_comp (s), D_sw (s per message) and S (s per message).

    A rank with no messages has no cycle to model: it only computes (Z = S = D_sw = 0).
    """
    messages, compute, switch_delay, service = np.broadcast_arrays(
        *(np.asarray(v, float) for v in (messages, compute, switch_delay, service)))
    has = messages > 0
    safe = np.where(has, messages, 1.0)
    think = np.where(has, compute / safe, 0.0)
    switch_delay = np.where(has, switch_delay, 0.0)
    service = np.where(has, service, 0.0)
    response, throughput, _ = solve_many(population, think, switch_delay, service, layout)
    # R - S is exactly 0 at P = 1 in exact arithmetic; keep rounding from showing as contention.
    contention = np.maximum(response - service, 0.0) if population > 1 else np.zeros_like(response)
    return Breakdown(compute, messages * switch_delay, messages * service, messages * contention,
                     response, throughput)


def calibrate_service(population: int, messages, think, switch_delay, mpi_time, layout: str = SHARED,
                      steps: int = 80) -> np.ndarray:
    """S with M R(P; S) = T_mpi (the paper's T_svc = T_mpi - T_cont), by bisection on [0, T_mpi/M].

    80 halvings shrink the bracket by 2^-80, below a double's resolution of T_mpi / M.
    Zero where M = 0 or T_mpi <= 0.
    """
    messages, think, switch_delay, mpi_time = np.broadcast_arrays(
        *(np.asarray(v, float) for v in (messages, think, switch_delay, mpi_time)))
    target = np.where((messages > 0) & (mpi_time > 0), mpi_time / np.where(messages > 0, messages, 1.0), 0.0)
    lo, hi = np.zeros_like(target), target.copy()
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        low = solve_many(population, think, switch_delay, mid, layout)[0] < target
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    return 0.5 * (lo + hi)
