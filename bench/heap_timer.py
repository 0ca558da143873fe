"""HeapTimer: the textbook timer the timing wheel is measured against.

A binary heap (``heapq``, in C) of ``[deadline, order, handle]`` entries and
a clock thread that sleeps until the earliest deadline, with the same API
as :class:`lsmkv.base.timer.Timer` (``schedule``, ``handle.cancel()``,
``close``) and the same executor, so the bench compares the data structures
and nothing else. Scheduling is O(log n). Cancelling is the usual lazy
O(1): the handle is marked and its entry stays in the heap until its
deadline comes (what asyncio does), so cancelled timers pile up in memory
until then -- the bench reports how many.

Bench-only code: the engines never use it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from typing import Callable

from lsmkv.base.executor import TaskExecutor


class HeapTimerHandle:
    __slots__ = ("deadline_ns", "callback", "cancelled", "done", "_timer")

    def __init__(self, timer: "HeapTimer", callback: Callable[[], object], deadline_ns: int) -> None:
        self.deadline_ns = deadline_ns
        self.callback = callback
        self.cancelled = False
        self.done = False
        self._timer = timer

    def cancel(self) -> bool:
        with self._timer._lock:
            if self.cancelled or self.done:
                return False
            self.cancelled = True
            return True


class HeapTimer:
    def __init__(self, *, executor_threads: int = 2, name: str = "heap-timer") -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list = []
        self._order = itertools.count()
        self._closed = False
        self._executor = TaskExecutor(executor_threads, name=f"{name}-exec")
        self._thread = threading.Thread(target=self._run_clock, name=name, daemon=True)
        self._thread.start()

    def schedule(self, delay: float, callback: Callable[[], object]) -> HeapTimerHandle:
        if not 0 <= delay < math.inf:
            raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay!r}")
        handle = HeapTimerHandle(self, callback, time.monotonic_ns() + round(delay * 1e9))
        with self._lock:
            heap = self._heap
            if not heap or handle.deadline_ns < heap[0][0]:
                self._cond.notify_all()
            heapq.heappush(heap, (handle.deadline_ns, next(self._order), handle))
        return handle

    def __len__(self) -> int:
        """Entries in the heap, cancelled ones included (they stay until due)."""
        return len(self._heap)

    def _run_clock(self) -> None:
        heap = self._heap
        with self._cond:
            while not self._closed:
                if not heap:
                    self._cond.wait()
                    continue
                now = time.monotonic_ns()
                if heap[0][0] > now:
                    self._cond.wait((heap[0][0] - now) / 1e9)
                    continue
                while heap and heap[0][0] <= now:
                    handle = heapq.heappop(heap)[2]
                    if not handle.cancelled:
                        self._executor.submit(lambda h=handle: self._fire(h))

    def _fire(self, handle: HeapTimerHandle) -> None:
        with self._lock:
            if handle.cancelled:
                return
            handle.done = True
        handle.callback()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        self._executor.close()
