"""btree: the read-optimized counterpart to lsmkv, an on-disk B+tree.

``btree.open(path, **options)`` returns a :class:`DB` with the same API as
``lsmkv.open``; ``btree.check(path)`` verifies a database. It is built on
the layer both engines share (lsmkv/base/: errors, the file-system layer,
checksums, the timing wheel, the write queue and log syncer, the cursor
machinery) and imports nothing of the LSM engine, except the LSM's table
reader when ``db.ingest`` reads table files. Modules:

* :mod:`btree.node`: page layouts (slotted leaf/internal pages, overflow and
  free-list pages) and the decoded in-memory node;
* :mod:`btree.pager`: the page file, meta pages, free pages, atomic checkpoints;
* :mod:`btree.pagemap`: which slot of the page file holds each page (shadow paging);
* :mod:`btree.bufferpool`: the page cache (CLOCK eviction, dirty tracking);
* :mod:`btree.wal`: the write-ahead log;
* :mod:`btree.tree`: search, insert/split, delete/merge, range reads;
* :mod:`btree.expiry`: how many values with a ttl have expired (``len(db)``);
* :mod:`btree.bulk`: a whole page file built bottom up from sorted entries
  (ingest, vacuum, checkpoints, repair);
* :mod:`btree.options`: the options of ``btree.open``, their defaults and checks;
* :mod:`btree.write_batch`: ``WriteBatch`` and a write as the write queue carries it;
* :mod:`btree.transactions`: ``db.transaction()``'s snapshot, commit and validation in the log writer;
* :mod:`btree.merging`: ``merge()``: operands folded by the log writer into the values it logs;
* :mod:`btree.range_delete`: ``delete_range()``: covered subtrees freed whole, the edges trimmed;
* :mod:`btree.db`: the DB object (locking, the write and read paths, log checkpoints);
* :mod:`btree.recovery`: opening the files and rebuilding the state from them;
* :mod:`btree.error_handler`: a failed write stops writes; ``resume()``;
* :mod:`btree.vacuum`: ``compact_range()`` and the compaction of the file at ``flush()`` and ``close()``;
* :mod:`btree.ingest`: ``ingest()``: table files taken into the tree;
* :mod:`btree.checkpoint`: ``checkpoint(dest)`` (a copy in a new directory) and ``split_keys()``;
* :mod:`btree.snapshot`: point-in-time views;
* :mod:`btree.snapshot_views`: the trees open snapshots read, kept (and registered
  in the reader table) until their last snapshot closes;
* :mod:`btree.snapshot_reads`: what a snapshot reads through (get, multi_get, scan, cursor);
* :mod:`btree.scan`: a scan's chunks, each one consistent read, and how they grow;
* :mod:`btree.multi_get`: ``multi_get()``;
* :mod:`btree.point_get`: ``PointGet``, what a get reads and counts, and the hash-index hits' bookkeeping;
* :mod:`btree.sweep`: the background sweep that deletes keys whose ttl has expired;
* :mod:`btree.cursor`: the cursor's source over the tree (``db.iterator()``);
* :mod:`btree.stats`: ``stats()``;
* :mod:`btree.check`: consistency checks (``btree.check``, ``check_invariants()``);
* :mod:`btree.repair`: ``lsmkv repair`` for this engine;
* :mod:`btree.dbm`: the standard library's dbm interface.

docs/btree.md describes the design, docs/formats.md the bytes on disk.
"""

import os

from lsmkv.base.destroy import destroy as _destroy_db
from lsmkv.base.retry import run_in_transaction
from lsmkv.base.transaction import Transaction
from lsmkv.base.errors import (BackgroundError, ClosedError, ConflictError, CorruptionError, InvalidArgumentError,
                               InvalidDatabaseError, LockError, LsmkvError, MergeError, OptionError, ReadOnlyError,
                               SizeLimitError, SnapshotEndedError, SyncTimeoutError)

from .check import check
from .db import DB, open
from .snapshot import Snapshot
from .write_batch import WriteBatch

# Imported before the function of the same name is defined below, so that
# ``btree.repair`` stays the function (see lsmkv/lsm/__init__.py).
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
    "open", "check", "checkpoint", "destroy", "repair", "DB", "Snapshot", "WriteBatch", "Transaction",
    "run_in_transaction",
    "BackgroundError", "ClosedError", "CorruptionError", "InvalidArgumentError", "InvalidDatabaseError", "LockError",
    "LsmkvError", "OptionError", "ReadOnlyError", "SizeLimitError", "SnapshotEndedError", "SyncTimeoutError",
    "ConflictError", "MergeError",
]
