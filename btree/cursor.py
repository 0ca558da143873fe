"""Cursors over a btree database: the same contract as lsmkv's
(lsmkv/cursor.py: seek, seek_for_prev, seek_to_first, seek_to_last, next,
prev, key, value, valid, bounds, a point-in-time view).

The view is a snapshot (btree/snapshot.py): ``db.iterator()`` takes one of
its own and closes it with the cursor, ``snapshot.iterator()`` reads
through the snapshot it is given. The cursor is lsmkv's merging cursor with
one source, which reads the tree a run of leaves at a time
(Tree.chunk_forward / Tree.chunk_backward under the DB's lock, as scans
do), so moving along costs a list index most of the time and a descent
from the root once per chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsmkv.cursor import Chunk, SourceCursor

from .tree import Tree

if TYPE_CHECKING:  # pragma: no cover
    from .db import DB
    from .snapshot import Snapshot

#: Entries a cursor asks the tree for at a time (whole leaves: a few more).
CHUNK = 128
_VALUE = 1


def snapshot_source(db: "DB", snap: "Snapshot") -> SourceCursor:
    """The tree as ``snap`` sees it, a chunk of leaves at a time."""

    def read(fn, *args) -> list:
        with db._lock:
            db._check_snapshot(snap)
            items, _ = db._read(fn, *args, snap._view, snap=snap)
            db._trim_after_read()
        return items

    def chunk(items: list) -> Chunk:
        if not items:
            return [], [], []
        keys, values = map(list, zip(*items))
        return keys, [_VALUE] * len(keys), values

    def after(key: bytes | None, inclusive: bool) -> Chunk:
        return chunk(read(Tree.chunk_forward, key, inclusive, None, CHUNK))

    def before(key: bytes | None, inclusive: bool) -> Chunk:
        # chunk_backward reads keys below its bound: key + b"\\0" is the
        # smallest key above ``key``, so "below it" is "<= key".
        hi = None if key is None else (key + b"\x00" if inclusive else key)
        items = read(Tree.chunk_backward, hi, None, CHUNK)
        items.reverse()
        return chunk(items)

    return SourceCursor(after, before)
