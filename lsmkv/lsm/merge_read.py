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
from .write_batch import MERGE, TOMBSTONE, VALUE, VALUE_TTL


def merged_value(st: ReadState, key: bytes, seq: int, now_ms: int, operator: Callable | None,
                 open_table: Callable[[FileMeta], TableReader]) -> bytes:
    """The value of ``key`` at ``seq`` in ``st``, whose newest visible
    version is a merge operand; values with a ttl are judged at ``now_ms``.
    A range tombstone covering the key ends the operands as a tombstone
    does (what it deletes is not their base). MergeError if the operator
    fails (or the handle has none)."""
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
        break  # (a tombstone, or what a range tombstone deleted: base stays None)
    if operator is None:
        raise MergeError(f"key {key[:40]!r} holds merge operands, but the database was opened without "
                         "merge_operator=; open it with the operator they were written with")
    operands.reverse()
    return fold(operator, key, base, operands)


def _versions(st: ReadState, key: bytes, seq: int,
              open_table: Callable[[FileMeta], TableReader]) -> Iterator[tuple[int, bytes]]:
    """(kind, value) of every version of ``key`` visible at ``seq``, newest
    first, ending with a tombstone where a range tombstone deletes the rest
    (range_del_reads.py: a source's tombstone deletes its own older
    versions and everything older sources hold)."""
    for mem in st.memtables:
        covering = mem.range_dels.covering_seq(key, seq) if mem.range_dels is not None else 0
        version = mem._latest.get(key)
        while version is not None:
            if version[0] <= seq:
                if version[0] < covering:
                    break
                yield version[1], version[2]
            version = version[3]
        if covering:
            yield TOMBSTONE, b""
            return
    version = st.version
    for meta in version.levels[0]:
        if meta.smallest <= key <= meta.largest:
            if (yield from _table_versions(meta.reader or open_table(meta), key, seq)):
                return
    levels = version.levels
    for level in version.deep_levels:
        files = levels[level]
        i = bisect_left(version.largest_keys[level], key)
        if i < len(files) and files[i].smallest <= key:
            if (yield from _table_versions(files[i].reader or open_table(files[i]), key, seq)):
                return


def _table_versions(reader: TableReader, key: bytes, seq: int) -> Iterator[tuple[int, bytes]]:
    """Yields a table's versions of ``key`` visible at ``seq``, newest first
    (only the newest unless it is an operand: get() answers that from its
    key index or bloom filter); returns True when a range tombstone of the
    table covers the key (then it yielded a tombstone: look no deeper)."""
    fragments = reader.range_dels
    covering = fragments.covering_seq(key, seq) if fragments is not None else 0
    if not covering:
        newest = reader.get(key, None, seq)
        if newest is None:
            return False
        if newest[0] != MERGE:
            yield newest
            return False
    for version_seq, kind, value in reader.versions(key, seq):
        if version_seq < covering:
            break
        yield kind, value
    if covering:
        yield TOMBSTONE, b""
        return True
    return False
