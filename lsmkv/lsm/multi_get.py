"""Batched point lookups: the read path of ``DB.multi_get`` over one read state.

Given distinct keys in ascending order and one read sequence, it answers
each key from the first source that holds a version of it visible at that
sequence, in get()'s order -- the memtable, the immutable memtables (newest
first), level 0 (newest first), then one table per deeper level -- but
source by source rather than key by key: each table is asked once for all
the keys still unanswered that fall in its key range (TableReader.get_many,
which fetches each data block once for every key it holds), as RocksDB's
MultiGet does. It returns what the sources store (kind, stored value); the
DB turns that into values (tombstones and expired ttls into None). It never
changes anything it reads.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Callable

from .read_state import ReadState
from .table.reader import TableReader
from .version import FileMeta


def lookup_many(st: ReadState, keys: list[bytes], seq: int,
                open_table: Callable[[FileMeta], TableReader]) -> tuple[list[tuple[int, bytes] | None], int]:
    """(the (kind, stored value) of each of ``keys`` -- ascending and
    distinct -- visible at ``seq`` in ``st``, or None where no source has
    one; how many keys the tables were asked for)."""
    found: list[tuple[int, bytes] | None] = [None] * len(keys)
    pending = list(range(len(keys)))  # the keys no source has answered yet, ascending
    for mem in (st.mem, *st.imms):
        latest = mem._latest
        still = []
        for i in pending:
            version = latest.get(keys[i])
            while version is not None and version[0] > seq:
                version = version[3]
            if version is None:
                still.append(i)
            else:
                found[i] = (version[1], version[2])
        pending = still
        if not pending:
            return found, 0
    asked = len(pending)
    version = st.version
    for meta in version.levels[0]:
        pending = _ask_table(meta, pending, keys, found, seq, open_table)
        if not pending:
            return found, asked
    levels = version.levels
    for level in version.deep_levels:
        files = levels[level]
        largest = version.largest_keys[level]
        still = []
        start = 0
        n = len(pending)
        while start < n:
            # The run of pending keys that fall in one file's key range.
            f = bisect_left(largest, keys[pending[start]])
            if f == len(files):
                still.extend(pending[start:])
                break
            end = start + 1
            limit = largest[f]
            while end < n and keys[pending[end]] <= limit:
                end += 1
            still.extend(_ask_table(files[f], pending[start:end], keys, found, seq, open_table))
            start = end
        pending = still
        if not pending:
            break
    return found, asked


def _ask_table(meta: FileMeta, pending: list[int], keys: list[bytes], found: list, seq: int,
               open_table: Callable[[FileMeta], TableReader]) -> list[int]:
    """Look the pending keys that fall in ``meta``'s key range up in its
    table; record what it holds in ``found`` and return the keys still
    pending (ascending)."""
    pkeys = [keys[i] for i in pending]
    lo = bisect_left(pkeys, meta.smallest)
    hi = bisect_right(pkeys, meta.largest)
    if lo >= hi:
        return pending
    answers = (meta.reader or open_table(meta)).get_many(pkeys[lo:hi], seq)
    still = pending[:lo]
    for i, answer in zip(pending[lo:hi], answers):
        if answer is None:
            still.append(i)
        else:
            found[i] = answer
    still.extend(pending[hi:])
    return still
