"""Timer: a hierarchical timing wheel (Varghese and Lauck's scheme 7).

This is the design of Kafka's TimingWheel/SystemTimer. ``schedule(delay,
callback)`` costs O(levels), ``handle.cancel()`` O(1), and time that passes
with nothing due costs nothing:

* A *wheel* is a ring of ``wheel_size`` buckets, each one ``tick`` wide; it
  holds the timers due within ``tick * wheel_size`` of its current time. A
  timer due later goes to the *overflow wheel*, whose tick is the whole span
  of the wheel below it (created on demand, so a timer days away costs a
  handful of levels, not millions of buckets). When an overflow bucket's
  time comes, its timers are put in again: they fall into finer wheels,
  down to the first, whose buckets run them.
* A *bucket* is a doubly linked list of timers (the bucket itself is the
  list's sentinel), so cancelling unlinks the timer at once: nothing is
  left behind for a reaper to find.
* The *delay queue* is a heap of non-empty buckets ordered by the time they
  are due (there are at most ``wheel_size`` per level, however many timers
  there are). The clock thread sleeps until the first one is due and jumps
  straight to it: idle ticks are never visited.
* Due timers run on a small executor (executor.py), never on the clock
  thread, so a slow callback delays no other timer's expiry.

Invariant (the one the whole class keeps): every timer in a bucket of the
first wheel is due inside that bucket's tick, and every bucket in the delay
queue is due no earlier than the current time of its wheel. Timers never
fire early: a timer is filed by its deadline rounded up to a tick boundary,
so it fires at the first tick boundary at or after its deadline (plus the
executor's latency), never more than one tick after it.

Thread-safe: one lock guards the wheels and the queue (schedule, cancel and
the clock thread take it briefly); callbacks run without it. Time comes from
an injectable clock (clock.py): tests use a ManualClock and move it by hand.

This module must never run a callback on the clock thread or with its lock
held, and never scan the timers to find cancelled or due ones.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
from typing import Callable

from .clock import SYSTEM_CLOCK, Clock
from .errors import ClosedError
from .executor import TaskExecutor

log = logging.getLogger(__name__)

#: TimerHandle states.
PENDING, DUE, RUNNING, DONE, CANCELLED = range(5)
_STATE_NAMES = ("pending", "due", "running", "done", "cancelled")

DEFAULT_TICK = 0.001
DEFAULT_WHEEL_SIZE = 512


class TimerHandle:
    """A scheduled callback; ``cancel()`` stops it if it has not started.

    It is also the timer's entry in its bucket's list (``prev``/``next``):
    one object per timer, no lookup to cancel it."""

    __slots__ = ("deadline_ns", "callback", "prev", "next", "bucket", "state", "_key", "_timer")

    def __init__(self, timer: "Timer", callback: Callable[[], object], deadline_ns: int, key: int) -> None:
        #: When the callback is due, on the timer's clock (ns).
        self.deadline_ns = deadline_ns
        self.callback = callback
        self.prev = None
        self.next = None
        self.bucket = None
        self.state = PENDING
        #: Where the wheels file it: the deadline plus one first-wheel tick,
        #: less 1 ns, so that it falls in the bucket of the first tick
        #: boundary at or after the deadline.
        self._key = key
        self._timer = timer

    def cancel(self) -> bool:
        """Stop the callback from running. True if it was stopped (it had
        not started); False if it already ran, is running or was cancelled.
        O(1): the entry leaves its bucket at once."""
        return self._timer._cancel(self)

    @property
    def cancelled(self) -> bool:
        return self.state == CANCELLED

    @property
    def done(self) -> bool:
        """The callback has run (or raised)."""
        return self.state == DONE

    def __repr__(self) -> str:
        return f"<TimerHandle deadline={self.deadline_ns}ns {_STATE_NAMES[self.state]}>"


class _Bucket:
    """A bucket: the sentinel of a circular doubly linked list of handles,
    and the time it is due (-1 while it is not in the delay queue)."""

    __slots__ = ("prev", "next", "expiration")

    def __init__(self) -> None:
        self.prev = self
        self.next = self
        self.expiration = -1


class _Wheel:
    """One level: ``size`` buckets of ``tick`` ns; ``current`` is a multiple of ``tick``."""

    __slots__ = ("tick", "size", "interval", "current", "buckets", "overflow")

    def __init__(self, tick: int, size: int, start: int) -> None:
        self.tick = tick
        self.size = size
        self.interval = tick * size
        self.current = start - start % tick
        self.buckets = [_Bucket() for _ in range(size)]
        self.overflow: _Wheel | None = None


class Timer:
    """A hierarchical timing wheel with its clock thread and executor.

    ``tick`` (seconds) is the resolution of the first wheel and
    ``wheel_size`` the buckets per wheel; a callback runs between its
    deadline and one tick after it (plus the executor's latency). The
    executor runs callbacks on ``executor_threads`` threads (or pass your
    own ``executor``). ``clock`` defaults to the monotonic system clock.
    """

    def __init__(self, tick: float = DEFAULT_TICK, wheel_size: int = DEFAULT_WHEEL_SIZE, *,
                 clock: Clock | None = None, executor: TaskExecutor | None = None, executor_threads: int = 2,
                 name: str = "lsmkv-timer") -> None:
        if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not (1e-6 <= tick < math.inf):
            raise ValueError(f"tick must be a number of seconds of at least 1e-6, not {tick!r}")
        if type(wheel_size) is not int or wheel_size < 2:
            raise ValueError(f"wheel_size must be an int of at least 2, not {wheel_size!r}")
        self._clock = clock or SYSTEM_CLOCK
        self._now = self._clock.now_ns
        self._tick = round(tick * 1e9)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        #: The delay queue: (due ns, tie-breaker, bucket) of non-empty buckets.
        self._queue: list[tuple[int, int, _Bucket]] = []
        self._order = itertools.count()
        self._wheel = _Wheel(self._tick, wheel_size, self._now())
        #: Handles filed in buckets (scheduled, not yet due, not cancelled).
        self._size = 0
        self._closed = False
        self._owns_executor = executor is None
        self._executor = executor or TaskExecutor(executor_threads, name=f"{name}-exec")
        self._submit = self._executor.submit
        #: Counters (under the lock): scheduled, cancelled, handed to the executor, re-filed from an overflow wheel.
        self.scheduled = 0
        self.cancels = 0
        self.expired = 0
        self.reinserted = 0
        self._clock.subscribe(self._wake)
        self._thread = threading.Thread(target=self._run_clock, name=name, daemon=True)
        self._thread.start()

    # -- the API --------------------------------------------------------------------

    def schedule(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback()`` on the executor once ``delay`` seconds have
        passed (0 runs it as soon as the executor gets to it)."""
        if (type(delay) is not float and type(delay) is not int) or not 0 <= delay < math.inf:
            if isinstance(delay, bool) or not isinstance(delay, (int, float)):
                raise TypeError(f"delay must be a number of seconds, not {type(delay).__name__}")
            raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay!r}")
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        now = self._now()
        deadline = now + round(delay * 1e9)
        handle = TimerHandle(self, callback, deadline, deadline + self._tick - 1)
        with self._lock:
            if self._closed:
                raise ClosedError("the timer is closed")
            self.scheduled += 1
            wheel = self._wheel
            if wheel.current + wheel.tick <= now:
                queue = self._queue
                if not queue or queue[0][0] > now:
                    # Nothing is due: move the wheels up to now, so that
                    # this timer lands in the finest wheel that can hold it.
                    self._advance(now)
            self._file(handle)
        return handle

    def _file(self, handle: TimerHandle) -> None:
        """Put ``handle`` in the bucket its key falls into, or hand it to the
        executor if it is due. Called with the lock held."""
        key = handle._key
        wheel = self._wheel
        if key < wheel.current + wheel.tick:
            handle.state = DUE
            self.expired += 1
            self._submit(lambda: self._fire(handle))
            return
        while key >= wheel.current + wheel.interval:
            upper = wheel.overflow
            if upper is None:
                upper = wheel.overflow = _Wheel(wheel.interval, wheel.size, wheel.current)
            wheel = upper
        tick = wheel.tick
        slot = key // tick
        bucket = wheel.buckets[slot % wheel.size]
        tail = bucket.prev
        handle.prev = tail
        handle.next = bucket
        handle.bucket = bucket
        tail.next = handle
        bucket.prev = handle
        self._size += 1
        due = slot * tick
        if bucket.expiration != due:
            bucket.expiration = due
            queue = self._queue
            if not queue or due < queue[0][0]:
                self._cond.notify_all()  # the clock thread sleeps until the old first bucket
            heapq.heappush(queue, (due, next(self._order), bucket))

    def _cancel(self, handle: TimerHandle) -> bool:
        with self._lock:
            state = handle.state
            if state == PENDING:
                prev, nxt = handle.prev, handle.next
                prev.next = nxt
                nxt.prev = prev
                handle.prev = handle.next = handle.bucket = None
                self._size -= 1
            elif state != DUE:
                return False
            handle.state = CANCELLED
            self.cancels += 1
            return True

    def _fire(self, handle: TimerHandle) -> None:
        """Run on the executor: the callback, unless it was cancelled meanwhile."""
        with self._lock:
            if handle.state != DUE:
                return
            handle.state = RUNNING
        try:
            handle.callback()
        finally:
            handle.state = DONE

    def __len__(self) -> int:
        """Timers scheduled that are neither due yet nor cancelled."""
        return self._size

    @property
    def tick(self) -> float:
        return self._tick / 1e9

    @property
    def levels(self) -> int:
        """Wheels in use (overflow wheels are made on demand)."""
        n, wheel = 1, self._wheel
        while wheel.overflow is not None:
            n, wheel = n + 1, wheel.overflow
        return n

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def executor(self) -> TaskExecutor:
        return self._executor

    def close(self) -> None:
        """Stop the clock. Timers not yet due never fire; callbacks already
        handed to the executor still run (an owned executor is closed after
        them). Closing twice is harmless; schedule() then raises ClosedError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._clock.unsubscribe(self._wake)
        if self._thread is not threading.current_thread():
            self._thread.join()
        if self._owns_executor:
            self._executor.close()

    def __enter__(self) -> "Timer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the clock ------------------------------------------------------------------

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _advance(self, now: int) -> None:
        """Move every wheel's current time up to ``now`` (rounded down to its tick)."""
        wheel = self._wheel
        while wheel is not None and now >= wheel.current + wheel.tick:
            wheel.current = now - now % wheel.tick
            wheel = wheel.overflow

    def _run_clock(self) -> None:
        """The clock thread: sleep until the first bucket is due, then empty
        every due bucket: re-file its timers (finer wheels, or the executor)."""
        clock = self._clock
        cond = self._cond
        queue = self._queue
        with cond:
            while not self._closed:
                if not queue:
                    clock.wait(cond, None)
                    continue
                now = self._now()
                if queue[0][0] > now:
                    clock.wait(cond, queue[0][0] - now)
                    continue
                try:
                    while queue and queue[0][0] <= now:
                        due, _, bucket = heapq.heappop(queue)
                        if bucket.expiration != due:
                            continue
                        self._advance(due)
                        self._flush(bucket)
                except BaseException:  # pragma: no cover - a bug here must not stop every timer silently
                    log.exception("the timer's clock thread failed")
                    raise
                cond.notify_all()  # wait_idle() waiters

    def _flush(self, bucket: _Bucket) -> None:
        """Take every handle out of ``bucket`` and file it again."""
        entry = bucket.next
        bucket.next = bucket.prev = bucket
        bucket.expiration = -1
        count = 0
        expired = self.expired
        file = self._file
        while entry is not bucket:
            nxt = entry.next
            entry.prev = entry.next = entry.bucket = None
            count += 1
            file(entry)
            entry = nxt
        # _file counted each handle that went back into a bucket.
        self._size -= count
        self.reinserted += count - (self.expired - expired)

    def wait_idle(self, timeout: float | None = 10.0) -> bool:
        """Wait until no bucket is due on the clock and the executor has run
        everything handed to it (tests, with a ManualClock: advance, then
        wait_idle, then look). False if that did not happen within
        ``timeout`` seconds of real time."""
        import time
        end = None if timeout is None else time.monotonic() + timeout
        queue = self._queue
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            with self._cond:
                if not self._cond.wait_for(lambda: self._closed or not queue or queue[0][0] > self._now(), left):
                    return False
            left = None if end is None else max(0.0, end - time.monotonic())
            if not self._executor.join(left):
                return False
            with self._cond:
                if (self._closed or not queue or queue[0][0] > self._now()) and not self._executor.pending:
                    return True
