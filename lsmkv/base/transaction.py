"""Transaction: optimistic, serializable transactions, engine-agnostic.

What users see (both engines)::

    with db.transaction() as txn:          # sync=True: durable at commit
        balance = int(txn.get(b"acct:1", b"0"))
        txn.put(b"acct:1", b"%d" % (balance - 10))
    # committed here; an exception in the block discards it

A transaction reads from a snapshot taken when it begins and sees its own
writes: ``get``/``[]``/``in``/``multi_get`` look in its writes first, and
``scan`` and ``iterator`` merge its writes (the newest source) with the
snapshot's sources, as RocksDB's WriteBatchWithIndex does. Nothing is
written until it commits, at the end of the ``with`` block or at
``commit()``. The commit is validated (lsmkv/base/conflicts.py): if another
commit since the snapshot changed a key it read or wrote, or wrote a key
inside a range it scanned or walked with a cursor (phantoms included), it
raises :class:`~lsmkv.base.errors.ConflictError` and writes nothing; run
it again (:func:`lsmkv.base.retry.run_in_transaction` does, with backoff).
So committed transactions are SERIALIZABLE, in commit order. A transaction
that wrote nothing commits without validation (it is equivalent to running
alone at its snapshot) and never conflicts.

How reads are recorded (lsmkv/base/read_set.py): every key looked up, and
of scans and cursors the range they walked -- a scan stopped after its
first entries has read only those. ``put(key, value, ttl=...)``: the ttl
counts from the commit (the engine dates the value when it writes the
batch); inside the transaction the value reads as live.

Merges and range deletes. ``merge(key, operand)`` (with the engine's
``merge_operator``) reads, inside the transaction, as its operands folded
onto the snapshot's value -- or, if the transaction put, deleted or
range-deleted the key, is folded at once into a put. The engine's commit
folds the operands onto the value the key has then. A key only merged and
never read is a blind write: validation leaves it out of the written keys
(WriteSet.validated_keys), so other commits' writes to it never make the
transaction conflict (counters need no retries), while the commit records
it as written, so transactions that read it do conflict. Reading it back
records a read as any get does. ``delete_range(start, end)`` hides the
snapshot's keys in [start, end) and the transaction's own earlier writes
there from its reads (a later write there shows); it is validated as a
written range (``written_ranges``), and the commit writes the range
deletes before the keys.

A transaction is used by one thread at a time. After ``commit()`` (whatever
its outcome) or ``rollback()``, it is ended: reads, writes and
``commit()`` raise ClosedError, scans and cursors still open raise it at
their next entry, and ``rollback()`` does nothing (so an ``except
ConflictError: txn.rollback()`` is harmless). A transaction dropped without
either is rolled back by the garbage collector. Bad input (a key that is
not bytes, a value over the limit, a bad ttl) raises one clear error and
changes nothing. On a handle that takes no writes (read-only), a
transaction reads as anywhere else and each write raises ReadOnlyError
(``TransactionLimits.writes_refused``), leaving the transaction open.

The engine's side is small (the protocols below):

* the engine's ``db.transaction(sync=False)`` returns
  ``Transaction.begin(host, tracker, snapshot, sync=sync)``, which
  registers with the engine's ConflictTracker, then calls ``snapshot()``
  for a :class:`SnapshotReader` over a snapshot taken now;
* the :class:`TransactionHost` (the DB or a small adapter) commits: its
  ``commit_transaction`` turns the write set into the engine's batch and
  sends it to the log writer, which validates it with the tracker, then
  appends, applies and records it, or raises ``conflict.error()``; and
  ``release_transaction(ticket)`` calls ``tracker.end(ticket)``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Iterator, Protocol

from .conflicts import ConflictTracker, Ticket
from .cursor import TOMBSTONE, VALUE, Cursor, Finder, SourceCursor, stream_view
from .errors import ClosedError, InvalidArgumentError, ReadOnlyError, SizeLimitError
from .key_ranges import Range, is_empty, show_key
from .keys import MAX_KEY_SIZE, MAX_VALUE_SIZE, as_key, as_optional_key, as_value, scan_bounds
from .merge_operators import check_operand, fold
from .read_set import ReadSet, RecordingCursor, recorded_stream
from .ttl import check_ttl
from .write_set import MERGE, WriteSet, hiding_ranges


@dataclass(frozen=True)
class TransactionLimits:
    """The engine's limits, checked as each write is made: the longest key
    (``max_ttl_key_size`` for a put with a ttl: the B+tree stores the
    deadline beside the key), the longest value, and the most bytes a
    transaction may write (keys and values, plus ``entry_overhead`` per key;
    None: no limit but the engine's batch limit at commit). ``writes_refused``:
    None, or why the handle takes no writes at all (a read-only handle): each
    put and delete then raises ReadOnlyError with it, and changes nothing."""

    max_key_size: int = MAX_KEY_SIZE
    max_ttl_key_size: int = MAX_KEY_SIZE
    max_value_size: int = MAX_VALUE_SIZE
    max_write_bytes: int | None = None
    entry_overhead: int = 0
    writes_refused: str | None = None


class SnapshotReader(Protocol):
    """The transaction's snapshot, as the engine reads it. Made by the
    engine AFTER ``tracker.begin()``; closed by the transaction when it
    ends (commit, rollback); if the transaction is dropped, the engine's
    own snapshot clean-up releases it when it is garbage-collected."""

    #: A one-item list the engine sets to [False] when the database closes
    #: (the engine's own, shared by all its streams): a scan looks at it
    #: before each entry and then calls check().
    alive: list[bool]

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` (checked bytes) in the snapshot, or None."""

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys`` (checked bytes, ascending, distinct) in the
        snapshot, in that order: the engine's batched lookup."""

    def finders(self, lower: bytes | None, upper: bytes | None) -> list[tuple[Finder, Finder]]:
        """The (after, before) finders of the snapshot's sources holding keys
        in [lower, upper), newest first (lsmkv/base/cursor.py)."""

    def check(self) -> None:
        """Raise (ClosedError, SnapshotEndedError) if the snapshot can no
        longer be read. Called before every cursor move and scan chunk."""

    def close(self) -> None:
        """Release the snapshot. Called once, when the transaction ends
        (also after its commit succeeded): it must not raise."""


class TransactionHost(Protocol):
    """What a transaction asks of its engine."""

    #: Checked as each write is made.
    limits: TransactionLimits

    #: The engine's merge operator, None if it has none (then ``merge``
    #: raises InvalidArgumentError). An engine without the attribute has none.
    merge_operator: Callable | None

    def commit_transaction(self, ticket: Ticket, writes: WriteSet, reads: Collection[bytes],
                           scanned_ranges: list[Range], sync: bool) -> None:
        """Commit a transaction that wrote something, or raise. The engine
        builds its batch from ``writes.entries()`` (ttl: seconds from now),
        and its log writer, serialized with every other commit, calls
        ``tracker.validate(ticket, reads, writes.keys(), scanned_ranges,
        written_ranges=writes.range_deletes, pending=...)``: on a conflict
        it writes nothing and raises ``conflict.error()``; otherwise it
        appends, applies and records the batch like any other (with
        ``sync``, durable before this returns). Called at most once per
        transaction, with the ticket still open."""

    def release_transaction(self, ticket: Ticket) -> None:
        """The transaction ended: ``tracker.end(ticket)``. May be called from
        a garbage collector's finalizer on any thread: it must not block
        (ConflictTracker.end never does)."""


class _BothAlive:
    """``alive[0]``, for the transaction's streams: True while both the
    transaction and the database are (lsmkv/base/cursor.py's streams call
    ``check`` once it is False)."""

    __slots__ = ("_transaction", "_database")

    def __init__(self, transaction: list[bool], database: list[bool]) -> None:
        self._transaction = transaction
        self._database = database

    def __getitem__(self, index: int) -> bool:
        return self._transaction[0] and self._database[0]


_OPEN = "open"


class Transaction:
    """An optimistic, serializable transaction (see the module docstring)."""

    __slots__ = ("_host", "_ticket", "_reader", "_sync", "_writes", "_reads", "_state", "_alive", "_streams_alive",
                 "_release", "__weakref__")

    def __init__(self, host: TransactionHost, ticket: Ticket, reader: SnapshotReader, *, sync: bool = False) -> None:
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        self._host = host
        self._ticket = ticket
        self._reader = reader
        self._sync = sync
        self._writes = WriteSet()
        self._reads = ReadSet()
        #: "open", then "committed", "rolled back" or "failed" (its commit raised).
        self._state = _OPEN
        self._alive = [True]
        self._streams_alive = _BothAlive(self._alive, reader.alive)
        # Ends the ticket once: at commit/rollback, or when the transaction is garbage.
        self._release = weakref.finalize(self, host.release_transaction, ticket)

    @classmethod
    def begin(cls, host: TransactionHost, tracker: ConflictTracker, snapshot: Callable[[], SnapshotReader], *,
              sync: bool = False) -> "Transaction":
        """A transaction beginning now: what an engine's ``db.transaction(sync)``
        returns. Registers with ``tracker`` first, then takes the snapshot
        (``snapshot()``), in the order validation relies on
        (lsmkv/base/conflicts.py); if anything fails, nothing stays registered."""
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        ticket = tracker.begin()
        try:
            return cls(host, ticket, snapshot(), sync=sync)
        except BaseException:
            tracker.end(ticket)
            raise

    @property
    def sync(self) -> bool:
        """Whether the commit waits for the write to be durable."""
        return self._sync

    @property
    def state(self) -> str:
        """"open", "committed", "rolled back" or "failed" (its commit raised)."""
        return self._state

    def __repr__(self) -> str:
        return f"<Transaction {self._state}, {len(self._writes)} keys written>"

    # -- writes --------------------------------------------------------------------------------

    def put(self, key: object, value: object, ttl: float | None = None) -> None:
        """Set ``key`` to ``value`` when the transaction commits; with ``ttl``
        (seconds), the key expires that long after the commit."""
        self._check_open()
        limits = self._host.limits
        if limits.writes_refused is not None:
            raise ReadOnlyError(limits.writes_refused)
        k = as_key(key, limits.max_key_size if ttl is None else limits.max_ttl_key_size)
        v = as_value(value, limits.max_value_size)
        if ttl is not None:
            ttl = check_ttl(ttl)
        self._check_size(k, v)
        self._writes.put(k, v, ttl)

    def delete(self, key: object) -> None:
        """Remove ``key`` when the transaction commits (not an error if absent)."""
        self._check_open()
        refused = self._host.limits.writes_refused
        if refused is not None:
            raise ReadOnlyError(refused)
        k = as_key(key)
        self._check_size(k, b"")
        self._writes.delete(k)

    def merge(self, key: object, operand: object) -> None:
        """Merge ``operand`` into ``key``'s value with the database's merge
        operator when the transaction commits. Reads in the transaction see
        it folded onto the snapshot's value (or onto the transaction's own
        write of the key). Unless the transaction reads the key, the merge
        is a blind write: another commit's write to the key does not make
        this one conflict (two transactions adding to one counter both
        commit); it is folded onto the value the key has at the commit."""
        self._check_open()
        limits = self._host.limits
        if limits.writes_refused is not None:
            raise ReadOnlyError(limits.writes_refused)
        operator = getattr(self._host, "merge_operator", None)
        if operator is None:
            raise InvalidArgumentError("merge needs a merge operator: open the database with merge_operator=")
        k = as_key(key, limits.max_key_size)
        v = as_value(operand, limits.max_value_size)
        check_operand(operator, v)
        writes = self._writes
        own = writes.get(k)
        if (own is None and not writes.range_deleted(k)) or (own is not None and own[0] == MERGE):
            self._check_size(k, v, "append")
            writes.merge(k, v)
            return
        # The key's value is the transaction's own (put, deleted, or inside
        # one of its range deletes): fold now, into a put (a ttl is kept).
        if own is None or own[0] == TOMBSTONE:
            folded, ttl = fold(operator, k, None, [v]), None
        else:
            folded, ttl = fold(operator, k, own[1], [v]), writes.ttl_of(k)
        folded = as_value(folded, limits.max_value_size)
        self._check_size(k, folded)
        writes.put(k, folded, ttl)

    def delete_range(self, start: object, end: object) -> None:
        """Delete every key k with start <= k < end (end exclusive) when the
        transaction commits; reads in the transaction no longer see them,
        and a write after this one inside the range is kept. start == end
        deletes nothing; start > end raises InvalidArgumentError."""
        self._check_open()
        refused = self._host.limits.writes_refused
        if refused is not None:
            raise ReadOnlyError(refused)
        lo = as_key(start)
        hi = as_key(end)
        if lo > hi:
            raise InvalidArgumentError(f"delete_range: start {show_key(lo)} is above end {show_key(hi)} "
                                       "(the range is [start, end))")
        if lo == hi:
            return
        self._check_size(lo, hi, "range")
        self._writes.delete_range(lo, hi)

    def _check_size(self, key: bytes, value: bytes, how: str = "replace") -> None:
        """Raise SizeLimitError if a write would take the transaction's
        writes over the limit: ``value`` replacing what it wrote to ``key``
        (``how="replace"``), ``value`` added to it (``"append"``: a merge
        operand), or a range delete from ``key`` to ``value`` (``"range"``).
        Each key written and each range counts ``entry_overhead`` once."""
        limits = self._host.limits
        if limits.max_write_bytes is None:
            return
        writes = self._writes
        entries = len(writes) + len(writes.range_deletes)
        old = None if how == "range" else writes.size_of(key)
        if old is None:  # a new entry (or range): its key (start) too, and its overhead
            size = writes.byte_size + len(key) + len(value) + (entries + 1) * limits.entry_overhead
        elif how == "append":
            size = writes.byte_size + len(value) + entries * limits.entry_overhead
        else:
            size = writes.byte_size + len(value) - old + entries * limits.entry_overhead
        if size > limits.max_write_bytes:
            raise SizeLimitError(f"the transaction's writes would take {size} bytes; the limit is "
                                 f"{limits.max_write_bytes}")

    # -- reads ---------------------------------------------------------------------------------

    def get(self, key: object, default: bytes | None = None) -> bytes | None:
        """The value of ``key`` -- the transaction's own write, else the
        snapshot's -- or ``default`` if it is absent."""
        self._check_readable()
        k = as_key(key)
        self._reads.keys.add(k)
        return self._get(k, default)

    def _get(self, key: bytes, default: bytes | None) -> bytes | None:
        writes = self._writes
        own = writes.get(key)
        if own is not None:
            kind = own[0]
            if kind == VALUE:
                return own[1]
            if kind == MERGE:
                return self._resolve(key, own[1])
            return default
        if writes.range_deleted(key):
            return default
        value = self._reader.get(key)
        return default if value is None else value

    def _resolve(self, key: bytes, operands: tuple) -> bytes:
        """The value ``key``'s merge operands fold into over the snapshot's value."""
        return fold(self._host.merge_operator, key, self._reader.get(key), list(operands))

    def __getitem__(self, key: object) -> bytes:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def multi_get(self, keys: Iterable[object]) -> list[bytes | None]:
        """The value of each key (None if absent), in the order given."""
        self._check_readable()
        checked = [as_key(key) for key in keys]
        self._reads.keys.update(checked)
        writes = self._writes
        found: dict[bytes, bytes | None] = {}
        merged = []
        for key in dict.fromkeys(checked):  # (each key once: a key asked twice is folded once)
            own = writes.get(key)
            if own is not None:
                if own[0] == MERGE:
                    merged.append(key)
                else:
                    found[key] = own[1] if own[0] == VALUE else None
            elif writes.range_deleted(key):
                found[key] = None
        rest = sorted(set(checked).difference(found))
        if rest:
            found.update(zip(rest, self._reader.multi_get(rest)))
        for key in merged:  # (their snapshot values were read with the rest)
            found[key] = fold(self._host.merge_operator, key, found[key], list(writes.get(key)[1]))
        return [found[key] for key in checked]

    def scan(self, start: object = None, end: object = None, reverse: bool = False,
             prefix: object = None) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs with start <= key < end (and starting with
        ``prefix``), ascending or descending: the snapshot with the
        transaction's writes over it, as they were when scan() was called."""
        self._check_readable()
        lo, hi = scan_bounds(start, end, prefix)
        if is_empty(lo, hi):
            return iter(())
        reverse = bool(reverse)
        items = stream_view(self._finders(lo, hi), lo, hi, None, reverse, self._check_readable,
                            self._streams_alive, self._reader)  # type: ignore[arg-type]
        span = self._reads.span(None, hi, read=False) if reverse else self._reads.span(lo, None, read=False)
        return recorded_stream(items, span, reverse, lo, hi)

    def iterator(self, lower_bound: object = None, upper_bound: object = None) -> Cursor:
        """A cursor (lsmkv/base/cursor.py) over keys in [lower_bound,
        upper_bound): the snapshot with the transaction's writes over it,
        as they were when it was made."""
        self._check_readable()
        lo = as_optional_key(lower_bound, "lower_bound")
        hi = as_optional_key(upper_bound, "upper_bound")
        sources = [SourceCursor(after, before) for after, before in self._finders(lo, hi)]
        return RecordingCursor(sources, lo, hi, reads=self._reads, check=self._check_readable,
                               pinned=self._reader, alive=self._streams_alive)  # type: ignore[arg-type]

    def _finders(self, lo: bytes | None, hi: bytes | None) -> list[tuple[Finder, Finder]]:
        """The transaction's own writes (if any) over the snapshot's sources."""
        snapshot = self._reader.finders(lo, hi)
        writes = self._writes
        if not writes:
            return list(snapshot)
        if writes.range_deletes:
            deleted = writes.deleted_ranges()
            snapshot = [hiding_ranges(finders, deleted) for finders in snapshot]
        return [writes.finders(self._resolve), *snapshot]

    # -- the end ---------------------------------------------------------------------------------

    def commit(self) -> None:
        """Write the transaction's changes atomically, or raise ConflictError
        (writing nothing). The transaction ends either way."""
        self._check_open()
        try:
            if self._writes:
                self._host.commit_transaction(self._ticket, self._writes, self._reads.keys, self._reads.ranges(),
                                              self._sync)
        except BaseException:
            self._end("failed")
            raise
        self._end("committed")

    def rollback(self) -> None:
        """Discard the transaction's changes; nothing if it already ended."""
        if self._state is _OPEN:
            self._end("rolled back")

    def _end(self, state: str) -> None:
        self._state = state
        self._alive[0] = False
        try:
            self._reader.close()
        finally:
            self._release()

    def __enter__(self) -> "Transaction":
        self._check_open()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._state is not _OPEN:
            return
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def _check_open(self) -> None:
        if self._state is not _OPEN:
            how = "ended by a failed commit" if self._state == "failed" else self._state
            raise ClosedError(f"the transaction was {how}: start a new one with db.transaction()")

    def _check_readable(self) -> None:
        if self._state is not _OPEN:
            self._check_open()
        self._reader.check()
