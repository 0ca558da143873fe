"""Write batches: the user-facing WriteBatch and its encoding in the log.

A batch is the unit of atomicity: it is one log record, applied to the memtable
as a whole, and gets consecutive sequence numbers starting at its first.

Encoding (one log record):
    first_sequence u64 | count u32 | count x op
    op = kind u8 | key_length u32 | value_length u32 | key | value
kind 1 = put (value), kind 0 = delete (tombstone; value_length is 0),
kind 2 = put with a time to live (value = deadline u64 | user value, so
value_length is at least 8; see ttl_value.py),
kind 3 = metadata (key = the entry's name, UTF-8, 1-255 bytes; value = its
value): ``batch.set_meta(name, value)``, stored with the batch and outside
the keyspace user reads see,
kind 4 = merge operand (value = the operand): ``batch.merge(key, operand)``,
folded by the database's merge operator on reads and in compaction
(lsmkv/lsm/merge_read.py, compaction_job.py).
kind 5 = range tombstone (key = start, value = end, start < end):
``batch.delete_range(start, end)`` deletes every key k with start <= k <
end that is older (lsmkv/lsm/range_tombstones.py); one operation, whatever
the number of keys it covers.
"""

from __future__ import annotations

import struct
import time
from typing import Callable, Iterator

from lsmkv.base.errors import ClosedError, CorruptionError, InvalidArgumentError, SizeLimitError
from lsmkv.base.keys import as_key, as_value
from lsmkv.base.merge_operators import check_operand
from lsmkv.base.meta import MAX_META_NAME, meta_entry
from lsmkv.base.ttl import check_ttl, deadline_ms

from .ttl_value import DEADLINE_SIZE, with_deadline
from .wal import LogReader

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from lsmkv.base.compile_hints import cython

if not cython.compiled:  # (compiled, put_le is a C function cimported in the .pxd)
    from lsmkv.base.little_endian import put_le

TOMBSTONE = 0
VALUE = 1
#: A value with a deadline in front of it (ttl_value.py).
VALUE_TTL = 2
#: A metadata entry (name, value), written atomically with the batch's data.
META = 3
#: A merge operand (``db.merge``), folded onto the key's older versions.
MERGE = 4
#: A range tombstone: key = start, value = end (exclusive).
RANGE_DELETE = 5

BATCH_HEADER = struct.Struct("<QI")
OP_HEADER = struct.Struct("<BII")
#: Batch header and op header of a one-operation batch, packed in one call.
_SINGLE = struct.Struct("<QIBII")
_pack_single = _SINGLE.pack
#: Largest encoded batch (log records are bounded so that replay memory is bounded).
MAX_BATCH_BYTES = 256 * 1024 * 1024


def encode_single(seq: int, kind: int, key: bytes, value: bytes) -> bytes:
    """The log record of a one-operation batch (the put/delete fast path)."""
    return _pack_single(seq, 1, kind, len(key), len(value)) + key + value


def encode_single_framed(seq: int, kind: int, key: bytes, value: bytes, room: int) -> bytearray:
    """encode_single's record after ``room`` free bytes, in one new
    bytearray: where the log writer frames it in place (LogWriter.add_framed),
    the compiled build's put path (one allocation and a C loop of writes,
    where encode_single and the log's header make three and two)."""
    klen = len(key)
    vlen = len(value)
    head = 21  # _SINGLE.size (a C integer in the compiled build: typed local, see write_batch.pxd)
    out = bytearray(room + head + klen + vlen)
    p = out
    at = room
    put_le(p, at, seq, 8)
    put_le(p, at + 8, 1, 4)
    put_le(p, at + 12, kind, 1)
    put_le(p, at + 13, klen, 4)
    put_le(p, at + 17, vlen, 4)
    at += head
    src = key
    for i in range(klen):
        p[at + i] = src[i]
    at += klen
    src = value
    for i in range(vlen):
        p[at + i] = src[i]
    return out


def encode_batch(seq: int, ops: list[tuple[int, bytes, bytes]]) -> bytes:
    parts = [BATCH_HEADER.pack(seq, len(ops))]
    pack = OP_HEADER.pack
    for kind, key, value in ops:
        parts.append(pack(kind, len(key), len(value)))
        parts.append(key)
        parts.append(value)
    return b"".join(parts)


def decode_batch(payload: bytes, path: str, offset: int) -> tuple[int, list[tuple[int, bytes, bytes]]]:
    """(first_sequence, ops) of a log record; CorruptionError if malformed."""
    size = len(payload)
    if size < BATCH_HEADER.size:
        raise CorruptionError(f"write batch of {size} bytes is shorter than its header", path=path, offset=offset)
    seq, count = BATCH_HEADER.unpack_from(payload, 0)
    pos = BATCH_HEADER.size
    if count * OP_HEADER.size > size - pos:
        raise CorruptionError(f"write batch claims {count} operations in {size} bytes", path=path, offset=offset)
    ops = []
    unpack = OP_HEADER.unpack_from
    hsize = OP_HEADER.size
    for _ in range(count):
        if pos + hsize > size:
            raise CorruptionError("write batch truncated inside an operation header", path=path, offset=offset)
        kind, klen, vlen = unpack(payload, pos)
        pos += hsize
        end = pos + klen + vlen
        if kind == RANGE_DELETE:
            if end > size or not payload[pos: pos + klen] < payload[pos + klen: end]:
                raise CorruptionError("write batch range tombstone malformed (its start is not below its end)",
                                      path=path, offset=offset)
        elif (kind > MERGE or end > size or (kind == TOMBSTONE and vlen)
                or (kind == VALUE_TTL and vlen < DEADLINE_SIZE)
                or (kind == META and not 0 < klen <= MAX_META_NAME)):
            raise CorruptionError(f"write batch operation malformed (kind {kind})", path=path, offset=offset)
        ops.append((kind, payload[pos: pos + klen], payload[pos + klen: end]))
        pos = end
    if pos != size:
        raise CorruptionError(f"write batch has {size - pos} trailing bytes", path=path, offset=offset)
    return seq, ops


class WriteBatch:
    """Puts and deletes applied atomically: all of them or none, also across a crash.

    Used as ``with db.write_batch(sync=False) as batch: ...``: the batch is
    written when the block exits normally and discarded if it raises. It can
    also be built standalone and passed to ``db.write(batch)``.

    It knows nothing of the database: ``commit`` (``db.write``, for a batch
    from ``db.write_batch()``) is what its ``with`` block calls at the end,
    and ``clock`` (the database's ttl_clock) dates puts with a ttl.
    """

    __slots__ = ("ops", "user_bytes", "merges", "_commit", "_sync", "_done", "_clock", "_merge_operator")

    def __init__(self, commit: "Callable[[WriteBatch, bool], None] | None" = None, sync: bool = False,
                 clock: Callable[[], float] = time.time, merge_operator: Callable | None = None) -> None:
        self.ops: list[tuple[int, bytes, bytes]] = []
        self.user_bytes = 0
        #: How many merge operands the batch holds (the database checks
        #: them, and records its operator's name, before writing them).
        self.merges = 0
        #: The database's merge operator (a batch from ``db.write_batch()``):
        #: ``merge`` checks operands with it; a standalone batch's operands
        #: are checked by ``db.write``.
        self._merge_operator = merge_operator
        self._commit = commit
        self._sync = sync
        self._done = False
        self._clock = clock

    def put(self, key: object, value: object, ttl: float | None = None) -> None:
        """Set ``key`` to ``value``; with ``ttl`` (seconds), the key expires
        that long after this call (lsmkv/base/ttl.py)."""
        if ttl is not None:
            self._put_with_ttl(key, value, ttl)
            return
        k = as_key(key)
        v = as_value(value)
        self._check_size(len(k) + len(v))
        self.ops.append((VALUE, k, v))
        self.user_bytes += len(k) + len(v)

    def _put_with_ttl(self, key: object, value: object, ttl: object) -> None:
        k = as_key(key)
        v = as_value(value)
        ttl = check_ttl(ttl)
        self._check_size(len(k) + len(v) + DEADLINE_SIZE)
        self.ops.append((VALUE_TTL, k, with_deadline(deadline_ms(self._clock(), ttl), v)))
        self.user_bytes += len(k) + len(v)

    def delete(self, key: object) -> None:
        k = as_key(key)
        self._check_size(len(k))
        self.ops.append((TOMBSTONE, k, b""))
        self.user_bytes += len(k)

    def delete_range(self, start: object, end: object) -> None:
        """Delete every key k with start <= k < end (end exclusive), as one
        operation whatever the number of keys it covers. start == end
        deletes nothing; start > end raises InvalidArgumentError."""
        lo = as_key(start)
        hi = as_key(end)
        if lo > hi:
            raise InvalidArgumentError(f"delete_range: start {lo!r} is greater than end {hi!r}")
        self._check_size(len(lo) + len(hi))
        if lo == hi:
            return
        self.ops.append((RANGE_DELETE, lo, hi))
        self.user_bytes += len(lo) + len(hi)

    def merge(self, key: object, operand: object) -> None:
        """Merge ``operand`` into ``key``: reads see the database's merge
        operator applied to the key's value and its operands, oldest first
        (lsmkv/base/merge_operators.py). InvalidArgumentError if the
        database was opened without ``merge_operator=`` or the operator
        cannot fold the operand; the batch is unchanged then."""
        k = as_key(key)
        v = as_value(operand)
        if self._commit is not None and self._merge_operator is None:
            raise InvalidArgumentError("merge needs a merge operator: open the database with merge_operator=")
        if self._merge_operator is not None:
            check_operand(self._merge_operator, v)
        self._check_size(len(k) + len(v))
        self.ops.append((MERGE, k, v))
        self.merges += 1
        self.user_bytes += len(k) + len(v)

    def set_meta(self, name: str, value: object) -> None:
        """Store ``value`` under the metadata entry ``name``, atomically with
        the rest of the batch (a batch may hold only metadata). Metadata is
        a namespace of its own: gets, scans and len() never see it;
        ``db.get_meta(name)`` does. A loader keeps its source offsets here,
        so that data and offsets are never apart, also across a crash."""
        n, v = meta_entry(name, value)
        self._check_size(len(n) + len(v))
        self.ops.append((META, n, v))

    def _check_size(self, extra: int) -> None:
        if self._done:
            raise ClosedError("this write batch was already written or discarded (its with-block ended)")
        if self.user_bytes + extra + OP_HEADER.size * (len(self.ops) + 1) > MAX_BATCH_BYTES:
            raise SizeLimitError(f"write batch would exceed {MAX_BATCH_BYTES} bytes")

    def clear(self) -> None:
        self.ops.clear()
        self.user_bytes = 0
        self.merges = 0

    def __len__(self) -> int:
        return len(self.ops)

    def __enter__(self) -> "WriteBatch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._done:
            return
        self._done = True
        if exc_type is None and self._commit is not None and self.ops:
            self._commit(self, self._sync)


def log_batches(reader: LogReader) -> Iterator[tuple[int, list[tuple[int, bytes, bytes]]]]:
    """(first sequence, operations) of every batch in the log ``reader`` reads.

    A record whose checksum holds but whose batch does not decode is
    corruption: raised by a strict reader, skipped and listed in
    ``reader.report.dropped`` by a salvaging one (as damaged framing is)."""
    for offset, payload in reader.records():
        try:
            seq, ops = decode_batch(payload, reader.path, offset)
        except CorruptionError as exc:
            if not reader.salvage:
                raise
            reader.report.dropped.append((offset, len(payload), exc.reason))
            continue
        yield seq, ops
