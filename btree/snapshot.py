"""Snapshots: point-in-time, read-only views of a database.

This module owns the :class:`Snapshot` handle given out by
``DB.snapshot()``: its identity, its view (root, height and overlay of
pre-images) and whether it is still open. It knows nothing of the database:
the things it does -- read a key, scan, make a cursor, end -- are
callables the database passes in. The mechanism lives in the tree (:meth:`Tree.preserve`
saves a node's pre-image into every live snapshot's overlay before a writer
changes it); a snapshot reads through its overlay first, then the buffer
pool or the page file. See docs/btree.md.
"""

from __future__ import annotations

from typing import Callable, Iterator

from lsmkv.base.keys import MAX_KEY_SIZE, as_key, as_keys, scan_bounds


class Snapshot:
    """A point-in-time view of a DB: ``get``, ``scan``, ``close``; a context
    manager. It keeps the pre-images of the pages writers change after it
    was taken (in memory), so close it when done."""

    __slots__ = ("_id", "_view", "_gen", "_closed", "_get", "_multi_get", "_scan", "_iterator", "_end", "_source",
                 "__weakref__")

    def __init__(self, sid: int, view: tuple, gen: int, *,
                 get: "Callable[[Snapshot, bytes], bytes | None]",
                 multi_get: "Callable[[Snapshot, list[bytes]], list[bytes | None]] | None" = None,
                 scan: "Callable[[Snapshot, bytes | None, bytes | None, bool], Iterator[tuple[bytes, bytes]]]",
                 iterator: "Callable[[Snapshot, object, object], object]",
                 end: "Callable[[Snapshot], None]") -> None:
        self._id = sid
        #: (root page, height, overlay of pre-images by page number).
        self._view = view
        #: The database's view generation when it was taken (a reload ends it).
        self._gen = gen
        self._closed = False
        self._get = get
        self._multi_get = multi_get
        self._scan = scan
        self._iterator = iterator
        self._end = end
        #: What it reads (the database's tree of the moment it was taken).
        self._source: object = None

    def get(self, key, default=None):
        """The value ``key`` had when the snapshot was taken, or ``default``."""
        if type(key) is not bytes:
            key = as_key(key, MAX_KEY_SIZE)
        value = self._get(self, key)
        return default if value is None else value

    def multi_get(self, keys) -> list[bytes | None]:
        """The value each of ``keys`` had when the snapshot was taken (None
        where absent), in the order given; one descent per leaf."""
        checked = as_keys(keys, MAX_KEY_SIZE)
        distinct = sorted(set(checked))
        if self._multi_get is None:
            values = [self._get(self, key) for key in distinct]
        else:
            values = self._multi_get(self, distinct)
        found = dict(zip(distinct, values))
        return [found[key] for key in checked]

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
        return self._scan(self, lo, hi, bool(reverse))

    def iterator(self, lower_bound=None, upper_bound=None):
        """A cursor (btree/cursor.py) over the snapshot's contents."""
        return self._iterator(self, lower_bound, upper_bound)

    def close(self) -> None:
        self._end(self)

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def __del__(self) -> None:
        # A forgotten snapshot must not pin pre-images for ever.
        try:
            if not self._closed:
                self.close()
        except Exception:  # pragma: no cover - interpreter shutdown, or a closed database
            pass
