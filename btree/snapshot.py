"""Snapshots: point-in-time, read-only views of a database.

This module owns the :class:`Snapshot` object handed out by
``DB.snapshot()``. The mechanism lives in the tree (:meth:`Tree.preserve`
saves a node's pre-image into every live snapshot's overlay before a writer
changes it); a snapshot reads through its overlay first, then the buffer
pool or the page file. See docs/btree.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from lsmkv.errors import ClosedError, LsmkvError
from lsmkv.keys import MAX_KEY_SIZE, as_key, scan_bounds

from .tree import Tree

if TYPE_CHECKING:
    from .db import DB


class Snapshot:
    """A point-in-time view of a DB: ``get``, ``scan``, ``close``; a context
    manager. It keeps the pre-images of the pages writers change after it
    was taken (in memory), so close it when done."""

    __slots__ = ("_db", "_id", "_view", "_gen", "_closed")

    def __init__(self, db: DB, sid: int, view: tuple, gen: int) -> None:
        self._db = db
        self._id = sid
        self._view = view
        self._gen = gen
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise ClosedError("the snapshot is closed")
        db = self._db
        db._check_open()
        if db._view_gen != self._gen:
            self._closed = True
            raise LsmkvError("the snapshot ended: its handle reloaded the database (a read-only handle after a "
                             "writer in another process checkpointed, a writer after a failed write); take a new "
                             "snapshot")

    def get(self, key, default=None):
        """The value ``key`` had when the snapshot was taken, or ``default``."""
        if type(key) is not bytes:
            key = as_key(key, MAX_KEY_SIZE)
        db = self._db
        with db._lock:
            self._check()
            value = db._read(Tree.get_in, self._view, key, snap=self)
            db._trim_after_read()
        return default if value is None else value

    def __getitem__(self, key) -> bytes:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key) -> bool:
        return self.get(key) is not None

    def scan(self, start=None, end=None, reverse: bool = False, prefix=None) -> Iterator[tuple[bytes, bytes]]:
        """Like DB.scan, over the snapshot's contents."""
        lo, hi = scan_bounds(start, end, prefix)
        with self._db._lock:
            self._check()
        return self._db._scan(lo, hi, bool(reverse), self)

    def iterator(self, lower_bound=None, upper_bound=None):
        """A cursor (btree/cursor.py) over the snapshot's contents."""
        from lsmkv.cursor import Iterator

        from .cursor import snapshot_source
        with self._db._lock:
            self._check()
        return Iterator([snapshot_source(self._db, self)], lower_bound, upper_bound, check=self._check)

    def close(self) -> None:
        db = self._db
        with db._lock:
            if self._closed:
                return
            self._closed = True
            for chunk, owner in db._chunks.values():
                if owner is self:
                    chunk.clear()  # stops this snapshot's iterators
            if db._live_snaps.pop(self._id, None) is not None:
                db._tree.end_snapshot(self._id)

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def __del__(self) -> None:
        # A forgotten snapshot must not pin pre-images for ever.
        try:
            if not self._closed and not self._db._closed:
                self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
