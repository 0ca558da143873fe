"""Merges on the B+tree: operands folded at write, never stored.

``db.merge(key, operand)`` (and ``batch.merge``, a transaction's merge)
reaches the log writer as a :class:`MergeOperand` in the batch's op list.
The log writer, holding the tree's lock, folds it (:func:`resolve_group`)
before anything of the group is logged: the key's value as the batches
ahead of it leave it -- the tree, then the group's earlier batches and the
batch's own earlier operations (:class:`GroupView`) -- is read, the
operator folds the operand onto it, and the folded VALUE takes the
operand's place: it is what the log record holds and what the tree gets.
So the tree and the log never hold an operand, recovery needs no operator,
and a store written with merges opens without one.

What an operand folds onto: the key's value, None if the key is absent,
deleted, or its ttl has expired; a value put with a ttl keeps its deadline
through the merges folded onto it (a counter of a time window expires with
its window). A batch whose fold fails (the operator raises, or returns
something that is not bytes, or more than MAX_VALUE_SIZE bytes) is refused
with that MergeError and left out of the group: nothing of it is written;
the other batches go on.

This module never touches the log or the tree but through the callable it
is given.
"""

from __future__ import annotations

from typing import Callable, Iterable

from lsmkv.base.errors import MergeError
from lsmkv.base.keys import MAX_VALUE_SIZE
from lsmkv.base.merge_operators import fold
from lsmkv.base.write_queue import Writer

from .node import Expiring
from .wal import MetaEntry, RangeDelete, encode_batch

#: ``read_entry(key)``: (value, deadline or None) in the tree, (None, None) if absent or expired.
ReadEntry = Callable[[bytes], "tuple[bytes | None, int | None]"]


class MergeOperand:
    """Merge operands of one key (oldest first) in a batch's op list, where
    a put's value would stand (they never reach the log: the log writer
    folds them into a value)."""

    __slots__ = ("operands",)

    def __init__(self, operands: tuple[bytes, ...]) -> None:
        self.operands = operands

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MergeOperand) and other.operands == self.operands

    def __repr__(self) -> str:
        return f"MergeOperand({self.operands!r})"


class GroupView:
    """The value each key will have once some batches, not applied yet, are:
    their writes over the tree (``read_entry``). ``now_ms()``: the clock of
    ttl deadlines."""

    __slots__ = ("_read_entry", "_now_ms", "_pending", "_ranges")

    def __init__(self, read_entry: ReadEntry, now_ms: Callable[[], int]) -> None:
        self._read_entry = read_entry
        self._now_ms = now_ms
        #: key -> (value or None, deadline or None), the latest write ahead.
        self._pending: dict[bytes, tuple[bytes | None, int | None]] = {}
        #: (start, end) of the range deletes ahead (keys written after one are in _pending).
        self._ranges: list[tuple[bytes, bytes]] = []

    def entry(self, key: bytes) -> tuple[bytes | None, int | None]:
        found = self._pending.get(key)
        if found is not None:
            value, deadline = found
            if deadline is not None and deadline <= self._now_ms():
                return None, None
            return found
        for start, end in self._ranges:
            if start <= key < end:
                return None, None
        return self._read_entry(key)

    def apply(self, ops: Iterable[tuple[bytes, object]]) -> None:
        """Take ``ops`` (resolved: no MergeOperand) as applied."""
        pending = self._pending
        for key, value in ops:
            t = type(value)
            if t is bytes:
                pending[key] = (value, None)
            elif value is None:
                pending[key] = (None, None)
            elif t is Expiring:
                pending[key] = (value.value, value.deadline)
            elif t is RangeDelete:
                end = value.end
                for k in [k for k in pending if key <= k < end]:
                    pending[k] = (None, None)
                self._ranges.append((key, end))
            # (MetaEntry: no key.)


def resolve_ops(ops: list, view: GroupView, operator: Callable) -> list:
    """``ops`` with each MergeOperand folded into the value it makes (a
    value with a deadline stays one), as ``view`` and the earlier ops
    leave the key; ``view`` takes the ops as applied. Raises MergeError."""
    out = []
    for key, value in ops:
        if type(value) is MergeOperand:
            existing, deadline = view.entry(key)
            folded = fold(operator, key, existing, value.operands)
            if len(folded) > MAX_VALUE_SIZE:
                raise MergeError(f"merging into key {key[:40]!r} made a value of {len(folded)} bytes; "
                                 f"the limit is {MAX_VALUE_SIZE}")
            value = folded if deadline is None else Expiring(deadline, folded)
        view.apply(((key, value),))
        out.append((key, value))
    return out


def resolve_group(group: list[Writer], read_entry: ReadEntry, now_ms: Callable[[], int],
                  operator: Callable | None) -> list[Writer]:
    """The writers of ``group`` to append, their merges folded and their
    records encoded (see the module docstring); a writer whose fold failed
    gets the MergeError and is left out. Called by the log writer, holding
    the tree's lock, for a group in which a batch has merges."""
    last = max(i for i, writer in enumerate(group) if writer.batch.merges)
    view = GroupView(read_entry, now_ms)
    kept = []
    for i, writer in enumerate(group):
        queued = writer.batch
        if queued.merges:
            try:
                ops = resolve_ops(queued.ops, _Trial(view), operator)
            except MergeError as exc:
                writer.error = exc
                continue
            queued.ops = ops
            queued.record = encode_batch(ops)
            queued.merges = 0
        if i < last:
            view.apply(op for op in queued.ops if type(op[1]) is not MetaEntry)
        kept.append(writer)
    return kept


class _Trial:
    """A GroupView a batch's own ops are tried on: they reach the view only
    once the whole batch folded (a batch refused leaves no trace)."""

    __slots__ = ("_view", "_own")

    def __init__(self, view: GroupView) -> None:
        self._view = view
        self._own = GroupView(view.entry, view._now_ms)

    def entry(self, key: bytes) -> tuple[bytes | None, int | None]:
        return self._own.entry(key)

    def apply(self, ops) -> None:
        self._own.apply(ops)
