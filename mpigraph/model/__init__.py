"""How will it scale?  Seed 002's queuing-network model of run time from the profile.

    mva.py      exact single-class MVA: delay centre, switch delay, MPI centre(s)
    inputs.py   the model's inputs from a run directory's report files
    network.py  switch delay: latency and bandwidth from params.csv, flags or defaults
    runs.py     the four-part model of one run, for the run and per rank
    scaling.py  the seed's scaling laws across runs, prediction, leave-one-out error
    report.py   model.csv / .parquet, model_ranks.csv, model.txt; svg.py: model.svg
    api.py      model_runs, the whole of it; cli.py: `mpigraph model`

docs/model.md explains the model and its output.
"""


__all__ = ["model_runs", "ModelResult"]


def __getattr__(name):
    """model_runs and ModelResult from mpigraph.model.api, imported on first use: the CLI imports this
    package to register `mpigraph model`, and `mpigraph lib` must not pay for numpy and pyarrow."""
    if name in __all__:
        from mpigraph.model import api

        return getattr(api, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
