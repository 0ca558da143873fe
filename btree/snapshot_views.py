"""The views snapshots read: the trees a DB's open snapshots keep alive.

This module owns the DB's ``_views`` (the id of a tree -> [tree, open
snapshots of it, reader-table slot or None]) and what changes it:

* :func:`pin_view`: the record of the tree a new snapshot reads, made on
  its first snapshot; a read-only handle registers the checkpoint it reads
  in the reader table (btree/readers.py) so that the writer keeps its slots;
* :func:`end_snapshot`: a snapshot closes; the last one of a view drops it;
* :func:`drop_view`: a view's reader-table slot is cleared, and a tree the
  handle replaced (a vacuum, a read-only handle's reload) is let go, with
  its page file;
* :func:`end_view`: the handle's own view ends before it is loaded again;
  a writer rebuilding its tree after a failed write ends every snapshot
  (``SnapshotEndedError`` gives the reason), a reload that keeps them
  (refresh, compact_range, ingest) leaves them their tree;
* :func:`read_snapshot`: a read through a snapshot, on the tree it was taken on.

Each takes the DB and works under its lock (the caller holds it).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from lsmkv.base.errors import CorruptionError, LsmkvError, SnapshotEndedError

from .pager import StaleView
from .readers import ReaderTable
from .recovery import VIEW_ATTEMPTS

if TYPE_CHECKING:
    from .db import DB
    from .snapshot import Snapshot

log = logging.getLogger(__name__)


def pin_view(db: DB) -> list:
    """The record of the tree a new snapshot reads (``db._views``), made if
    it has none. A read-only handle registers its view's checkpoint in the
    reader table first, and keeps it only if that checkpoint is still the
    newest on disk (else the writer may have reused its slots already):
    otherwise it moves to the writer's newest data and tries again
    (btree/readers.py)."""
    view = db._views.get(id(db._tree))
    if view is not None:
        return view
    slot = None
    if db._read_only and db._readers is None and db._readers_unusable is None:
        try:
            db._readers = ReaderTable(db.path, create=False)
        except (OSError, CorruptionError) as exc:
            # (A store on a read-only file system, say: its snapshots
            # last while no writer reuses what they read.)
            db._readers_unusable = str(exc)
            log.warning("%s: snapshots of this read-only handle are not registered in the reader table "
                        "(%s): a writer's checkpoints may end them", db.path, exc)
    if db._read_only and db._readers is not None:
        for attempt in range(VIEW_ATTEMPTS):
            pager = db._pager
            slot = db._readers.register(pager.meta.epoch, pager.file.identity())
            if not pager.overlay and not db._concurrent_checkpoint():
                break
            db._readers.unregister(slot)
            slot = None
            if attempt:
                time.sleep(0.01)
            db._refresh("a snapshot was taken, which reads the writer's newest checkpoint")
        else:
            raise LsmkvError(f"{db.path}: could not register a snapshot while another process kept "
                             "checkpointing; retry")
    view = db._views[id(db._tree)] = [db._tree, 0, slot]
    return view


def drop_view(db: DB, view: list) -> None:
    """The last snapshot of ``view`` closed (or ended): its reader-table
    slot is cleared, and a tree the handle replaced is let go, with its
    page file."""
    tree, _, slot = view
    db._views.pop(id(tree), None)
    if slot is not None and db._readers is not None:
        db._readers.unregister(slot)
    if tree is not db._tree:
        tree.pool.clear()
        if tree.pager is not db._pager:
            tree.pager.close()


def end_snapshot(db: DB, snap: Snapshot) -> None:
    """Close ``snap`` (Snapshot.close): its scan iterators stop, the tree
    lets go of its pre-images, and its view is dropped with its last snapshot."""
    with db._lock:
        if snap._closed:
            return
        snap._closed = True
        for chunk, owner in db._chunks.values():
            if owner is snap:
                chunk.clear()  # stops this snapshot's iterators
        db._live_snaps.pop(snap._id, None)
        tree = snap._source
        if snap._gen == db._view_gen:  # (a rebuild after a failure ended it)
            tree.end_snapshot(snap._id)
            view = db._views.get(id(tree))
            if view is not None:
                view[1] -= 1
                if not view[1]:
                    drop_view(db, view)


def end_view(db: DB, reason: str) -> None:
    """End the handle's view before it is loaded again, and read the meta
    page again. A read-only handle, and a writer whose page file was
    replaced (compact_range, ingest), keep the view for the snapshots and
    cursors that read it, with its page file open (the writer never reuses
    what they read: btree/readers.py); a writer rebuilding its tree after a
    failed write ends them (``reason`` is what they are told)."""
    if db._views and not (db._read_only or db._pager.replaced()):
        db._view_gen += 1
        db._view_reason = reason
        db._live_snaps.clear()
        for view in list(db._views.values()):
            drop_view(db, view)
    if id(db._tree) not in db._views:
        db._pool.clear()
    db._reread_meta()


def read_snapshot(db: DB, fn, args: tuple, snap: Snapshot):
    """``fn(tree, *args)`` on the tree ``snap`` was taken on, which the
    writer keeps whole for it (btree/readers.py); the pool of a tree the
    handle replaced is trimmed after."""
    tree = snap._source
    try:
        result = fn(tree, *args)
    except StaleView:
        # The writer reused slots this view registered: a writer that
        # keeps no reader table (an older lsmkv) checkpointed under it.
        why = (f"this handle could not register it in the reader table ({db._readers_unusable})"
               if db._readers_unusable else "a writer that keeps no reader table?")
        raise SnapshotEndedError(f"the snapshot ended: a writer of {db.path} checkpointed over pages it "
                                 f"reads ({why}); take a new one") from None
    if tree is not db._tree:
        pool = tree.pool
        if len(pool.pages) > pool.capacity:
            pool.trim()
    return result
