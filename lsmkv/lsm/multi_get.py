"""Batched point lookups: the read path of ``DB.multi_get`` over one read state.

Given distinct keys in ascending order and one read sequence, it answers
each key from the first source that holds a version of it visible at that
sequence, in get()'s order -- the memtable, the immutable memtables (newest
first), level 0 (newest first), then one table per deeper level -- but
source by source rather than key by key: each table is asked once for all
the keys still unanswered that fall in its key range (TableReader.get_many,
which fetches each data block once for the run of keys it holds), as
RocksDB's MultiGet does. The keys still unanswered stay an ascending list
of keys, so the keys of a table are one slice of it, found by bisection. It
returns what the sources store (kind, stored value); the DB turns that into
values (tombstones and expired ttls into None). It never changes anything
it reads.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Callable

from .read_state import ReadState
from .table.reader import TableReader
from .version import FileMeta


def lookup_many(st: ReadState, keys: list[bytes], seq: int,
                open_table: Callable[[FileMeta], TableReader]) -> tuple[dict[bytes, tuple[int, bytes]], int]:
    """(the (kind, stored value) visible at ``seq`` in ``st`` of each of
    ``keys`` -- ascending and distinct -- that some source holds, by key;
    how many keys the tables were asked for)."""
    found: dict[bytes, tuple[int, bytes]] = {}
    pending = keys  # the keys no source has answered yet, ascending
    for mem in st.memtables:
        latest = mem._latest
        if not latest:
            continue
        still = []
        for key in pending:
            version = latest.get(key)
            while version is not None and version[0] > seq:
                version = version[3]
            if version is None:
                still.append(key)
            else:
                found[key] = version[1], version[2]
        pending = still
        if not pending:
            return found, 0
    asked = len(pending)
    version = st.version
    for meta in version.levels[0]:
        lo = bisect_left(pending, meta.smallest)
        hi = bisect_right(pending, meta.largest, lo)
        if lo < hi:
            left = (meta.reader or open_table(meta)).get_many(pending[lo:hi], seq, found)
            pending = pending[:lo] + left + pending[hi:]
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
            # The run of pending keys up to one file's largest key; those of
            # them at or above its smallest key are its to answer.
            f = bisect_left(largest, pending[start])
            if f == len(files):
                still.extend(pending[start:])
                break
            meta = files[f]
            end = bisect_right(pending, largest[f], start)
            lo = bisect_left(pending, meta.smallest, start, end)
            if lo > start:
                still.extend(pending[start:lo])
            if lo < end:
                still.extend((meta.reader or open_table(meta)).get_many(pending[lo:end], seq, found))
            start = end
        pending = still
        if not pending:
            break
    return found, asked
