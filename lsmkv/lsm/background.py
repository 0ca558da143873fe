"""The LSM engine's background work besides compaction: the flush thread, and the compactor's ttl wake-up.

RocksDB schedules this in db_impl_compaction_flush.cc. :class:`FlushThread`
writes immutable memtables to level-0 tables, oldest first, one at a time;
it idles while writes are stopped (resume() wakes it) and exits at close,
after the queued flushes unless writes are stopped. ``flush()``,
``checkpoint()`` and ``ingest()`` wait on it (``wait_until_flushed``) and
resume() waits for its job to end (``wait_idle``). :class:`TtlWakeup`
wakes the compactor, on the timing wheel, when the earliest ttl deadline of
the tables passes, so the space of expired values comes back without
writes. Compactions themselves run in the compactor (compactor.py).

Both get what they need from the DB (db.py) as callables, as the compactor
gets its CompactionHost, and never see the DB. The flush thread's job --
writing the table, recording it in the manifest, publishing the Version
without the memtable -- is the DB's ``flush(imm)``; a job's failure goes to
``failed("flush", exc)``, which stops writes; nothing here swallows one.
"""

from __future__ import annotations

import threading
from typing import Callable

from lsmkv.base.timer import Timer

from .compaction import earliest_deadline
from .memtable import MemTable
from .version import Version


class FlushThread:
    """The thread that writes immutable memtables to tables.

    ``cond`` is the DB's background condition: every callable is read
    under it and the thread waits on it. ``oldest_immutable()`` is the
    immutable memtable to flush next (None: none waits), ``error()`` the
    error that stopped writes (None while they go on), ``shutting_down()``
    true once close() began. ``busy`` is true while a job runs (read and
    changed under ``cond``)."""

    def __init__(self, name: str, cond: threading.Condition, oldest_immutable: Callable[[], MemTable | None],
                 error: Callable[[], BaseException | None], shutting_down: Callable[[], bool],
                 flush: Callable[[MemTable], None], failed: Callable[[str, BaseException], None]) -> None:
        self._cond = cond
        self._oldest_immutable = oldest_immutable
        self._error = error
        self._shutting_down = shutting_down
        self._flush = flush
        self._failed = failed
        self.busy = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        """Wait for the thread to exit (the DB set shutting_down and notified ``cond``)."""
        self._thread.join()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while ((self._oldest_immutable() is None or self._error() is not None)
                       and not self._shutting_down()):
                    cond.wait()
                imm = self._oldest_immutable()
                if imm is None or self._error() is not None:
                    return
                self.busy = True
            try:
                self._flush(imm)
            except BaseException as exc:  # noqa: BLE001 - any failure stops writes
                self._failed("flush", exc)
            finally:
                with cond:
                    self.busy = False
                    cond.notify_all()

    def wait_until_flushed(self) -> BaseException | None:
        """Wait until no immutable memtable waits and no job runs, or writes
        stop; returns the error that stopped them (read under ``cond``), or None."""
        with self._cond:
            while (self._oldest_immutable() is not None or self.busy) and self._error() is None:
                self._cond.wait()
            return self._error()

    def wait_idle(self) -> None:
        """Wait until no job runs (resume(), with writes stopped: no new one starts)."""
        with self._cond:
            while self.busy:
                self._cond.wait()


class TtlWakeup:
    """Wakes the compactor (``wake()``) on the timing wheel ``timer()`` when
    the earliest ttl deadline of a Version's tables passes (pick_expired
    then finds the table). ``clock()``: seconds since the Unix epoch, the
    clock deadlines are judged by."""

    def __init__(self, timer: Callable[[], Timer], clock: Callable[[], float], wake: Callable[[], None]) -> None:
        self._timer = timer
        self._clock = clock
        self._wake = wake
        self._lock = threading.Lock()
        #: The timer entry of the wake-up, and its deadline (ms; 0: none).
        self._handle = None
        self._deadline = 0

    def schedule(self, version: Version) -> None:
        """Wake the compactor at ``version``'s earliest deadline (replacing
        the wake-up of an earlier Version, unless the deadline is the same)."""
        deadline = earliest_deadline(version)
        with self._lock:
            if deadline == self._deadline:
                return
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            self._deadline = deadline
        if deadline:
            delay = max(0.0, deadline / 1000.0 - self._clock()) + 0.001
            handle = self._timer().schedule(delay, self._passed)
            with self._lock:
                self._handle = handle

    def _passed(self) -> None:
        with self._lock:
            self._deadline = 0
        self._wake()
