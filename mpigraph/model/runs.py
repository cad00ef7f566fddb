"""The four-part model of one measured run, per rank and for the run.

For the run, the single-class network's customer is the mean rank [recon]:
    M = mean_r M[r],  T_comp = mean_r T_comp[r],  L = sum bytes / sum M,
    S = mean_r T_svc[r] / M                     (service=measured, the default)
    S : M R(P; S) = mean_r T_mpi[r]             (service=calibrated, the paper's)
    D_sw = Lat + L / BW
and the modelled run time T_model = T_comp + T_sw + T_svc + T_cont (mva.py) is
compared with the measured wall clock, the longest rank's T_app.

Per rank, the same network with that rank's own M, T_comp, L and S, as if every
rank were like it: where a rank's parts differ from the run's, the ranks are
imbalanced, which a single-class model does not describe.

Measured parts, for the comparison: compute = mean T_comp; service = mean
measured T_svc; contention = mean (T_mpi - T_svc), the calls' wait, which is
what the queue's contention stands for; mpi = mean T_mpi; switch is not
measured (NaN): on one host it is inside the calls' execution.
"""

from dataclasses import dataclass

import numpy as np

from mpigraph.model import mva
from mpigraph.model.inputs import RunInputs
from mpigraph.model.network import Network

MEASURED, CALIBRATED = "measured", "calibrated"
SERVICE_MODES = (MEASURED, CALIBRATED)
COMPONENTS = ("compute", "switch", "service", "contention", "mpi", "total")


@dataclass(frozen=True)
class RunModel:
    """One run, its mean-rank inputs and the modelled parts for the run and for each rank."""

    inputs: RunInputs
    messages: float           # M, per rank
    mean_bytes: float         # L
    switch_delay: float       # D_sw, s per message
    service_time: float       # T_svc used by the model, per rank (measured, or M S calibrated)
    run: mva.Breakdown        # 0-d arrays
    per_rank: mva.Breakdown   # arrays over ranks

    @property
    def population(self) -> int:
        return self.inputs.population

    def measured(self) -> dict:
        """The measured counterpart of each component (see the module docstring)."""
        i = self.inputs
        return {"compute": float(i.compute.mean()), "switch": float("nan"), "service": float(i.service.mean()),
                "contention": float((i.mpi - i.service).mean()), "mpi": float(i.mpi.mean()),
                "total": i.wall_clock}

    def modelled(self) -> dict:
        b = self.run
        return {"compute": float(b.compute), "switch": float(b.switch), "service": float(b.service),
                "contention": float(b.contention), "mpi": float(b.mpi), "total": float(b.total)}


def _service_per_message(population, messages, compute, switch_delay, service, mpi_time, mode, layout):
    """S for each customer: measured T_svc / M, or calibrated so that M R = T_mpi."""
    messages = np.asarray(messages, float)
    safe = np.where(messages > 0, messages, 1.0)
    if mode == MEASURED:
        return np.where(messages > 0, np.asarray(service, float) / safe, 0.0)
    if mode == CALIBRATED:
        think = np.where(messages > 0, np.asarray(compute, float) / safe, 0.0)
        return mva.calibrate_service(population, messages, think, switch_delay, mpi_time, layout)
    raise mva.ModelError("unknown service mode %r: use one of %s" % (mode, ", ".join(SERVICE_MODES)))


def model_run(inputs: RunInputs, net: Network, service: str = MEASURED, layout: str = mva.SHARED) -> RunModel:
    """The model of one run (see the module docstring)."""
    p = inputs.population
    m, comp, length = float(inputs.messages.mean()), float(inputs.compute.mean()), inputs.mean_bytes
    d_sw = float(net.delay(length))
    s = _service_per_message(p, m, comp, d_sw, inputs.service.mean(), inputs.mpi.mean(), service, layout)
    run = mva.breakdown(p, m, comp, d_sw, s, layout)
    rank_delay = net.delay(inputs.rank_mean_bytes())
    rank_s = _service_per_message(p, inputs.messages, inputs.compute, rank_delay, inputs.service, inputs.mpi,
                                  service, layout)
    per_rank = mva.breakdown(p, inputs.messages, inputs.compute, rank_delay, rank_s, layout)
    return RunModel(inputs, m, length, d_sw, float(m * s), run, per_rank)
