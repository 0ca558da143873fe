"""Vacuum: the page file rewritten densely, and the room checkpoints leave
in it given back.

This module owns the two ways the page file shrinks (docs/btree.md):

* :func:`vacuum` (``db.compact_range()``): a checkpoint, then the live
  entries written bottom up into a new file beside the old one, which is
  fsynced and renamed over it (:func:`rewrite_page_file`, which
  ``db.ingest`` uses too). A crash before the rename leaves the old file
  (the new one is removed at the next open), after it the new one: either
  holds every acknowledged write. The writer's lock moves with the file;
* :func:`compact_file` (at ``flush()`` and ``close()``): when more than
  1/:data:`COMPACT_FREE` of the file's slots are free, one more checkpoint
  moves the pages in the highest slots down into free ones and cuts the
  file after the last slot in use.

A failure stops writes as any failed write does (btree/error_handler.py);
this module never leaves the page file without one whole checkpoint.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable

from lsmkv.base.errors import CorruptionError, SizeLimitError
from lsmkv.base.keys import as_optional_key

from .bulk import build_page_file
from .error_handler import rebuild_tree
from .pager import VACUUM_FILE

if TYPE_CHECKING:
    from .db import DB

#: flush() and close() compact the page file when more than 1/COMPACT_FREE
#: of its slots are free (room earlier checkpoints left): 1/64, a little
#: over 1.5% of the file.
COMPACT_FREE = 64


def vacuum(db: DB, start: object, end: object) -> None:
    """``db.compact_range(start, end)``: the bounds are checked (the API both
    engines share takes them); the whole file is rewritten."""
    as_optional_key(start, "start")
    as_optional_key(end, "end")
    with db._lock:  # a ttl sweep runs its chunks under this lock too
        db._check_writable()
        db._checkpoint()  # the log is empty from here on, until the next write
        rewrite_page_file(db, db._tree.live_entries(), "a compact_range()")
        db._vacuums += 1


def rewrite_page_file(db: DB, entries: Iterable, what: str, fill_factor: float = 1.0) -> None:
    """Replace the page file with one built bottom up from ``entries``
    (key order). Called with the lock held, right after a checkpoint."""
    fs, pager = db._fs, db._pager
    before = pager.page_count
    vacuum_path = os.path.join(db.path, VACUUM_FILE)
    # Writing the new file: a failure changes nothing (the old file
    # and the log stay as they are); writes stop until resume() like
    # after any failed write, which checkpoints into the old file.
    # Bad input found while building (a key too long) stops only the
    # build: nothing was changed.
    try:
        if fs.exists(vacuum_path):
            fs.remove(vacuum_path)
        build_page_file(fs, vacuum_path, pager.page_size, entries,
                        epoch=pager.meta.epoch + 1, ckpt_lsn=pager.meta.ckpt_lsn, metadata=db._meta,
                        fill_factor=fill_factor)
        new_lock = fs.lock(vacuum_path)  # the lock moves with the file: no writer slips in
        try:
            fs.rename(vacuum_path, pager.path)
        except BaseException:
            new_lock.release()
            raise
    except BaseException as exc:
        try:
            if fs.exists(vacuum_path):
                fs.remove(vacuum_path)
        except OSError:
            pass  # removed at the next open
        if isinstance(exc, (SizeLimitError, CorruptionError)) and what == "an ingest":
            raise
        raise db._fail(f"{what} writing the new page file", exc, applied=True) from exc
    # The new file is in place, holding the same checkpoint (same
    # checkpoint LSN, so the empty log goes on as it is). From here a
    # failure leaves the tree to be rebuilt from the new file (the
    # pager is reopened when its file was replaced), now or at resume().
    old_lock, db._filelock = db._filelock, new_lock
    old_lock.release()
    try:
        fs.sync_dir(db.path)
        db._replay_until = db._log.end_lsn
        rebuild_tree(db, f"{what} rewrote the page file")
    except BaseException as exc:
        raise db._fail(f"{what} opening the new page file", exc,
                       replay_until=db._log.end_lsn) from exc
    db._vacuum_pages_freed += max(0, before - db._pager.page_count)


def compact_file(db: DB) -> None:
    """At flush() and close(): while writes go on, the page file keeps
    free slots for the next checkpoint's pages (each changed page goes
    to a slot the checkpoint on disk does not use). When more than
    1/COMPACT_FREE of the file is free, one more checkpoint moves the
    pages in the highest slots down into the free ones and the file is
    cut after the last slot in use (docs/btree.md)."""
    pmap = db._pager.map
    free = pmap.free_slots()
    if free < 16 or free * COMPACT_FREE <= pmap.slot_count:
        return
    try:
        db._write_checkpoint(db._pager.meta.ckpt_lsn, compact=True)
    except BaseException as exc:
        raise db._fail("a checkpoint", exc, applied=True) from exc
