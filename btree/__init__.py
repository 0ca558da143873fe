"""btree: the read-optimized counterpart to lsmkv, an on-disk B+tree.

``btree.open(path, **options)`` returns a :class:`DB` with the same API as
``lsmkv.open``; ``btree.check(path)`` verifies a database. Modules:

* :mod:`btree.node`: page layouts (slotted leaf/internal pages, overflow and
  free-list pages) and the decoded in-memory node;
* :mod:`btree.pager`: the page file, meta pages, free list, journaled checkpoints;
* :mod:`btree.bufferpool`: the page cache (CLOCK eviction, dirty tracking);
* :mod:`btree.wal`: the write-ahead log;
* :mod:`btree.tree`: search, insert/split, delete/merge, range reads;
* :mod:`btree.db`: the DB object (locking, recovery, checkpoints, stats);
* :mod:`btree.snapshot`: point-in-time views;
* :mod:`btree.check`: consistency checks.

docs/btree.md describes the design, docs/formats.md the bytes on disk.
"""

from lsmkv.errors import (BackgroundError, ClosedError, CorruptionError, InvalidDatabaseError, LockError,
                          LsmkvError, OptionError, ReadOnlyError, SizeLimitError)

from .check import check
from .db import DB, Snapshot, WriteBatch, open

__all__ = [
    "open", "check", "DB", "Snapshot", "WriteBatch",
    "BackgroundError", "ClosedError", "CorruptionError", "InvalidDatabaseError", "LockError",
    "LsmkvError", "OptionError", "ReadOnlyError", "SizeLimitError",
]
