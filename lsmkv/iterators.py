"""Merging the sources of a read into one ordered, version-resolved stream.

A scan reads from several *sources*: the memtable, the immutable memtables,
each level-0 table, and each deeper level (its tables concatenated). Every
source yields, per user key, the newest version visible at the read sequence
as ``(key, kind, value)``, tombstones included, in key order.

Sources are ordered newest first, and the LSM invariant makes a key's version
in an earlier source newer than its version in any later source. So the merge
keeps, for equal keys, the one from the earliest source, and then hides
tombstones and expired values (an expired value hides older versions, as a
tombstone does). heapq.merge breaks ties by source position, which is
exactly that.
"""

from __future__ import annotations

from heapq import merge
from operator import itemgetter
from typing import Iterable, Iterator

from .ttl import live_value
from .version import FileMeta
from .write_batch import VALUE, VALUE_TTL

_first = itemgetter(0)


def merge_visible(sources: list[Iterator[tuple[bytes, int, bytes]]], reverse: bool = False,
                  now: int = 0) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of every live key across ``sources`` (newest source
    first): tombstones are hidden, and so are values with a ttl whose
    deadline is at or before ``now`` (milliseconds since the epoch)."""
    if len(sources) == 1:
        for key, kind, value in sources[0]:
            if kind == VALUE:
                yield key, value
            elif kind == VALUE_TTL:
                value = live_value(value, now)
                if value is not None:
                    yield key, value
        return
    prev = None
    for key, kind, value in merge(*sources, key=_first, reverse=reverse):
        if key == prev:
            continue
        prev = key
        if kind == VALUE:
            yield key, value
        elif kind == VALUE_TTL:
            value = live_value(value, now)
            if value is not None:
                yield key, value


def level_visible(files: list[FileMeta], open_table, read_seq: int, start: bytes | None,
                  end: bytes | None, reverse: bool) -> Iterator[tuple[bytes, int, bytes]]:
    """One source for a level >= 1: its tables (sorted, disjoint) concatenated."""
    tables: Iterable[FileMeta] = reversed(files) if reverse else files
    for meta in tables:
        reader = open_table(meta)
        if reverse:
            yield from reader.visible_reverse(read_seq, start, end)
        else:
            yield from reader.visible(read_seq, start, end)
