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

from lsmkv.base.cursor import EMPTY, Chunk, Finder, SourceCursor, filtered

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
    """A memtable's keys a run at a time (see memtable_finders)."""
    return SourceCursor(*memtable_finders(mem, read_seq, now_ms, merged))


def memtable_finders(mem, read_seq: int, now_ms: int | None = None, merged: Merged = None,
                     first_chunk: int = _FIRST_CHUNK) -> tuple[Finder, Finder]:
    """A memtable's after/before finders: its keys a run at a time, each resolved at read_seq.
    Keys inserted after the cursor was made carry newer sequences only, so
    they resolve to nothing and are left out. With ``now_ms``, values with
    a ttl are resolved at it (:func:`_expire`). ``first_chunk``: the keys
    resolved for the first chunk after a seek (a view sizes it by how
    dense the memtable is beside its densest source, as it does a table's:
    :func:`seek_chunk`)."""
    index = mem._index
    latest = mem._latest

    def resolve(keys: list[bytes]) -> Chunk:
        versions = list(map(latest.get, keys))
        if None not in versions and max(map(_first, versions)) <= read_seq:
            # Every key's newest version is visible (a cursor made after the
            # last write to this memtable): C-level maps, no walk.
            kinds = list(map(_second, versions))
            chunk = keys, kinds, list(map(_third, versions))
        else:
            out_keys, kinds, values = [], [], []
            for key in keys:
                version = latest.get(key)
                while version is not None and version[0] > read_seq:
                    version = version[3]
                if version is not None:
                    out_keys.append(key)
                    kinds.append(version[1])
                    values.append(version[2])
            chunk = out_keys, kinds, values
        if now_ms is not None and VALUE_TTL in kinds:
            chunk = _expire(chunk, now_ms)
        if merged is not None and MERGE in kinds:
            chunk = _fold(chunk, merged)
        return chunk

    # How many keys to resolve per chunk: few right after a seek (a short
    # range read needs a handful, and a skiplist node holds hundreds), 4x
    # more each time the cursor goes on from where the last chunk ended.
    # [size, the key the last chunk ended at, its direction]
    walk: list = [first_chunk, None, 0]

    def chunk_size(key: bytes | None, direction: int) -> int:
        if key is not None and key == walk[1] and direction == walk[2]:
            walk[0] = min(walk[0] * 4, _MAX_CHUNK)
        else:
            walk[0] = first_chunk
        return walk[0]

    def after(key: bytes | None, inclusive: bool) -> Chunk:
        size = chunk_size(key, 1)
        keys = index.keys_after(key, inclusive, size)
        while keys:
            chunk = resolve(keys)
            if chunk[0]:
                walk[1], walk[2] = keys[-1], 1
                return chunk
            keys = index.keys_after(keys[-1], False, size)
        return EMPTY

    def before(key: bytes | None, inclusive: bool) -> Chunk:
        size = chunk_size(key, -1)
        keys = index.keys_before(key, inclusive, size)
        while keys:
            chunk = resolve(keys)
            if chunk[0]:
                walk[1], walk[2] = keys[0], -1
                return chunk
            keys = index.keys_before(keys[0], False, size)
        return EMPTY

    return after, before


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
    or a part of a block read in place (see table_finders)."""
    return SourceCursor(*table_finders(reader, read_seq, now_ms, seek_chunk, merged))


def seek_chunk(entries: int, densest: int) -> int:
    """The first chunk a source with ``entries`` versions (a memtable's
    keys) reads after a seek, when the view's densest source holds ``densest``:
    SEEK_CHUNK for the densest, proportionally fewer (at least
    _MIN_SEEK_CHUNK) for a sparser one. The merge takes about as many keys
    from each source as its share of the range, so a level-0 table holding
    a quarter of the keys a level holds serves a short range read's first
    entries from a quarter of the chunk; if it must go on, the next chunk
    is the rest of the block."""
    if densest <= entries or densest <= 0:
        return SEEK_CHUNK
    return max(_MIN_SEEK_CHUNK, -(-SEEK_CHUNK * entries // densest))


def table_finders(reader, read_seq: int, now_ms: int | None = None,
                   seek_chunk: int = SEEK_CHUNK, merged: Merged = None, keep: object = None) -> tuple[Finder, Finder]:
    """A table's after/before finders. Forward, when the table allows it
    (reader.reads_in_place), a block is read in place: ``seek_chunk``
    entries after a seek -- a short range read decodes what it reads, not
    the block -- and the rest of the block when the cursor goes on from
    there. Otherwise, and backward, a block's owned entries are decoded whole.
    The finders hold ``keep`` as long as they live (a view's read state,
    whose Version keeps the table's file)."""
    index_keys = reader.index_keys
    n = len(index_keys)
    in_place = reader.reads_in_place(read_seq)
    entries_after = reader.entries_after
    #: The last block's entries: stepping off a chunk's end asks for the
    #: block it came from once more before the one beside it.
    memo: list = [-1, None]
    #: The key the last chunk read in place ended at.
    ended: list = [None]

    def owned(i: int) -> Chunk:
        if memo[0] != i:
            memo[1] = reader.owned_entries(i, read_seq)
            memo[0] = i
        return memo[1]

    def after(key: bytes | None, inclusive: bool, _keep: object = keep) -> Chunk:
        if key is None:
            i = 0
        else:
            i = bisect_left(index_keys, key)
            if not inclusive and i < n and index_keys[i] == key:
                i += 1  # block i ends at key: nothing above it there
        while i < n:
            if in_place:
                going_on = key is not None and key == ended[0] and not inclusive
                chunk = entries_after(i, key, inclusive, None if going_on else seek_chunk)
                if chunk[0]:
                    ended[0] = chunk[0][-1]
            else:
                chunk = filtered(owned(i), key, inclusive, True)
            if chunk[0]:
                if now_ms is not None and VALUE_TTL in chunk[1]:
                    chunk = _expire(chunk, now_ms)
                if merged is not None and MERGE in chunk[1]:
                    chunk = _fold(chunk, merged)
                return chunk
            i += 1
        return EMPTY

    def before(key: bytes | None, inclusive: bool, _keep: object = keep) -> Chunk:
        i = n - 1 if key is None else min(bisect_left(index_keys, key), n - 1)
        while i >= 0:
            chunk = filtered(owned(i), key, inclusive, False)
            if chunk[0]:
                if now_ms is not None and VALUE_TTL in chunk[1]:
                    chunk = _expire(chunk, now_ms)
                if merged is not None and MERGE in chunk[1]:
                    chunk = _fold(chunk, merged)
                return chunk
            i -= 1
        return EMPTY

    return after, before


def level_finders(files: list, open_table, read_seq: int, now_ms: int | None = None, *,
                   largest: list[bytes], lo: bytes | None = None, hi: bytes | None = None,
                   seek_chunk: int = SEEK_CHUNK, merged: Merged = None, keep: object = None) -> tuple[Finder, Finder]:
    """A level's after/before finders: its tables (sorted, disjoint) one after the other.
    ``largest`` is each table's largest key (the Version keeps that list,
    so a view need not build it). A table is opened, and its finders made,
    only when a seek lands in it; with bounds [lo, hi) the source never
    steps into a table wholly outside them, so a view can hand over a
    whole level instead of a copy of the tables that meet its range.
    The finders hold ``keep`` as long as they live (a view's read state,
    whose Version keeps the level's files: a table a seek lands in later
    must still be there)."""
    count = len(files)
    finders: dict[int, tuple[Finder, Finder]] = {}

    def table(f: int) -> tuple[Finder, Finder]:
        found = finders.get(f)
        if found is None:
            found = finders[f] = table_finders(open_table(files[f]), read_seq, now_ms, seek_chunk, merged)
        return found

    def after(key: bytes | None, inclusive: bool, _keep: object = keep) -> Chunk:
        if key is None:
            f = 0 if lo is None else bisect_left(largest, lo)
        else:
            f = bisect_left(largest, key)
        while f < count and (hi is None or files[f].smallest < hi):
            chunk = table(f)[0](key, inclusive)
            if chunk[0]:
                return chunk
            f += 1
            key = None
        return EMPTY

    def before(key: bytes | None, inclusive: bool, _keep: object = keep) -> Chunk:
        if key is None and hi is not None:
            key, inclusive = hi, False
        f = count - 1 if key is None else min(bisect_left(largest, key), count - 1)
        while f >= 0 and (lo is None or largest[f] >= lo):
            if key is None or files[f].smallest <= key:
                chunk = table(f)[1](key, inclusive)
                if chunk[0]:
                    return chunk
            f -= 1
            key = None
        return EMPTY

    return after, before
