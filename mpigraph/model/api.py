"""model_runs: seed 002's queuing-network model of one or more run directories."""

from dataclasses import dataclass, field

from mpigraph.model import mva, report, scaling
from mpigraph.model.inputs import read_run
from mpigraph.model.network import Network, network
from mpigraph.model.runs import MEASURED, model_run


@dataclass
class ModelResult:
    """Everything `mpigraph model` writes: the tables (pyarrow), the paragraph and what is behind them."""

    runs: list                      # [RunModel], in the order given
    network: Network
    service: str
    layout: str
    laws: object = None             # scaling.Laws, with runs at >= 3 process counts
    loo: list = field(default_factory=list)           # [(P, measured, scaling.Prediction)]
    predictions: list = field(default_factory=list)   # [scaling.Prediction]
    warnings: list = field(default_factory=list)
    table: object = None            # pyarrow Table: P, run, source, component, measured, modelled, rel_error
    ranks: object = None            # pyarrow Table: the parts per rank of every run
    text: str = ""


def model_runs(run_dirs, params=None, latency=None, bandwidth=None, predict=(), service: str = MEASURED,
               centres: str = mva.SHARED, collective_messages: float = 1.0) -> ModelResult:
    """Model each run directory; with runs at >= 3 process counts, fit the scaling laws, compute the
    leave-one-out error of each measured P and predict the run time at the counts in `predict`.

    params: a params.csv path; latency ('1us' or seconds) and bandwidth ('10GB/s' or bytes/s):
    see mpigraph.model.network for the defaults.  service: 'measured' or 'calibrated';
    centres: 'shared' or 'per-rank'; collective_messages: messages counted per collective call.
    """
    if not run_dirs:
        raise mva.ModelError("give at least one run directory")
    inputs = [read_run(d, collective_messages) for d in run_dirs]
    net, warnings = network(params, latency, bandwidth, hosts=max(i.hosts for i in inputs))
    runs = [model_run(i, net, service, centres) for i in inputs]
    result = ModelResult(runs, net, service, centres, warnings=warnings)
    _scale(result, predict)
    result.table = report.model_table(result)
    result.ranks = report.ranks_table(result)
    result.text = report.paragraph(result)
    return result


def _scale(result: ModelResult, predict) -> None:
    points = [scaling.Point.of(r) for r in result.runs]
    counts = {q.population for q in points}
    if len(counts) < scaling.MIN_COUNTS:
        if predict:
            raise mva.ModelError("--predict needs runs at %d or more process counts, got %s: run the program at "
                                 "more counts (mpigraph run -n P)" % (scaling.MIN_COUNTS, sorted(counts)))
        return
    result.laws = scaling.fit(points)
    result.loo = scaling.leave_one_out(points, result.network, result.layout)
    if any(int(p) < 1 for p in predict):
        raise mva.ModelError("--predict takes process counts >= 1, got %s" % list(predict))
    result.predictions = [scaling.predict(result.laws, int(p), result.network, result.layout) for p in predict]
    for _, _, prediction in result.loo:
        result.warnings += ["leave-one-out " + w for w in prediction.warnings]
    for prediction in result.predictions:
        result.warnings += prediction.warnings

