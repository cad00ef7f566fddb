"""What each analysis rank did per stage: wall and CPU seconds, bytes sent and received.

A rank-0 funnel (one rank pulling every rank's rows and writing them while the others wait)
shows in wall times only on a machine with a core per rank.  Its CPU seconds and bytes show
it anywhere, a 2-core machine with 4 analysis ranks included: ``benchmarks/bench_analysis.py``
prints them per rank and stage.

The bytes are counted where the analysis moves bulk data between ranks: the shuffles and
exchanges of mpigraph.comm (shuffle.exchange, RootPull / serve_root, owner_exchange.send_rows)
and the graph's gather to rank 0 (paths.gather).  Small pickled objects (counts, settings,
per-rank tables of a row per rank) are not counted.
"""

import contextlib
import dataclasses
import time

_counter = {"sent": 0, "received": 0}


def count(sent=0, received=0):
    """Add bytes this rank sent to and received from other ranks (its own rows not included)."""
    _counter["sent"] += int(sent)
    _counter["received"] += int(received)


def totals():
    """(bytes sent, bytes received) counted so far in this process."""
    return _counter["sent"], _counter["received"]


@dataclasses.dataclass
class Stage:
    """One stage on one rank."""

    name: str
    wall_s: float
    cpu_s: float          # time.process_time: every thread of the process
    sent: int
    received: int


class Meter:
    """Per-stage figures of this rank, in stage order (``stages``)."""

    def __init__(self):
        self.stages = []

    @contextlib.contextmanager
    def stage(self, name):
        sent, received = totals()
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            now_sent, now_received = totals()
            self.stages.append(Stage(name, time.perf_counter() - wall, time.process_time() - cpu,
                                     now_sent - sent, now_received - received))


# The Meter of the last analysis run in this process (analysis.analyze sets it): the benchmark
# reads it after analyze() returns.
last = Meter()
