"""The default critical-path algorithm, "auto": it gathers the graph to one analysis rank only
when there is one, or the run is small; the summary says which algorithm ran and why (issue 28)."""

import pytest

import mpi_env
from mpigraph.testing import synth
from mpigraph import config
from mpigraph.paths import algorithms

LIMIT = algorithms.AUTO_GATHER_RECORDS


@pytest.mark.parametrize("setting, ranks, records, chosen", [
    ("auto", 1, 10 * LIMIT, "dijkstra"),                  # one rank: the graph is there anyway
    ("auto", 1, 10, "dijkstra"),
    ("auto", 4, LIMIT, "dijkstra"),                       # small: the gather is cheap
    ("auto", 4, LIMIT + 1, "parallel-dijkstra"),          # big: no rank-0 funnel
    ("auto", 2, LIMIT + 1, "parallel-dijkstra"),
    ("delta-stepping", 4, 10 * LIMIT, "delta-stepping"),  # a setting is obeyed
])
def test_choose(setting, ranks, records, chosen):
    algorithm, why = algorithms.choose(setting, ranks, records)
    assert algorithm == chosen
    assert why == "as set" if setting != "auto" else why.startswith("auto: ")


def test_auto_is_the_default_and_not_a_search_of_its_own():
    assert config.Config().algorithm == "auto" and config.from_env({}).algorithm == "auto"
    assert "auto" not in algorithms.GRAPH_ALGORITHMS + algorithms.TOPOSORT_ALGORITHMS


@pytest.mark.parametrize("nprocs", [1, 2])
def test_the_summary_says_which_algorithm_ran_and_why(tmp_path, nprocs):
    synth.write_noisy(tmp_path / "run", ranks=4, calls=50)
    result = mpi_env.mpigraph(["analyze", tmp_path / "run", "--out", tmp_path / "out"], nprocs=nprocs)
    assert result.returncode == 0, result.stderr
    # synth.write_noisy: 16 phases of 5 records and Init and Finalize per rank.  The same words for
    # every K: the report of a small run does not depend on K.
    why = "auto: %d records, at most 1,000,000: the graph on one analysis rank" % (4 * (2 + 16 * 5))
    assert "  algorithm dijkstra (%s)\n" % why in (tmp_path / "out" / "summary.txt").read_text()
