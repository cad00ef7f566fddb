"""The columnar codec: a batch of equal-length numpy columns to bytes and back.

A *batch* is an ordered mapping ``name -> 1-D numpy array`` whose arrays have
the same length (the rows) and a numeric dtype of 1, 2, 4 or 8 bytes (bool,
int*, uint*, float*, datetime64/timedelta64).  ``Codec.encode`` turns it into
one self-describing ``bytes`` object; ``decode`` gives the batch back exactly,
bit for bit (NaN payloads and -0.0 included).

Every column is handled as the unsigned integers of its width (a ``view``,
never a conversion), goes through one *encoding* and then its integer
*streams* are packed:

========== ===================================================================
encoding   streams
========== ===================================================================
plain      the values
delta      zig-zag of the wrapping differences x[i] - x[i-1] (first value in
           the descriptor): sorted or near-sorted times become small numbers
ref:<col>  zig-zag of x - <col>, an earlier column of the same width: an end
           time next to its start time becomes a duration
rle        the value of each run, and the run lengths
========== ===================================================================

Packing a stream subtracts its minimum (signed minimum for a signed column),
stores it in the narrowest of 1/2/4/8 bytes that holds the range, and
byte-shuffles it (all first bytes, then all second bytes, ...) so that the
compressor sees long runs of similar bytes.  All arithmetic wraps in the
column's unsigned width, so extreme values round-trip exactly.  The encoding
of each column is chosen by trying the candidates on a sample of rows, or set
by a hint.  Finally the payload (all packed streams back to back) is
compressed with zstandard, unless the level is off.

Layout (little-endian)::

    fixed header  "<4sBBHQQQII": magic b"MPGC", version, compression (0 none,
                  1 zstd), column count, row count, payload length before
                  compression, stored payload length, crc32 of the stored
                  payload, header length (fixed part + columns + header crc)
    per column    name (u16 length + utf-8), dtype (u8 length + ascii numpy
                  dtype string), encoding (u8), parameter (u64: delta's first
                  value, ref's column index), stream count (u8), per stream:
                  item count (u64), base (u64), width (u8), shuffled (u8)
    header crc    crc32 of everything above (u32)
    payload       stored payload length bytes

Anything wrong with a batch (short, bad magic, bad checksum, an unknown
encoding...) raises ``CodecError`` naming what is wrong; a corrupt batch is
never decoded into wrong numbers (both the header and the payload are covered
by crc32, zstd frames also carry their own checksum).
"""

import struct
import zlib

import numpy as np
import zstandard

from mpigraph.util import arrays
from mpigraph import config

MAGIC = b"MPGC"
VERSION = 1
DEFAULT_LEVEL = 3          # zstandard's own default: fast, most of the gain

# Column encodings (the u8 in a column descriptor).
PLAIN, DELTA, REF, RLE = 0, 1, 2, 3
ENCODING_NAMES = {PLAIN: "plain", DELTA: "delta", REF: "ref", RLE: "rle"}
_STREAM_COUNT = {PLAIN: 1, DELTA: 1, REF: 1, RLE: 2}

COMPRESSION_NONE, COMPRESSION_ZSTD = 0, 1

_FIXED = struct.Struct("<4sBBHQQQII")
_STREAM = struct.Struct("<QQBB")
_COLUMN_TAIL = struct.Struct("<BQB")       # encoding, parameter, stream count
_CRC = struct.Struct("<I")
_NAME_LEN = struct.Struct("<H")
_DTYPE_LEN = struct.Struct("<B")

_UINT = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
_SINT = {1: np.dtype("<i1"), 2: np.dtype("<i2"), 4: np.dtype("<i4"), 8: np.dtype("<i8")}
_KINDS = "biufmM"          # bool, signed, unsigned, float, timedelta, datetime

# Encoding choice: candidates are tried on up to _SAMPLE_BLOCKS blocks of
# _SAMPLE_ROWS contiguous rows (contiguous, so deltas and runs are realistic).
_SAMPLE_ROWS = 2048
_SAMPLE_BLOCKS = 4
_TRIAL_LEVEL = 3           # trials at a high level would cost more than they tell


class CodecError(ValueError):
    """A batch cannot be decoded; the message says what is wrong with it."""


# ---------------------------------------------------------------------------
# Integer transforms: all in the column's unsigned width, wrapping.

def _zigzag(d, in_place=False):
    """Signed (as two's complement in unsigned d) to unsigned: 0,-1,1,-2 -> 0,1,2,3.

    in_place: d is a temporary of the caller's, overwritten with the answer (one array
    less to allocate and fill: columns are long)."""
    bits = d.dtype.itemsize * 8
    sign = d >> d.dtype.type(bits - 1)
    np.negative(sign, out=sign)
    out = d if in_place else d.copy()
    out <<= d.dtype.type(1)
    out ^= sign
    return out


def _unzigzag(z, out=None):
    """The inverse of _zigzag, into `out` (may be z itself) or a new array."""
    low = z & z.dtype.type(1)
    np.negative(low, out=low)
    out = np.right_shift(z, z.dtype.type(1), out=out)
    out ^= low
    return out


def _delta(u):
    """The wrapping differences u[i] - u[i-1], zig-zagged; u[0] goes in the descriptor."""
    return _zigzag(u[1:] - u[:-1], in_place=True)


def _undelta(z, first, n, udtype):
    out = np.empty(n, udtype)
    if n:
        out[0] = first
        _unzigzag(z, out=out[1:])
        np.cumsum(out, out=out)          # wraps in the unsigned width: exact
    return out


def _rle(u):
    """Run values and run lengths (uint64)."""
    if not len(u):
        return u[:0], np.zeros(0, np.uint64)
    starts, lengths = arrays.runs(u)
    return u[starts], lengths.astype(np.uint64)


# ---------------------------------------------------------------------------
# Stream packing: frame of reference, narrowest width, byte shuffle.

def _narrowest(span):
    for width in (1, 2, 4):
        if span < (1 << (8 * width)):
            return width
    return 8


def _pack(s, signed, transform):
    """(count, base, width, shuffled), bytes of one unsigned stream."""
    width = s.dtype.itemsize
    if not transform or not len(s):
        return (len(s), 0, width, 0), s.tobytes()
    view = s.view(_SINT[width]) if signed else s
    low, high = view.min(), view.max()
    base = s.dtype.type(low.view(s.dtype)) if signed else low
    span = int(high) - int(low)                     # exact in Python ints
    narrow = _narrowest(span)
    r = s - base if base else s
    if narrow != width:
        r = r.astype(_UINT[narrow])
    if narrow == 1:
        return (len(s), int(base), 1, 0), r.tobytes()
    shuffled = np.ascontiguousarray(r.view(np.uint8).reshape(len(r), narrow).T)
    return (len(s), int(base), narrow, 1), shuffled.tobytes()


def _unpack(raw, count, base, width, shuffled, udtype):
    """The unsigned stream (of dtype udtype) packed in `raw`."""
    packed = np.frombuffer(raw, np.uint8)
    if shuffled and width <= 4:
        # A byte plane at a time into its byte of every value: 3 to 6 times faster than numpy's
        # copy of the transposed planes, whose rows of 2 or 4 bytes it walks one at a time.
        r = np.empty((count, width), np.uint8)
        for b, plane in enumerate(packed.reshape(width, count)):
            r[:, b] = plane
        r = r.view(_UINT[width]).reshape(count)
    else:
        if shuffled:
            packed = packed.reshape(width, count).T
        r = np.ascontiguousarray(packed).view(_UINT[width]).reshape(count)
    s = r.astype(udtype)                            # always a fresh copy
    if base:
        s += udtype.type(base)
    return s


# ---------------------------------------------------------------------------
# Encoding a column: transform into streams.

def _signed_stream(signed_column, encoding, index):
    """Whether stream `index` holds the column's own (possibly signed) values.

    Those get a signed frame of reference, so -1 next to small positives packs
    into one byte; delta and ref streams are zig-zagged, hence unsigned.
    """
    return signed_column and encoding in (PLAIN, RLE) and index == 0


def _stream_dtype(encoding, index, udtype):
    """The unsigned dtype of a stream: the column's width, uint64 for run lengths."""
    return _UINT[8] if encoding == RLE and index == 1 else udtype


def _streams(u, encoding, ref_u):
    """(parameter, [(stream, signed)]) for one column's unsigned view."""
    if encoding == PLAIN:
        return 0, [u]
    if encoding == DELTA:
        return (int(u[0]) if len(u) else 0), [_delta(u)]
    if encoding == REF:
        return None, [_zigzag(u - ref_u, in_place=True)]
    values, lengths = _rle(u)
    return 0, [values, lengths]


def _parse_hint(hint, name, names_before):
    """Encoding code and ref name from a hint string: plain, delta, rle, ref:<column>."""
    if hint in ("plain", "delta", "rle"):
        return {"plain": PLAIN, "delta": DELTA, "rle": RLE}[hint], None
    if isinstance(hint, str) and hint.startswith("ref:"):
        ref = hint[4:]
        if ref not in names_before:
            raise ValueError("hint %r for column %r: %r is not an earlier column" % (hint, name, ref))
        return REF, ref
    raise ValueError("hint %r for column %r: expected plain, delta, rle or ref:<column>" % (hint, name))


class _Chooser:
    """Picks each column's encoding by packing and compressing a sample of rows."""

    def __init__(self, n_rows, level):
        blocks = min(_SAMPLE_BLOCKS, max(1, n_rows // _SAMPLE_ROWS))
        starts = np.linspace(0, max(0, n_rows - _SAMPLE_ROWS), blocks).astype(np.int64)
        self.blocks = [slice(int(a), int(a) + _SAMPLE_ROWS) for a in arrays.unique(starts)]
        self.trial = zstandard.ZstdCompressor(level=min(level, _TRIAL_LEVEL)) if level else None

    def cost(self, u, encoding, ref_u, signed):
        parts = []
        for block in self.blocks:
            sample_ref = ref_u[block] if ref_u is not None else None
            _, streams = _streams(u[block], encoding, sample_ref)
            for i, s in enumerate(streams):
                parts.append(_pack(s, _signed_stream(signed, encoding, i), True)[1])
        payload = b"".join(parts)
        return len(self.trial.compress(payload)) if self.trial else len(payload)

    def choose(self, u, signed, refs):
        """(encoding, ref name) of least sampled cost; refs: earlier columns worth a try."""
        options = [(PLAIN, None), (DELTA, None)]
        first = u[self.blocks[0]]
        if len(first) and 2 * (np.count_nonzero(first[1:] != first[:-1]) + 1) <= len(first):
            options.append((RLE, None))
        options += [(REF, name) for name in refs]
        costs = [self.cost(u, enc, refs.get(ref), signed) for enc, ref in options]
        return options[int(np.argmin(costs))]   # ties: the earlier, cheaper option


# ---------------------------------------------------------------------------
# Batch validation.

def _as_columns(columns):
    """Columns as contiguous little-endian arrays, checked; returns (dict, n_rows)."""
    out, n_rows = {}, None
    for name, values in columns.items():
        if not isinstance(name, str):
            raise TypeError("column names must be str, got %r" % (name,))
        a = np.asarray(values)
        if a.ndim != 1:
            raise ValueError("column %r has %d dimensions, expected 1" % (name, a.ndim))
        if a.dtype.kind not in _KINDS or a.dtype.itemsize not in _UINT:
            raise TypeError("column %r has dtype %s: only 1/2/4/8-byte numeric columns" % (name, a.dtype))
        if n_rows is None:
            n_rows = len(a)
        elif len(a) != n_rows:
            raise ValueError("column %r has %d rows, the batch %d" % (name, len(a), n_rows))
        out[name] = np.ascontiguousarray(a, a.dtype.newbyteorder("<"))
    return out, n_rows or 0


def _column_dtype(text, name):
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError):
        raise CodecError("column %r has unknown dtype %r" % (name, text)) from None
    if dtype.kind not in _KINDS or dtype.itemsize not in _UINT or dtype.str != text:
        raise CodecError("column %r has unsupported dtype %r" % (name, text))
    return dtype


# ---------------------------------------------------------------------------
# The codec.

class Codec:
    """Encodes batches; `level` is the zstandard level 1-22, None or 0 for no compression.

    `transform` (default: on when compressing) applies the encodings and the
    stream packing; off, the payload is the columns' raw bytes, which is the
    cheapest on CPU.  `hints` maps column names to an encoding ("plain",
    "delta", "rle", "ref:<earlier column>") instead of the sampled choice.
    """

    def __init__(self, level=DEFAULT_LEVEL, transform=None, hints=None):
        if level is not None and not isinstance(level, (int, np.integer)):
            raise TypeError("level must be an int or None, got %r" % (level,))
        if level and not 1 <= level <= 22:
            raise ValueError("zstandard level must be 1-22 (or None/0 for off), got %d" % level)
        self.level = int(level) if level else None
        self.transform = self.level is not None if transform is None else bool(transform)
        self.hints = dict(hints or {})
        self._compressor = (zstandard.ZstdCompressor(level=self.level, write_checksum=True)
                            if self.level else None)

    @classmethod
    def from_setting(cls, value):
        """The codec of an MPIGRAPH_COMPRESS value: off | on | 1-22."""
        return cls(level=config.parse_compress(value))

    def __repr__(self):
        return "Codec(level=%r, transform=%r)" % (self.level, self.transform)

    def encode(self, columns, hints=None):
        """One batch as bytes; `hints` adds to (and overrides) the codec's hints."""
        columns, n_rows = _as_columns(columns)
        hints = {**self.hints, **(hints or {})}
        unknown = set(hints) - set(columns)
        if unknown:
            raise ValueError("hints for columns not in the batch: %s" % ", ".join(sorted(unknown)))
        chooser = _Chooser(n_rows, self.level) if self.transform else None
        descriptors, parts = [], []
        names = list(columns)
        views = {}
        for index, (name, column) in enumerate(columns.items()):
            u = column.view(_UINT[column.dtype.itemsize])
            views[name] = u
            encoding, ref = self._encoding(name, u, column.dtype, names[:index], views, hints, chooser)
            parameter, streams = _streams(u, encoding, views[ref] if ref else None)
            if encoding == REF:
                parameter = names.index(ref)
            signed = column.dtype.kind in "im"
            metas = []
            for i, s in enumerate(streams):
                meta, raw = _pack(s, _signed_stream(signed, encoding, i), self.transform)
                metas.append(meta)
                parts.append(raw)
            descriptors.append(_column_descriptor(name, column.dtype, encoding, parameter, metas))
        return self._frame(n_rows, descriptors, b"".join(parts))

    def _encoding(self, name, u, dtype, names_before, views, hints, chooser):
        if name in hints:
            encoding, ref = _parse_hint(hints[name], name, names_before)
            if ref is not None and views[ref].dtype != u.dtype:
                raise ValueError("hint ref:%s for column %r: widths differ" % (ref, name))
            return encoding, ref
        if chooser is None or not len(u):
            return PLAIN, None
        # Only a time next to another time is worth a reference: same width, and
        # (for speed) only the columns just before this one.
        refs = {n: views[n] for n in names_before[-2:] if views[n].dtype == u.dtype and len(u) > 1}
        return chooser.choose(u, dtype.kind in "im", refs)

    def _frame(self, n_rows, descriptors, payload):
        stored = self._compressor.compress(payload) if self._compressor else payload
        compression = COMPRESSION_ZSTD if self._compressor else COMPRESSION_NONE
        columns = b"".join(descriptors)
        header_len = _FIXED.size + len(columns) + _CRC.size
        header = _FIXED.pack(MAGIC, VERSION, compression, len(descriptors), n_rows,
                             len(payload), len(stored), zlib.crc32(stored), header_len) + columns
        return b"".join((header, _CRC.pack(zlib.crc32(header)), stored))

    @staticmethod
    def decode(data):
        """The batch encoded in `data` (batches describe themselves: any Codec decodes any)."""
        return decode(data)


def _column_descriptor(name, dtype, encoding, parameter, metas):
    name_bytes = name.encode("utf-8")
    dtype_bytes = dtype.str.encode("ascii")
    if len(name_bytes) > 0xFFFF:
        raise ValueError("column name too long: %r..." % name[:40])
    head = (_NAME_LEN.pack(len(name_bytes)) + name_bytes + _DTYPE_LEN.pack(len(dtype_bytes))
            + dtype_bytes + _COLUMN_TAIL.pack(encoding, parameter & 0xFFFFFFFFFFFFFFFF, len(metas)))
    return head + b"".join(_STREAM.pack(*meta) for meta in metas)


def encode(columns, level=DEFAULT_LEVEL, hints=None):
    """Encode one batch with a throwaway Codec(level); see Codec.encode."""
    return Codec(level=level, hints=hints).encode(columns)


# ---------------------------------------------------------------------------
# Decoding.

class ColumnInfo:
    """One column as described by a batch header."""

    __slots__ = ("name", "dtype", "encoding", "parameter", "streams")

    def __init__(self, name, dtype, encoding, parameter, streams):
        self.name, self.dtype, self.encoding = name, dtype, encoding
        self.parameter, self.streams = parameter, streams   # streams: (count, base, width, shuffled)

    @property
    def packed_size(self):
        """Bytes of this column in the payload before compression."""
        return sum(count * width for count, _, width, _ in self.streams)

    def encoding_name(self, columns):
        if self.encoding == REF:
            return "ref:" + columns[self.parameter].name
        return ENCODING_NAMES[self.encoding]

    def __repr__(self):
        return "ColumnInfo(%r, %s, %s)" % (self.name, self.dtype, ENCODING_NAMES[self.encoding])


class BatchInfo:
    """What a batch header says: rows, columns, payload sizes and where the payload is."""

    __slots__ = ("n_rows", "columns", "compression", "raw_len", "stored_len", "payload_crc",
                 "header_len")

    def __init__(self, **fields):
        for k, v in fields.items():
            setattr(self, k, v)

    @property
    def size(self):
        """Bytes of the whole batch."""
        return self.header_len + self.stored_len

    def encodings(self):
        """{column name: encoding name}, e.g. {"t_start": "delta", "t_end": "ref:t_start"}."""
        return {c.name: c.encoding_name(self.columns) for c in self.columns}


class _Reader:
    """Bounds-checked reads from the header; any overrun is a malformed header."""

    def __init__(self, data, start, end):
        self.data, self.pos, self.end = data, start, end

    def take(self, n):
        if self.pos + n > self.end:
            raise CodecError("malformed header: column descriptors overrun the header at byte %d"
                             % self.pos)
        chunk = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return chunk

    def unpack(self, fmt):
        return fmt.unpack(self.take(fmt.size))


def read_header(data):
    """The BatchInfo of a batch, checking everything but the payload checksum."""
    data = memoryview(data).cast("B")
    size = len(data)
    if size >= 4 and bytes(data[:4]) != MAGIC:
        raise CodecError("bad magic %r: not an mpigraph batch" % bytes(data[:4]))
    if size < _FIXED.size:
        raise CodecError("truncated at byte %d: the fixed header needs %d bytes" % (size, _FIXED.size))
    (_, version, compression, n_cols, n_rows, raw_len, stored_len, payload_crc,
     header_len) = _FIXED.unpack(data[:_FIXED.size])
    if version != VERSION:
        raise CodecError("unsupported batch version %d (this mpigraph reads %d)" % (version, VERSION))
    if header_len < _FIXED.size + _CRC.size:
        raise CodecError("malformed header: header length %d" % header_len)
    if size < header_len:
        raise CodecError("truncated at byte %d: the header needs %d bytes" % (size, header_len))
    (header_crc,) = _CRC.unpack(data[header_len - _CRC.size:header_len])
    if zlib.crc32(data[:header_len - _CRC.size]) != header_crc:
        raise CodecError("header checksum mismatch")
    if compression not in (COMPRESSION_NONE, COMPRESSION_ZSTD):
        raise CodecError("unknown compression %d" % compression)
    if size < header_len + stored_len:
        raise CodecError("truncated at byte %d: the batch has %d bytes" % (size, header_len + stored_len))
    if size > header_len + stored_len:
        raise CodecError("%d trailing bytes after the batch's %d" % (size - header_len - stored_len,
                                                                     header_len + stored_len))
    reader = _Reader(data, _FIXED.size, header_len - _CRC.size)
    columns = [_read_column(reader, n_rows, i) for i in range(n_cols)]
    if reader.pos != reader.end:
        raise CodecError("malformed header: %d unused bytes" % (reader.end - reader.pos))
    packed = sum(c.packed_size for c in columns)
    if packed != raw_len:
        raise CodecError("malformed header: columns need %d payload bytes, header says %d"
                         % (packed, raw_len))
    return BatchInfo(n_rows=n_rows, columns=columns, compression=compression, raw_len=raw_len,
                     stored_len=stored_len, payload_crc=payload_crc, header_len=header_len)


def _read_column(reader, n_rows, index):
    (name_len,) = reader.unpack(_NAME_LEN)
    try:
        name = reader.take(name_len).decode("utf-8")
    except UnicodeDecodeError:
        raise CodecError("malformed header: column %d name is not utf-8" % index) from None
    (dtype_len,) = reader.unpack(_DTYPE_LEN)
    dtype = _column_dtype(reader.take(dtype_len).decode("ascii", "replace"), name)
    encoding, parameter, n_streams = reader.unpack(_COLUMN_TAIL)
    if encoding not in ENCODING_NAMES:
        raise CodecError("column %r: unknown encoding %d" % (name, encoding))
    if n_streams != _STREAM_COUNT[encoding]:
        raise CodecError("column %r: %s needs %d streams, header says %d"
                         % (name, ENCODING_NAMES[encoding], _STREAM_COUNT[encoding], n_streams))
    streams = [reader.unpack(_STREAM) for _ in range(n_streams)]
    for i, (count, base, width, shuffled) in enumerate(streams):
        widest = _stream_dtype(encoding, i, _UINT[dtype.itemsize]).itemsize
        if width not in _UINT or width > widest or shuffled not in (0, 1) or count > n_rows:
            raise CodecError("column %r: malformed stream (count %d, width %d, shuffled %d)"
                             % (name, count, width, shuffled))
    expected = {PLAIN: n_rows, DELTA: max(n_rows - 1, 0), REF: n_rows}.get(encoding)
    if expected is not None and streams[0][0] != expected:
        raise CodecError("column %r: %d encoded values for %d rows" % (name, streams[0][0], n_rows))
    if encoding == RLE and streams[0][0] != streams[1][0]:
        raise CodecError("column %r: %d run values but %d run lengths" % (name, streams[0][0], streams[1][0]))
    if encoding == REF and parameter >= index:
        raise CodecError("column %r: reference to column %d, not an earlier one" % (name, parameter))
    return ColumnInfo(name, dtype, encoding, parameter, streams)


def decode(data):
    """The batch (dict name -> numpy array) encoded in `data` (any bytes-like object)."""
    info = read_header(data)
    data = memoryview(data).cast("B")
    stored = data[info.header_len:info.size]
    if zlib.crc32(stored) != info.payload_crc:
        raise CodecError("payload checksum mismatch")
    payload = _decompress(stored, info)
    columns, views, pos = {}, [], 0
    for column in info.columns:
        udtype = _UINT[column.dtype.itemsize]
        streams = []
        for i, (count, base, width, shuffled) in enumerate(column.streams):
            end = pos + count * width
            sdtype = _stream_dtype(column.encoding, i, udtype)
            streams.append(_unpack(payload[pos:end], count, base, width, shuffled, sdtype))
            pos = end
        u = _decode_column(column, streams, views, info.n_rows, udtype)
        views.append(u)
        columns[column.name] = u.view(column.dtype)
    return columns


def _decompress(stored, info):
    if info.compression == COMPRESSION_NONE:
        if info.stored_len != info.raw_len:
            raise CodecError("malformed header: uncompressed payload of %d bytes, header says %d"
                             % (info.stored_len, info.raw_len))
        return stored
    try:
        payload = zstandard.ZstdDecompressor().decompress(stored, max_output_size=info.raw_len)
    except zstandard.ZstdError as e:
        raise CodecError("zstd: %s" % e) from None
    if len(payload) != info.raw_len:
        raise CodecError("payload decompressed to %d bytes, header says %d" % (len(payload), info.raw_len))
    return memoryview(payload)


def _decode_column(column, streams, views, n_rows, udtype):
    if column.encoding == PLAIN:
        return streams[0]
    if column.encoding == DELTA:
        return _undelta(streams[0], column.parameter, n_rows, udtype)
    if column.encoding == REF:
        ref = views[column.parameter]
        if ref.dtype != udtype:
            raise CodecError("column %r: reference column %d has another width"
                             % (column.name, column.parameter))
        out = _unzigzag(streams[0], out=streams[0])      # a fresh stream of ours (_unpack)
        out += ref
        return out
    values, lengths = streams
    if int(lengths.sum(dtype=np.uint64)) != n_rows or (len(lengths) and lengths.min() == 0):
        raise CodecError("column %r: run lengths do not add up to %d rows" % (column.name, n_rows))
    return np.repeat(values, lengths.astype(np.intp))
