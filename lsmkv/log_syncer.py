"""LogSyncer: makes the write-ahead log durable on request, for a whole group at once.

Both engines use one. After a group of writes is appended to the log (the
write queue, write_queue.py), a ``sync=True`` writer needs the log durable
past its *position* (the LSM's sequence number, the B+tree's LSN). It asks
the syncer (``request``) and waits in the purgatory (purgatory.py) until
the durable position reaches its own, or until ``sync_timeout`` passes on
the timing wheel (timer.py), whichever comes first.

The syncer's thread (Kafka's Sender, for the log) waits for requests; each
time, it waits ``commit_delay`` seconds (0 by default: linger, as the
producer's linger.ms, trading latency for larger groups), then syncs the
log once through the engine's ``sync_log`` callback, which returns the
position everything up to is now durable, and completes every waiter that
position satisfies. Writers keep appending while it syncs; the next sync
covers all of them: one fsync per group, however many sync writers are in
it. A writer never waits for a sync it does not need (its position may be
durable already: then it returns at once).

Invariant (what this class owns): ``durable`` only grows, and only to a
position the engine reported as synced (by ``sync_log`` or
``mark_durable``, when it synced the log itself: a log switch, a
checkpoint, close). A failed sync is sticky: every waiter gets a
BackgroundError, the engine is told (``on_failure``: it stops writes), and
nothing is reported durable again until ``reset()`` (resume()) says what is.

Threads: the syncer thread and the timer (for timeouts) start on the first
sync request, so a database that never syncs pays for neither.

This module must never report a position durable that the engine did not
sync, and never call ``sync_log`` from a writer's thread (a stalled disk
must not keep a writer past its timeout).
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Callable

from .errors import BackgroundError, ClosedError, OptionError, SyncTimeoutError
from .purgatory import DelayedOperation, Purgatory
from .timer import Timer

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


class _DurableWait(DelayedOperation):
    """A sync writer waiting for the log to be durable past ``position``."""

    __slots__ = ("position", "_syncer")

    def __init__(self, timeout: float | None, position: int, syncer: "LogSyncer") -> None:
        super().__init__(timeout)
        self.position = position
        self._syncer = syncer

    def condition(self) -> bool:
        s = self._syncer
        return s._durable >= self.position or s._failure is not None or s._closed


class LogSyncer:
    """The log's durability stage for one open database (see the module docstring)."""

    def __init__(self, sync_log: Callable[[], int], *, durable: int, commit_delay: float,
                 timer: Callable[[], Timer], on_failure: Callable[[BaseException], None], name: str) -> None:
        self._sync_log = sync_log
        self._durable = durable
        self._requested = durable
        self._commit_delay = commit_delay
        self._get_timer = timer
        self._on_failure = on_failure
        self._name = name
        self._cond = threading.Condition()
        self._failure: BaseException | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._purgatory: Purgatory | None = None
        #: Syncs done by the thread, sync waits that had to wait, and of those, timeouts.
        self.syncs = 0
        self.waits = 0
        self.timeouts = 0

    @property
    def durable(self) -> int:
        """The log is durable up to this position."""
        return self._durable

    # -- writers ---------------------------------------------------------------------

    def request(self, position: int) -> None:
        """Ask for the log to be synced past ``position`` (soon; not waiting)."""
        if position <= self._requested:
            return
        with self._cond:
            if position > self._requested:
                self._requested = position
                if self._thread is None and not self._closed:
                    self._start()
                self._cond.notify()

    def wait_durable(self, position: int, timeout: float | None) -> None:
        """Return once the log is durable past ``position``. Raises
        SyncTimeoutError after ``timeout`` seconds (None: wait as long as it
        takes), BackgroundError if a sync failed, ClosedError if the database
        closed first."""
        if self._durable >= position:
            return
        self.request(position)
        op = _DurableWait(timeout, position, self)
        if not self._watch(op):
            op.wait()
        if self._durable >= position:
            return
        if op.expired:
            self.timeouts += 1
            raise SyncTimeoutError(
                f"{self._name}: the log was not confirmed durable within sync_timeout={timeout} s; the write "
                "was applied and handed to the OS (a process crash does not lose it), but a power loss or OS "
                "crash before the log's next successful sync may; it is not rolled back "
                "(docs/reliability.md)", position)
        if self._failure is not None:
            raise BackgroundError(
                f"{self._name}: syncing the log failed ({self._failure}); the write was applied but is not "
                "known to be durable, and writes are stopped: call db.resume() once the cause is fixed") \
                from self._failure
        raise ClosedError(f"{self._name}: database closed before the write was confirmed durable")

    def _watch(self, op: _DurableWait) -> bool:
        purgatory = self._purgatory
        if purgatory is None:
            with self._cond:
                if self._purgatory is None:
                    self._purgatory = Purgatory(self._get_timer(), name=f"{self._name} sync waits")
                purgatory = self._purgatory
        self.waits += 1
        return purgatory.try_complete_else_watch(op, (_DURABLE,))

    # -- the engine --------------------------------------------------------------------

    def mark_durable(self, position: int) -> None:
        """The engine synced the log up to ``position`` itself."""
        with self._cond:
            if position > self._durable and self._failure is None:
                self._durable = position
            if self._requested < self._durable:
                self._requested = self._durable
        if self._purgatory is not None:
            self._purgatory.check_and_complete(_DURABLE)

    def reset(self, durable: int) -> None:
        """After resume(): forget the failure; everything up to ``durable`` is durable."""
        with self._cond:
            self._failure = None
            self._durable = max(self._durable, durable)
            self._requested = max(self._requested, self._durable)
        if self._purgatory is not None:
            self._purgatory.check_and_complete(_DURABLE)

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def close(self) -> None:
        """Stop the thread; waiters still pending get ClosedError (after a
        final sync, which the engine reports through mark_durable, none are)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self._purgatory is not None:
            self._purgatory.check_and_complete(_DURABLE)

    # -- the syncer thread ----------------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"lsmkv-log-sync:{self._name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._closed and (self._requested <= self._durable or self._failure is not None):
                    cond.wait()
                if self._closed:
                    return
                if self._commit_delay:
                    # Linger: writers arriving meanwhile share this sync.
                    cond.wait_for(lambda: self._closed, self._commit_delay)
                    if self._closed:
                        return
            try:
                position = self._sync_log()
            except BaseException as exc:  # noqa: BLE001 - every waiter and the engine must hear of it
                self._fail(exc)
                continue
            self.syncs += 1
            self.mark_durable(position)

    def _fail(self, exc: BaseException) -> None:
        log.error("%s: syncing the log failed: %r", self._name, exc)
        with self._cond:
            self._failure = exc
        try:
            self._on_failure(exc)
        finally:
            if self._purgatory is not None:
                self._purgatory.check_and_complete(_DURABLE)
