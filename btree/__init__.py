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

from lsmkv.errors import (BackgroundError, ClosedError, CorruptionError, InvalidArgumentError, InvalidDatabaseError,
                          LockError, LsmkvError, OptionError, ReadOnlyError, SizeLimitError, SnapshotEndedError,
                          SyncTimeoutError)

import os

from lsmkv.destroy import destroy as _destroy_db

from .check import check
from .db import DB, Snapshot, WriteBatch, open
# Imported before the function of the same name is defined below, so that
# ``btree.repair`` stays the function (see lsmkv/__init__.py).
from .repair import repair_db as _repair_db


def checkpoint(path: str | bytes | os.PathLike, dest: str | bytes | os.PathLike) -> None:
    """Write a consistent, openable copy of the btree database at ``path``
    into the new directory ``dest`` (see :meth:`DB.checkpoint`), also while
    another process has it open for writing (the store is opened
    read-only)."""
    with open(path, read_only=True) as db:
        db.checkpoint(dest)


def destroy(path: str | bytes | os.PathLike) -> None:
    """Delete the btree database at ``path``: its files, and the directory if
    nothing else is left in it. Refuses, deleting nothing, a path that is not
    a btree database (InvalidDatabaseError) and one another process has open
    for writing (LockError)."""
    _destroy_db(path, "btree")


def repair(path: str | bytes | os.PathLike):
    """Rebuild a damaged btree database from the leaves that verify (what
    ``lsmkv repair`` does) and return its RepairReport."""
    return _repair_db(os.fsdecode(path))

__all__ = [
    "open", "check", "checkpoint", "destroy", "repair", "DB", "Snapshot", "WriteBatch",
    "BackgroundError", "ClosedError", "CorruptionError", "InvalidArgumentError", "InvalidDatabaseError", "LockError",
    "LsmkvError", "OptionError", "ReadOnlyError", "SizeLimitError", "SnapshotEndedError", "SyncTimeoutError",
]
