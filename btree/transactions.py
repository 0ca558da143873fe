"""Transactions on the B+tree: the engine's side of lsmkv/base/transaction.py.

``db.transaction(sync=False)`` is ``Transaction.begin`` (the engine-
independent transaction: read-your-writes, the read set, commit and
rollback) with what this module gives it:

* :class:`TransactionSnapshot`: the transaction's reads, through a btree
  snapshot (btree/snapshot.py) taken when it begins, AFTER it registered
  with the DB's ConflictTracker (lsmkv/base/conflicts.py);
* :class:`TransactionHost`: one per transaction, so that its commit knows
  the snapshot it read from. Its ``limits`` are the tree's (the key limit
  of the page size, eight bytes less for a put with a ttl, which keeps its
  deadline beside the key, and MAX_BATCH_BYTES); on a read-only handle
  asking for them raises ReadOnlyError, so a transaction fails at its first
  write and reads as any other. ``commit_transaction`` turns the write set
  into one :class:`QueuedTransaction` -- a batch with one log record, the
  ttls dated now, deletes of keys longer than any stored key left out as
  WriteBatch does -- and hands it to the write queue like any batch;
* :func:`screen_group`: the log writer's check of the transaction batches
  of a group (btree/db.py's ``_append_and_apply``, under the tree's lock,
  BEFORE the group's log append): a batch whose snapshot ended gets
  SnapshotEndedError, one that ``tracker.validate`` finds in conflict with
  a commit since its snapshot -- or with a batch ahead of it in the same
  group (PendingWrites) -- gets ConflictError; either is left out of the
  append, so it leaves nothing in the log, the tree or after recovery;
* :func:`recorded_writes`: the user keys a group wrote and the ranges it
  deleted, which the log writer records in the tracker after applying it,
  while a transaction is open.

A transaction's merges go into its batch as operands, folded by the log
writer onto the value the key has at the commit (btree/merging.py), not
the snapshot's: a merge the transaction did not read back is a blind write,
not validated (two transactions adding to one counter both commit), but
recorded as written, so a transaction that read the key conflicts. Its
range deletes come first in the batch, then its last write of each key.

A btree snapshot outlives checkpoints, ``compact_range()``, ``ingest()``
and a read-only handle's refresh (it reads the tree it was taken on: see
btree/db.py and btree/readers.py); it ends only when a write that failed
while changing the tree has the tree rebuilt from the disk. A
transaction open then cannot read any more (SnapshotEndedError, as its
snapshot's own readers) and its commit fails with the same error, writing
nothing, even if it had read everything before: the error names why; run
the transaction again. SnapshotEndedError, not ConflictError: no other
commit changed what it read, and it is the error its reads raise. A
transaction that wrote nothing still commits (its reads, all made before
the end, were of one snapshot).

This module never touches the log or the tree; the DB calls it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Iterator

from lsmkv.base.conflicts import ConflictTracker, PendingWrites, Ticket
from lsmkv.base.cursor import VALUE, Finder
from lsmkv.base.errors import ReadOnlyError, SnapshotEndedError
from lsmkv.base.key_ranges import Range
from lsmkv.base.keys import MAX_VALUE_SIZE
from lsmkv.base.transaction import TransactionLimits
from lsmkv.base.ttl import deadline_ms
from lsmkv.base.write_queue import Writer
from lsmkv.base.write_set import MERGE, WriteSet

from .cursor import ChunkReader, snapshot_source
from .node import DEADLINE_SIZE, Expiring
from .merging import MergeOperand
from .wal import PUT_TTL_OP, MetaEntry, RangeDelete, encode_batch
from .write_batch import MAX_BATCH_BYTES, QueuedWrite

if TYPE_CHECKING:
    from .snapshot import Snapshot

log = logging.getLogger(__name__)


def transaction_limits(max_key: int) -> TransactionLimits:
    """The limits of a tree whose longest key is ``max_key``: each write
    counts the largest head an operation takes in the log record (a put
    with a ttl's), so a transaction's record stays within MAX_BATCH_BYTES
    plus its frame."""
    return TransactionLimits(max_key_size=max_key, max_ttl_key_size=max_key - DEADLINE_SIZE,
                             max_value_size=MAX_VALUE_SIZE, max_write_bytes=MAX_BATCH_BYTES,
                             entry_overhead=PUT_TTL_OP.size)


class TransactionSnapshot:
    """A transaction's reads: a btree snapshot, read with the DB's
    callables (the SnapshotReader protocol of lsmkv/base/transaction.py)."""

    __slots__ = ("alive", "snapshot", "_get", "_multi_get", "_read_chunk", "_check")

    def __init__(self, snapshot: Snapshot, alive: list[bool], *, get: Callable[[Snapshot, bytes], bytes | None],
                 multi_get: Callable[[Snapshot, list[bytes]], list[bytes | None]],
                 read_chunk: ChunkReader, check: Callable[[], None]) -> None:
        #: The DB's: set to [False] when it closes.
        self.alive = alive
        self.snapshot = snapshot
        self._get = get
        self._multi_get = multi_get
        self._read_chunk = read_chunk
        self._check = check

    def get(self, key: bytes) -> bytes | None:
        return self._get(self.snapshot, key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        return self._multi_get(self.snapshot, keys)

    def finders(self, lower: bytes | None, upper: bytes | None) -> list[tuple[Finder, Finder]]:
        # One source: the tree as the snapshot sees it (a new one each time:
        # a source remembers where its last chunk stopped).
        source = snapshot_source(self._read_chunk)
        return [(source.after, source.before)]

    def check(self) -> None:
        self._check()

    def close(self) -> None:
        try:
            self.snapshot.close()
        except Exception:  # noqa: BLE001 - must not raise; the DB's own clean-up frees it at close
            log.exception("closing a transaction's snapshot failed")


class QueuedTransaction(QueuedWrite):
    """A transaction's commit as the write queue carries it: the batch (its
    operations and log record) and what the log writer validates it with."""

    __slots__ = ("ticket", "reads", "writes", "scanned", "snapshot")

    def __init__(self, ops: list, record: bytes, user_bytes: int, *, ticket: Ticket, reads: Collection[bytes],
                 writes: WriteSet, scanned: list[Range], snapshot: Snapshot) -> None:
        super().__init__("transaction", ops, record, user_bytes)
        self.ticket = ticket
        self.reads = reads
        self.writes = writes
        self.scanned = scanned
        self.snapshot = snapshot


class TransactionHost:
    """The TransactionHost of one transaction (lsmkv/base/transaction.py):
    its commit goes to ``commit(queued, sync)`` (the DB's write queue)."""

    __slots__ = ("_limits", "_tracker", "_commit", "_max_key", "_clock", "_take_snapshot", "_path", "reader",
                 "merge_operator")

    def __init__(self, limits: TransactionLimits | None, tracker: ConflictTracker,
                 commit: Callable[[QueuedWrite, bool], None], take_snapshot: Callable[[], TransactionSnapshot], *,
                 max_key: int, clock: Callable[[], float] = time.time, path: str = "",
                 merge_operator: Callable | None = None) -> None:
        #: The database's merge operator (None: the transaction's merges are refused).
        self.merge_operator = merge_operator
        #: None on a read-only handle: no writes.
        self._limits = limits
        self._tracker = tracker
        self._commit = commit
        self._max_key = max_key
        self._clock = clock
        self._take_snapshot = take_snapshot
        self._path = path
        #: The transaction's snapshot, once begun.
        self.reader: TransactionSnapshot | None = None

    @property
    def limits(self) -> TransactionLimits:
        limits = self._limits
        if limits is None:
            raise ReadOnlyError(f"the btree database {self._path} was opened with read_only=True: its "
                                "transactions can read, not write")
        return limits

    def snapshot(self) -> TransactionSnapshot:
        """The transaction's snapshot, taken now (what Transaction.begin calls)."""
        reader = self.reader = self._take_snapshot()
        return reader

    def commit_transaction(self, ticket: Ticket, writes: WriteSet, reads: Collection[bytes],
                           scanned_ranges: list[Range], sync: bool) -> None:
        now = self._clock()
        max_key = self._max_key
        # The range deletes first: a key the transaction wrote after one is
        # in its entries (one it wrote before inside the range is not).
        ops: list = [(start, RangeDelete(end)) for start, end in writes.range_deletes]
        user_bytes = sum(len(start) + len(end) for start, end in writes.range_deletes)
        merges = 0
        for key, kind, value, ttl in writes.entries():
            if kind == VALUE:
                user_bytes += len(key) + len(value)
                ops.append((key, value if ttl is None else Expiring(deadline_ms(now, ttl), value)))
            elif kind == MERGE:
                user_bytes += len(key) + sum(map(len, value))
                ops.append((key, MergeOperand(value)))
                merges += 1
            else:
                user_bytes += len(key)
                if len(key) <= max_key:  # a longer key is in no tree: nothing to delete or log
                    ops.append((key, None))
        queued = QueuedTransaction(ops, encode_batch(ops) if ops and not merges else b"", user_bytes,
                                   ticket=ticket, reads=reads, writes=writes, scanned=scanned_ranges,
                                   snapshot=self.reader.snapshot)
        queued.merges = merges
        self._commit(queued, sync)

    def release_transaction(self, ticket: Ticket) -> None:
        self._tracker.end(ticket)


def screen_group(group: list[Writer], tracker: ConflictTracker, view_gen: int,
                 ended: Callable[[], SnapshotEndedError]) -> list[Writer]:
    """The writers of ``group`` whose batches may be appended: each
    transaction batch is checked in group order (see the module docstring)
    and, if it fails, gets its error and is left out. ``view_gen``: the
    DB's view generation (a snapshot taken in another one ended);
    ``ended()``: the error of a transaction whose snapshot ended. Called
    by the log writer, holding the tree's lock, while ``tracker.active``."""
    for writer in group:
        if type(writer.batch) is QueuedTransaction:
            break
    else:
        return group
    kept = []
    pending = PendingWrites()
    for writer in group:
        queued = writer.batch
        if type(queued) is QueuedTransaction:
            if queued.snapshot._gen != view_gen:
                writer.error = ended()
                continue
            # (Its blind merges are not validated: they commute with other writes.)
            conflict = tracker.validate(queued.ticket, queued.reads, queued.writes.validated_keys(),
                                        queued.scanned, written_ranges=queued.writes.range_deletes,
                                        pending=pending)
            if conflict is not None:
                writer.error = conflict.error()
                continue
        kept.append(writer)
        pending.add(_user_keys(queued.ops), _ranges(queued.ops))
    return kept


def _user_keys(ops: list) -> Iterator[bytes]:
    for key, value in ops:
        if type(value) is not MetaEntry and type(value) is not RangeDelete:
            yield key


def _ranges(ops: list) -> list[Range]:
    return [(key, value.end) for key, value in ops if type(value) is RangeDelete]


def recorded_writes(group: Iterable[Writer]) -> tuple[list[bytes], list[Range]]:
    """The user keys the batches of ``group`` wrote and the ranges they
    deleted, for ``tracker.record``: metadata entries and the deletes of
    expired keys by a ttl sweep left out (an expired key reads as absent
    before and after)."""
    keys: list[bytes] = []
    ranges: list[Range] = []
    for writer in group:
        queued = writer.batch
        if queued.kind != "sweep":
            keys.extend(_user_keys(queued.ops))
            ranges.extend(_ranges(queued.ops))
    return keys, ranges
