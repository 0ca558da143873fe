"""Error handling: what a writable btree handle does when a write, a
checkpoint or a vacuum fails, and how it resumes.

This module owns the handle's failure protocol (docs/reliability.md):

* :func:`fail`: a failure stops writes (reads go on) and is remembered --
  the first one is the one ``stats()`` and later writes name. The failing
  call raises a BackgroundError saying whether its write stands. When the
  failure cut short a change of the tree in memory, the tree is rebuilt at
  once from the disk and the log records before the failed one;
* :func:`rebuild_tree`: that rebuild (also after a vacuum renamed a new
  page file into place): after a failure the handle's snapshots and
  cursors end; after a vacuum they read on in the old file;
* :func:`resume_writes`: once the cause is gone, the page file is made to hold
  one whole checkpoint again, a checkpoint of the tree in memory (exactly
  the acknowledged writes) is written with an LSN past everything the old
  log holds, and a fresh log starts, so a write that failed never
  reappears.

The state it keeps lives on the DB (``_failed``, ``_tree_lost``,
``_replay_until``, ``_resumes``, and the ``_writable``/``_usable`` flags
the hot paths test); these functions are the only ones that change it.
They never swallow a KeyboardInterrupt or the like: those are raised as
they are, after writes are stopped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsmkv.base.errors import BackgroundError, ClosedError, ReadOnlyError

from .snapshot_views import end_view
from .wal import LOG_HEADER_SIZE, LogWriter

if TYPE_CHECKING:
    from .db import DB

log = logging.getLogger(__name__)


def fail(db: DB, what: str, exc: BaseException, *, applied: bool = False,
         replay_until: int | None = None) -> BaseException:
    """Stop writes after ``what`` failed with ``exc``; return the error
    the failing call raises (a KeyboardInterrupt or the like is raised as
    it is). ``applied``: the write itself was logged and applied (a
    checkpoint after it failed). ``replay_until``: the failure cut short
    a change of the tree in memory, whose record starts at that LSN: the
    tree is rebuilt from the disk and the log before it at once."""
    log.error("btree %s: %s failed, writes stopped until resume(): %r", db.path, what, exc)
    if db._failed is None:
        db._failed = exc
    db._writable = False
    if replay_until is not None:
        db._tree_lost = True
        db._usable = False
        db._replay_until = replay_until
        try:
            rebuild_tree(db, f"{what} failed, so the tree was rebuilt from the disk")
        except Exception as again:  # noqa: BLE001 - resume() retries it
            log.error("btree %s: reloading the tree failed too: %r", db.path, again)
    if not isinstance(exc, Exception):
        raise exc
    outcome = ("nothing acknowledged is lost (it is in the log), but" if applied
               else "the write was not applied and")
    return BackgroundError(f"the btree database {db.path}: {what} failed ({exc}); {outcome} writes are "
                           "stopped: call db.resume() once the cause is fixed (reads keep working)")


def rebuild_tree(db: DB, reason: str) -> None:
    """Rebuild the tree in memory from the last checkpoint and the log
    records before ``db._replay_until`` (the acknowledged writes). Live
    snapshots end unless the page file was replaced (btree/snapshot_views.py: end_view);
    ``reason`` is what they are told."""
    replayed = db._replayed
    end_view(db, reason)
    db._load_state(replay_until=db._replay_until)
    db._replayed = replayed
    db._fill_cache = None
    db._tree_lost = False
    db._usable = True


def resume_writes(db: DB) -> None:
    """Leave the error state once the cause of a failure is gone (see
    DB.resume). Called with ``db._lock`` held."""
    if db._closed:
        raise ClosedError(f"the btree database {db.path} is closed")
    if db._read_only:
        raise ReadOnlyError(f"the btree database {db.path} was opened with read_only=True; "
                            "there is nothing to resume")
    if db._failed is None:
        return
    fs = db._fs
    wal = db._log
    try:
        if db._tree_lost:
            rebuild_tree(db, f"resume() rebuilt the tree from the disk after a failure ({db._failed})")
        db._pager.prepare_retry()
        end = max(wal.end_lsn, wal.base_lsn + fs.file_size(wal.file.path) - LOG_HEADER_SIZE)
        db._write_checkpoint(end)
        new_log = LogWriter.create(fs, wal.file.path, end, db.path)
        with db._log_sync_lock:
            db._log = new_log
    except BaseException as exc:
        log.error("btree %s: resume failed, writes stay stopped: %r", db.path, exc)
        db._failed = exc
        if not isinstance(exc, Exception):
            raise
        raise BackgroundError(f"the btree database {db.path}: resume failed ({exc}); writes stay "
                              "stopped: call db.resume() again once the cause is fixed") from exc
    db._log_bytes_done += wal.bytes_written
    try:
        wal.close()
    except OSError:
        pass  # the old log is replaced already
    db._failed = None
    db._writable = True
    db._log_pending = 0
    db._resumes += 1
    # The checkpoint holds every write the tree holds.
    db._commits.syncer.reset(end)
    log.info("btree %s: resumed writes", db.path)
