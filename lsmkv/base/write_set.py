"""WriteSet: a transaction's own writes, readable as the newest source of
its cursors and scans (RocksDB's WriteBatchWithIndex).

It holds the last write to each key the transaction wrote: a value (with
the ttl it was put with, if any), a tombstone, or the merge operands of a
key it merged without writing it otherwise (:data:`MERGE`: they fold onto
the snapshot's value when read, onto the database's when committed), in a
sorted map; and the ranges its ``delete_range`` calls deleted, in order
(``range_deletes``). A range delete drops the transaction's own earlier
writes inside the range from the map, so a write there after it is all
the map holds of that key: the engine's commit writes the range deletes
first, then the map. So that

* ``get(key)`` says whether the transaction wrote the key (and what) or
  not (then the snapshot answers, unless :meth:`WriteSet.range_deleted`
  says a range delete of the transaction covers it);
* :meth:`WriteSet.source` (or :meth:`WriteSet.finders`) is a cursor source
  (lsmkv/base/cursor.py) over its entries: an engine makes a transaction's
  cursor as ``Cursor([write_set.source(), *snapshot_sources], lower,
  upper)`` and a scan as ``stream_view([write_set.finders(),
  *snapshot_finders], ...)``: the transaction's own values shadow the
  snapshot's, its tombstones hide them, its merges show folded (the
  ``resolve`` callable given folds them); the snapshot's sources go
  through :func:`hiding_ranges` to hide what its range deletes cover;
* the engine's commit reads ``range_deletes``, :meth:`WriteSet.entries`
  (each key once, in key order), :meth:`WriteSet.keys` (what it records
  as written) and :meth:`WriteSet.validated_keys` (what it validates:
  the keys but those only merged, blind writes that commute with others).

A source reads the entries as they were when it was made, as a cursor over
a database reads it as of its making: a write made while a cursor or scan
of the transaction is open goes to a copy of the map (made once, shared by
every source open at that moment), so the open ones are not disturbed.
Copies are made only when a write meets an open source: a scan that
updates the keys it walks costs one copy of the write set, not one per
write.

This module checks nothing about keys and values (the transaction does,
with the engine's limits) and never touches a database.
"""

from __future__ import annotations

import weakref
from itertools import compress
from operator import itemgetter
from typing import Callable, Iterator, KeysView

from sortedcontainers import SortedDict

from .cursor import EMPTY, TOMBSTONE, VALUE, Chunk, Finder, Jump, SourceCursor, hiding
from .key_ranges import KeyRanges, Range

#: Merge operands (txn.merge) of a key the transaction did not otherwise
#: write: the entry's value is a tuple of operands, oldest first. Never in
#: a chunk (chunks hold VALUE and TOMBSTONE only: a source folds them).
MERGE = 4

#: ``resolve(key, operands)``: the value a key's merge operands fold into
#: (over the snapshot's value of the key).
Resolve = Callable[[bytes, tuple], bytes]

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

    __slots__ = ("_entries", "_ttls", "_views", "_merged", "range_deletes", "_deleted", "byte_size")

    def __init__(self) -> None:
        #: key -> (kind, value): VALUE and the value, TOMBSTONE and b"", or
        #: MERGE and a tuple of operands.
        self._entries: SortedDict = SortedDict()
        #: key -> ttl in seconds, for the keys whose last write was a put with a ttl.
        self._ttls: dict[bytes, float] = {}
        #: Sources reading ``_entries`` itself (not a copy): a write copies it first.
        self._views: weakref.WeakSet[_View] = weakref.WeakSet()
        #: Keys whose entry is MERGE.
        self._merged: set[bytes] = set()
        #: (start, end) of each delete_range, in order (end exclusive).
        self.range_deletes: list[Range] = []
        #: The union of range_deletes (made when first asked for after a change).
        self._deleted: KeyRanges | None = None
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

    def merge(self, key: bytes, operand: bytes) -> None:
        """Add a merge operand to ``key``, which the transaction has not
        written otherwise (a key it put or deleted, or one inside its range
        deletes, has its operand folded by the transaction into a put)."""
        old = self._entries.get(key)
        operands = (operand,) if old is None else (*old[1], operand)
        self._set(key, MERGE, operands)
        self._merged.add(key)

    def delete_range(self, start: bytes, end: bytes) -> None:
        """Delete every key k with start <= k < end (start < end, checked):
        the transaction's own writes in there go, and the snapshot's keys
        read as absent from now on."""
        self._own_copy()
        entries = self._entries
        doomed = list(entries.irange(start, end, (True, False)))
        for key in doomed:
            kind, value = entries.pop(key)
            self.byte_size -= len(key) + _size(value)
            self._ttls.pop(key, None)
            self._merged.discard(key)
        self.range_deletes.append((start, end))
        self.byte_size += len(start) + len(end)
        self._deleted = None

    def _own_copy(self) -> None:
        if self._views:
            # Open sources keep the map as it is; the write set goes on in a copy.
            self._entries = SortedDict(self._entries)
            self._views = weakref.WeakSet()

    def _set(self, key: bytes, kind: int, value) -> None:
        self._own_copy()
        old = self._entries.get(key)
        self.byte_size += _size(value) - (_size(old[1]) if old is not None else -len(key))
        self._entries[key] = (kind, value)
        if kind != MERGE and self._merged:
            self._merged.discard(key)

    # -- reading ------------------------------------------------------------------------------

    def get(self, key: bytes) -> tuple[int, bytes] | None:
        """``(VALUE, value)`` if the transaction's last write to ``key`` put
        it, ``(TOMBSTONE, b"")`` if it deleted it, None if it did not write it."""
        return self._entries.get(key)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        """Whether the transaction wrote anything (a key or a range delete)."""
        return bool(self._entries) or bool(self.range_deletes)

    def ttl_of(self, key: bytes) -> float | None:
        """The ttl of the transaction's put of ``key``, None if it has none."""
        return self._ttls.get(key)

    def size_of(self, key: bytes) -> int | None:
        """Bytes the entry of ``key`` holds (its value or operands), None if
        there is none."""
        old = self._entries.get(key)
        return None if old is None else _size(old[1])

    def range_deleted(self, key: bytes) -> bool:
        """Whether a range delete of the transaction covers ``key``."""
        if not self.range_deletes:
            return False
        return self.deleted_ranges().containing(key) is not None

    def deleted_ranges(self) -> KeyRanges:
        """The union of the range deletes."""
        deleted = self._deleted
        if deleted is None:
            deleted = self._deleted = KeyRanges(self.range_deletes)
        return deleted

    def keys(self) -> KeysView[bytes]:
        """The keys written, ascending (a view: ``in`` is O(1))."""
        return self._entries.keys()

    def validated_keys(self):
        """The keys written but those only merged (a collection with a fast
        ``in``): what a commit's validation checks as written."""
        merged = self._merged
        if not merged:
            return self._entries.keys()
        return set(self._entries.keys()).difference(merged)

    def entries(self) -> Iterator[tuple[bytes, int, bytes, float | None]]:
        """``(key, kind, value, ttl)`` of each key written, ascending: what
        the engine's commit writes after the range deletes. ttl is None but
        for puts with a ttl; a MERGE entry's value is its operands, oldest first."""
        ttl_of = self._ttls.get
        for key, (kind, value) in self._entries.items():
            yield key, kind, value, ttl_of(key)

    # -- as a cursor source ---------------------------------------------------------------------

    def finders(self, resolve: Resolve | None = None) -> tuple[Finder, Finder]:
        """The (after, before) finders of a source over the entries as they
        are now (lsmkv/base/cursor.py): chunks of up to CHUNK keys, each
        VALUE or TOMBSTONE; a MERGE entry is a VALUE, ``resolve(key,
        operands)`` (needed once the transaction merged)."""
        view = _View(self._entries)
        self._views.add(view)

        def chunk(entries: SortedDict, i: int, j: int) -> Chunk:
            keys = entries.keys()[i:j]
            if not keys:
                return EMPTY
            pairs = list(map(entries.__getitem__, keys))
            kinds = list(map(_kind, pairs))
            values = list(map(_value, pairs))
            if MERGE in kinds:
                for at, kind in enumerate(kinds):
                    if kind == MERGE:
                        kinds[at] = VALUE
                        values[at] = resolve(keys[at], values[at])
            return keys, kinds, values

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

    def source(self, resolve: Resolve | None = None) -> SourceCursor:
        """A cursor source over the entries as they are now (see :meth:`finders`)."""
        return SourceCursor(*self.finders(resolve))


def _size(value) -> int:
    """Bytes an entry's value holds: a value, or a tuple of merge operands."""
    return len(value) if type(value) is bytes else sum(map(len, value))


def hiding_ranges(finders: tuple[Finder, Finder], ranges: KeyRanges) -> tuple[Finder, Finder]:
    """The (after, before) finders of a source with every key inside
    ``ranges`` left out (a transaction's range deletes over its snapshot).
    A chunk whose keys all fall inside the ranges makes the finder go on
    past the range that holds its last (first) key, so a range covering
    many keys is skipped in one step."""
    containing = ranges.containing

    def kept(chunk: Chunk) -> Chunk:
        keys, kinds, values = chunk
        keep = [containing(key) is None for key in keys]
        if all(keep):
            return chunk
        return (list(compress(keys, keep)), list(compress(kinds, keep)), list(compress(values, keep)))

    def jump(end: int, inclusive_there: bool) -> Jump:
        """Past the range holding the key, to its high end (end 1) or its low end (end 0)."""
        def to(key: bytes | None, inclusive: bool) -> tuple[bytes | None, bool] | None:
            span = None if key is None else containing(key)
            if span is None:
                return key, inclusive
            return None if span[end] is None else (span[end], inclusive_there)
        return to

    return hiding(finders, kept, jump(1, True), jump(0, False))
