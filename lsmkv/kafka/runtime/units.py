"""Processor units: Decaton's parallelism within one partition.

Each assigned partition feeds ``concurrency`` units; a record goes to the
unit chosen by a hash of its key (:func:`unit_of`: murmur3, mmh3), so
all records of one key pass through one unit, in the order they were
fetched, while different keys run in parallel on different units. A unit
is a thread with a queue: it runs the user processor on each record
(which may block on I/O: that is where the parallelism pays off) and
completes the record in its partition's window with the operations the
processor returned. The store is written by the applier, in offset
order, never by a unit.

Failures: when the processor raises (or returns something the store
cannot hold), the record is retried after a backoff on the timing wheel
(retry.py) and, past the last retry, dead-lettered (dead_letters.py).
Meanwhile its key is *blocked*: later records of the same key wait in
the unit behind it (so per-key order holds across retries), records of
other keys go on. When the record is resolved the waiting records are
put back at the front of the queue, in order.

Invariant (what this class owns): of the records of one key routed to a
unit, the processor is called on one at a time, in offset order, and a
record is completed exactly once (or dropped when its partition is
fenced). Only the unit's own thread touches its blocked keys; other
threads (the consumer, the timer, the dead-letter delivery thread) talk
to it through its queue.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Callable

import mmh3

from .commit_control import complete
from .processor import BadResult, Record, store_ops

log = logging.getLogger(__name__)

#: Queue items: (kind, payload...).
_RECORD = 0   # (0, record, entry, attempt)
_RESOLVED = 1  # (1, key): the record blocking ``key`` is resolved
_STOP = 2


def unit_of(key: bytes, units: int) -> int:
    """The unit (0 .. units-1) that records with ``key`` go to."""
    return mmh3.hash(key, signed=False) % units if units > 1 else 0


class ProcessorUnit:
    """One unit of one partition: a thread running the processor in key order."""

    def __init__(self, name: str, processor: Callable[[Record], object], max_key: int, *, scheduler,
                 dead_letters, on_complete: Callable[[int], None], partition_state) -> None:
        self._processor = processor
        self._max_key = max_key
        self._scheduler = scheduler
        self._dead_letters = dead_letters
        self._on_complete = on_complete
        self._ps = partition_state
        self._queue: deque = deque()
        self._cond = threading.Condition(threading.Lock())
        #: key -> records waiting behind the record of that key being retried.
        self._blocked: dict[bytes, deque] = {}
        self.processed = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- called by other threads -------------------------------------------------

    def submit(self, items: list) -> None:
        """Queue ``items``: (record, entry) pairs, in fetch order."""
        with self._cond:
            self._queue.extend((_RECORD, record, entry, 1) for record, entry in items)
            self._cond.notify()

    def _push_front(self, item: tuple) -> None:
        with self._cond:
            self._queue.appendleft(item)
            self._cond.notify()

    def stop(self) -> None:
        """Stop after the record in hand (queued records are dropped: the
        partition is fenced by then, its records left to the next owner)."""
        with self._cond:
            self._queue.clear()
            self._queue.append((_STOP,))
            self._cond.notify()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def queued(self) -> int:
        """Items in the queue (not counting records waiting behind a blocked key)."""
        return len(self._queue)

    # -- the unit's thread -------------------------------------------------------------

    def _run(self) -> None:
        queue = self._queue
        cond = self._cond
        while True:
            with cond:
                while not queue:
                    cond.wait()
                item = queue.popleft()
            kind = item[0]
            if kind == _STOP:
                return
            if self._ps.fenced:
                continue
            try:
                if kind == _RESOLVED:
                    self._release(item[1])
                else:
                    self._handle(item[1], item[2], item[3])
            except BaseException:  # noqa: BLE001 - a unit must not die silently; the loader sees it
                log.exception("processor unit %s failed", self._thread.name)
                self._ps.unit_failed = True
                raise

    def _handle(self, record: Record, entry: list, attempt: int) -> None:
        key = record.key
        blocked = self._blocked
        if attempt == 1 and key in blocked:
            blocked[key].append((record, entry))  # behind the record of its key being retried
            return
        try:
            ops = store_ops(self._processor(record), self._max_key)
        except Exception as exc:  # noqa: BLE001 - any processor failure is the record's, not the loader's
            self._failed(record, entry, attempt, exc)
            return
        complete(entry, ops)
        self.processed += 1
        self._on_complete(1)
        if attempt > 1:
            self._push_front((_RESOLVED, key))

    def _failed(self, record: Record, entry: list, attempt: int, exc: Exception) -> None:
        key = record.key
        self._blocked.setdefault(key, deque())
        reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, BadResult) else str(exc)
        ps = self._ps
        if not self._scheduler.policy.gives_up(attempt):
            ps.metrics.retries += 1
            ps.loader_metrics.retries += 1
            log.info("%s[%d]@%d: processor failed (try %d: %s); retrying", record.topic, record.partition,
                     record.offset, attempt, reason)
            self._scheduler.schedule(ps, attempt,
                                     lambda: self._push_front((_RECORD, record, entry, attempt + 1)))
            return
        log.warning("%s[%d]@%d: processor failed %d times (%s); dead-lettering it", record.topic, record.partition,
                    record.offset, attempt, reason)

        def done() -> None:
            complete(entry, None)
            ps.metrics.dead_letters += 1
            ps.loader_metrics.dead_letters += 1
            self._on_complete(1)
            self._push_front((_RESOLVED, key))

        self._dead_letters.send(record, reason, attempt, done)

    def _release(self, key: bytes) -> None:
        """The record that blocked ``key`` is resolved: its waiting records go
        back to the front of the queue, in order (one of them may block
        the key again)."""
        waiting = self._blocked.pop(key, None)
        if waiting:
            with self._cond:
                self._queue.extendleft((_RECORD, record, entry, 1) for record, entry in reversed(waiting))
                self._cond.notify()
