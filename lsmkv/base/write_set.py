"""WriteSet: a transaction's own writes, readable as the newest source of
its cursors and scans (RocksDB's WriteBatchWithIndex).

It holds the last write to each key the transaction wrote: a value (with
the ttl it was put with, if any) or a tombstone, in a sorted map, so that

* ``get(key)`` says whether the transaction wrote the key (and what) or
  not (then the snapshot answers);
* :meth:`WriteSet.source` (or :meth:`WriteSet.finders`) is a cursor source
  (lsmkv/base/cursor.py) over its entries: an engine makes a transaction's
  cursor as ``Cursor([write_set.source(), *snapshot_sources], lower,
  upper)`` and a scan as ``stream_view([write_set.finders(),
  *snapshot_finders], ...)``: the transaction's own values shadow the
  snapshot's, its tombstones hide them;
* the engine's commit reads :meth:`WriteSet.entries` (each key once, in
  key order) and :meth:`WriteSet.keys` (for validation and recording).

A source reads the entries as they were when it was made, as a cursor over
a database reads it as of its making: a write made while a cursor or scan
of the transaction is open goes to a copy of the map (made once, shared by
every source open at that moment), so the open ones are not disturbed.
Copies are made only when a write meets an open source: a scan that
updates the keys it walks costs one copy of the write set, not one per
write.

Room for what comes later: :data:`MERGE` is the kind a merge operand
(``db.merge``) will have -- entries of that kind need folding with the
snapshot's value and cannot be a plain cursor source until that exists --
and ``range_deletes`` the ranges a ``delete_range`` will delete (a cursor
source cannot express a range tombstone yet). Neither is written now.

This module checks nothing about keys and values (the transaction does,
with the engine's limits) and never touches a database.
"""

from __future__ import annotations

import weakref
from operator import itemgetter
from typing import Iterator, KeysView

from sortedcontainers import SortedDict

from .cursor import EMPTY, TOMBSTONE, VALUE, Chunk, Finder, SourceCursor
from .key_ranges import Range

#: Reserved: a merge operand (db.merge), folded onto the snapshot's value.
#: Not written yet; never in a chunk (chunks hold VALUE and TOMBSTONE only).
MERGE = 4

#: Entries a source hands out per chunk.
CHUNK = 128

_kind = itemgetter(0)
_value = itemgetter(1)


class _View:
    """The entries a source reads: the write set's map until a write
    meets the source, then the map as it was (the write set moved on to a copy)."""

    __slots__ = ("entries", "__weakref__")

    def __init__(self, entries: SortedDict) -> None:
        self.entries = entries


class WriteSet:
    """The last write to each key a transaction wrote (see the module docstring)."""

    __slots__ = ("_entries", "_ttls", "_views", "range_deletes", "byte_size")

    def __init__(self) -> None:
        #: key -> (kind, value): VALUE and the value, or TOMBSTONE and b"".
        self._entries: SortedDict = SortedDict()
        #: key -> ttl in seconds, for the keys whose last write was a put with a ttl.
        self._ttls: dict[bytes, float] = {}
        #: Sources reading ``_entries`` itself (not a copy): a write copies it first.
        self._views: weakref.WeakSet[_View] = weakref.WeakSet()
        #: Reserved: (low, high) ranges a delete_range deletes. Always empty now.
        self.range_deletes: list[Range] = []
        #: Bytes of the keys and values held (what an engine's batch limit counts).
        self.byte_size = 0

    # -- writing ------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> None:
        """Set ``key`` to ``value`` (checked bytes); with ``ttl`` (checked
        seconds), the engine gives it a deadline when it commits."""
        self._set(key, VALUE, value)
        if ttl is None:
            self._ttls.pop(key, None)
        else:
            self._ttls[key] = ttl

    def delete(self, key: bytes) -> None:
        """Write a tombstone for ``key``."""
        self._set(key, TOMBSTONE, b"")
        self._ttls.pop(key, None)

    def _set(self, key: bytes, kind: int, value: bytes) -> None:
        if self._views:
            # Open sources keep the map as it is; the write set goes on in a copy.
            self._entries = SortedDict(self._entries)
            self._views = weakref.WeakSet()
        old = self._entries.get(key)
        self.byte_size += len(value) - (len(old[1]) if old is not None else -len(key))
        self._entries[key] = (kind, value)

    # -- reading ------------------------------------------------------------------------------

    def get(self, key: bytes) -> tuple[int, bytes] | None:
        """``(VALUE, value)`` if the transaction's last write to ``key`` put
        it, ``(TOMBSTONE, b"")`` if it deleted it, None if it did not write it."""
        return self._entries.get(key)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def keys(self) -> KeysView[bytes]:
        """The keys written, ascending (a view: ``in`` is O(1))."""
        return self._entries.keys()

    def entries(self) -> Iterator[tuple[bytes, int, bytes, float | None]]:
        """``(key, kind, value, ttl)`` of each key written, ascending: what
        the engine's commit writes. ttl is None but for puts with a ttl."""
        ttl_of = self._ttls.get
        for key, (kind, value) in self._entries.items():
            yield key, kind, value, ttl_of(key)

    # -- as a cursor source ---------------------------------------------------------------------

    def finders(self) -> tuple[Finder, Finder]:
        """The (after, before) finders of a source over the entries as they
        are now (lsmkv/base/cursor.py): chunks of up to CHUNK keys, each
        VALUE or TOMBSTONE."""
        view = _View(self._entries)
        self._views.add(view)

        def chunk(entries: SortedDict, i: int, j: int) -> Chunk:
            keys = entries.keys()[i:j]
            if not keys:
                return EMPTY
            pairs = list(map(entries.__getitem__, keys))
            return keys, list(map(_kind, pairs)), list(map(_value, pairs))

        def after(key: bytes | None, inclusive: bool) -> Chunk:
            entries = view.entries
            if key is None:
                i = 0
            else:
                i = entries.bisect_left(key) if inclusive else entries.bisect_right(key)
            return chunk(entries, i, i + CHUNK)

        def before(key: bytes | None, inclusive: bool) -> Chunk:
            entries = view.entries
            if key is None:
                j = len(entries)
            else:
                j = entries.bisect_right(key) if inclusive else entries.bisect_left(key)
            return chunk(entries, max(0, j - CHUNK), j)

        # The finders hold the view (in their closure): it lives, kept apart
        # from later writes, as long as a cursor or stream holds them.
        return after, before

    def source(self) -> SourceCursor:
        """A cursor source over the entries as they are now (see :meth:`finders`)."""
        return SourceCursor(*self.finders())
