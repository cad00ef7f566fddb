"""The network parameters `mpigraph decompose` uses when no params.csv is given.

Fitted by `mpiexec -n 2 mpigraph calibrate --repeats 100` on one host (2 ranks over shared
memory, the MPICH wheel of `pip install mpigraph[mpich]`, a busy 2-core VM): the numbers of a
laptop-class machine, not of a cluster's network.  They make the network part of a decomposition
an order-of-magnitude estimate at best; calibrate on the machine the run used
(`mpiexec -n 2 mpigraph calibrate --out params.csv`, ranks on two nodes) and pass --params.
"""

from mpigraph.network.params import NetworkParams, ProtocolParams

SOURCE = ("built-in defaults: alpha, beta fitted by mpigraph calibrate on one host (2 ranks, shared memory, "
          "MPICH), not this run's network; calibrate and pass --params for a better estimate")

# protocol, latency_s, per_byte_s, latency_lo_s, latency_hi_s, per_byte_lo_s, per_byte_hi_s, threshold, host pair
_ROWS = (
    ("eager", 5.08447e-06, 2.99907e-10, 5.06769e-06, 5.09963e-06, 2.88617e-10, 3.09807e-10, 8192, "same-host"),
    ("rendezvous", 1.02114e-05, 7.58588e-10, 1.01144e-05, 1.05654e-05, 7.49829e-10, 7.60392e-10, 8192,
     "same-host"),
)


def default_params() -> NetworkParams:
    """The built-in NetworkParams (see the module doc for where they come from)."""
    return NetworkParams([ProtocolParams(*row) for row in _ROWS])
