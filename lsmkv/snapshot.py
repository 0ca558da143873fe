"""Snapshot: a point-in-time, read-only view of a DB.

A snapshot is a sequence number the DB promises to keep readable: flushes
(and compactions) keep every version a live snapshot can see. Release it with
``close()`` or a ``with`` block; a forgotten snapshot is released when it is
garbage-collected, but until then it pins old versions on disk.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Iterator

from .errors import ClosedError

if TYPE_CHECKING:  # pragma: no cover
    from .db import DB


class Snapshot:
    __slots__ = ("_db", "sequence", "_finalizer", "__weakref__")

    def __init__(self, db: "DB", sequence: int) -> None:
        self._db = db
        #: Reads through this snapshot see writes with sequence <= this.
        self.sequence = sequence
        self._finalizer = weakref.finalize(self, db._release_snapshot, sequence)

    def _check(self) -> "DB":
        if not self._finalizer.alive:
            raise ClosedError("snapshot used after close()")
        return self._db

    def get(self, key: object, default: bytes | None = None) -> bytes | None:
        return self._check()._get_at(key, self.sequence, default)

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
        return self._while_open(self._check()._scan(start, end, reverse, prefix, self.sequence))

    def iterator(self, lower_bound: object = None, upper_bound: object = None):
        """A cursor (lsmkv/cursor.py) over the database as of the snapshot;
        it raises ClosedError once the snapshot is closed."""
        db = self._check()
        return db._iterator(self.sequence, lower_bound, upper_bound, self._check)

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
