"""Cursors over a btree database: the same contract as lsmkv's
(lsmkv/base/cursor.py: seek, seek_for_prev, seek_to_first, seek_to_last,
next, prev, key, value, valid, bounds, a point-in-time view).

The view is a snapshot (btree/snapshot.py): ``db.iterator()`` takes one of
its own and closes it with the cursor, ``snapshot.iterator()`` reads
through the snapshot it is given. The cursor is the shared merging cursor
with one source, which reads the tree a run of leaves at a time
(Tree.chunk_forward / Tree.chunk_backward, as scans do), so moving along
costs a list index most of the time; a chunk goes on where the last one
stopped (no descent from the root) unless something was written in
between. Like a snapshot, the source knows nothing of the database: it
reads through the one function the database hands it.
"""

from __future__ import annotations

from itertools import chain
from typing import Callable

from lsmkv.base.cursor import VALUE, Chunk, SourceCursor

from .leaf_runs import LeafRuns

from .tree import Tree

#: Entries a cursor asks the tree for at a time (whole leaves: a few more).
CHUNK = 128

#: read(fn, resume, *args) -> (LeafRuns, RangePos or None): the database runs
#: ``fn`` (Tree.chunk_forward or Tree.chunk_backward) with ``args`` over the
#: snapshot's view, from ``resume`` when it is given, under its lock, after
#: checking that the snapshot is still usable.
ChunkReader = Callable[..., tuple[LeafRuns, object]]


def snapshot_source(read_chunk: ChunkReader) -> SourceCursor:
    """The tree as a snapshot sees it, a chunk of leaves at a time, read
    with ``read_chunk`` (the database's; see ChunkReader). A cursor that
    moves on past the chunk it read (``after`` the last key it was given,
    or ``before`` the first) goes on where the tree read stopped
    (Tree.chunk_forward's RangePos) instead of seeking again, if nothing
    was written in between."""
    # The last read each way: (the key a move on from it passes, the
    # RangePos to go on from, or None: nothing lies beyond it -- in a
    # snapshot, which never changes, that stays so).
    last: dict[str, tuple] = {}

    def read(fn, way: str, key: bytes | None, *args) -> Chunk:
        """The chunk ``fn`` reads, in ascending key order."""
        went = last.pop(way, None)
        resume = None
        if went is not None and went[0] == key:
            if went[1] is None:
                return [], [], []
            resume = went[1]
        runs, pos = read_chunk(fn, resume, *args)
        if not runs:
            return [], [], []
        last[way] = (runs.last_key(), pos)
        keys = list(chain.from_iterable(runs.keys))
        values = list(chain.from_iterable(runs.values))
        if way == "before":  # (chunk_backward reads in descending order)
            keys.reverse()
            values.reverse()
        return keys, [VALUE] * len(keys), values

    def after(key: bytes | None, inclusive: bool) -> Chunk:
        return read(Tree.chunk_forward, "after", key if not inclusive else None, key, inclusive, None, CHUNK)

    def before(key: bytes | None, inclusive: bool) -> Chunk:
        # chunk_backward reads keys below its bound: key + b"\\0" is the
        # smallest key above ``key``, so "below it" is "<= key".
        hi = None if key is None else (key + b"\x00" if inclusive else key)
        return read(Tree.chunk_backward, "before", key if not inclusive else None, hi, None, CHUNK)

    return SourceCursor(after, before)
