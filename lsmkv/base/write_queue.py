"""WriteQueue: writers hand their batches over; one log writer commits them in groups.

Both engines write through one of these (the accumulator of Kafka's
producer, LevelDB's writer queue). A writer enqueues its batch and either
becomes the *log writer* -- if nobody holds that role -- or waits. The log
writer takes everything queued at that moment (its own batch included) and
commits it as one *group* through the engine's ``commit_group`` callback:
one append to the write-ahead log for the whole group, then the memtable or
tree, in queue order. Then it completes each writer of the group and hands
the role on to the first writer still queued, if any.

Invariant (what this class owns): a writer's batch is committed by exactly
one group, in queue order, and no writer ever waits for a write that was
not queued yet: a group is what was queued when the log writer started
(nothing lingers for company; see ``commit_delay`` in log_syncer.py for the
one deliberate wait), so anyone arriving later goes into a later group.
Whenever the role is given up, the first queued writer is woken to take
it, so no writer is ever stranded.

Fast path: a writer that finds the queue empty takes the role with one
non-blocking lock acquisition (``try_lead``) and commits its own batch
directly, with no queue entry and no wake-up: the uncontended write costs
about what a plain lock did. The role's lock also serves callers that must
keep writers out for a while (``exclusive``: a flush switching memtables,
close, resume).

Durability is not this module's business: with group commit, ``sync=True``
writes go to the log syncer (log_syncer.py), which brings them here as a
group of its own (``lead``) and wakes them itself once the log is durable
past them -- so a sync writer sleeps once, not once for the append and
again for the fsync.

This module must never call ``commit_group`` without holding the log
writer's lock, nor wake a writer before its batch is committed or it is
first in the queue.
"""

from __future__ import annotations

import threading
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterator

_allocate_lock = threading.Lock


class Writer:
    """One write on its way: what the engine's commit callback reads
    (``batch``, ``sync``) and fills in (``position``: where the batch ended
    in the log; ``committed`` once the batch is in the log and applied). A
    ``pending`` writer belongs to the log syncer, which wakes it (the queue
    never does). If the group fails, every writer not committed by then
    gets the error (``error``)."""

    __slots__ = ("batch", "sync", "position", "committed", "pending", "taken", "error", "done", "_wake")

    def __init__(self, batch: object, sync: bool) -> None:
        self.batch = batch
        self.sync = sync
        self.position = 0
        self.committed = False
        self.pending = False
        #: Taken into a group by the log syncer (its sync writes only).
        self.taken = False
        self.error: BaseException | None = None
        self.done = False
        # A binary semaphore, taken now: released when the writer is done or
        # becomes first in the queue. Extra releases collapse into one.
        self._wake = _allocate_lock()
        self._wake.acquire()


def _wake(writer: Writer) -> None:
    try:
        writer._wake.release()
    except RuntimeError:
        pass  # already woken and not yet listening: one wake-up is enough


class WriteQueue:
    """The queue of writers and the log writer's role (a lock)."""

    def __init__(self, commit_group: Callable[[list[Writer]], None]) -> None:
        self._commit_group = commit_group
        self._lock = threading.Lock()
        # Its two methods on the uncontended put's path, bound once: each
        # call then skips looking the method up by name.
        self._try_acquire = self._lock.acquire
        self._release = self._lock.release
        self._queue: deque[Writer] = deque()
        #: Groups committed through the queue, and the writes in them
        #: (fast-path writes are not counted: they are groups of one).
        self.groups = 0
        self.grouped_writes = 0
        self.largest_group = 0

    def try_lead(self) -> bool:
        """Take the log writer's role if nobody has it and nobody is queued.
        The caller then commits its own write and calls ``release()``."""
        return not self._queue and self._try_acquire(False)

    def release(self) -> None:
        """Give up the role; wake the first queued writer to take it."""
        self._release()
        if self._queue:
            try:
                _wake(self._queue[0])
            except IndexError:
                pass  # a new log writer emptied the queue meanwhile

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the log writer's role (blocking): no group is committed meanwhile."""
        self._lock.acquire()
        try:
            yield
        finally:
            self.release()

    def write(self, writer: Writer) -> Writer:
        """Queue ``writer`` and return once its batch is committed (or its
        group failed: then ``writer.error`` is set)."""
        queue = self._queue
        queue.append(writer)
        lock = self._lock
        while True:
            if lock.acquire(False):
                try:
                    if not writer.done:
                        self._lead()
                finally:
                    self.release()
                if writer.done:
                    return writer
            writer._wake.acquire()
            if writer.done:
                return writer

    def lead(self, writers: list[Writer]) -> None:
        """Take the log writer's role (waiting for it) and commit ``writers``
        (the log syncer's sync writes), with everything queued, as one group."""
        self._lock.acquire()
        try:
            self._lead(writers)
        finally:
            self.release()

    def _lead(self, group: list[Writer] | None = None) -> None:
        """As the log writer: commit ``group`` and everything queued now as one group."""
        queue = self._queue
        group = list(group) if group else []
        while queue:
            group.append(queue.popleft())
        try:
            self._commit_group(group)
        except BaseException as exc:  # noqa: BLE001 - each writer of the group not committed raises it
            for w in group:
                if not w.committed and w.error is None:
                    w.error = exc
        self.groups += 1
        self.grouped_writes += len(group)
        if len(group) > self.largest_group:
            self.largest_group = len(group)
        for w in group:
            if w.pending:
                continue  # the log syncer's: it wakes them once durable
            w.done = True
            _wake(w)

    def __len__(self) -> int:
        """Writers queued and not yet taken into a group."""
        return len(self._queue)
