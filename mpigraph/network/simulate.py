"""netprobe without MPI: random link latencies as the truth, synthetic noisy RTTs, errors.

    truth     beta_z ~ U(LOW, HIGH) per link (seconds), RTT(x, y) = a_xy . beta
    a measurement of a pair = min over `repeats` of RTT * (1 + |N(0, noise)|)
              (one-sided: interference only ever slows a ping-pong down; the minimum of
              repeats is what the MPI runner reports too)
    error     |predicted - true| / true over every pair, measured or not

The paper runs no noise experiment; specs/netprobe.md gives the reference figures for the
8-port 3-tree (2% noise, 5 repeats: 2x oversampling gives median 0.45%, max 7%).
"""

from dataclasses import dataclass

import numpy as np

from mpigraph.network.plan import Plan, all_pairs, make_plan, path_matrix
from mpigraph.network.solve import Solution, solve
from mpigraph.network.topology import Topology

LOW, HIGH = 0.5e-6, 1.5e-6         # a link's one-way latency: 1 us +- 50%


def link_latencies(m: int, rng) -> np.ndarray:
    """The ground truth: one uniform random latency per link."""
    return rng.uniform(LOW, HIGH, size=m)


def min_of_repeats(true_rtt: np.ndarray, noise: float, repeats: int, rng):
    """(min of repeats, its error estimate) of RTT * (1 + |N(0, noise)|) for each pair.

    The error estimate is the gap between the two smallest repeats: the scale of the
    lower tail the minimum is drawn from (0 with a single repeat: unknown).
    """
    samples = true_rtt[:, None] * (1.0 + np.abs(rng.normal(0.0, noise, size=(len(true_rtt), repeats))))
    ordered = np.sort(samples, axis=1)
    gap = ordered[:, 1] - ordered[:, 0] if repeats > 1 else np.zeros(len(true_rtt))
    return ordered[:, 0], gap


@dataclass
class Simulation:
    plan: Plan
    solution: Solution
    x: np.ndarray                # every pair
    y: np.ndarray
    true_rtt: np.ndarray
    measured_rtt: np.ndarray     # NaN where not measured
    predicted_rtt: np.ndarray
    predicted_se: np.ndarray
    beta_true: np.ndarray
    S: object                    # the pairs x links matrix (scipy.sparse)

    @property
    def relative_error(self) -> np.ndarray:
        return np.abs(self.predicted_rtt - self.true_rtt) / self.true_rtt


def simulate(topology: Topology, seed: int = 1, noise: float = 0.0, repeats: int = 1,
             oversample: float = 1.0, orders: int = 4) -> Simulation:
    """Plan, measure synthetically, solve and predict every pair of `topology`."""
    rng = np.random.default_rng(seed)
    x, y = all_pairs(topology.n)
    S = path_matrix(topology, x, y)
    plan = make_plan(topology, orders=orders, oversample=oversample, seed=seed, S=S)
    beta = link_latencies(topology.m, rng)
    true_rtt = S @ beta
    measured, gap = min_of_repeats(true_rtt[plan.measured], noise, repeats, rng) if noise > 0 else \
        (true_rtt[plan.measured], np.zeros(len(plan.measured)))
    solution = solve(S[plan.measured], measured, gap)
    predicted, se = solution.predict(S)
    measured_all = np.full(len(x), np.nan)
    measured_all[plan.measured] = measured
    return Simulation(plan, solution, x, y, true_rtt, measured_all, predicted, se, beta, S)
