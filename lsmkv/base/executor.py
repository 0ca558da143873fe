"""TaskExecutor: a small, fixed pool of threads that runs submitted callables.

The timer hands expired tasks to one of these so that a slow callback never
holds up the clock (and with it every other timer). Tasks run in submission
order when the pool has one thread; with more, they start in that order and
may overlap. A task that raises is logged and forgotten: it never kills its
thread.

This module must never run a task on the submitting thread, and never drop
one that was accepted before ``close()`` (close runs the queue dry first).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

from .errors import ClosedError

log = logging.getLogger(__name__)

_STOP = object()


class TaskExecutor:
    """``threads`` daemon threads named ``<name>-<i>``; ``submit`` is thread-safe."""

    def __init__(self, threads: int = 2, name: str = "lsmkv-executor") -> None:
        if type(threads) is not int or threads < 1:
            raise ValueError(f"an executor needs at least one thread, not {threads!r}")
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._put = self._queue.put
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        #: Tasks accepted and not yet finished.
        self._pending = 0
        self._closed = False
        #: Tasks finished (run to the end or raised), and of those, raised.
        self.completed = 0
        self.failed = 0
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(threads)]
        for t in self._threads:
            t.start()

    def submit(self, task: Callable[[], object]) -> None:
        """Queue ``task`` to run on a pool thread; ClosedError after close()."""
        with self._lock:
            if self._closed:
                raise ClosedError("the executor is closed")
            self._pending += 1
        self._put(task)

    def _work(self) -> None:
        get = self._queue.get
        while True:
            task = get()
            if task is _STOP:
                return
            failed = False
            try:
                task()
            except BaseException:  # noqa: BLE001 - a task's failure is its own; the pool goes on
                failed = True
                log.exception("a task on the executor raised")
            with self._lock:
                self._pending -= 1
                self.completed += 1
                self.failed += failed
                if not self._pending:
                    self._idle.notify_all()

    @property
    def pending(self) -> int:
        """Tasks accepted and not yet finished."""
        return self._pending

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every accepted task has finished; False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def close(self, wait: bool = True) -> None:
        """Refuse new tasks, run the queued ones, stop the threads (and with
        ``wait``, wait for them). Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._put(_STOP)
        if wait:
            me = threading.current_thread()
            for t in self._threads:
                if t is not me:
                    t.join()
