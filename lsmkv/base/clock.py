"""Clocks for the timer: the monotonic system clock, and a manual clock for tests.

A clock answers two questions: what time it is (``now_ns``, an integer count
of nanoseconds on a clock that never goes backwards) and how to wait for a
moment (``wait``). The timer (timer.py) asks nothing else of time, so a test
swaps in :class:`ManualClock` and moves time forward by hand: timers then
fire exactly when the test says, however slow or loaded the machine is.

This module must never read the wall clock (``time.time``): deadlines of
timers are durations from now, not dates. (TTL deadlines are dates; they live
with the values they expire, see docs/formats.md.)
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class Clock:
    """Interface: ``now_ns`` and ``wait``; ``subscribe`` lets a waiter learn
    that time moved by other means than passing (only manual clocks do that)."""

    def now_ns(self) -> int:
        raise NotImplementedError

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None:
        """Wait on ``cond`` (held by the caller) until notified or, at the
        latest, until ``timeout_ns`` nanoseconds of this clock have passed
        (None: until notified). May return early; callers re-check."""
        raise NotImplementedError

    def subscribe(self, wake: Callable[[], None]) -> None:
        """Call ``wake()`` whenever this clock jumps (system clocks never do)."""

    def unsubscribe(self, wake: Callable[[], None]) -> None:
        pass


class SystemClock(Clock):
    """``time.monotonic_ns``: immune to changes of the date."""

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None:
        cond.wait(None if timeout_ns is None else timeout_ns / 1e9)


class ManualClock(Clock):
    """A clock that stands still until ``advance`` moves it (tests).

    Waiting on it never ends by itself: a timer on a manual clock fires only
    when the test advances the clock past the timer's deadline."""

    def __init__(self, start_ns: int = 0) -> None:
        self._now = start_ns
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[], None]] = []

    def now_ns(self) -> int:
        return self._now

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None:
        # Time passes only in advance(), which wakes every subscriber; a
        # bounded real wait guards against a missed wake-up all the same.
        cond.wait(0.5)

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0) and wake every waiter."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back (advance by {seconds!r})")
        self.advance_ns(round(seconds * 1e9))

    def advance_ns(self, ns: int) -> None:
        if ns < 0:
            raise ValueError(f"a clock cannot go back (advance by {ns!r} ns)")
        with self._lock:
            self._now += ns
            subscribers = list(self._subscribers)
        for wake in subscribers:
            wake()

    def subscribe(self, wake: Callable[[], None]) -> None:
        with self._lock:
            self._subscribers.append(wake)

    def unsubscribe(self, wake: Callable[[], None]) -> None:
        with self._lock:
            if wake in self._subscribers:
                self._subscribers.remove(wake)


#: The clock timers use unless given another.
SYSTEM_CLOCK = SystemClock()
