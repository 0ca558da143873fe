"""Writes on their way to the log writer: the user's WriteBatch and what the write queue carries.

* :class:`WriteBatch` collects puts, deletes, merges, range deletes and
  metadata entries in a ``with`` block, checking each as it comes (key and
  value limits, a ttl, a merge operand against the operator, a range's
  ends, :data:`MAX_BATCH_BYTES` in all); its end hands the batch to a
  commit function it was given. It knows nothing of the database.
* :class:`QueuedWrite` is one write as the write queue
  (lsmkv/base/write_queue.py) carries it to the log writer: its
  operations, its log record (btree/wal.py's encoding, made by the
  writer's own thread before it queues), the kind of call it came from
  and the user bytes it counts; :func:`queued_batch` makes one of a
  WriteBatch. A write holding merges has no record yet: the log writer
  folds them and encodes it (btree/merging.py).

Applying a write to the tree is the DB's (btree/db.py); this module
never touches the log or the tree.
"""

from __future__ import annotations

import time
from typing import Callable

from lsmkv.base.errors import ClosedError, InvalidArgumentError, SizeLimitError
from lsmkv.base.key_ranges import show_key
from lsmkv.base.keys import as_key, as_value
from lsmkv.base.merge_operators import check_operand
from lsmkv.base.meta import meta_entry
from lsmkv.base.ttl import check_ttl, deadline_ms

from .node import DEADLINE_SIZE, Expiring
from .merging import MergeOperand
from .wal import MetaEntry, RangeDelete, encode_batch

#: Largest total of key and value bytes in one write batch.
MAX_BATCH_BYTES = 512 * 1024 * 1024


class WriteBatch:
    """Puts and deletes applied atomically when the ``with`` block ends
    (discarded if it ends with an exception). It knows nothing of the
    database: ``commit(batch, sync)`` is what its block calls at the end
    (the batch itself travels through the write queue to the log writer)."""

    __slots__ = ("_commit", "_max_key", "_ops", "_sync", "_bytes", "_done", "_clock", "_operator", "_merges")

    def __init__(self, commit: Callable[[list, bool], None], max_key: int, sync: bool,
                 clock: Callable[[], float] = time.time, merge_operator: Callable | None = None) -> None:
        self._commit = commit
        self._max_key = max_key
        self._ops: list[tuple[bytes, "bytes | Expiring | None"]] = []
        self._sync = sync
        self._bytes = 0
        self._done = False
        self._clock = clock
        self._operator = merge_operator
        #: Merge operands among the ops.
        self._merges = 0

    def put(self, key, value, ttl: float | None = None) -> None:
        """Set ``key`` to ``value``; with ``ttl`` (seconds), the key expires
        that long after this call (lsmkv/base/ttl.py)."""
        if ttl is None:
            key = as_key(key, self._max_key)
            value = as_value(value)
            self._add(key, value, len(key) + len(value))
        else:
            key = as_key(key, self._max_key - DEADLINE_SIZE)
            value = as_value(value)
            ttl = check_ttl(ttl)
            self._add(key, Expiring(deadline_ms(self._clock(), ttl), value), len(key) + len(value))

    def delete(self, key) -> None:
        key = as_key(key)
        self._add(key, None, len(key))

    def merge(self, key, operand) -> None:
        """Merge ``operand`` into ``key``'s value with the database's merge
        operator, after the batch's earlier operations (a put then a merge
        of one key folds onto the put)."""
        operator = self._operator
        if operator is None:
            raise InvalidArgumentError("merge needs a merge operator: open the database with merge_operator=")
        key = as_key(key, self._max_key)
        operand = as_value(operand)
        check_operand(operator, operand)
        self._add(key, MergeOperand((operand,)), len(key) + len(operand))
        self._merges += 1

    def delete_range(self, start, end) -> None:
        """Delete every key k with start <= k < end (end exclusive), after
        the batch's earlier operations; later ones in the range stay."""
        start, end = check_range(start, end)
        if start == end:
            return
        self._add(start, RangeDelete(end), len(start) + len(end))

    def set_meta(self, name: str, value) -> None:
        """Store ``value`` under the metadata entry ``name``, atomically with
        the rest of the batch (see lsmkv's WriteBatch.set_meta: the same
        contract). ``db.get_meta(name)`` reads it; gets and scans never see it."""
        n, v = meta_entry(name, value)
        self._add(n, MetaEntry(v), len(n) + len(v))

    def _add(self, key: bytes, value: "bytes | Expiring | None", size: int) -> None:
        if self._done:
            raise ClosedError("this write batch was already committed or discarded (its with-block ended)")
        if self._bytes + size > MAX_BATCH_BYTES:
            raise SizeLimitError(f"write batch would hold {self._bytes + size} bytes; the limit is {MAX_BATCH_BYTES}")
        self._bytes += size
        self._ops.append((key, value))

    def __len__(self) -> int:
        return len(self._ops)

    def __enter__(self) -> "WriteBatch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._done:
            return
        self._done = True
        if exc_type is None:
            self._commit(self, self._sync)
        self._ops = []

    @property
    def ops(self) -> list[tuple[bytes, "bytes | Expiring | None"]]:
        """(key, value) in order: bytes, an Expiring (a put with a ttl) or None (a delete)."""
        return self._ops


class QueuedWrite:
    """A write as the write queue carries it: its operations, its log record
    (encoded by the writer's own thread, before it queues), what kind of
    call it came from, the user bytes it counts, and the WriteBatch it came
    from, if any (whatever a batch carries reaches the log writer)."""

    __slots__ = ("kind", "ops", "record", "user_bytes", "batch", "merges")

    def __init__(self, kind: str, ops: list[tuple[bytes, bytes | None]], record: bytes, user_bytes: int,
                 batch: "WriteBatch | None" = None, merges: int = 0) -> None:
        self.kind = kind
        self.ops = ops
        self.record = record
        self.user_bytes = user_bytes
        self.batch = batch
        #: Merge operands among ``ops``: the log writer folds them and
        #: encodes ``record`` (empty until then).
        self.merges = merges


def _value_bytes(value) -> int:
    """The user bytes of an op's value beside its key."""
    t = type(value)
    if t is bytes:
        return len(value)
    if value is None:
        return 0
    if t is RangeDelete:
        return len(value.end)
    if t is MergeOperand:
        return sum(map(len, value.operands))
    return len(value.value)  # an Expiring


def check_range(start: object, end: object) -> tuple[bytes, bytes]:
    """``start`` and ``end`` of a range delete, checked as keys; start > end
    raises InvalidArgumentError naming both (start == end: an empty range)."""
    start = as_key(start)
    end = as_key(end)
    if start > end:
        raise InvalidArgumentError(f"delete_range: start {show_key(start)} is above end {show_key(end)} "
                                   "(the range is [start, end))")
    return start, end


def queued_batch(batch: WriteBatch, max_key: int) -> QueuedWrite:
    """The QueuedWrite of a WriteBatch whose block ended: one log record for
    all of its operations. Deletes of keys longer than ``max_key`` (which no
    stored key is) are left out; they count as user bytes all the same."""
    ops = batch.ops
    user_bytes = sum(len(k) + _value_bytes(v) for k, v in ops if type(v) is not MetaEntry)
    # Too-long deletes are no-ops (metadata names and range ends have limits of their own).
    ops = [(k, v) for k, v in ops if v is not None or len(k) <= max_key]
    merges = batch._merges
    return QueuedWrite("batch", ops, encode_batch(ops) if ops and not merges else b"", user_bytes, batch, merges)
