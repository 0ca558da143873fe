"""Point reads on a read state: get and multi_get at a read sequence, and
what a stored entry reads as (an expiring value judged against the clock,
a merge operand folded by the operator).

DB.get keeps its own copy of the common case written out (no range
tombstones, read at the newest sequence: db.py), because each call is a
measurable share of a get; everything else -- snapshots' reads,
transactions' reads, stores with range tombstones, multi_get -- comes
here. The lookups walk get()'s order: the memtable, the immutable
memtables (newest first), level 0 (newest first), then one table per
deeper level whose key range holds the key, each table asked after its
bloom filter. Where the read state holds range tombstones, the lookups
take range_del_reads.py's path instead, which honours them.

This module never changes what it reads and never touches the DB object:
it is handed how to open a table, the ttl clock and the merge operator.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable

from lsmkv.base.errors import ClosedError
from lsmkv.base.keys import as_key
from lsmkv.base.ttl import now_ms

from .merge_read import merged_value
from .multi_get import lookup_many
from .range_del_reads import get_honouring_range_dels
from .read_state import ReadState
from .table.bloom import bloom_hash
from .table.reader import TableReader
from .ttl_value import live_value
from .version import FileMeta, Version
from .write_batch import MERGE, TOMBSTONE, VALUE, VALUE_TTL

OpenTable = Callable[[FileMeta], TableReader]


class PointReads:
    """get() and multi_get() of one database on any read state at any
    read sequence. ``alive`` is the database's [True] ([False] once it is
    closed); ``gets`` counts the keys looked up in the tables (a share of
    ``stats()["gets"]``: DB.get counts its own)."""

    __slots__ = ("_path", "_alive", "_open_table", "_ttl_clock", "_merge_operator", "gets")

    def __init__(self, path: str, alive: list[bool], open_table: OpenTable, ttl_clock: Callable[[], float],
                 merge_operator: object) -> None:
        self._path, self._alive = path, alive
        self._open_table, self._ttl_clock, self._merge_operator = open_table, ttl_clock, merge_operator
        self.gets = 0

    def get_in(self, st: ReadState, key: object, seq: int, default: bytes | None) -> bytes | None:
        """get() on the read state ``st`` at the read sequence ``seq`` (at
        least the state's floor)."""
        if not self._alive[0]:
            raise ClosedError(f"{self._path}: database is closed")
        if seq < st.floor:
            seq = st.floor
        k = key if type(key) is bytes else as_key(key)
        if st.range_dels or st.mem.range_dels is not None:
            self.gets += 1
            found = get_honouring_range_dels(st, k, seq, self._open_table)
            if found is None:
                return default
            kind, value = found
        else:
            for mem in st.memtables:
                version = mem.get(k, seq)
                if version is not None:
                    kind, value = version[1], version[2]
                    break
            else:
                self.gets += 1
                found = get_from_tables(st.version, k, seq, self._open_table)
                if found is None:
                    return default
                kind, value = found
        if kind == VALUE:
            return value
        if kind == TOMBSTONE:
            return default
        if kind == VALUE_TTL:
            return self.unexpired(value, default)
        return self.merged(st, k, seq)

    def multi_get_in(self, st: ReadState, keys: list[bytes], seq: int) -> list[bytes | None]:
        """multi_get() of checked keys on the read state ``st`` at ``seq``."""
        if not self._alive[0]:
            raise ClosedError(f"{self._path}: database is closed")
        if seq < st.floor:
            seq = st.floor
        distinct = sorted(set(keys))
        if st.range_dels or st.mem.range_dels is not None:
            # Range tombstones: each key weighed against them (range_del_reads.py).
            found = {}
            for key in distinct:
                entry = get_honouring_range_dels(st, key, seq, self._open_table)
                if entry is not None:
                    found[key] = entry
            asked = len(distinct)
        else:
            found, asked = lookup_many(st, distinct, seq, self._open_table)
        self.gets += asked
        now = None  # one clock reading for every expiring value
        values: dict[bytes, bytes | None] = {}  # the keys found; the others are absent
        for key, (kind, value) in found.items():
            if kind == TOMBSTONE:
                continue
            if kind == VALUE_TTL:
                if now is None:
                    now = now_ms(self._ttl_clock())
                value = live_value(value, now)
            elif kind == MERGE:
                value = self.merged(st, key, seq)
            values[key] = value
        get = values.get
        return [get(key) for key in keys]

    def unexpired(self, stored: bytes, default: bytes | None) -> bytes | None:
        """The value of a stored expiring value (kind VALUE_TTL), or
        ``default`` once its deadline has passed."""
        value = live_value(stored, now_ms(self._ttl_clock()))
        return default if value is None else value

    def merged(self, st: ReadState, key: bytes, seq: int, now: int | None = None) -> bytes:
        """The value of ``key``, whose newest version visible at ``seq`` is a
        merge operand: the operator folded over its operands (merge_read.py)."""
        if now is None:
            now = now_ms(self._ttl_clock())
        return merged_value(st, key, seq, now, self._merge_operator, self._open_table)


def get_from_tables(version: Version, key: bytes, seq: int, open_table: OpenTable) -> tuple[int, bytes] | None:
    """(kind, value) of the newest version <= seq in the tables, or None.

    Level 0 newest first, then the one table per deeper level whose key
    range holds the key; each table checks its bloom filter first."""
    h = bloom_hash(key)
    for meta in version.levels[0]:
        if meta.smallest <= key <= meta.largest:
            found = (meta.reader or open_table(meta)).get(key, h, seq)
            if found is not None:
                return found
    levels = version.levels
    largest_keys = version.largest_keys
    for level in version.deep_levels:
        files = levels[level]
        i = bisect_left(largest_keys[level], key)
        if i < len(files):
            meta = files[i]
            if meta.smallest <= key:
                found = (meta.reader or open_table(meta)).get(key, h, seq)
                if found is not None:
                    return found
    return None
