"""Reads that honour range tombstones: point lookups and the sources of a view.

Taken only when the read state holds a range tombstone somewhere (a
memtable's ``range_dels``, or a table the Version marks), so reads of a
store without any keep their own path untouched (db.py).

What a tombstone ``(start, end, t)`` deletes, for a reader at sequence r
with t <= r: every version of a key in [start, end) with a sequence below
t. Sources are newest first (memtables, level-0 tables, deeper levels), and
a newer source's data is newer than an older source's (compaction keeps
that, table key ranges widened over their tombstones), so

* a tombstone of a source deletes everything older sources hold in its
  range: a point lookup that meets one covering its key stops there, and a
  source of a view *jumps* over every stretch newer sources deleted (one
  seek to its end, nothing in between decoded);
* within its own source it deletes the versions older than it: those are
  weighed by sequence, key by key (the rare case: compaction soon merges
  a tombstone with what it covers and drops both).

This module never changes what it reads and never touches the DB object.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable

from lsmkv.base.cursor import Chunk, Finder, hiding

from .range_tombstones import FragmentedTombstones
from .read_state import ReadState
from .table.reader import TableReader
from .version import FileMeta

OpenTable = Callable[[FileMeta], TableReader]
#: The sequence of a key's version visible at the read sequence in one source (None: none).
SeqOf = Callable[[bytes], "int | None"]


def get_honouring_range_dels(st: ReadState, key: bytes, seq: int,
                             open_table: OpenTable) -> tuple[int, bytes] | None:
    """(kind, stored value) of ``key``'s newest version visible at ``seq``
    in ``st``, or None when no source has one or a range tombstone deletes it."""
    for mem in st.memtables:
        version = mem.get(key, seq)
        covering = mem.range_dels.covering_seq(key, seq) if mem.range_dels is not None else 0
        if version is not None and version[0] > covering:
            return version[1], version[2]
        if covering:
            return None
    version = st.version
    for meta in version.levels[0]:
        if meta.smallest <= key <= meta.largest:
            found = _table_get(meta.reader or open_table(meta), key, seq)
            if found is not None:
                return found or None
    levels = version.levels
    for level in version.deep_levels:
        files = levels[level]
        i = bisect_left(version.largest_keys[level], key)
        if i < len(files) and files[i].smallest <= key:
            found = _table_get(files[i].reader or open_table(files[i]), key, seq)
            if found is not None:
                return found or None
    return None


def _table_get(reader: TableReader, key: bytes, seq: int) -> tuple[int, bytes] | tuple | None:
    """(kind, value) of the table's visible version of ``key``; () when a
    range tombstone of the table deletes it (look no deeper); None when
    the table says nothing of the key."""
    fragments = reader.range_dels
    if fragments is not None:
        covering = fragments.covering_seq(key, seq)
        if covering:
            found = reader.get_with_seq(key, seq)
            return (found[1], found[2]) if found is not None and found[0] > covering else ()
    return reader.get(key, None, seq)


class ViewSource:
    """One source of a view with what range tombstones need of it: its
    finders, its own tombstones (None: none) and how to learn the sequence
    of a key's visible version in it (for weighing it against them)."""

    __slots__ = ("finders", "own", "seq_of")

    def __init__(self, finders: tuple[Finder, Finder], own: FragmentedTombstones | None,
                 seq_of: SeqOf | None) -> None:
        self.finders = finders
        self.own = own
        self.seq_of = seq_of


def memtable_seq_of(mem, seq: int) -> SeqOf:
    def seq_of(key: bytes) -> int | None:
        version = mem.get(key, seq)
        return None if version is None else version[0]
    return seq_of


def table_seq_of(reader: TableReader, seq: int) -> SeqOf:
    def seq_of(key: bytes) -> int | None:
        found = reader.get_with_seq(key, seq)
        return None if found is None else found[0]
    return seq_of


def level_range_dels(files: list[FileMeta], largest: list[bytes], open_table: OpenTable, seq: int,
                     lo: bytes | None, hi: bytes | None) -> tuple[FragmentedTombstones | None, SeqOf | None]:
    """The range tombstones of a level's tables that meet [lo, hi) (only
    tables the manifest marks as holding some are opened), and the seq_of
    of the level (the one table whose range holds the key)."""
    parts = []
    i = 0 if lo is None else bisect_left(largest, lo)
    while i < len(files) and (hi is None or files[i].smallest < hi):
        if files[i].range_tombstones:
            parts.append((files[i].reader or open_table(files[i])).range_dels)
        i += 1
    own = FragmentedTombstones.merged(parts)
    if not own:
        return None, None

    def seq_of(key: bytes) -> int | None:
        f = bisect_left(largest, key)
        if f == len(files) or files[f].smallest > key:
            return None
        found = (files[f].reader or open_table(files[f])).get_with_seq(key, seq)
        return None if found is None else found[0]

    return own, seq_of


def honouring_range_dels(sources: list[ViewSource], seq: int) -> list[tuple[Finder, Finder]]:
    """The (after, before) finders of ``sources`` (newest first), each
    wrapped so that what range tombstones delete at ``seq`` is gone: a
    source skips every stretch a newer source's tombstones delete, and
    drops its own versions older than its own tombstones."""
    out = []
    newer: list[FragmentedTombstones] = []
    for source in sources:
        above = FragmentedTombstones.build(t for part in newer for t in part.tombstones() if t[2] <= seq)
        if not above and source.own is None:
            out.append(source.finders)
        else:
            out.append(_wrapped(source, above if above else None, seq))
        if source.own is not None:
            newer.append(source.own)
    return out


def _wrapped(source: ViewSource, above: FragmentedTombstones | None, seq: int) -> tuple[Finder, Finder]:
    own = source.own
    seq_of = source.seq_of

    def deleted(key: bytes) -> bool:
        if above is not None and above.covering_seq(key, seq):
            return True
        if own is not None:
            covering = own.covering_seq(key, seq)
            if covering:
                version = seq_of(key)
                return version is None or version < covering
        return False

    def kept(chunk: Chunk) -> Chunk:
        keys, kinds, values = chunk
        first, last = keys[0], keys[-1]
        if (above is None or not above.meets(first, last)) and (own is None or not own.meets(first, last)):
            return chunk  # no tombstone reaches into the chunk: nothing to weigh
        flags = [not deleted(key) for key in keys]
        if all(flags):
            return chunk
        return ([k for k, f in zip(keys, flags) if f], [k for k, f in zip(kinds, flags) if f],
                [v for v, f in zip(values, flags) if f])

    if above is None:
        return hiding(source.finders, kept, None, None)

    def jump_after(key: bytes | None, inclusive: bool) -> tuple[bytes | None, bool]:
        span = above.span_at(b"" if key is None else key, seq)
        return (key, inclusive) if span is None else (span[1], True)  # everything up to its end is deleted here

    def jump_before(key: bytes | None, inclusive: bool) -> tuple[bytes | None, bool]:
        if key is None:
            return key, inclusive
        span = above.span_at(key, seq) if inclusive else above.span_below(key, seq)
        return (key, inclusive) if span is None else (span[0], False)

    return hiding(source.finders, kept, jump_after, jump_before)
