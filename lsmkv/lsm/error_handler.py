"""The LSM engine's error state: writes stopped after a failure, and resume()'s commit step.

RocksDB keeps this in error_handler.cc. A failed log append or sync, flush
or compaction stops writes (reads go on): :class:`ErrorHandler` keeps the
first such failure as the background error, every later write raises a
BackgroundError naming it, and the flush thread and the compactor idle
(they read ``error`` under the DB's background condition, which every
change here notifies). ``resume()`` leaves that state once the cause is
gone: with writers, flushes and compactions held off by the DB (db.py),
:func:`flush_to_fresh_manifest` writes every memtable (they hold exactly
the acknowledged writes) to a level-0 table and records them and a fresh
log in a fresh manifest in one step, so the log whose tail is unknown
becomes obsolete and a write that failed never reappears;
:meth:`ErrorHandler.resume` clears the error only once that step has
succeeded.

Never clear the error unless the new manifest that makes the old log
obsolete is written.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, NoReturn

from lsmkv.base.errors import BackgroundError

from .memtable import MemTable
from .version import FileMeta, VersionEdit, VersionSet
from .wal import LogWriter

#: What the error handler logs goes out under the DB's logger name.
log = logging.getLogger("lsmkv.lsm.db")


class ErrorHandler:
    """The background error of one DB: None while writes go on, else the
    failure that stopped them. ``cond`` is the DB's background condition;
    the error changes under it and its waiters are woken. ``resumes``
    counts successful resume() calls (``stats()["resumes"]``)."""

    __slots__ = ("path", "_cond", "error", "resumes")

    def __init__(self, path: str, cond: threading.Condition) -> None:
        self.path = path
        self._cond = cond
        self.error: BaseException | None = None
        self.resumes = 0

    def keep(self, exc: BaseException) -> None:
        """Keep ``exc`` as the error unless one is kept already (the first
        failure is the cause). The caller holds ``cond``."""
        if self.error is None:
            self.error = exc

    def stop_writes(self, what: str, exc: BaseException) -> None:
        """A background job (``what``: a flush, a compaction) failed: stop writes."""
        log.error("%s: %s failed; writes are stopped until resume(): %r", self.path, what, exc)
        with self._cond:
            self.keep(exc)
            self._cond.notify_all()

    def fail_writes(self, what: str, exc: BaseException) -> BaseException:
        """Writing the log failed: its tail is unknown (the failed record may
        be partly or wholly in it), so refuse further writes (reads go on)
        until resume() replaces the log, or a reopen. Returns the error the
        failing call raises: a BackgroundError naming the cause (a
        KeyboardInterrupt or the like propagates as it is)."""
        log.error("%s: %s failed, writes stopped: %r", self.path, what, exc)
        with self._cond:
            self.keep(exc)
            self._cond.notify_all()
        if not isinstance(exc, Exception):
            raise exc
        return BackgroundError(f"{self.path}: {what} failed ({exc}); the write was not applied and writes are "
                               "stopped: call db.resume() once the cause is fixed (reads keep working)")

    def raise_stopped(self) -> NoReturn:
        """Raise the error a write gets while writes are stopped."""
        raise BackgroundError(f"{self.path}: writes are stopped after an earlier failure ({self.error}); "
                              "call db.resume() once the cause is fixed, or reopen (reads keep working)") \
            from self.error

    def raise_failed(self, what: str, exc: BaseException) -> NoReturn:
        """Raise the error a call that waited for ``what`` (a flush, a
        compaction) gets when ``exc`` stopped writes."""
        raise BackgroundError(f"{self.path}: {what} failed ({exc}); writes are stopped: call "
                              "db.resume() once the cause is fixed (reads keep working)") from exc

    def resume(self, restart: Callable[[], None]) -> None:
        """Run ``restart`` (resume()'s work; the caller holds writers,
        flushes and compactions off) and clear the error once it succeeded.
        If it raises, its failure becomes the error and a BackgroundError
        naming it is raised: writes stay stopped."""
        try:
            restart()
        except BaseException as exc:
            log.error("%s: resume failed, writes stay stopped: %r", self.path, exc)
            with self._cond:
                self.error = exc
            if not isinstance(exc, Exception):
                raise
            raise BackgroundError(f"{self.path}: resume failed ({exc}); writes stay stopped: call "
                                  "db.resume() again once the cause is fixed") from exc
        with self._cond:
            self.error = None
            self.resumes += 1
            self._cond.notify_all()


def flush_to_fresh_manifest(versions: VersionSet, memtables: tuple[MemTable, ...], last_sequence: int,
                            write_level0: Callable[[MemTable], FileMeta | None],
                            create_log: Callable[[int], LogWriter], manifest_lock: threading.Lock,
                            pending_outputs: set[int]) -> tuple[int, LogWriter]:
    """resume()'s commit step: write ``memtables`` (oldest first) to level-0
    tables, create a new log, and write a fresh manifest recording both
    (and the memtables' metadata entries) with ``last_sequence``. Returns
    the new log's number and writer; the caller makes it the log. On
    failure the new log is abandoned and the tables written stay on disk
    unrecorded (the next sweep after a success removes them)."""
    edit = VersionEdit()
    written = []
    try:
        for mem in memtables:
            edit.meta.update(mem.meta)
            if len(mem):
                meta = write_level0(mem)
                if meta is not None:
                    edit.add_file(0, meta)
                    written.append(meta.number)
        number = versions.new_file_number()
        new_log = create_log(number)
        try:
            edit.log_number = number
            edit.last_sequence = last_sequence
            with manifest_lock:
                # Also makes the new log's name durable (it syncs the directory).
                versions.write_new_manifest(edit)
        except BaseException:
            new_log.abandon()
            raise
    finally:
        # Tables a failed attempt wrote stay on disk (the manifest CURRENT
        # names may hold them); sweeps after the next success remove them.
        pending_outputs.difference_update(written)
    return number, new_log
