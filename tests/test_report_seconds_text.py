"""report.writer._seconds_text: ns as the CSV's exact seconds text, [-]s.nnnnnnnnn, on both of its
ways (one integer cast up to _ONE_CAST_MAX_S whole seconds, string kernels past it)."""

import numpy as np

from mpigraph.report import writer

LIMIT_NS = writer._ONE_CAST_MAX_S * 10**9
INT64 = np.iinfo(np.int64)


def exact(ns):
    """The text by Python's integers (no float, no overflow): sign, whole seconds, 9 digits."""
    return ["%s%d.%09d" % ("-" if v < 0 else "", abs(v) // 10**9, abs(v) % 10**9) for v in ns]


def test_known_values():
    ns = np.array([0, 1, -1, 999_999_999, 10**9, -10**9, 1_234_567_890_123, -20_000_000_001], np.int64)
    assert writer._seconds_text(ns).to_pylist() == [
        "0.000000000", "0.000000001", "-0.000000001", "0.999999999", "1.000000000", "-1.000000000",
        "1234.567890123", "-20.000000001"]


def test_both_sides_of_the_one_cast_limit_and_int64s_ends():
    # The limit's own last ns (one cast) and the next (the general way); int64's largest, least
    # (whose |x| overflows int64) and least but one.
    ns = np.array([LIMIT_NS + 999_999_999, LIMIT_NS + 10**9, -(LIMIT_NS + 999_999_999), -(LIMIT_NS + 10**9),
                   INT64.max, INT64.min + 1, 0, INT64.min], np.int64)
    assert writer._seconds_text(ns).to_pylist() == exact(ns.tolist())
    assert writer._seconds_text(ns[[0, 2, 6]]).to_pylist() == exact(ns[[0, 2, 6]].tolist())   # one cast only


def test_random_times_of_every_magnitude():
    rng = np.random.default_rng(28)
    scale = 10 ** rng.integers(0, 19, 20_000)
    ns = rng.integers(-scale, scale, dtype=np.int64)
    small = ns[np.abs(ns) < LIMIT_NS]
    assert len(small) < len(ns)      # both ways taken below
    assert writer._seconds_text(ns).to_pylist() == exact(ns.tolist())
    assert writer._seconds_text(small).to_pylist() == exact(small.tolist())


def test_empty_and_a_slice_of_a_column():
    assert writer._seconds_text(np.zeros(0, np.int64)).to_pylist() == []
    ns = np.arange(-3, 4, dtype=np.int64) * 700_000_001
    assert writer._csv_text(writer.schema.Column("t", "time", ""), ns, slice(2, 6)).to_pylist() == exact(ns[2:6])


def test_int_text_of_a_small_span_and_of_any_int64():
    """_int_text takes a small span's texts (ranks, tags: few values, many rows) and casts the rest."""
    few = np.array([-2, 0, 7, 7, 3] * 40, np.int64)          # span 10, 200 rows: taken
    assert writer._int_text(few).to_pylist() == [str(v) for v in few.tolist()]
    ends = np.array([INT64.min, INT64.max, 0, -1] * 50, np.int64)     # span past int64: cast
    assert writer._int_text(ends).to_pylist() == [str(v) for v in ends.tolist()]
    assert writer._int_text(np.zeros(0, np.int64)).to_pylist() == []
