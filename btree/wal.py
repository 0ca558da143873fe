"""The write-ahead log: one record per committed batch.

This module owns the log file ``btree.log``: its header, the record framing
(length + crc32, so a torn tail is recognised and dropped) and the encoding of
the logical operations a batch holds. It knows nothing about pages: recovery
re-applies the logged batches to the tree as of the last checkpoint (see
docs/btree.md for why that is sound).

Positions in the log are LSNs, byte positions in an endless stream: a record's
LSN is the log's ``base_lsn`` (in its header) plus its offset past the header.
A checkpoint starts a new log file whose ``base_lsn`` is the checkpointed LSN,
so LSNs only ever grow.
"""

from __future__ import annotations

import struct
from typing import Iterator

from lsmkv.base.checksum import crc32, single_bit_error
from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import FileSystem, WritableFile

from .node import Expiring

LOG_MAGIC = b"BTREELOG"
#: 2: operations may be puts with a ttl (op 3); 3: metadata entries (op 4);
#: 4: range deletes (op 5). Older logs are still read.
LOG_VERSION = 4
#: magic 8s, version u32, reserved u32, base LSN u64, crc32 of the first 24 bytes u32, reserved u32
LOG_HEADER = struct.Struct("<8sIIQII")
LOG_HEADER_SIZE = LOG_HEADER.size  # 32
#: Record frame: crc32 of the payload u32, payload length u32.
FRAME = struct.Struct("<II")
FRAME_SIZE = FRAME.size
#: Payload start: record type u8 (1 = batch), operation count u32.
BATCH_HEAD = struct.Struct("<BI")
REC_BATCH = 1
OP_PUT = 1
OP_DELETE = 2
OP_PUT_TTL = 3
#: A metadata entry: op u8, name length u16, value length u32, name, value.
OP_META = 4
#: A range delete: op u8, start length u16, end length u16, start, end
#: (every key k with start <= k < end is deleted).
OP_RANGE_DELETE = 5
#: Operations: op u8, key length u16, value length u32 (puts only), deadline
#: u64 (puts with a ttl only; ms since the epoch).
PUT_OP = struct.Struct("<BHI")
DEL_OP = struct.Struct("<BH")
PUT_TTL_OP = struct.Struct("<BHIQ")
META_OP = struct.Struct("<BHI")
RANGE_DELETE_OP = struct.Struct("<BHH")
#: A one-put batch's payload head, packed in one call on the hot path.
_SINGLE_PUT = struct.Struct("<BIBHI")
_SINGLE_DEL = struct.Struct("<BIBH")
_frame_pack = FRAME.pack


class _BatchMarker:
    """A value that stands in a batch's op list where a put's value would,
    beside a key, and says what else the operation is; it holds one field
    (its class's one slot). Equal to one of its kind holding an equal field."""

    __slots__ = ()

    def _field(self) -> bytes:
        return getattr(self, self.__slots__[0])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and other._field() == self._field()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._field()!r})"


class MetaEntry(_BatchMarker):
    """A batch's metadata entry (``batch.set_meta``): in a batch's op list
    it stands where a put's value would, beside the entry's name."""

    __slots__ = ("value",)

    def __init__(self, value: bytes) -> None:
        self.value = value


class RangeDelete(_BatchMarker):
    """A batch's range delete (``batch.delete_range(start, end)``): in a
    batch's op list it stands where a put's value would, beside ``start``;
    it deletes every key k with start <= k < ``end``."""

    __slots__ = ("end",)

    def __init__(self, end: bytes) -> None:
        self.end = end


def encode_header(base_lsn: int) -> bytes:
    head = struct.pack("<8sIIQ", LOG_MAGIC, LOG_VERSION, 0, base_lsn)
    return head + struct.pack("<II", crc32(head), 0)


def _frame(payload: bytes) -> bytes:
    return _frame_pack(crc32(payload), len(payload)) + payload


def encode_put(key: bytes, value: bytes) -> bytes:
    """The record of a batch holding one put."""
    payload = b"".join((_SINGLE_PUT.pack(REC_BATCH, 1, OP_PUT, len(key), len(value)), key, value))
    return _frame_pack(crc32(payload), len(payload)) + payload


def encode_delete(key: bytes) -> bytes:
    """The record of a batch holding one delete."""
    payload = _SINGLE_DEL.pack(REC_BATCH, 1, OP_DELETE, len(key)) + key
    return _frame_pack(crc32(payload), len(payload)) + payload


def encode_put_ttl(key: bytes, value: Expiring) -> bytes:
    """The record of a batch holding one put with a ttl."""
    return encode_batch([(key, value)])


def encode_batch(ops: list[tuple[bytes, "bytes | Expiring | None"]]) -> bytes:
    """The record of a batch: ``ops`` is a list of (key, value), the value
    bytes, an Expiring (a put with a ttl), None (a delete), a MetaEntry (a
    metadata entry) or a RangeDelete (the key is the range's start)."""
    parts = [BATCH_HEAD.pack(REC_BATCH, len(ops))]
    append = parts.append
    for key, value in ops:
        if value is None:
            append(DEL_OP.pack(OP_DELETE, len(key)))
            append(key)
        elif type(value) is Expiring:
            append(PUT_TTL_OP.pack(OP_PUT_TTL, len(key), len(value.value), value.deadline))
            append(key)
            append(value.value)
        elif type(value) is MetaEntry:
            append(META_OP.pack(OP_META, len(key), len(value.value)))
            append(key)
            append(value.value)
        elif type(value) is RangeDelete:
            append(RANGE_DELETE_OP.pack(OP_RANGE_DELETE, len(key), len(value.end)))
            append(key)
            append(value.end)
        else:
            append(PUT_OP.pack(OP_PUT, len(key), len(value)))
            append(key)
            append(value)
    return _frame(b"".join(parts))


def _take(payload: bytes, pos: int, length: int) -> tuple[bytes, int]:
    """The ``length`` bytes of ``payload`` at ``pos``, and the position
    after them; IndexError if the payload ends before."""
    end = pos + length
    if end > len(payload):
        raise IndexError
    return payload[pos:end], end


def decode_batch(payload: bytes, path: str, offset: int) -> list[tuple[bytes, "bytes | Expiring | None"]]:
    """The operations of a verified record payload."""
    try:
        rtype, count = BATCH_HEAD.unpack_from(payload, 0)
        if rtype != REC_BATCH:
            raise CorruptionError(f"unknown log record type {rtype}", path=path, offset=offset)
        pos = BATCH_HEAD.size
        ops: list[tuple[bytes, bytes | None]] = []
        for _ in range(count):
            op = payload[pos]
            if op == OP_PUT:
                _, klen, vlen = PUT_OP.unpack_from(payload, pos)
                key, pos = _take(payload, pos + PUT_OP.size, klen)
                value, pos = _take(payload, pos, vlen)
                ops.append((key, value))
            elif op == OP_PUT_TTL:
                _, klen, vlen, deadline = PUT_TTL_OP.unpack_from(payload, pos)
                key, pos = _take(payload, pos + PUT_TTL_OP.size, klen)
                value, pos = _take(payload, pos, vlen)
                ops.append((key, Expiring(deadline, value)))
            elif op == OP_META:
                _, klen, vlen = META_OP.unpack_from(payload, pos)
                if not 0 < klen <= 255:
                    raise IndexError
                key, pos = _take(payload, pos + META_OP.size, klen)
                value, pos = _take(payload, pos, vlen)
                ops.append((key, MetaEntry(value)))
            elif op == OP_RANGE_DELETE:
                _, klen, elen = RANGE_DELETE_OP.unpack_from(payload, pos)
                key, pos = _take(payload, pos + RANGE_DELETE_OP.size, klen)
                end, pos = _take(payload, pos, elen)
                if key >= end:
                    raise CorruptionError("log range delete whose start is not below its end", path=path,
                                          offset=offset)
                ops.append((key, RangeDelete(end)))
            elif op == OP_DELETE:
                _, klen = DEL_OP.unpack_from(payload, pos)
                key, pos = _take(payload, pos + DEL_OP.size, klen)
                ops.append((key, None))
            else:
                raise CorruptionError(f"unknown log operation {op}", path=path, offset=offset)
        if pos != len(payload):
            raise CorruptionError("log record has trailing bytes", path=path, offset=offset)
        return ops
    except (IndexError, struct.error):
        raise CorruptionError("log record operations run past the record", path=path, offset=offset) from None


class LogWriter:
    """Appends records to ``btree.log``. ``end_lsn`` is the LSN after the last
    record handed to the OS; ``synced_lsn`` the LSN up to which it is durable."""

    __slots__ = ("file", "base_lsn", "synced_lsn", "_start_size", "append")

    def __init__(self, file: WritableFile, base_lsn: int, created: bool = False) -> None:
        self.file = file
        self.base_lsn = base_lsn
        self.synced_lsn = self.end_lsn
        self._start_size = 0 if created else file.size
        #: Hand a record to the OS (the file's own append: one call on the hot path).
        self.append = file.append

    @property
    def bytes_written(self) -> int:
        """Bytes this writer put in the file (its header included if it created it)."""
        return self.file.size - self._start_size

    @classmethod
    def create(cls, fs: FileSystem, path: str, base_lsn: int, sync_dir: str) -> "LogWriter":
        """Start a fresh log at ``base_lsn``: write it under a temporary name,
        fsync, rename over ``path`` (so a reader never sees a half-made log)."""
        tmp = path + ".tmp"
        f = fs.create(tmp)
        try:
            f.append(encode_header(base_lsn))
            f.sync()
        finally:
            f.close()
        fs.rename(tmp, path)
        fs.sync_dir(sync_dir)
        return cls(fs.open_appendable(path), base_lsn, created=True)

    @property
    def end_lsn(self) -> int:
        return self.base_lsn + self.file.size - LOG_HEADER_SIZE

    def sync(self) -> int:
        """Make every record handed to the OS durable; returns the LSN up to
        which the log is durable. Safe on another thread than the one
        appending (the log syncer's): it covers what was appended before it
        started."""
        end = self.end_lsn
        if self.synced_lsn < end:
            self.file.sync()
            if end > self.synced_lsn:
                self.synced_lsn = end
        return self.synced_lsn

    def close(self) -> None:
        self.file.close()


class LogContents:
    """The parsed log: base LSN, the batches in it, where the valid part ends."""

    __slots__ = ("base_lsn", "records", "valid_end_lsn", "torn_bytes", "size", "dropped")

    def __init__(self, base_lsn: int) -> None:
        self.base_lsn = base_lsn
        #: (start LSN, end LSN, operations)
        self.records: list[tuple[int, int, list[tuple[bytes, bytes | None]]]] = []
        self.valid_end_lsn = base_lsn
        self.torn_bytes = 0
        self.size = 0
        #: Salvage only: (file offset, bytes, reason) of the damaged rest of the log.
        self.dropped: tuple[int, int, str] | None = None


def parse_log(data: bytes, path: str, *, salvage: bool = False) -> LogContents | None:
    """Parse a whole log file. None if it has no complete header (a log whose
    creation was cut short: it holds nothing). A torn record at the tail (one
    that runs past the end of the file, or is damaged with nothing but zero
    bytes from somewhere inside it to the end of the file, and that no
    single flipped bit explains) is dropped; a bad record anywhere else
    raises CorruptionError with its offset, or, with ``salvage=True``
    (repair), ends the log there: the records before it are kept and the
    rest is listed in ``dropped`` (a damaged header drops the whole log)."""
    if len(data) < LOG_HEADER_SIZE:
        return None
    magic, version, _r, base_lsn, hcrc, _r2 = LOG_HEADER.unpack_from(data, 0)
    problem = None
    if magic != LOG_MAGIC or hcrc != crc32(data[:24]):
        problem = "log header is damaged"
    elif not 1 <= version <= LOG_VERSION:
        problem = f"log format version {version} is not supported"
    if problem is not None:
        if not salvage:
            raise CorruptionError(problem, path=path, offset=0)
        out = LogContents(0)
        out.size = len(data)
        out.dropped = (0, len(data), problem)
        return out
    out = LogContents(base_lsn)
    out.size = len(data)
    pos = LOG_HEADER_SIZE
    n = len(data)
    try:
        for rec in iter_records(data, pos, path):
            start, end, ops = rec
            out.records.append((base_lsn + start - LOG_HEADER_SIZE, base_lsn + end - LOG_HEADER_SIZE, ops))
            pos = end
    except CorruptionError as exc:
        if not salvage:
            raise
        out.dropped = (pos, n - pos, exc.reason)
        out.valid_end_lsn = base_lsn + pos - LOG_HEADER_SIZE
        return out
    out.valid_end_lsn = base_lsn + pos - LOG_HEADER_SIZE
    out.torn_bytes = n - pos
    return out


def iter_records(data: bytes, pos: int, path: str) -> Iterator[tuple[int, int, list]]:
    n = len(data)
    #: Everything from here to the end of the file is zero bytes.
    zeros_from = len(data.rstrip(b"\0"))
    while pos < n:
        bad = None
        if pos + FRAME_SIZE > n:
            bad = "truncated record frame"
            end = pos + FRAME_SIZE
        else:
            crc, length = FRAME.unpack_from(data, pos)
            end = pos + FRAME_SIZE + length
            if end > n:
                bad = "record runs past the end of the log"
            elif length < BATCH_HEAD.size:
                bad = "record too short"
            else:
                payload = data[pos + FRAME_SIZE:end]
                if crc32(payload) != crc:
                    bad = "record checksum mismatch"
        if bad is not None:
            if (end > n or zeros_from < end) and not _one_bit_off(data, pos):
                return  # a torn tail: the write that was cut short was never acknowledged
            raise CorruptionError(f"log {bad}", path=path, offset=pos)
        yield pos, end, decode_batch(payload, path, pos)
        pos = end


def _one_bit_off(data: bytes, pos: int) -> bool:
    """Whether flipping one bit of the record at ``pos`` (its checksum,
    length or payload) would make it intact: damage in place, never the
    work of a write cut short (whose bytes end early or in zeros)."""
    n = len(data)
    if pos + FRAME_SIZE > n:
        return False
    crc, length = FRAME.unpack_from(data, pos)
    start = pos + FRAME_SIZE
    if start + length <= n and single_bit_error(data[start:start + length], crc) is not None:
        return True
    for bit in range(32):
        other = length ^ (1 << bit)
        if BATCH_HEAD.size <= other and start + other <= n and crc32(data[start:start + other]) == crc:
            return True
    return False
