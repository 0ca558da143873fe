"""Transactions on the LSM engine: its side of lsmkv/base/transaction.py.

What a transaction is -- reads over a snapshot, its own writes over them,
validation at commit, serializable in commit order -- is the shared layer's
(lsmkv/base/transaction.py, conflicts.py). This module is what the LSM
engine adds, and it never sees the DB (db.py hands it callables):

* :class:`TransactionSnapshot`: the transaction's SnapshotReader, a read
  sequence pinned in the DB's live snapshots (flushes and compactions keep
  every version it sees), read as ``db.snapshot()`` reads;
* :class:`TransactionBatch`: a transaction's writes as a WriteBatch (one log
  record, applied atomically), carrying its ticket, the keys it read and
  the ranges it scanned to the log writer;
* :class:`LsmTransactionHost`: the TransactionHost: the engine's limits,
  the commit (the batch through the write queue), the release of a ticket;
* :func:`validate_group`, :func:`settle_group` and :func:`group_keys`: the
  log writer's part (``DB._append_and_apply``).

The commit path. ``commit_transaction`` hands the batch to the write queue
like any write batch (with group commit, a ``sync=True`` one to the log
syncer). The log writer, holding its role (so serialized with every other
commit), validates each transaction batch of a group, in order, against
the commits recorded since its snapshot and against the batches kept
ahead of it in the group (PendingWrites), before anything is appended. A
batch that conflicts is left out of the append -- nothing of it reaches
the log -- and its writer is woken with the ConflictError (by the write
queue, or by the log syncer for a ``sync=True`` commit with group
commit). The rest are appended in one write, applied and published; then,
still holding the role and only while a transaction is open
(``tracker.active``, looked at after the publishing), their keys are
recorded with the tracker. Writes that skip the queue (the uncontended
put's fast path, ingest) record theirs the same way after they are
published. A group with no transaction batch costs one pass over its
writers' batch types, and the one attribute read of ``active``.

A ``sync=True`` commit that times out after the log syncer took it into a
group (SyncTimeoutError with ``applied=True`` for a plain write) does not
know yet whether it will commit: it waits until the log writer settled its
batch, and then raises the ConflictError if it was refused, or the
SyncTimeoutError if it was applied but is not known durable. So its ticket
stays open until its batch was validated, and the answer it gives is true.
Its wait for its turn at the log writer is unbounded, as any write's is;
``sync_timeout`` bounds the wait for durability.
"""

from __future__ import annotations

import threading
import weakref
from itertools import chain
from typing import Callable, Collection, Iterable, Iterator

from lsmkv.base.conflicts import ConflictTracker, PendingWrites, Ticket
from lsmkv.base.cursor import TOMBSTONE as WRITTEN_TOMBSTONE, VALUE as WRITTEN_VALUE, Finder
from lsmkv.base.errors import ClosedError, SyncTimeoutError
from lsmkv.base.group_commit import raised_again
from lsmkv.base.key_ranges import Range
from lsmkv.base.transaction import TransactionLimits
from lsmkv.base.ttl import deadline_ms
from lsmkv.base.write_queue import Writer
from lsmkv.base.write_set import MERGE as WRITTEN_MERGE, WriteSet

from .read_state import ReadState
from .ttl_value import with_deadline
from .write_batch import MERGE, META, RANGE_DELETE, TOMBSTONE, VALUE, VALUE_TTL, WriteBatch

#: ``get_in(state, key, sequence, default)``: a point read (point_reads.PointReads.get_in).
GetIn = Callable[[ReadState, bytes, int, "bytes | None"], "bytes | None"]
#: ``view_finders(state, sequence, lower, upper)``: the sources of a view (view_sources.Views.finders).
ViewFinders = Callable[[ReadState, int, "bytes | None", "bytes | None"], list[tuple[Finder, Finder]]]


class TransactionSnapshot:
    """A transaction's snapshot of the LSM engine (the SnapshotReader
    protocol of lsmkv/base/transaction.py): the read sequence ``sequence``,
    registered with the DB's live snapshots until :meth:`close` (or until it
    is garbage: the finalizer releases it). On a writable handle it reads
    the read state of the moment at that sequence (its compactions keep
    what live snapshots need); on a read-only handle, the read state it was
    taken on (``pinned``), as a read-only handle's snapshots do."""

    __slots__ = ("alive", "sequence", "_pinned", "_current_state", "_get_in", "_multi_get_in", "_view_finders",
                 "_check_open",
                 "_release", "__weakref__")

    def __init__(self, sequence: int, pinned: ReadState | None, *, alive: list[bool],
                 current_state: Callable[[], ReadState], get_in: GetIn,
                 multi_get_in: Callable[[ReadState, list[bytes], int], list[bytes | None]], view_finders: ViewFinders,
                 check_open: Callable[[], None], release: Callable[[int], None]) -> None:
        #: The DB's [True], [False] once it closed.
        self.alive = alive
        self.sequence = sequence
        self._pinned = pinned
        self._current_state = current_state
        self._get_in = get_in
        self._multi_get_in = multi_get_in
        self._view_finders = view_finders
        self._check_open = check_open
        self._release = weakref.finalize(self, release, sequence)

    def _state(self) -> ReadState:
        return self._pinned if self._pinned is not None else self._current_state()

    def get(self, key: bytes) -> bytes | None:
        return self._get_in(self._state(), key, self.sequence, None)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        return self._multi_get_in(self._state(), keys, self.sequence)

    def finders(self, lower: bytes | None, upper: bytes | None) -> list[tuple[Finder, Finder]]:
        state = self._state()
        return self._view_finders(state, max(self.sequence, state.floor), lower, upper)

    def check(self) -> None:
        self._check_open()
        if not self._release.alive:
            raise ClosedError("the transaction's snapshot was released (the transaction ended)")

    def close(self) -> None:
        self._release()


class TransactionBatch(WriteBatch):
    """A transaction's writes as one write batch, with what the log writer
    validates it with: its ``ticket``, the keys it ``read``, the ranges it
    ``scanned``, the keys it ``wrote`` and the ranges it deletes
    (``deleted``). The log writer settles it once it dealt with its group:
    ``conflict`` (the ConflictError it was refused with) or ``committed``;
    ``wait_settled()`` waits for that."""

    __slots__ = ("ticket", "read", "scanned", "wrote", "validated", "deleted", "conflict", "committed", "failure",
                 "_settled")

    def __init__(self, ticket: Ticket, writes: WriteSet, reads: Collection[bytes], scanned: list[Range],
                 clock: Callable[[], float]) -> None:
        super().__init__()
        self.ticket = ticket
        self.read = reads
        self.scanned = scanned
        self.wrote = writes.keys()
        #: The keys validated as written: all but those only merged (blind writes).
        self.validated = writes.validated_keys()
        self.deleted = writes.range_deletes
        self.conflict: BaseException | None = None
        self.committed = False
        #: The error the batch's group failed with, if it did.
        self.failure: BaseException | None = None
        self._settled = threading.Lock()
        self._settled.acquire()
        ops = self.ops
        now = None
        user_bytes = 0
        # The ranges first: the transaction's later writes into them are newer.
        for start, end in writes.range_deletes:
            ops.append((RANGE_DELETE, start, end))
            user_bytes += len(start) + len(end)
        for key, kind, value, ttl in writes.entries():
            if kind == WRITTEN_VALUE:
                if ttl is None:
                    ops.append((VALUE, key, value))
                else:
                    if now is None:
                        now = clock()
                    ops.append((VALUE_TTL, key, with_deadline(deadline_ms(now, ttl), value)))
            elif kind == WRITTEN_TOMBSTONE:
                ops.append((TOMBSTONE, key, b""))
            elif kind == WRITTEN_MERGE:
                for operand in value:  # oldest first
                    ops.append((MERGE, key, operand))
                    user_bytes += len(key) + len(operand)
                continue
            else:
                raise ValueError(f"a transaction's write of kind {kind} cannot be committed by this engine")
            user_bytes += len(key) + len(value)
        self.user_bytes = user_bytes

    def settle(self, committed: bool, conflict: BaseException | None, failure: BaseException | None) -> None:
        self.committed = committed
        self.conflict = conflict
        self.failure = failure
        try:
            self._settled.release()
        except RuntimeError:
            pass  # settled already

    def wait_settled(self) -> None:
        self._settled.acquire()
        self._settled.release()


def batch_keys(batch: WriteBatch) -> Iterable[bytes]:
    """The user keys a batch writes (its metadata entries left out)."""
    if type(batch) is TransactionBatch:
        return batch.wrote
    return [key for kind, key, _ in batch.ops if kind != META and kind != RANGE_DELETE]


def group_range_deletes(group: list[Writer]) -> list[tuple[bytes, bytes]]:
    """The ranges [start, end) the batches of ``group`` delete (delete_range)."""
    ranges = []
    for writer in group:
        batch = writer.batch
        if type(batch) is TransactionBatch:
            ranges.extend(batch.deleted)
        else:
            ranges.extend((key, value) for kind, key, value in batch.ops if kind == RANGE_DELETE)
    return ranges


def group_keys(group: list[Writer]) -> Iterator[bytes]:
    """The user keys the batches of ``group`` write, to record with the tracker."""
    return chain.from_iterable(batch_keys(writer.batch) for writer in group)


def validate_group(tracker: ConflictTracker, group: list[Writer]) -> list[Writer]:
    """The writers of ``group`` to append, in order: each transaction batch
    is validated against the commits the tracker recorded since its
    snapshot and the batches kept ahead of it in this group; one that
    conflicts is left out, its writer's ``error`` the ConflictError. The
    log writer calls this before the append, holding its role, for every
    group holding a transaction batch (whose ticket is open, so the tracker
    is active, but for a commit interrupted in its thread)."""
    kept = []
    pending = PendingWrites()
    for writer in group:
        batch = writer.batch
        if type(batch) is TransactionBatch:
            try:
                conflict = tracker.validate(batch.ticket, batch.read, batch.validated, batch.scanned,
                                            written_ranges=batch.deleted, pending=pending)
            except ValueError:
                if batch.ticket.open:
                    raise
                # Its commit was interrupted (a KeyboardInterrupt in the
                # committing thread) and the transaction ended: unvalidated, it never commits.
                writer.error = ClosedError("the transaction ended before its commit was validated; nothing of "
                                           "it was written")
                continue
            if conflict is not None:
                writer.error = conflict.error()
                continue
            pending.add(batch.wrote, batch.deleted)
        else:
            pending.add(batch_keys(batch))
        kept.append(writer)
    return kept


def settle_group(group: list[Writer], failure: BaseException | None) -> None:
    """Tell each transaction batch of ``group`` how the log writer dealt
    with it (the group failed with ``failure``, if not None)."""
    for writer in group:
        batch = writer.batch
        if type(batch) is TransactionBatch:
            # (The writer's error is set by now only if validation refused it.)
            batch.settle(writer.committed, writer.error, failure)


class LsmTransactionHost:
    """The LSM engine's TransactionHost (lsmkv/base/transaction.py):
    ``write(batch, sync)`` is DB.write, ``clock`` the ttl clock, ``tracker``
    the DB's ConflictTracker."""

    __slots__ = ("limits", "merge_operator", "_write", "_clock", "_tracker")

    def __init__(self, limits: TransactionLimits, write: Callable[[WriteBatch, bool], None],
                 clock: Callable[[], float], tracker: ConflictTracker,
                 merge_operator: Callable | None = None) -> None:
        self.limits = limits
        #: The database's merge operator (None: txn.merge is refused).
        self.merge_operator = merge_operator
        self._write = write
        self._clock = clock
        self._tracker = tracker

    def commit_transaction(self, ticket: Ticket, writes: WriteSet, reads: Collection[bytes],
                           scanned_ranges: list[Range], sync: bool) -> None:
        batch = TransactionBatch(ticket, writes, reads, scanned_ranges, self._clock)
        try:
            self._write(batch, sync)
        except SyncTimeoutError as exc:
            if not exc.applied:
                raise  # dropped while queued: never validated, never written
            # Taken into a group: whether it commits is decided by the log writer.
            batch.wait_settled()
            if batch.conflict is not None:
                raise batch.conflict from None
            if not batch.committed and batch.failure is not None:
                raise raised_again(batch.failure) from None
            raise

    def release_transaction(self, ticket: Ticket) -> None:
        self._tracker.end(ticket)
