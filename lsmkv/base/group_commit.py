"""GroupCommit: the write queue and the log syncer as one database's write path uses them.

Both engines' DB classes own one. It holds the write queue
(write_queue.py) and, once the database has a log, the log syncer
(log_syncer.py), and it is the glue between them and the engine: a write
goes to the queue -- or, with group commit, a ``sync=True`` write to the
syncer -- and the engine's ``append_and_apply(group, sync_now)`` commits
each group the queue hands over. What the engine does with a group (the
log append, the memtable or the tree) is its own; this class knows nothing
of logs, memtables or pages.

* ``write(batch, sync)``: the write returns once its batch is in the log
  and applied (and, for a sync write with group commit, durable, or
  SyncTimeoutError after ``sync_timeout``).
* The group's callback: with group commit, the whole group in one append;
  without, each batch on its own, fsynced if it asked, as if it had come
  alone. With a ``lock`` (btree: the tree's lock), the group is committed
  holding it, after ``check_writable()``.
* A failed log sync stops the database's writes (``on_sync_failure``);
  whatever that raises is dropped, the syncer's waiters hear of the
  failure from the syncer.
* A writer whose group failed raises the group's error: a fresh error of
  the same kind for the errors the write path raises, so that each thread
  gets its own traceback (``raised_again``).

The hot write that finds nobody else writing takes the queue's role
itself (``writes.try_lead()``) and never comes through here.

This module must never commit a group without holding the log writer's
role (the queue gives it), nor swallow a group's error.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Callable

from .errors import BackgroundError, ClosedError, ReadOnlyError
from .log_syncer import LogSyncer
from .timer import Timer
from .write_queue import WriteQueue, Writer


def raised_again(error: BaseException) -> BaseException:
    """The error a queued writer raises when its group failed: a fresh one
    of the same kind for the errors the write path raises (each thread gets
    its own traceback), else the very one."""
    if type(error) in (BackgroundError, ClosedError, ReadOnlyError):
        again = type(error)(*error.args)
        again.__cause__ = error.__cause__
        return again
    return error


class GroupCommit:
    """The write queue and log syncer of one database (see the module docstring).

    ``append_and_apply(group, sync_now)``: the engine's commit of a group of
    Writers (the log append, fsynced if ``sync_now``, then applying each
    batch, setting each writer's ``position`` and ``committed``).
    ``check_writable()``: raises the error a write gets while the database
    takes no writes; called without a log syncer (a read-only handle), and
    before each group when a ``lock`` is given. ``name``: the database's
    path, for messages and thread names."""

    def __init__(self, append_and_apply: Callable[[list[Writer], bool], None], *, group_commit: bool,
                 sync_timeout: float | None, check_writable: Callable[[], None],
                 lock: AbstractContextManager | None = None, name: str) -> None:
        self._append_and_apply = append_and_apply
        self._group_commit = group_commit
        self._sync_timeout = sync_timeout
        self._check_writable = check_writable
        self._lock = lock
        self._name = name
        self._on_sync_failure: Callable[[BaseException], object] | None = None
        #: Writers queue here; the one holding its lock is the log writer.
        self.writes = WriteQueue(self._commit_group if lock is None else self._commit_group_locked)
        #: The log syncer (start_syncer(): once the database has a log).
        self.syncer: LogSyncer | None = None

    def start_syncer(self, sync_log: Callable[[], int], *, on_sync_failure: Callable[[BaseException], object],
                     durable: int, commit_delay: float, timer: Callable[[], Timer]) -> None:
        """Make the log syncer: ``sync_log()`` fsyncs the log and returns the
        position everything before is durable up to; ``on_sync_failure(exc)``
        stops the database's writes; ``durable``: the position durable now."""
        self._on_sync_failure = on_sync_failure
        self.syncer = LogSyncer(sync_log, self.writes.lead, durable=durable, commit_delay=commit_delay,
                                timer=timer, on_failure=self._sync_failed, name=self._name)

    # -- writers ---------------------------------------------------------------------

    def write(self, batch: object, sync: bool) -> None:
        """Hand ``batch`` to the write queue (with group commit, a sync write
        to the log syncer); return once it is in the log and applied (and,
        for a sync write, durable)."""
        if sync and self._group_commit:
            self.write_synced(batch)
            return
        writer = self.writes.write(Writer(batch, sync))
        if writer.error is not None:
            raise raised_again(writer.error)

    def write_synced(self, batch: object) -> None:
        """Hand ``batch`` to the log syncer; return once it is in the log,
        applied, and durable (or raise SyncTimeoutError after sync_timeout)."""
        if self.syncer is None:
            self._check_writable()
        try:
            self.syncer.write(Writer(batch, True), self._sync_timeout)
        except (BackgroundError, ClosedError, ReadOnlyError) as exc:
            raise raised_again(exc)  # the group's error may be another thread's too

    # -- the log writer ---------------------------------------------------------------

    def _commit_group(self, group: list[Writer]) -> None:
        """The log writer's work (write_queue.py): the group's batches go to
        the log in one append, then are applied, in order. Without group
        commit, each batch is appended (and fsynced if it asked) on its own,
        as if it had come alone."""
        if self._group_commit:
            self._append_and_apply(group, False)
        else:
            for writer in group:
                self._append_and_apply([writer], writer.sync)

    def _commit_group_locked(self, group: list[Writer]) -> None:
        with self._lock:
            self._check_writable()
            self._commit_group(group)

    def _sync_failed(self, exc: BaseException) -> None:
        """The log syncer could not sync: the log's tail is not known to be
        durable, so writes stop as after a failed append."""
        try:
            self._on_sync_failure(exc)
        except BaseException:  # noqa: BLE001 - a KeyboardInterrupt-like cause: writes are stopped regardless
            pass

    # -- the database ----------------------------------------------------------------

    def close(self) -> None:
        """Stop the log syncer (its waiters, if any are left, get ClosedError)."""
        if self.syncer is not None:
            self.syncer.close()

    def stats(self) -> dict:
        """The group-commit figures both engines' stats() report: groups the
        write queue committed (a write that found nobody else writing is not
        counted), the writes in them, the largest; fsyncs the log syncer
        did, the sync writes it committed, those waiting for it now, and
        those that timed out."""
        writes, syncer = self.writes, self.syncer
        return {
            "write_groups": writes.groups,
            "grouped_writes": writes.grouped_writes,
            "largest_write_group": writes.largest_group,
            "log_syncs": syncer.syncs if syncer is not None else 0,
            "synced_writes": syncer.writes if syncer is not None else 0,
            "sync_writes_queued": syncer.queued if syncer is not None else 0,
            "sync_timeouts": syncer.timeouts if syncer is not None else 0,
        }
