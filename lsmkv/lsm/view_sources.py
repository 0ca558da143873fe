"""Views of a read state: scans and cursors at a read sequence, and the
sources they merge -- the (after, before) finders that scans, cursors and
transactions' views read through (lsmkv/base/cursor.py), made from a
read state at a read sequence for the keys in [lo, hi).

One source per memtable, per level-0 table and per deeper level, newest
first (lsmkv/lsm/cursor.py makes each). Where the read state holds range
tombstones, each source is wrapped so that what they delete is gone
(range_del_reads.py). This module never changes what it reads and never
touches the DB object.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from lsmkv.base.compile_hints import cython

from lsmkv.base.cursor import Cursor, Finder, SourceCursor, stream_view
from lsmkv.base.errors import ClosedError
from lsmkv.base.key_search import keys_bisect_left
from lsmkv.base.keys import as_optional_key, scan_bounds
from lsmkv.base.ttl import now_ms

from .cursor import LevelSource, MemTableSource, TableSource, seek_chunk
from .memtable import MemTable
from .range_del_reads import ViewSource, honouring_range_dels, level_range_dels, memtable_seq_of, table_seq_of
from .read_state import ReadState
from .table.reader import TableReader
from .version import FileMeta

OpenTable = Callable[[FileMeta], TableReader]
#: ``merged(key)``: the value a key whose visible version is a merge operand reads as.
Merged = Callable[[bytes], bytes]
#: ``merged_in(state, key, sequence, now)``: the same on any read state (PointReads.merged).
MergedIn = Callable[[ReadState, bytes, int, int], bytes]


class Views:
    """Scans, cursors and view sources of one database on any read state
    at any read sequence. ``alive`` is the database's [True] ([False] once
    it is closed: streams and cursors look at it); ``merged_in`` folds a
    key's merge operands (None: the database has no merge operator)."""

    __slots__ = ("_path", "_alive", "_open_table", "_ttl_clock", "_merged_in")

    def __init__(self, path: str, alive: list[bool], open_table: OpenTable, ttl_clock: Callable[[], float],
                 merged_in: MergedIn | None) -> None:
        self._path, self._alive = path, alive
        self._open_table, self._ttl_clock, self._merged_in = open_table, ttl_clock, merged_in

    def finders(self, st: ReadState, seq: int, lo: bytes | None, hi: bytes | None) -> list[tuple[Finder, Finder]]:
        """The sources of a view of ``st`` at ``seq`` in [lo, hi) (view_finders)."""
        # Values with a ttl are judged once, as of the view's making (as the data is).
        now = now_ms(self._ttl_clock())
        merged = None if self._merged_in is None else partial(self._merged_in, st, seq=seq, now=now)
        return view_finders(st, seq, lo, hi, self._open_table, now, merged)

    def scan_in(self, st: ReadState, start: object, end: object, reverse: bool, prefix: object,
                seq: int) -> Iterator[tuple[bytes, bytes]]:
        """DB.scan() on ``st`` at ``seq`` (at least the state's floor)."""
        if not self._alive[0]:
            raise ClosedError(f"{self._path}: database is closed")
        lo, hi = scan_bounds(start, end, prefix)
        if lo is not None and hi is not None and lo >= hi:
            return iter(())
        floor = st.floor
        if seq < floor:
            seq = floor
        # (Views.finders inlined: a seek of 10 is a few microseconds, and a call a tenth of one.)
        now = now_ms(self._ttl_clock())
        merged = None if self._merged_in is None else partial(self._merged_in, st, seq=seq, now=now)
        return stream_view(view_finders(st, seq, lo, hi, self._open_table, now, merged), lo, hi, None, bool(reverse),
                           self._check_scan, self._alive, None)

    def _check_scan(self) -> None:
        if not self._alive[0]:
            raise ClosedError(f"{self._path}: database closed while a scan was open")

    def cursor_in(self, st: ReadState, seq: int, lower_bound: object, upper_bound: object,
                  check: Callable[[], None]) -> Cursor:
        """DB.iterator() on ``st`` at ``seq`` (at least the state's floor);
        ``check`` raises once the database (or snapshot) is closed."""
        lo = as_optional_key(lower_bound, "lower_bound")
        hi = as_optional_key(upper_bound, "upper_bound")
        seq = max(seq, st.floor)
        return Cursor([SourceCursor(after, before) for after, before in self.finders(st, seq, lo, hi)],
                      lo, hi, check=check, alive=self._alive)


@cython.locals(st=ReadState, densest=cython.Py_ssize_t, size=cython.Py_ssize_t, i=cython.Py_ssize_t,
               level=cython.Py_ssize_t, mems=list, tables=list, levels=list, sources=list)
def view_finders(st: ReadState, seq: int, lo: bytes | None, hi: bytes | None, open_table: OpenTable, now: int,
                 merged: Merged | None) -> list[tuple[Finder, Finder]]:
    """The (after, before) finders of the sources of ``st`` at ``seq``
    that hold keys in [lo, hi), newest first: one per memtable, per
    level-0 table and per deeper level. A level is handed whole, with
    the bounds, and opens only the tables a seek lands in. Each source's
    first read after a seek is sized by how dense it is (a memtable's
    keys, a table's or a level's entries) beside the view's densest
    source (cursor.seek_chunk). Values with a ttl are
    judged as of ``now`` (live ones read as values, expired ones as
    deletes); keys whose visible version is a merge operand read as
    ``merged`` folds them (None: the database has no merge operator).
    Every table and level source holds ``st`` (``keep``), whose Version
    keeps their files, so a scan or cursor needs nothing else to keep the
    tables it reads: a merging read lets go of a source once it ends (a
    memtable's, often first), while a level's source opens its tables
    only when a seek lands in them."""
    # Plain loops over typed locals (compiled: C integers and the read
    # state's fields as struct members), not comprehensions, zip or max:
    # each of those was a generic call of about a thousand instructions,
    # and a short seek makes its view afresh.
    version = st.version
    all_levels = version.levels
    densest = 0
    mems = []
    for mem in st.memtables:
        size = len(mem)
        if size:
            mems.append(mem)
            if size > densest:
                densest = size
    tables = []
    for meta in all_levels[0]:  # (Version.overlapping(0, lo, hi), inline)
        if (lo is None or meta.largest >= lo) and (hi is None or meta.smallest <= hi):
            tables.append(meta)
            size = meta.entries
            if size > densest:
                densest = size
    levels = []
    entries = version.level_entries
    for level in version.deep_levels:
        files = all_levels[level]
        i = 0 if lo is None else keys_bisect_left(version.largest_keys[level], lo)
        if i < len(files) and (hi is None or files[i].smallest < hi):
            levels.append(level)
            size = entries[level]
            if size > densest:
                densest = size
    sources = []
    for mem in mems:
        sources.append(MemTableSource(mem, seq, now, merged, seek_chunk(len(mem), densest)))
    for meta in tables:
        sources.append(TableSource(open_table(meta), seq, now, seek_chunk(meta.entries, densest), merged, st))
    for level in levels:
        sources.append(LevelSource(all_levels[level], open_table, seq, now, version.largest_keys[level], lo, hi,
                                   seek_chunk(entries[level], densest), merged, st))
    finders = [(source.after, source.before) for source in sources]
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
