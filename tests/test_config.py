"""Settings from MPIGRAPH_* variables (mpigraph.config)."""

import pytest

from mpigraph import config


def test_defaults():
    cfg = config.from_env({})
    assert cfg == config.Config()
    assert (cfg.out, cfg.analyze, cfg.algorithm, cfg.clock, cfg.threshold, cfg.splits, cfg.compress,
            cfg.quiet, cfg.verbose) == (None, True, "auto", "pingpong", 0.0, True, 3, False, False)


def test_every_value_read():
    cfg = config.from_env({
        "MPIGRAPH_OUT": "/tmp/x", "MPIGRAPH_ANALYZE": "off", "MPIGRAPH_ALGORITHM": "Parallel-Toposort",
        "MPIGRAPH_CLOCK": "barrier", "MPIGRAPH_THRESHOLD": "1e-6", "MPIGRAPH_SPLITS": "no",
        "MPIGRAPH_COMPRESS": "19", "MPIGRAPH_QUIET": "1", "MPIGRAPH_VERBOSE": "true"})
    assert cfg == config.Config(out="/tmp/x", analyze=False, algorithm="parallel-toposort", clock="barrier",
                                threshold=1e-6, splits=False, compress=19, quiet=True, verbose=True)


@pytest.mark.parametrize("value,level", [("off", 0), ("0", 0), ("on", 3), ("1", 1), ("22", 22)])
def test_compress_levels(value, level):
    assert config.from_env({"MPIGRAPH_COMPRESS": value}).compress == level


def test_empty_values_keep_defaults():
    assert config.from_env({"MPIGRAPH_ALGORITHM": "", "MPIGRAPH_OUT": "", "MPIGRAPH_QUIET": " "}) == config.Config()


@pytest.mark.parametrize("name,value,accepted", [
    ("MPIGRAPH_ALGORITHM", "bfs", "auto, dijkstra, delta-stepping, parallel-dijkstra, parallel-delta-stepping, "
                                  "toposort, parallel-toposort"),
    ("MPIGRAPH_ANALYZE", "maybe", "on or off"),
    ("MPIGRAPH_CLOCK", "ntp", "pingpong, barrier, none"),
    ("MPIGRAPH_THRESHOLD", "-1", "a number of seconds >= 0"),
    ("MPIGRAPH_THRESHOLD", "fast", "a number of seconds >= 0"),
    ("MPIGRAPH_THRESHOLD", "inf", "a number of seconds >= 0"),
    ("MPIGRAPH_SPLITS", "2", "on or off"),
    ("MPIGRAPH_COMPRESS", "23", "off, on, or a zstandard level 1-22"),
    ("MPIGRAPH_QUIET", "yes please", "on or off"),
])
def test_bad_values_name_the_variable(name, value, accepted):
    with pytest.raises(config.ConfigError) as info:
        config.from_env({name: value})
    message = str(info.value)
    assert message.startswith("%s=%r is not valid; accepted: " % (name, value)), message
    assert accepted in message


def test_overrides():
    cfg = config.Config().with_overrides(algorithm="Toposort", quiet=None)
    assert cfg.algorithm == "toposort" and cfg.quiet is False
    with pytest.raises(config.ConfigError, match="--algorithm='x' is not valid"):
        config.Config().with_overrides(algorithm="x")


def test_settings_table_lists_every_variable():
    table = config.settings_table()
    lines = table.splitlines()
    assert lines[0].split() == ["variable", "default", "meaning"]
    assert [line.split()[0] for line in lines[1:]] == [s.name for s in config.SETTINGS + config.TOOL_SETTINGS]
    for name in ("MPIGRAPH_OUT", "MPIGRAPH_ANALYZE", "MPIGRAPH_ALGORITHM", "MPIGRAPH_CLOCK", "MPIGRAPH_THRESHOLD",
                 "MPIGRAPH_SPLITS", "MPIGRAPH_COMPRESS", "MPIGRAPH_QUIET", "MPIGRAPH_MPICC", "MPIGRAPH_MPIEXEC"):
        assert name in table
    assert "parallel-delta-stepping" in table and "(read by the shim)" in table
