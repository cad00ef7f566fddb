"""The network's share: calibrated latency and bandwidth, pairwise latency of a topology.

    calibrate   ping-pong over message sizes, alpha + beta*N per protocol (seed 003's
                light substitute for its Bayesian calibration): params.csv; under its
                table the MPI's own protocol limits, read through MPI_T (mpit.py)
    netprobe    every node pair's latency from O(links) ping-pongs planned in parallel
                rounds (seed 001, PMM): netprobe/plan.csv, pairs.csv, links.csv

docs/network.md describes both, the params file and how to read the outputs.
"""


class NetworkError(ValueError):
    """Bad input the user can fix (a topology, a size list, too few ranks): the message says how."""
