"""Folding merge operands on reads: what a key with operands reads as.

A key whose newest version visible to a read is a merge operand (kind 4,
``db.merge``) reads as the database's merge operator folded over its
operands, oldest first, onto the version below them: a value, a value
with a ttl (an expired one counts as absent), a tombstone (absent) or
nothing. This module gathers one key's versions at one read sequence,
newest first, through the read state's sources in get()'s order -- the
memtable, the immutable memtables (newest first), level 0 (newest first),
one table per deeper level -- and stops at the first that is not an
operand.

Only reads that met an operand come here (DB.get and friends check the
kind they found; a cursor source checks its chunk): reads that never meet
one pay nothing. It never changes anything it reads.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable, Iterator

from lsmkv.base.errors import MergeError
from lsmkv.base.merge_operators import fold

from .read_state import ReadState
from .table.reader import TableReader
from .ttl_value import live_value
from .version import FileMeta
from .write_batch import MERGE, VALUE, VALUE_TTL


def merged_value(st: ReadState, key: bytes, seq: int, now_ms: int, operator: Callable | None,
                 open_table: Callable[[FileMeta], TableReader]) -> bytes:
    """The value of ``key`` at ``seq`` in ``st``, whose newest visible
    version is a merge operand; values with a ttl are judged at ``now_ms``.
    MergeError if the operator fails (or the handle has none)."""
    operands: list[bytes] = []
    base = None
    for kind, value in _versions(st, key, seq, open_table):
        if kind == MERGE:
            operands.append(value)
            continue
        if kind == VALUE:
            base = value
        elif kind == VALUE_TTL:
            base = live_value(value, now_ms)
        break  # (a tombstone: base stays None)
    if operator is None:
        raise MergeError(f"key {key[:40]!r} holds merge operands, but the database was opened without "
                         "merge_operator=; open it with the operator they were written with")
    operands.reverse()
    return fold(operator, key, base, operands)


def _versions(st: ReadState, key: bytes, seq: int,
              open_table: Callable[[FileMeta], TableReader]) -> Iterator[tuple[int, bytes]]:
    """(kind, value) of every version of ``key`` visible at ``seq``, newest first."""
    for mem in (st.mem, *st.imms):
        version = mem._latest.get(key)
        while version is not None:
            if version[0] <= seq:
                yield version[1], version[2]
            version = version[3]
    version = st.version
    for meta in version.levels[0]:
        if meta.smallest <= key <= meta.largest:
            yield from _table_versions(meta.reader or open_table(meta), key, seq)
    levels = version.levels
    for level in version.deep_levels:
        files = levels[level]
        i = bisect_left(version.largest_keys[level], key)
        if i < len(files) and files[i].smallest <= key:
            yield from _table_versions(files[i].reader or open_table(files[i]), key, seq)


def _table_versions(reader: TableReader, key: bytes, seq: int) -> list[tuple[int, bytes]]:
    """A table's versions of ``key`` visible at ``seq``, newest first: only
    the newest unless it is an operand (get() answers that from its key
    index or bloom filter)."""
    newest = reader.get(key, None, seq)
    if newest is None:
        return []
    if newest[0] != MERGE:
        return [newest]
    return reader.versions(key, seq)
