"""ConflictTracker: which keys and ranges commits wrote while transactions
were open, and whether a transaction may commit (optimistic concurrency
control, validated backward against the commits since its snapshot).

Isolation. A transaction (lsmkv/base/transaction.py) reads from a snapshot
taken when it begins and buffers its writes. It may commit only if no
commit since its snapshot wrote a key it read or wrote, or a key inside a
range it scanned or walked with a cursor, and no such commit deleted a range
holding any of those (a later ``delete_range``). Then everything it read is
still current at its commit, so it is equivalent to running alone at that
instant: commits are SERIALIZABLE, in commit order, phantoms included (a key
inserted into a scanned range is a conflict). A transaction that wrote
nothing commits without validation: it is equivalent to running alone at
its snapshot, which is a prefix of the commit order. Compare:

* sqlite3 ``BEGIN IMMEDIATE`` and LMDB/bbolt: one writing transaction at a
  time holds the database's write lock from its first read on; nothing can
  conflict, but writers wait for each other for the whole transaction.
  Here transactions run side by side and pay only when they really
  overlapped, at commit.
* RocksDB's OptimisticTransactionDB: the same backward validation for the
  keys read (GetForUpdate) and written, but an iterator's range is not
  tracked, so a key inserted into a range a transaction scanned goes
  unnoticed (write skew over phantoms). Here ranges are tracked.

What this class owns. A sorted map key -> the number of the last commit
that wrote it, a log of the commits recorded (their keys, oldest first), a
log of the ranges commits deleted, and the open transactions (their
tickets). It holds only what an open transaction can still conflict with:
entries of commits older than the oldest open ticket are pruned, and with
no transaction open it holds nothing. It never reads the database.

Protocol (what an engine does; all of it is thread-safe):

* ``ticket = tracker.begin()`` when a transaction begins, BEFORE the engine
  takes the transaction's snapshot. A commit that lands in between is
  either in the snapshot or not; since it is recorded after the ticket, it
  can only cause a spurious conflict, never a missed one.
* ``tracker.end(ticket)`` when it ends: commit, rollback or garbage
  collection. It never blocks (it may run in a garbage collector's
  finalizer on any thread, even one inside this class): if the lock is
  busy, the ticket is ended by whoever holds it, as it lets go.
* ``tracker.active`` (a plain attribute): whether any transaction is open.
  On the engine's write path, AFTER any batch is applied -- visible to
  snapshots taken from then on: plain puts and deletes, write batches and
  transaction commits alike -- the engine calls ``tracker.record(keys,
  ranges)`` if ``active`` is true. Users who never open a transaction pay
  one attribute check per write. Checking after the apply is what makes
  skipping safe: a transaction whose ``begin()`` came after the check
  took its snapshot after the write was visible, so the write is in its
  snapshot and cannot conflict with it; one whose ``begin()`` came before
  the check is seen by it (``active`` is set inside ``begin()``), so the
  write is recorded, with a commit number above that ticket's start.
  (Checking before the apply would miss a transaction beginning in
  between, whose snapshot lacks the write.)
* ``tracker.validate(ticket, reads, writes, scanned_ranges, ...)`` by the
  engine's log writer, just before it appends the transaction's batch.
  None: append, apply and record it; a :class:`Conflict`: drop the batch
  and raise ``conflict.error()`` to the committing thread. Validation and
  recording must be serialized with every other commit (they are, by the
  log writer's role: lsmkv/base/write_queue.py), so that no commit comes
  between a transaction's validation and its apply.
* A group commit: the log writer appends several batches at once and
  applies them before recording them, so a transaction's batch in a group
  is validated against the tracker AND the batches ahead of it in the same
  group (``pending``, a :class:`PendingWrites` the log writer fills with
  each batch it keeps, only while ``active``). Those are not in any
  snapshot yet, so any overlap with them is a real conflict.

Cost. ``validate`` costs what the transaction touched, or the keys
recorded since it began, whichever is less: either each key it read or
wrote is looked up (O(log n)) and each range it scanned is walked over
the keys recorded inside it (which go back to the oldest open
transaction's start), or the log since its start is walked, each key
checked against its read set, write set and ranges. Never a walk over
the database. ``record`` is O(log n) per key. Memory is the keys written
since the oldest open transaction began.
"""

from __future__ import annotations

import threading
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Collection, Iterable, Iterator

from sortedcontainers import SortedDict

from .errors import ConflictError
from .key_ranges import KeyRanges, Range, show_key, show_range


class Ticket:
    """An open transaction's registration with a tracker. ``start``: the
    number of commits the tracker had recorded when it began (commits
    numbered above it came after); ``keys_at_start``: how many keys those
    commits had written (to weigh the log walk); ``open``: until its end."""

    __slots__ = ("start", "keys_at_start", "open")

    def __init__(self, start: int, keys_at_start: int) -> None:
        self.start = start
        self.keys_at_start = keys_at_start
        self.open = True

    def __repr__(self) -> str:
        return f"Ticket(start={self.start}, {'open' if self.open else 'ended'})"


@dataclass(frozen=True)
class Conflict:
    """Why a transaction may not commit: what it did (``access``: "read",
    "written", "scanned" or "deleted"), with which ``key`` and/or ``range``,
    and, when another commit deleted a range, that range (``by_range``)."""

    access: str
    key: bytes | None = None
    range: Range | None = None
    by_range: Range | None = None

    def __str__(self) -> str:
        verb = {"read": "read", "written": "also wrote", "scanned": "scanned", "deleted": "deletes"}[self.access]
        if self.by_range is not None:
            other = f"another commit deleted the range {show_range(*self.by_range)}"
            if self.key is not None:
                what = f"{other}, which holds key {show_key(self.key)} that this transaction {verb}"
            else:
                what = f"{other}, which overlaps the range {show_range(*self.range)} this transaction {verb}"
        elif self.range is not None:
            what = (f"another commit wrote key {show_key(self.key)} inside the range {show_range(*self.range)} "
                    f"this transaction {verb}")
        else:
            what = f"another commit changed key {show_key(self.key)}, which this transaction {verb}"
        return (f"transaction conflict: {what}, after the transaction's snapshot was taken; nothing of the "
                f"transaction was written: run it again (run_in_transaction retries)")

    def error(self) -> ConflictError:
        """The error a failed commit raises."""
        return ConflictError(str(self), key=self.key, range=self.range if self.range is not None else self.by_range,
                             access=self.access)


class PendingWrites:
    """The writes of the batches a log writer is committing in one group,
    ahead of a transaction's batch: appended together, applied after
    validation, so not in any snapshot and not recorded yet. The log writer
    adds each batch it keeps (``add``), in group order, and passes this to
    ``validate`` for each transaction batch further on."""

    __slots__ = ("keys", "ranges")

    def __init__(self) -> None:
        self.keys: set[bytes] = set()
        self.ranges: list[Range] = []

    def add(self, keys: Iterable[bytes], ranges: Iterable[Range] = ()) -> None:
        self.keys.update(keys)
        self.ranges.extend(ranges)

    def __bool__(self) -> bool:
        return bool(self.keys) or bool(self.ranges)


def _first_conflict(their_keys: Iterable[bytes], their_ranges: KeyRanges, reads: Collection[bytes],
                    writes: Collection[bytes], scanned: KeyRanges, deleted: KeyRanges) -> Conflict | None:
    """The first overlap between keys and ranges other commits wrote and
    what a transaction read, wrote, scanned and deleted. Costs the keys
    given (O(log r) each against the ranges), plus, if ``their_ranges`` is
    not empty, the transaction's keys (O(log) each) and ranges."""
    for key in their_keys:
        if key in reads:
            return Conflict("read", key)
        if key in writes:
            return Conflict("written", key)
        if scanned:
            found = scanned.containing(key)
            if found is not None:
                return Conflict("scanned", key, found)
        if deleted:
            found = deleted.containing(key)
            if found is not None:
                return Conflict("deleted", key, found)
    if their_ranges:
        for access, keys in (("read", reads), ("written", writes)):
            for key in keys:
                found = their_ranges.containing(key)
                if found is not None:
                    return Conflict(access, key, by_range=found)
        for access, ours in (("scanned", scanned), ("deleted", deleted)):
            pair = ours.first_overlap(their_ranges)
            if pair is not None:
                return Conflict(access, range=pair[0], by_range=pair[1])
    return None


class ConflictTracker:
    """Commits' writes while transactions are open; validation of a
    transaction's commit against them (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Commits recorded so far; the number of the last one.
        self._commits = 0
        #: Keys those commits wrote (with repeats), to weigh the log walk.
        self._keys_recorded = 0
        #: key -> the number of the last recorded commit that wrote it.
        self._last: SortedDict = SortedDict()
        #: (commit number, keys) of the commits recorded, oldest first.
        self._log: deque[tuple[int, list[bytes]]] = deque()
        #: (commit number, low, high) of the ranges recorded commits deleted, oldest first.
        self._range_log: deque[tuple[int, bytes | None, bytes | None]] = deque()
        #: start -> how many open tickets have it. Starts only grow, so the
        #: dict's order (insertion) is ascending: the first is the oldest.
        self._open: dict[int, int] = {}
        #: Tickets whose end() found the lock busy: ended by its holder.
        self._ending: deque[Ticket] = deque()
        #: Whether a transaction is open: the engine records writes only then.
        self.active = False

    # -- open transactions ------------------------------------------------------------------------

    def begin(self) -> Ticket:
        """Register a transaction beginning now (before its snapshot is taken)."""
        with self._locked():
            ticket = Ticket(self._commits, self._keys_recorded)
            self._open[ticket.start] = self._open.get(ticket.start, 0) + 1
            self.active = True
        return ticket

    def end(self, ticket: Ticket) -> None:
        """Unregister ``ticket`` (its transaction committed, rolled back or
        was dropped); ending it again does nothing. Never blocks."""
        self._ending.append(ticket)
        if self._lock.acquire(False):
            self._end_queued_and_release()

    def _end_queued_and_release(self) -> None:
        """With the lock held: end the tickets queued by end(), then let go
        of the lock; again while tickets were queued meanwhile by threads
        that found the lock busy (so none is left waiting for a next call)."""
        while True:
            try:
                if self._ending:
                    self._end_queued()
            finally:
                self._lock.release()
            if not self._ending or not self._lock.acquire(False):
                return

    def _end_queued(self) -> None:
        ending = self._ending
        changed = False
        while ending:
            ticket = ending.popleft()
            if not ticket.open:
                continue
            ticket.open = False
            changed = True
            left = self._open[ticket.start] - 1
            if left:
                self._open[ticket.start] = left
            else:
                del self._open[ticket.start]
        if changed:
            self._prune()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._lock.acquire()
        try:
            if self._ending:
                self._end_queued()
            yield
        finally:
            self._end_queued_and_release()

    def _prune(self) -> None:
        """Forget what no open transaction can conflict with: commits numbered
        at or below the oldest open ticket's start (all of them if none is open)."""
        if not self._open:
            self.active = False
            self._last = SortedDict()
            self._log.clear()
            self._range_log.clear()
            return
        oldest = next(iter(self._open))
        log, last = self._log, self._last
        while log and log[0][0] <= oldest:
            commit, keys = log.popleft()
            for key in keys:
                if last.get(key) == commit:
                    del last[key]
        ranges = self._range_log
        while ranges and ranges[0][0] <= oldest:
            ranges.popleft()

    # -- the write path ---------------------------------------------------------------------------

    def record(self, keys: Iterable[bytes], ranges: Iterable[Range] = ()) -> None:
        """A commit just applied wrote ``keys`` and deleted ``ranges`` (low
        inclusive, high exclusive, None open). Called by the log writer
        after the apply, while ``active``; a no-op if no transaction is open."""
        # The lock taken by hand, not with _locked(): this runs on every
        # write while a transaction is open.
        self._lock.acquire()
        try:
            if self._ending:
                self._end_queued()
            if not self._open:
                return
            self._commits += 1
            commit = self._commits
            keys = list(keys)
            if keys:
                last = self._last
                for key in keys:
                    last[key] = commit
                self._log.append((commit, keys))
                self._keys_recorded += len(keys)
            for low, high in ranges:
                self._range_log.append((commit, low, high))
        finally:
            self._end_queued_and_release()

    def validate(self, ticket: Ticket, reads: Collection[bytes], writes: Collection[bytes],
                 scanned_ranges: Iterable[Range] = (), *, written_ranges: Iterable[Range] = (),
                 pending: PendingWrites | None = None) -> Conflict | None:
        """Whether the transaction of ``ticket`` may commit now: None, or the
        first :class:`Conflict` found with a commit recorded since it began
        (or with ``pending``, the batches ahead of it in the log writer's
        group). ``reads`` and ``writes`` are the keys it read and wrote
        (collections with a fast ``in``: a set, a dict's keys);
        ``scanned_ranges`` the ranges it scanned or walked with a cursor;
        ``written_ranges`` the ranges it deletes (``delete_range``).
        Called by the log writer, serialized with ``record``."""
        scanned = KeyRanges(scanned_ranges)
        deleted = KeyRanges(written_ranges)
        with self._locked():
            if not ticket.open:
                raise ValueError(f"{ticket!r} was already ended: a transaction is validated while it is open")
            conflict = self._since(ticket, reads, writes, scanned, deleted)
        if conflict is None and pending:
            conflict = _first_conflict(pending.keys, KeyRanges(pending.ranges), reads, writes, scanned, deleted)
        return conflict

    def _since(self, ticket: Ticket, reads: Collection[bytes], writes: Collection[bytes], scanned: KeyRanges,
               deleted: KeyRanges) -> Conflict | None:
        start = ticket.start
        their_ranges = []
        for commit, low, high in reversed(self._range_log):
            if commit <= start:
                break
            their_ranges.append((low, high))
        their_ranges = KeyRanges(their_ranges)
        keys_since = self._keys_recorded - ticket.keys_at_start
        if keys_since == 0:
            return _first_conflict((), their_ranges, reads, writes, scanned, deleted)
        last = self._last
        # Looking each of the transaction's keys and ranges up costs about
        # this many steps (the keys recorded inside its ranges are walked);
        # the log walk costs keys_since. Take the cheaper.
        by_lookup = len(reads) + len(writes)
        for ranges in (scanned, deleted):
            for low, high in zip(ranges.lows, ranges.highs):
                by_lookup += (len(last) if high is None else last.bisect_left(high)) - last.bisect_left(low)
        if keys_since <= by_lookup:
            return _first_conflict(self._keys_recorded_since(start), their_ranges, reads, writes, scanned, deleted)
        get = last.get
        for access, keys in (("read", reads), ("written", writes)):
            for key in keys:
                commit = get(key)
                if commit is not None and commit > start:
                    return Conflict(access, key)
        for access, ranges in (("scanned", scanned), ("deleted", deleted)):
            for low, high in zip(ranges.lows, ranges.highs):
                for key in last.irange(low, high, (True, False)):
                    if last[key] > start:
                        return Conflict(access, key, ranges.containing(key))
        return _first_conflict((), their_ranges, reads, writes, scanned, deleted)

    def _keys_recorded_since(self, start: int) -> Iterator[bytes]:
        """The keys of the commits numbered above ``start``, newest commit first."""
        commits = []
        for commit, keys in reversed(self._log):
            if commit <= start:
                break
            commits.append(keys)
        return chain.from_iterable(commits)

    # -- what it holds (tests, stats) ---------------------------------------------------------------

    @property
    def open_transactions(self) -> int:
        """Tickets begun and not ended."""
        with self._locked():
            return sum(self._open.values())

    @property
    def tracked_keys(self) -> int:
        """Keys held: written since the oldest open transaction began."""
        with self._locked():
            return len(self._last)

    @property
    def tracked_commits(self) -> int:
        """Commits held in the log (of keys or of deleted ranges)."""
        with self._locked():
            return len(self._log) + len(self._range_log)
