"""The LSM's cursor sources: a memtable, a table and a level of tables as
the finders the merging cursor (lsmkv/base/cursor.py) reads.

A view is the read state (memtables and Version) and sequence number
pinned when the cursor or scan is made, so writes made later are never
seen and the tables it reads are not deleted under it. Each source of that
view -- a memtable, a level-0 table, a deeper level's tables concatenated
-- moves a chunk at a time: a run of a memtable's keys or the keys one
table block owns, each already resolved to its newest version visible at
the sequence (a tombstone included, since it hides older sources). Values
with a ttl are resolved per source as chunks arrive (``expiring``), and
so are merge operands (``merged``: the key's value as a point read at the
view's sequence folds it, merge_read.py): by the time the merge looks, a
kind is only a value or a tombstone.

This module reads memtables and tables through the small interfaces they
offer (the skiplist index, ``TableReader.owned_entries``/``entries_after``);
it never touches the DB object.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter
from typing import Callable

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from lsmkv.base.compile_hints import cython

from lsmkv.base.cursor import EMPTY, Chunk, Finder, SourceCursor, filtered
from lsmkv.base.key_search import keys_bisect_left

from .ttl_value import live_value
from .write_batch import MERGE, TOMBSTONE, VALUE, VALUE_TTL

#: ``merged(key)``: the value of a key whose visible version is a merge
#: operand, at the view's sequence (None: the view cannot meet one).
Merged = Callable[[bytes], bytes] | None

_first = itemgetter(0)
_second = itemgetter(1)
_third = itemgetter(2)

#: Keys a memtable source resolves for the first chunk after a seek (unless
#: the view sizes it: view_sources.view_finders), and at most.
_FIRST_CHUNK = 32
_MAX_CHUNK = 4096


def memtable_source(mem, read_seq: int, now_ms: int | None = None, merged: Merged = None) -> SourceCursor:
    """A memtable's keys a run at a time (:class:`MemTableSource`)."""
    source = MemTableSource(mem, read_seq, now_ms, merged, _FIRST_CHUNK)
    return SourceCursor(source.after, source.before)


class MemTableSource:
    """A memtable as a cursor source: its keys a run at a time, each
    resolved at ``read_seq``. Keys inserted after the cursor was made carry
    newer sequences only, so they resolve to nothing and are left out. With
    ``now_ms``, values with a ttl are resolved at it (:func:`_expire`).
    ``first_chunk``: the keys resolved for the first chunk after a seek (a
    view sizes it by how dense the memtable is beside its densest source,
    as it does a table's: :func:`seek_chunk`)."""

    __slots__ = ("index", "latest", "read_seq", "now_ms", "merged", "first_chunk", "size", "walked_to",
                 "walked_way")

    def __init__(self, mem, read_seq: int, now_ms: int | None, merged: Merged, first_chunk: int) -> None:
        self.index = mem._index
        self.latest = mem._latest
        self.read_seq = read_seq
        self.now_ms = now_ms
        self.merged = merged
        self.first_chunk = first_chunk
        # How many keys to resolve per chunk: few right after a seek (a
        # short range read needs a handful, and a skiplist node holds
        # hundreds), 4x more each time the cursor goes on from where the
        # last chunk ended (``walked_to``, in direction ``walked_way``).
        self.size = first_chunk
        self.walked_to = None
        self.walked_way = 0

    @cython.locals(kind=cython.long, value_kind=cython.long, tombstone_kind=cython.long, plain=cython.bint,
                   latest=dict, out_keys=list, kinds=list, values=list, version=tuple)
    def _resolve(self, keys: list[bytes]) -> Chunk:
        latest = self.latest
        read_seq = self.read_seq
        if not cython.compiled:
            versions = list(map(latest.get, keys))
            if None not in versions and max(map(_first, versions)) <= read_seq:
                # Every key's newest version is visible (a cursor made after
                # the last write to this memtable): C-level maps, no walk.
                # (Compiled, the loop below costs less than the maps and
                # their lists, the more so for a seek's handful of keys.)
                return _settled((keys, list(map(_second, versions)), list(map(_third, versions))), self.now_ms,
                                self.merged)
        out_keys, kinds, values = [], [], []
        value_kind, tombstone_kind = VALUE, TOMBSTONE
        plain = True  # values and tombstones only: nothing to settle
        for key in keys:
            version = latest.get(key)
            while version is not None and version[0] > read_seq:
                version = version[3]
            if version is not None:
                out_keys.append(key)
                kind = version[1]
                kinds.append(kind)
                values.append(version[2])
                if kind != value_kind and kind != tombstone_kind:
                    plain = False
        if plain:
            return out_keys, kinds, values
        return _settled((out_keys, kinds, values), self.now_ms, self.merged)

    def _chunk_size(self, key: bytes | None, direction: int) -> int:
        if key is not None and key == self.walked_to and direction == self.walked_way:
            self.size = min(self.size * 4, _MAX_CHUNK)
        else:
            self.size = self.first_chunk
        return self.size

    def after(self, key: bytes | None, inclusive: bool) -> Chunk:
        size = self._chunk_size(key, 1)
        keys = self.index.keys_after(key, inclusive, size)
        while keys:
            chunk = self._resolve(keys)
            if chunk[0]:
                self.walked_to, self.walked_way = keys[-1], 1
                return chunk
            keys = self.index.keys_after(keys[-1], False, size)
        return EMPTY

    def before(self, key: bytes | None, inclusive: bool) -> Chunk:
        size = self._chunk_size(key, -1)
        keys = self.index.keys_before(key, inclusive, size)
        while keys:
            chunk = self._resolve(keys)
            if chunk[0]:
                self.walked_to, self.walked_way = keys[0], -1
                return chunk
            keys = self.index.keys_before(keys[0], False, size)
        return EMPTY


def _settled(chunk: Chunk, now_ms: int | None, merged: Merged) -> Chunk:
    """``chunk`` with its values that have a ttl resolved at ``now_ms``
    (None: left as they are) and its merge operands folded by ``merged``
    (None: the view meets none): what a source hands the merge."""
    if now_ms is not None and VALUE_TTL in chunk[1]:
        chunk = _expire(chunk, now_ms)
    if merged is not None and MERGE in chunk[1]:
        chunk = _fold(chunk, merged)
    return chunk


def _expire(chunk: Chunk, now_ms: int) -> Chunk:
    """``chunk`` with its values that have a ttl resolved at ``now_ms`` (ms
    since the epoch): a live one reads as a plain value, an expired one as
    a tombstone -- it hides older sources' versions of its key, as a delete
    does (ttl_value.py). Callers check ``VALUE_TTL in kinds`` first (one C scan)."""
    kinds, values = list(chunk[1]), list(chunk[2])
    for i, kind in enumerate(kinds):
        if kind == VALUE_TTL:
            value = live_value(values[i], now_ms)
            if value is None:
                kinds[i], values[i] = TOMBSTONE, b""
            else:
                kinds[i], values[i] = VALUE, value
    return chunk[0], kinds, values


def _fold(chunk: Chunk, merged: Merged) -> Chunk:
    """``chunk`` with each merge operand replaced by its key's value
    (``merged``). Callers check ``MERGE in kinds`` first (one C scan)."""
    keys = chunk[0]
    kinds, values = list(chunk[1]), list(chunk[2])
    for i, kind in enumerate(kinds):
        if kind == MERGE:
            kinds[i], values[i] = VALUE, merged(keys[i])
    return keys, kinds, values


#: Entries a table source reads in place for the first chunk after a seek,
#: at most (a source sparser than the view's densest reads fewer: seek_chunk).
SEEK_CHUNK = 16
_MIN_SEEK_CHUNK = 4


def table_source(reader, read_seq: int, now_ms: int | None = None,
                 seek_chunk: int = SEEK_CHUNK, merged: Merged = None) -> SourceCursor:
    """A table's keys a block's owned keys at a time (reader.owned_entries),
    or a part of a block read in place (:class:`TableSource`)."""
    source = TableSource(reader, read_seq, now_ms, seek_chunk, merged, None)
    return SourceCursor(source.after, source.before)


def seek_chunk(entries: int, densest: int) -> int:
    """The first chunk a source with ``entries`` versions (a memtable's
    keys) reads after a seek, when the view's densest source holds ``densest``:
    SEEK_CHUNK for the densest, proportionally fewer (at least
    _MIN_SEEK_CHUNK) for a sparser one. The merge takes about as many keys
    from each source as its share of the range, so a level-0 table holding
    a quarter of the keys a level holds serves a short range read's first
    entries from a quarter of the chunk; if it must go on, the next chunk
    is as large again, and each one after it four times larger."""
    most = SEEK_CHUNK  # (typed locals, compiled: C arithmetic, no call of max)
    if densest <= entries or densest <= 0:
        return most
    chunk = -(-most * entries // densest)
    least = _MIN_SEEK_CHUNK
    return chunk if chunk > least else least


class TableSource:
    """One table as a cursor source: its after/before finders. Forward,
    when the table allows it (reader.reads_in_place), a block is read in
    place: ``seek_chunk`` entries after a seek -- a short range read
    decodes what it reads, not the block -- and as many again when the
    cursor goes on from there, then four times more each time (``going``,
    up to the rest of the block). Otherwise, and backward, a block's
    owned entries are decoded whole. The source holds ``keep`` as long as
    it lives (a view's read state, whose Version keeps the table's file).

    A view makes one per level-0 table it reads, and a level's source one
    per table a seek lands in: an object with fields rather than closures,
    so that making one costs one allocation."""

    __slots__ = ("reader", "index_keys", "count", "read_seq", "now_ms", "seek_chunk", "merged", "keep",
                 "in_place", "memo_block", "memo_chunk", "ended", "going")

    def __init__(self, reader, read_seq: int, now_ms: int | None, seek_chunk: int, merged: Merged,
                 keep: object) -> None:
        self.reader = reader
        self.index_keys = reader.index_keys
        self.count = len(self.index_keys)
        self.read_seq = read_seq
        self.now_ms = now_ms
        self.seek_chunk = seek_chunk
        self.merged = merged
        self.keep = keep
        self.in_place = read_seq >= reader.in_place_from  # (reader.reads_in_place, as a field)
        #: The last block's owned entries: stepping off a chunk's end asks
        #: for the block it came from once more before the one beside it.
        self.memo_block = -1
        self.memo_chunk = None
        #: The key the last chunk read in place ended at, and the entries
        #: the next one reads if the cursor goes on from there.
        self.ended = None
        self.going = seek_chunk

    def _owned(self, i: int) -> Chunk:
        if self.memo_block != i:
            self.memo_chunk = self.reader.owned_entries(i, self.read_seq)
            self.memo_block = i
        return self.memo_chunk

    def after(self, key: bytes | None, inclusive: bool) -> Chunk:
        index_keys = self.index_keys
        n = self.count
        if key is None:
            i = 0
        else:
            i = keys_bisect_left(index_keys, key)
            if not inclusive and i < n and index_keys[i] == key:
                i += 1  # block i ends at key: nothing above it there
        while i < n:
            if self.in_place:
                if key is not None and key == self.ended and not inclusive:
                    # Going on from the last chunk: as many entries again as
                    # the seek's, then four times more each time (a short
                    # range read whose first chunk a block's end cut short
                    # reads a chunk, not the next block whole).
                    limit = self.going
                    if limit < _MAX_CHUNK:
                        self.going = limit * 4
                else:
                    limit = self.going = self.seek_chunk
                chunk = self.reader.entries_after(i, key, inclusive, limit)
                if chunk[0]:
                    self.ended = chunk[0][-1]
            else:
                chunk = filtered(self._owned(i), key, inclusive, True)
            if chunk[0]:
                return _settled(chunk, self.now_ms, self.merged)
            i += 1
        return EMPTY

    def before(self, key: bytes | None, inclusive: bool) -> Chunk:
        i = self.count - 1 if key is None else min(bisect_left(self.index_keys, key), self.count - 1)
        while i >= 0:
            chunk = filtered(self._owned(i), key, inclusive, False)
            if chunk[0]:
                return _settled(chunk, self.now_ms, self.merged)
            i -= 1
        return EMPTY


class LevelSource:
    """A level as one cursor source: its tables (sorted, disjoint) one after
    the other. ``largest`` is each table's largest key (the Version keeps
    that list, so a view need not build it). A table is opened, and its
    :class:`TableSource` made, only when a seek lands in it; with bounds
    [lo, hi) the source never steps into a table wholly outside them, so a
    view can hand over a whole level instead of a copy of the tables that
    meet its range. The source holds ``keep`` as long as it lives (a view's
    read state, whose Version keeps the level's files: a table a seek
    lands in later must still be there)."""

    __slots__ = ("files", "open_table", "read_seq", "now_ms", "largest", "lo", "hi", "seek_chunk", "merged",
                 "keep", "count", "tables")

    def __init__(self, files: list, open_table, read_seq: int, now_ms: int | None, largest: list[bytes],
                 lo: bytes | None, hi: bytes | None, seek_chunk: int, merged: Merged, keep: object) -> None:
        self.files = files
        self.open_table = open_table
        self.read_seq = read_seq
        self.now_ms = now_ms
        self.largest = largest
        self.lo = lo
        self.hi = hi
        self.seek_chunk = seek_chunk
        self.merged = merged
        self.keep = keep
        self.count = len(files)
        #: The TableSource of each table a seek has landed in, by its place in the level.
        self.tables: dict[int, TableSource] = {}

    def _table(self, f: int) -> TableSource:
        found = self.tables.get(f)
        if found is None:
            found = self.tables[f] = TableSource(self.open_table(self.files[f]), self.read_seq, self.now_ms,
                                                 self.seek_chunk, self.merged, None)
        return found

    def after(self, key: bytes | None, inclusive: bool) -> Chunk:
        files, hi = self.files, self.hi
        if key is None:
            f = 0 if self.lo is None else bisect_left(self.largest, self.lo)
        else:
            f = bisect_left(self.largest, key)
        while f < self.count and (hi is None or files[f].smallest < hi):
            chunk = self._table(f).after(key, inclusive)
            if chunk[0]:
                return chunk
            f += 1
            key = None
        return EMPTY

    def before(self, key: bytes | None, inclusive: bool) -> Chunk:
        files, lo, largest = self.files, self.lo, self.largest
        if key is None and self.hi is not None:
            key, inclusive = self.hi, False
        f = self.count - 1 if key is None else min(bisect_left(largest, key), self.count - 1)
        while f >= 0 and (lo is None or largest[f] >= lo):
            if key is None or files[f].smallest <= key:
                chunk = self._table(f).before(key, inclusive)
                if chunk[0]:
                    return chunk
            f -= 1
            key = None
        return EMPTY
