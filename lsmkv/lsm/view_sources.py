"""The sources of a view: the (after, before) finders that scans, cursors
and transactions' views merge (lsmkv/base/cursor.py), made from a read
state at a read sequence for the keys in [lo, hi).

One source per memtable, per level-0 table and per deeper level, newest
first (lsmkv/lsm/cursor.py makes each). Where the read state holds range
tombstones, each source is wrapped so that what they delete is gone
(range_del_reads.py). This module never changes what it reads and never
touches the DB object.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable

from lsmkv.base.cursor import Finder

from .cursor import level_finders, memtable_finders, seek_chunk, table_finders
from .memtable import MemTable
from .range_del_reads import ViewSource, honouring_range_dels, level_range_dels, memtable_seq_of, table_seq_of
from .read_state import ReadState
from .table.reader import TableReader
from .version import FileMeta

OpenTable = Callable[[FileMeta], TableReader]
#: ``merged(key)``: the value a key whose visible version is a merge operand reads as.
Merged = Callable[[bytes], bytes]


def view_finders(st: ReadState, seq: int, lo: bytes | None, hi: bytes | None, open_table: OpenTable, now: int,
                 merged: Merged | None) -> list[tuple[Finder, Finder]]:
    """The (after, before) finders of the sources of ``st`` at ``seq``
    that hold keys in [lo, hi), newest first: one per memtable, per
    level-0 table and per deeper level. A level is handed whole, with
    the bounds, and opens only the tables a seek lands in. Each table
    source's first read after a seek is sized by how dense it is beside
    the view's densest source (cursor.seek_chunk). Values with a ttl are
    judged as of ``now`` (live ones read as values, expired ones as
    deletes); keys whose visible version is a merge operand read as
    ``merged`` folds them (None: the database has no merge operator)."""
    mems = [mem for mem in (st.mem, *st.imms) if len(mem)]
    finders = [memtable_finders(mem, seq, now, merged) for mem in mems]
    version = st.version
    tables = version.overlapping(0, lo, hi)
    levels = []
    for level in version.deep_levels:
        files = version.levels[level]
        i = 0 if lo is None else bisect_left(version.largest_keys[level], lo)
        if i < len(files) and (hi is None or files[i].smallest < hi):
            levels.append(level)
    entries = version.level_entries
    densest = max([meta.entries for meta in tables] + [entries[level] for level in levels], default=0)
    for meta in tables:
        finders.append(table_finders(open_table(meta), seq, now, seek_chunk(meta.entries, densest), merged))
    for level in levels:
        finders.append(level_finders(version.levels[level], open_table, seq, now,
                                     largest=version.largest_keys[level], lo=lo, hi=hi,
                                     seek_chunk=seek_chunk(entries[level], densest), merged=merged))
    if st.range_dels or st.mem.range_dels is not None:
        return honouring_range_dels(_range_del_sources(finders, mems, tables, levels, st, seq, lo, hi, open_table),
                                    seq)
    return finders


def _range_del_sources(finders: list[tuple[Finder, Finder]], mems: list[MemTable], tables: list[FileMeta],
                       levels: list[int], st: ReadState, seq: int, lo: bytes | None, hi: bytes | None,
                       open_table: OpenTable) -> list[ViewSource]:
    """The sources view_finders made (memtables, level-0 tables, deeper
    levels, in that order), each with its own range tombstones and how
    to weigh a key's version against them (range_del_reads.py)."""
    owners = [(mem.range_dels, memtable_seq_of(mem, seq)) for mem in mems]
    for meta in tables:
        reader = open_table(meta)
        owners.append((reader.range_dels, table_seq_of(reader, seq)))
    version = st.version
    for level in levels:
        owners.append(level_range_dels(version.levels[level], version.largest_keys[level], open_table, seq, lo, hi))
    return [ViewSource(pair, own, seq_of if own is not None else None)
            for pair, (own, seq_of) in zip(finders, owners)]
