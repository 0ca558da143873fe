"""Purgatory: operations parked until their condition holds or their time is up.

A :class:`DelayedOperation` waits for something (the log to be durable past
a sequence number, say). It is *watched* under one or more keys; whoever
makes progress on a key calls ``check_and_complete(key)``, which completes
every operation watched there whose condition now holds. An operation not
completed within its timeout *expires*: a timer on the timing wheel
(timer.py) completes it as expired.

Invariant (what this module owns): an operation is in a watch list exactly
while it is pending. Completing it -- by its condition through any of its
keys, by expiry, or by ``force_complete`` -- unlinks it from every watch list
at once and cancels its timer, in O(number of its keys); a watch list left
empty is dropped with its key. So completed operations never pile up and no
reaper ever scans for them (Kafka's purgatory, before its timing wheel,
needed one).

Completion happens exactly once; ``wait()`` blocks until it has. Conditions
are called without the purgatory's lock and must not block.

This module must never hold its lock while calling a condition or a
completion hook, and never leave a completed operation in a watch list.
"""

from __future__ import annotations

import threading
from typing import Callable, Hashable, Iterable

from .timer import Timer, TimerHandle


class DelayedOperation:
    """An operation that completes when ``condition()`` holds, or expires
    after ``timeout`` seconds (None: never). Subclass and override
    ``condition`` (or pass one), and ``on_complete`` for work to do when it
    completes either way."""

    __slots__ = ("timeout", "_condition", "_completed", "expired", "error", "_watches", "_timer",
                 "_done", "_purgatory")

    def __init__(self, timeout: float | None, condition: Callable[[], bool] | None = None) -> None:
        self.timeout = timeout
        self._condition = condition
        self._completed = False
        #: True when the timeout completed it (False: its condition, or force_complete).
        self.expired = False
        #: The exception ``force_complete(error=...)`` completed it with, if any.
        self.error: BaseException | None = None
        #: (watch list, key) pairs it is linked into while pending.
        self._watches: list[tuple[dict, Hashable]] = []
        self._timer: TimerHandle | None = None
        self._done = threading.Lock()
        self._done.acquire()
        self._purgatory: Purgatory | None = None

    def condition(self) -> bool:
        """Whether the operation can complete now (must be quick and not block)."""
        if self._condition is None:
            return False
        return self._condition()

    def on_complete(self) -> None:
        """Called once, when it completes (by its condition, by expiry or by
        force_complete); ``expired`` and ``error`` say how."""

    @property
    def completed(self) -> bool:
        return self._completed

    def wait(self, timeout: float | None = None) -> bool:
        """Block until it has completed (its hook has run); False if
        ``timeout`` seconds (real time) passed first."""
        if self._completed and not self._done.locked():
            return True
        if not self._done.acquire(timeout=-1 if timeout is None else timeout):
            return False
        self._done.release()
        return True

    def force_complete(self, error: BaseException | None = None) -> bool:
        """Complete it now (with ``error`` recorded, if given), whatever its
        condition says. False if it was completed already."""
        purgatory = self._purgatory
        if purgatory is None:
            if self._completed:
                return False
            self._completed = True
            self.error = error
            self._finish()
            return True
        return purgatory._complete(self, expired=False, error=error)

    def _finish(self) -> None:
        try:
            self.on_complete()
        finally:
            self._done.release()


class Purgatory:
    """Watch lists of delayed operations by key, with expiry on ``timer``."""

    def __init__(self, timer: Timer, name: str = "purgatory") -> None:
        self.name = name
        self._timer = timer
        self._lock = threading.Lock()
        #: key -> {operation: None}: an insertion-ordered set, O(1) removal.
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        #: Operations watched and not completed.
        self._pending = 0
        #: Counters: completed by condition (or force_complete), expired.
        self.completed = 0
        self.expired = 0

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if its condition holds (True); otherwise watch
        it under every key in ``keys`` and start its timeout (False). The
        condition is checked again after watching, so a check_and_complete()
        that ran in between is never missed."""
        keys = list(keys)
        if not keys:
            raise ValueError("an operation must be watched under at least one key")
        if op._purgatory is not None or op._completed:
            raise ValueError("this operation was handed to a purgatory already")
        op._purgatory = self
        if op.condition():
            return self._complete(op, expired=False, watched=False)
        with self._lock:
            watchers = self._watchers
            for key in keys:
                watch_list = watchers.get(key)
                if watch_list is None:
                    watch_list = watchers[key] = {}
                watch_list[op] = None
                op._watches.append((watch_list, key))
            self._pending += 1
        if op.condition():
            return self._complete(op, expired=False)
        if op.timeout is None:
            return False  # waits for its condition however long it takes
        handle = self._timer.schedule(op.timeout, lambda: self._complete(op, expired=True))
        op._timer = handle
        if op._completed:
            handle.cancel()  # completed while the timer was being set
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Complete every operation watched under ``key`` whose condition
        holds (removing each from all of its watch lists); returns how many."""
        with self._lock:
            watch_list = self._watchers.get(key)
            if not watch_list:
                return 0
            candidates = list(watch_list)
        ready = [op for op in candidates if not op._completed and op.condition()]
        if not ready:
            return 0
        # One pass under the lock for all of them (a group commit completes
        # a whole group of sync writers at once), then their hooks.
        with self._lock:
            ready = [op for op in ready if self._mark_completed(op, False, None, True)]
        for op in ready:
            handle = op._timer
            if handle is not None:
                handle.cancel()
            op._finish()
        return len(ready)

    def _complete(self, op: DelayedOperation, *, expired: bool, error: BaseException | None = None,
                  watched: bool = True) -> bool:
        """Complete ``op`` once: unlink it from every watch list, cancel its
        timer, run its hook. False if something else completed it first."""
        with self._lock:
            if not self._mark_completed(op, expired, error, watched):
                return False
        handle = op._timer
        if handle is not None and not expired:
            handle.cancel()
        op._finish()
        return True

    def _mark_completed(self, op: DelayedOperation, expired: bool, error: BaseException | None,
                        watched: bool) -> bool:
        """Under the lock: mark ``op`` completed and unlink it from every
        watch list; False if it was completed already."""
        if op._completed:
            return False
        op._completed = True
        op.expired = expired
        op.error = error
        watchers = self._watchers
        for watch_list, key in op._watches:
            del watch_list[op]
            if not watch_list and watchers.get(key) is watch_list:
                del watchers[key]
        op._watches = []
        if watched:
            self._pending -= 1
        if expired:
            self.expired += 1
        else:
            self.completed += 1
        return True

    def cancel_key(self, key: Hashable, error: BaseException | None = None) -> int:
        """Complete every operation watched under ``key`` at once, as by
        force_complete(error) (a shutdown, say); returns how many."""
        with self._lock:
            candidates = list(self._watchers.get(key, ()))
        return sum(self._complete(op, expired=False, error=error) for op in candidates)

    def watched(self) -> int:
        """Entries in all watch lists (an operation under two keys counts twice)."""
        with self._lock:
            return sum(len(w) for w in self._watchers.values())

    def keys(self) -> list[Hashable]:
        """Keys with at least one pending operation."""
        with self._lock:
            return list(self._watchers)

    @property
    def pending(self) -> int:
        """Operations watched and not yet completed."""
        return self._pending
