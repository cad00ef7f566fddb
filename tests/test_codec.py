"""The columnar codec round-trips exactly and refuses every corrupt batch."""

import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mpigraph.comm import codec
from mpigraph.comm.codec import Codec, CodecError

DTYPES = ["<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8", "<f4", "<f8", "?", "<M8[ns]"]
CODECS = [Codec(None), Codec(None, transform=True), Codec(1), Codec(3, transform=False), Codec(9)]
I64 = np.iinfo(np.int64)


def bits(a):
    """The bytes of an array: equality of bits, so NaN payloads and -0.0 count."""
    return a.view(np.uint8).tobytes()


def assert_same_batch(decoded, columns):
    assert list(decoded) == list(columns)
    for name, original in columns.items():
        original = np.asarray(original)
        assert decoded[name].dtype == original.dtype.newbyteorder("<"), name
        assert decoded[name].shape == original.shape, name
        assert bits(decoded[name]) == bits(original.astype(original.dtype.newbyteorder("<"))), name


def round_trip(columns, codec_=None, **kw):
    data = (codec_ or Codec()).encode(columns, **kw)
    decoded = codec.decode(data)
    assert_same_batch(decoded, columns)
    return data


# -- hypothesis: random batches ---------------------------------------------

def shaped(values):
    """Arrays as they come in traces: as drawn, sorted, cumulative (times), repeated runs."""
    return st.sampled_from(["raw", "sorted", "cumsum", "runs"]).map(lambda how: {
        "raw": values,
        "sorted": np.sort(values) if values.dtype.kind != "b" else values,
        "cumsum": np.cumsum(values, dtype=values.dtype) if values.dtype.kind in "iu" else values,
        "runs": np.repeat(values, 8)[: len(values)],
    }[how])


@st.composite
def batches(draw, max_rows=200):
    n = draw(st.integers(0, max_rows))
    names = draw(st.lists(st.text(min_size=1, max_size=8), min_size=0, max_size=5, unique=True))
    columns = {}
    for name in names:
        dtype = np.dtype(draw(st.sampled_from(DTYPES)))
        values = draw(hnp.arrays(dtype, n, elements=None if dtype.kind != "M" else
                                 st.integers(I64.min + 1, I64.max).map(lambda v: np.datetime64(v, "ns"))))
        columns[name] = draw(shaped(values)) if n else values
    return columns


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=batches(), which=st.integers(0, len(CODECS) - 1))
def test_random_batches_round_trip(columns, which):
    round_trip(columns, CODECS[which])


@settings(max_examples=60, deadline=None)
@given(values=hnp.arrays(np.int64, st.integers(0, 300), elements=st.sampled_from(
    [I64.min, I64.min + 1, -1, 0, 1, I64.max - 1, I64.max])),
    hint=st.sampled_from(["plain", "delta", "rle"]))
def test_extreme_int64_every_encoding(values, hint):
    """Deltas between int64 min and max overflow: the wrapping arithmetic stays exact."""
    round_trip({"x": values}, Codec(3), hints={"x": hint})
    round_trip({"x": values, "y": values[::-1].copy()}, Codec(None, transform=True),
               hints={"y": "ref:x"})


@settings(max_examples=60, deadline=None)
@given(payload=hnp.arrays(np.uint64, st.integers(0, 100)))
def test_float64_bit_patterns_exact(payload):
    """Any 64-bit pattern (NaNs with payloads, infinities, denormals) comes back as is."""
    values = payload.view(np.float64)
    for hint in ("plain", "delta", "rle"):
        round_trip({"f": values}, Codec(3), hints={"f": hint})


@pytest.mark.parametrize("span, width", [(1 << 9, 2), (1 << 17, 4), (1 << 40, 8)])
def test_byte_shuffled_streams_of_every_width(span, width):
    """Values packed into 2, 4 and 8 bytes, each stream's bytes shuffled into planes: exact."""
    rng = np.random.default_rng(width)
    values = rng.integers(-span // 2, span // 2, 1000)
    data = round_trip({"x": values}, Codec(1), hints={"x": "plain"})
    assert codec.read_header(data).columns[0].streams[0][2:] == (width, 1)


# -- explicit edge cases ------------------------------------------------------

def test_empty_batch_and_zero_rows():
    assert codec.decode(Codec().encode({})) == {}
    for c in CODECS:
        round_trip({"a": np.zeros(0, np.int64), "b": np.zeros(0, np.float32)}, c)


def test_one_row_and_constant():
    for c in CODECS:
        round_trip({"a": np.array([I64.min]), "b": np.array([3.5]), "c": np.array([True])}, c)
        round_trip({"k": np.full(10000, -7, np.int64), "z": np.zeros(10000, np.uint16)}, c)


def test_special_floats():
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 1.7976931348623157e308])
    payload_nan = np.array([0x7FF0000000000001, 0xFFF8DEADBEEF0001], np.uint64).view(np.float64)
    for c in CODECS:
        round_trip({"f": np.concatenate([specials, payload_nan])}, c)
        round_trip({"g": np.array([np.nan, -np.inf, -0.0, 1e-45], np.float32),
                    "g_bits": np.array([0x7FC00001, 0xFF800000, 0x80000000, 1], np.uint32)}, c)


def test_big_endian_input_decodes_as_little_endian_equal_values():
    values = np.arange(-50, 50, dtype=">i4")
    decoded = codec.decode(Codec().encode({"x": values}))
    assert decoded["x"].dtype == np.dtype("<i4")
    assert np.array_equal(decoded["x"], values)


def test_decoded_arrays_are_writable_copies():
    data = Codec(None).encode({"x": np.arange(10)})
    decoded = codec.decode(data)
    decoded["x"][0] = 99          # must not raise, must not touch `data`
    assert codec.decode(data)["x"][0] == 0


def test_non_contiguous_and_list_input():
    base = np.arange(100, dtype=np.int64) * 3
    round_trip({"strided": base[::3], "list": list(range(34))})


# -- the encodings chosen on trace-like columns -------------------------------

def trace_like(n=20000, seed=1):
    rng = np.random.default_rng(seed)
    start = 10**15 + np.cumsum(rng.integers(1000, 20000, n))
    return {
        "t_start": start,
        "t_end": start + rng.integers(100, 3000, n),
        "func": np.repeat(rng.integers(0, 5, n // 100), 100).astype(np.uint16),
        "peer": rng.integers(-1, 8, n).astype(np.int32),
    }


def test_sampled_choice_on_trace_like_columns():
    info = codec.read_header(Codec(3).encode(trace_like()))
    assert info.encodings() == {"t_start": "delta", "t_end": "ref:t_start", "func": "rle", "peer": "plain"}
    # without zstandard the packed size decides: the same choice for times and runs
    info = codec.read_header(Codec(None, transform=True).encode(trace_like()))
    assert info.encodings()["t_start"] == "delta" and info.encodings()["func"] == "rle"
    # peer is -1..7: a signed frame of reference packs it into one byte
    assert info.columns[3].streams[0][2] == 1


def test_encodings_shrink_trace_like_columns():
    """Better than zstd on the raw bytes, and near the entropy of the random draws."""
    n = 20000
    columns = trace_like(n)
    plain_zstd = len(Codec(3, transform=False).encode(columns))
    encoded = len(Codec(3).encode(columns))
    entropy_bytes = n * (np.log2(19000) + np.log2(2900) + np.log2(9)) / 8   # gaps, durations, peers
    assert encoded < 0.9 * plain_zstd, (plain_zstd, encoded)
    assert encoded < 1.3 * entropy_bytes, (entropy_bytes, encoded)


def test_hints_override_and_are_checked():
    columns = trace_like(1000)
    info = codec.read_header(Codec(3, hints={"t_start": "plain"}).encode(columns, hints={"func": "delta"}))
    assert info.encodings()["t_start"] == "plain" and info.encodings()["func"] == "delta"
    with pytest.raises(ValueError, match="earlier column"):
        Codec().encode(columns, hints={"t_start": "ref:t_end"})
    with pytest.raises(ValueError, match="widths differ"):
        Codec().encode(columns, hints={"func": "ref:t_start"})
    with pytest.raises(ValueError, match="expected plain"):
        Codec().encode(columns, hints={"func": "lz4"})
    with pytest.raises(ValueError, match="not in the batch"):
        Codec().encode(columns, hints={"nope": "plain"})


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="rows"):
        Codec().encode({"a": np.zeros(3), "b": np.zeros(4)})
    with pytest.raises(ValueError, match="dimensions"):
        Codec().encode({"a": np.zeros((2, 2))})
    with pytest.raises(TypeError, match="dtype"):
        Codec().encode({"a": np.array(["x", "y"])})
    with pytest.raises(TypeError, match="dtype"):
        Codec().encode({"a": np.zeros(2, np.complex128)})


def test_levels_and_setting():
    assert Codec(None).level is None and Codec(0).level is None and not Codec(0).transform
    assert Codec(5).level == 5 and Codec(5).transform
    assert Codec.from_setting("off").level is None
    assert Codec.from_setting("on").level == codec.DEFAULT_LEVEL
    assert Codec.from_setting("19").level == 19
    for bad in ("23", "x", "-1"):
        with pytest.raises(ValueError):
            Codec.from_setting(bad)
    with pytest.raises(ValueError):
        Codec(23)
    info = codec.read_header(Codec(None).encode({"a": np.arange(5)}))
    assert info.compression == codec.COMPRESSION_NONE and info.stored_len == 40


# -- corruption: never a wrong decode -----------------------------------------

def small_batch(c):
    return c.encode({"t": np.array([10, 20, 35, 35, 40], np.int64), "f": np.array([1, 1, 1, 2, 2], np.uint16),
                     "x": np.array([0.5, np.nan, -1.0, 2.0, 3.0])})


@pytest.mark.parametrize("c", [Codec(None), Codec(3)], ids=["off", "zstd"])
def test_truncated_at_every_position(c):
    data = small_batch(c)
    for cut in range(len(data)):
        with pytest.raises(CodecError, match="truncated at byte %d" % cut):
            codec.decode(data[:cut])


@pytest.mark.parametrize("c", [Codec(None), Codec(3)], ids=["off", "zstd"])
def test_every_byte_flip_is_detected(c):
    data = small_batch(c)
    for pos in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            corrupt = bytearray(data)
            corrupt[pos] ^= mask
            with pytest.raises(CodecError):
                codec.decode(bytes(corrupt))


def test_named_errors():
    data = small_batch(Codec(3))
    with pytest.raises(CodecError, match="bad magic"):
        codec.decode(b"XXXX" + data[4:])
    with pytest.raises(CodecError, match="trailing"):
        codec.decode(data + b"\0")
    corrupt = bytearray(data)
    corrupt[-1] ^= 1
    with pytest.raises(CodecError, match="payload checksum"):
        codec.decode(bytes(corrupt))
    corrupt = bytearray(data)
    corrupt[45] ^= 1
    with pytest.raises(CodecError, match="header checksum"):
        codec.decode(bytes(corrupt))


def rewrite_header(data, patch):
    """`data` with its header changed by patch(bytearray) and the header crc made valid again."""
    header_len = struct.unpack_from("<I", data, 36)[0]
    header = bytearray(data[:header_len - 4])
    patch(header)
    return bytes(header) + struct.pack("<I", zlib.crc32(header)) + data[header_len:]


def first_column_tail(header):
    """Offset of the first column's encoding byte."""
    name_len = struct.unpack_from("<H", header, 40)[0]
    dtype_len = header[42 + name_len]
    return 43 + name_len + dtype_len


def test_unknown_encoding_and_version_with_valid_checksums():
    data = small_batch(Codec(3))

    def bad_encoding(h):
        h[first_column_tail(h)] = 7

    with pytest.raises(CodecError, match="unknown encoding 7"):
        codec.decode(rewrite_header(data, bad_encoding))

    def bad_version(h):
        h[4] = 2

    with pytest.raises(CodecError, match="version 2"):
        codec.decode(rewrite_header(data, bad_version))

    def bad_dtype(h):
        pos = 43 + struct.unpack_from("<H", h, 40)[0]
        h[pos:pos + 3] = b"|O8"

    with pytest.raises(CodecError, match="dtype"):
        codec.decode(rewrite_header(data, bad_dtype))


def test_structural_checks_behind_valid_checksums():
    """A writer bug (valid crcs, inconsistent streams) is refused, not decoded."""
    data = Codec(None).encode({"x": np.arange(4, dtype=np.int64)})

    def wider_stream(h):
        h[first_column_tail(h) + 10 + 16] = 16     # stream width 16 bytes

    with pytest.raises(CodecError, match="malformed stream"):
        codec.decode(rewrite_header(data, wider_stream))

    def wrong_raw_len(h):
        struct.pack_into("<Q", h, 16, 31)

    with pytest.raises(CodecError, match="payload bytes"):
        codec.decode(rewrite_header(data, wrong_raw_len))


def test_read_header_describes_the_batch():
    columns = trace_like(5000)
    data = Codec(3).encode(columns)
    info = codec.read_header(data)
    assert info.n_rows == 5000 and info.size == len(data)
    assert [c.name for c in info.columns] == list(columns)
    assert [c.dtype for c in info.columns] == [a.dtype for a in columns.values()]
    assert info.stored_len < info.raw_len < sum(a.nbytes for a in columns.values())
