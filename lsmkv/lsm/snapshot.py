"""Snapshot: a point-in-time, read-only view of a DB.

A snapshot is a sequence number the DB promises to keep readable: flushes
(and compactions) keep every version a live snapshot can see. Release it with
``close()`` or a ``with`` block; a forgotten snapshot is released when it is
garbage-collected, but until then it pins old versions on disk.
"""

from __future__ import annotations

import weakref
from typing import Callable, Iterable, Iterator

from lsmkv.base.errors import ClosedError
from lsmkv.base.keys import as_keys

#: ``get_at(key, sequence, default)``: a point read at a sequence.
GetAt = Callable[[object, int, "bytes | None"], "bytes | None"]
#: ``scan_at(start, end, reverse, prefix, sequence)``: a scan at a sequence.
ScanAt = Callable[[object, object, bool, object, int], Iterator[tuple[bytes, bytes]]]
#: ``iterator_at(sequence, lower_bound, upper_bound, check)``: a cursor at a sequence.
IteratorAt = Callable[[int, object, object, Callable[[], None]], object]
#: ``multi_get_at(keys, sequence)``: point reads of many keys at a sequence.
MultiGetAt = Callable[[object, int], "list[bytes | None]"]


class Snapshot:
    """A pinned read sequence and the things it needs from its database,
    passed in (it knows nothing else of it): reads, scans and cursors at a
    sequence, and ``release(sequence)`` when it ends."""

    __slots__ = ("_get_at", "_multi_get_at", "_scan_at", "_iterator_at", "sequence", "_finalizer", "__weakref__")

    def __init__(self, sequence: int, get_at: GetAt, scan_at: ScanAt, iterator_at: IteratorAt,
                 release: Callable[[int], None], multi_get_at: MultiGetAt | None = None) -> None:
        self._get_at = get_at
        self._multi_get_at = multi_get_at
        self._scan_at = scan_at
        self._iterator_at = iterator_at
        #: Reads through this snapshot see writes with sequence <= this.
        self.sequence = sequence
        self._finalizer = weakref.finalize(self, release, sequence)

    def _check(self) -> None:
        if not self._finalizer.alive:
            raise ClosedError("snapshot used after close()")

    def get(self, key: object, default: bytes | None = None) -> bytes | None:
        self._check()
        return self._get_at(key, self.sequence, default)

    def multi_get(self, keys: Iterable[object]) -> list[bytes | None]:
        """The value of each of ``keys`` as of the snapshot (None where
        absent), in the order given: DB.multi_get at the snapshot's sequence."""
        self._check()
        if self._multi_get_at is None:
            return [self._get_at(key, self.sequence, None) for key in as_keys(keys)]
        return self._multi_get_at(keys, self.sequence)

    def __getitem__(self, key: object) -> bytes:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def scan(self, start: object = None, end: object = None, reverse: bool = False,
             prefix: object = None) -> Iterator[tuple[bytes, bytes]]:
        """Like DB.scan, as of the snapshot; the iterator ends with an error
        once the snapshot is closed."""
        self._check()
        return self._while_open(self._scan_at(start, end, reverse, prefix, self.sequence))

    def iterator(self, lower_bound: object = None, upper_bound: object = None):
        """A cursor (lsmkv/base/cursor.py) over the database as of the snapshot;
        it raises ClosedError once the snapshot is closed."""
        self._check()
        return self._iterator_at(self.sequence, lower_bound, upper_bound, self._check)

    def _while_open(self, items: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        finalizer = self._finalizer
        for item in items:
            if not finalizer.alive:
                raise ClosedError("snapshot closed while a scan of it was open")
            yield item

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pinned_snapshot(sequence: int, state: object, get_in: Callable[..., "bytes | None"],
                    scan_in: Callable[..., Iterator[tuple[bytes, bytes]]], iterator_in: Callable[..., object],
                    multi_get_in: Callable[..., "list[bytes | None]"], release: Callable[[int], None]) -> Snapshot:
    """A read-only handle's snapshot: it reads the read state it was taken
    on, not the newest one (the writer's compactions know nothing of it,
    so a state a later refresh publishes may lack versions it sees). The
    state (with its Version, whose tables stay open) is held until the
    snapshot is closed. ``get_in``, ``scan_in``, ``iterator_in`` and
    ``multi_get_in`` are the database's reads on a given state (the
    state first, then the arguments of get_at and so on)."""
    pin = [state]

    def pinned() -> object:
        if not pin:
            raise ClosedError("snapshot used after close()")
        return pin[0]

    def release_pin(seq: int) -> None:
        pin.clear()
        release(seq)

    return Snapshot(sequence, lambda key, s, default: get_in(pinned(), key, s, default),
                    lambda start, end, reverse, prefix, s: scan_in(pinned(), start, end, reverse, prefix, s),
                    lambda s, lower, upper, check: iterator_in(pinned(), s, lower, upper, check),
                    release_pin,
                    multi_get_at=lambda keys, s: multi_get_in(pinned(), as_keys(keys), s))
