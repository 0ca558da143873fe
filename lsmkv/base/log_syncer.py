"""LogSyncer: commits sync=True writes in groups and makes the log durable once per group.

Both engines use one (Kafka's Sender, for the write-ahead log). A
``sync=True`` writer hands its batch to the syncer (``write``) and sleeps in
the purgatory (purgatory.py) until its batch is in the log *and* the log is
durable past it -- or until ``sync_timeout`` passes on the timing wheel
(timer.py), whichever comes first. It is woken once.

The syncer's thread loops: it takes every sync write queued (after lingering
``commit_delay`` seconds, 0 by default, like a Kafka producer's linger.ms:
latency traded for larger groups), commits them through the engine's
``commit_group`` -- which takes the log writer's role (write_queue.py) and
appends them, together with any other writes queued there, in one append,
and applies them -- then syncs the log once through the engine's
``sync_log`` (which returns the position everything before is durable up
to) and completes every waiter that position satisfies. Writes without sync
never wait for it: while it fsyncs, they go on appending; the next fsync
covers whatever sync writes queued meanwhile, so one fsync serves a whole
group however many writers are in it.

Invariant (what this class owns): ``durable`` only grows, and only to a
position the engine reported as synced (by ``sync_log``, or by
``mark_durable`` when it synced the log itself: a log switch, a checkpoint,
close). A sync write is applied only if the syncer took it into a group
before its timeout: one that times out while still queued is dropped, never
applied (``SyncTimeoutError.applied`` says which happened). A failed sync is
sticky: every waiter gets a BackgroundError, the engine is told
(``on_failure``: it stops writes), and nothing is reported durable again
until ``reset()`` (resume()) says what is.

The thread and the timer start with the first sync write, so a database
that never syncs pays for neither.

This module must never report a position durable that the engine did not
sync, and never sync on a writer's thread (a stalled disk must not keep a
writer past its timeout).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from typing import Callable

from .errors import BackgroundError, ClosedError, OptionError, SyncTimeoutError
from .purgatory import DelayedOperation, Purgatory
from .timer import Timer
from .write_queue import Writer

log = logging.getLogger(__name__)

#: The one watch key: every sync waiter waits for the same log.
_DURABLE = "log durable"
#: Longest commit_delay accepted, in seconds.
MAX_COMMIT_DELAY = 1.0


def check_sync_options(sync_timeout: object, commit_delay: object) -> None:
    """Validate ``sync_timeout`` and ``commit_delay`` (both engines take them)."""
    if sync_timeout is not None and (isinstance(sync_timeout, bool) or not isinstance(sync_timeout, (int, float))
                                     or not 0 < sync_timeout < math.inf):
        raise OptionError(f"option sync_timeout must be a positive number of seconds or None, got {sync_timeout!r}")
    if (isinstance(commit_delay, bool) or not isinstance(commit_delay, (int, float))
            or not 0 <= commit_delay <= MAX_COMMIT_DELAY):
        raise OptionError(f"option commit_delay must be a number of seconds from 0 to {MAX_COMMIT_DELAY}, "
                          f"got {commit_delay!r}")


class _SyncWrite(DelayedOperation):
    """A sync writer asleep until its batch is committed and durable (or
    failed, or the database closed)."""

    __slots__ = ("writer", "_syncer")

    def __init__(self, timeout: float | None, writer: Writer, syncer: "LogSyncer") -> None:
        super().__init__(timeout)
        self.writer = writer
        self._syncer = syncer

    def condition(self) -> bool:
        w, s = self.writer, self._syncer
        return (w.error is not None or (w.committed and s._durable >= w.position) or s._failure is not None
                or s._closed)


class LogSyncer:
    """The durability stage of one open database (see the module docstring)."""

    def __init__(self, sync_log: Callable[[], int], commit_group: Callable[[list[Writer]], None], *,
                 durable: int, commit_delay: float, timer: Callable[[], Timer],
                 on_failure: Callable[[BaseException], None], name: str) -> None:
        self._sync_log = sync_log
        self._commit_group = commit_group
        self._durable = durable
        self._commit_delay = commit_delay
        self._get_timer = timer
        self._on_failure = on_failure
        self._name = name
        self._cond = threading.Condition()
        #: Sync writers not yet taken into a group.
        self._queue: deque[Writer] = deque()
        self._failure: BaseException | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        #: The syncer thread waits for writers (a new one must notify it).
        self._idle = False
        self._purgatory: Purgatory | None = None
        #: Syncs done by the thread, sync writes committed through it, and
        #: sync writes that timed out (applied, or dropped while queued).
        self.syncs = 0
        self.writes = 0
        self.timeouts = 0

    @property
    def durable(self) -> int:
        """The log is durable up to this position."""
        return self._durable

    @property
    def queued(self) -> int:
        """Sync writes waiting for the syncer to take them into a group."""
        return len(self._queue)

    # -- writers ---------------------------------------------------------------------

    def write(self, writer: Writer, timeout: float | None) -> None:
        """Commit ``writer``'s batch in the next group and return once the
        log is durable past it. Raises SyncTimeoutError after ``timeout``
        seconds (None: no limit), the group's error if committing it failed,
        BackgroundError if the sync failed, ClosedError if the database
        closed first."""
        op = _SyncWrite(timeout, writer, self)
        writer.pending = True
        with self._cond:
            if self._closed:
                raise ClosedError(f"{self._name}: database is closed")
            self._queue.append(writer)
            if self._thread is None:
                self._start()
            if self._idle:
                self._cond.notify()
        if not self._watch(op):
            op.wait()
        error = self._outcome(op)
        if error is not None:
            raise error

    def _watch(self, op: _SyncWrite) -> bool:
        purgatory = self._purgatory
        if purgatory is None:
            with self._cond:
                if self._purgatory is None:
                    self._purgatory = Purgatory(self._get_timer(), name=f"{self._name} sync writes")
                purgatory = self._purgatory
        return purgatory.try_complete_else_watch(op, (_DURABLE,))

    def _outcome(self, op: _SyncWrite) -> BaseException | None:
        """None if the write is committed and durable, else what its writer raises."""
        w = op.writer
        if w.error is not None:
            return w.error
        if w.committed and self._durable >= w.position:
            return None
        if op.expired:
            self.timeouts += 1
            with self._cond:
                # Still queued: the syncer must never take it now.
                taken = w.taken
                w.done = True
            if not taken:
                return SyncTimeoutError(
                    f"{self._name}: the write waited sync_timeout={op.timeout} s for its turn (the log syncer "
                    "was still busy with an earlier group: a slow or stalled disk) and was not applied; "
                    "nothing of it will be written (docs/reliability.md)", None, applied=False)
            return SyncTimeoutError(
                f"{self._name}: the log was not confirmed durable within sync_timeout={op.timeout} s; the write "
                "was applied and handed to the OS (a process crash does not lose it), but a power loss or OS "
                "crash before the log's next successful sync may; it is not rolled back "
                "(docs/reliability.md)", w.position or None, applied=True)
        if self._failure is not None:
            error = BackgroundError(
                f"{self._name}: syncing the log failed ({self._failure}); the write was applied but is not "
                "known to be durable, and writes are stopped: call db.resume() once the cause is fixed")
            error.__cause__ = self._failure
            return error
        return ClosedError(f"{self._name}: database closed before the write was confirmed durable")

    # -- the engine --------------------------------------------------------------------

    def mark_durable(self, position: int) -> None:
        """The engine synced the log up to ``position`` itself."""
        with self._cond:
            if position > self._durable and self._failure is None:
                self._durable = position
        self._complete_waiters()

    def reset(self, durable: int) -> None:
        """After resume(): forget the failure; everything up to ``durable`` is durable."""
        with self._cond:
            self._failure = None
            self._durable = max(self._durable, durable)
        self._complete_waiters()

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def close(self) -> None:
        """Stop the thread; writers still waiting (after the engine's final
        sync, only those never committed) get ClosedError."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._complete_waiters()

    def _complete_waiters(self) -> None:
        if self._purgatory is not None:
            self._purgatory.check_and_complete(_DURABLE)

    # -- the syncer thread ----------------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"lsmkv-log-sync:{self._name}", daemon=True)
        self._thread.start()

    def _take_group(self) -> list[Writer] | None:
        """Wait for sync writers (and linger); take them all. None at close."""
        cond = self._cond
        with cond:
            while not self._closed and not self._queue:
                self._idle = True
                cond.wait()
                self._idle = False
            if self._closed:
                return None
            if self._commit_delay:
                cond.wait_for(lambda: self._closed, self._commit_delay)
                if self._closed:
                    return None
            group = []
            queue = self._queue
            while queue:
                w = queue.popleft()
                if not w.done:  # not timed out while queued
                    w.taken = True
                    group.append(w)
            return group

    def _run(self) -> None:
        while True:
            group = self._take_group()
            if group is None:
                return
            if group:
                try:
                    self._commit_group(group)
                except BaseException as exc:  # noqa: BLE001 - each writer not committed raises it
                    for w in group:
                        if not w.committed and w.error is None:
                            w.error = exc
                self.writes += sum(1 for w in group if w.committed)
            if any(w.committed for w in group) and self._failure is None:
                try:
                    position = self._sync_log()
                except BaseException as exc:  # noqa: BLE001 - every waiter and the engine must hear of it
                    self._fail(exc)
                    continue
                self.syncs += 1
                self.mark_durable(position)
            else:
                self._complete_waiters()

    def _fail(self, exc: BaseException) -> None:
        log.error("%s: syncing the log failed: %r", self._name, exc)
        with self._cond:
            self._failure = exc
        try:
            self._on_failure(exc)
        finally:
            self._complete_waiters()

