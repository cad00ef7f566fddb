"""Quantities as users write them on command lines (mpigraph.util.units), one reader for all."""

import pytest

from mpigraph.util import units


@pytest.mark.parametrize("text, unit, seconds", [("100us", "s", 1e-4), ("2.5 ms", "s", 2.5e-3), ("300ns", "s", 3e-7),
                                                 ("1e-6", "s", 1e-6), ("7", "us", 7e-6), ("70", "ns", 7e-8),
                                                 ("0", "us", 0.0), ("5µs", "s", 5e-6), ("1.5US", "s", 1.5e-6)])
def test_time(text, unit, seconds):
    assert units.parse_time(text, unit) == pytest.approx(seconds, rel=1e-12, abs=0)


def test_negative_time_only_where_signed():
    assert units.parse_time("-5us", signed=True) == pytest.approx(-5e-6)
    with pytest.raises(units.UnitError, match=">= 0"):
        units.parse_time("-5us")


@pytest.mark.parametrize("text", ["fast", "10 parsecs", "", "1e400", "nan", "us"])
def test_bad_time(text):
    with pytest.raises(units.UnitError, match="write a time like|finite"):
        units.parse_time(text)


@pytest.mark.parametrize("text, nbytes", [("65536", 65536), ("64KiB", 65536), ("256KB", 256000), ("1MiB", 2 ** 20),
                                          ("2mb", 2e6), ("8 B", 8)])
def test_size(text, nbytes):
    assert units.parse_size(text) == nbytes


@pytest.mark.parametrize("text, rate", [("10GB/s", 1e10), ("1GiB/s", 2.0 ** 30), ("100Gb/s", 1.25e10),
                                        ("100Gbps", 1.25e10), ("1e9", 1e9), ("200 MB/s", 2e8)])
def test_bandwidth(text, rate):
    assert units.parse_bandwidth(text) == pytest.approx(rate)


@pytest.mark.parametrize("text", ["fast", "0GB/s", "-1GB/s"])
def test_bad_bandwidth(text):
    with pytest.raises(units.UnitError):
        units.parse_bandwidth(text)


def test_bandwidth_or_time_per_byte():
    assert units.is_bandwidth("10GB/s") and units.is_bandwidth("100Gbps")
    assert not units.is_bandwidth("0.02ns") and not units.is_bandwidth("0.1")
