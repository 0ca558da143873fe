"""OffsetWindow: out-of-order completion, in-order progress (Decaton's OutOfOrderCommitControl).

One window per assigned partition. Every fetched record is *registered*
in fetch order (ascending offsets); processor units *complete* records in
any order, each with what it yields for the store (its operations: a put,
a delete, or nothing); the applier *takes* the completed prefix -- the
records from the oldest registered one up to the first not yet completed
-- and writes it in offset order. The partition's progress (the offset the
store and Kafka's commit record) is therefore the first offset not yet
taken: every offset below it is applied, none at or above it is.

Invariant (what this class owns): entries are kept in registration order
and taken only from the front while completed, so the offsets taken form
a prefix of the offsets fetched; ``pending`` counts the records registered
and not yet taken, which is what bounds a partition's memory (the loader
pauses the partition when it reaches ``capacity``).

An entry covers one record (completed by a unit) or a run of records
fetched together and completed at once (no processor: the fetch itself
completes them), so the common case costs one entry per fetched chunk, not
one per record.

Thread-safety: the consumer thread registers, units complete, the applier
takes. Completing writes the entry's operations before its ``done`` flag,
and ``take_ready`` reads the flag first, so under the GIL a taken entry's
operations are always complete. ``register`` and ``take_ready`` touch the
deque's two ends only (deque appends and pops are atomic).
"""

from __future__ import annotations

from collections import deque

#: Positions in an entry (a list, for speed): first offset, next offset
#: (one past the last record it covers), records covered, done, operations,
#: bytes of the operations' keys and values.
FIRST, NEXT, COUNT, DONE, OPS, BYTES = range(6)


class OffsetWindow:
    """The registered, not yet applied records of one partition."""

    __slots__ = ("capacity", "_entries", "registered", "taken", "next_offset", "last_registered")

    def __init__(self, capacity: int, start_offset: int | None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._entries: deque[list] = deque()
        #: Records registered and records taken, since the window was made.
        self.registered = 0
        self.taken = 0
        #: The partition's progress: every offset below it is taken (applied);
        #: None until known (no stored offset: the first record fetched sets it).
        self.next_offset = start_offset
        #: The offset after the last registered record (where fetching continues).
        self.last_registered = start_offset if start_offset is not None else 0

    @property
    def pending(self) -> int:
        """Records registered and not yet taken."""
        return self.registered - self.taken

    @property
    def full(self) -> bool:
        return self.registered - self.taken >= self.capacity

    def register(self, offset: int) -> list:
        """A not-yet-completed entry for the record at ``offset`` (which must
        be above every offset registered before); complete it with
        :func:`complete`."""
        if offset < self.last_registered:
            raise ValueError(f"offset {offset} registered after {self.last_registered - 1}")
        if self.next_offset is None:
            self.next_offset = offset
        entry = [offset, offset + 1, 1, False, None, 0]
        self._entries.append(entry)
        self.registered += 1
        self.last_registered = offset + 1
        return entry

    def register_done(self, first: int, next_offset: int, count: int, ops: list, nbytes: int) -> None:
        """Register ``count`` records from ``first`` up to ``next_offset``
        (exclusive) as one entry, completed already with ``ops`` (``nbytes``
        of keys and values)."""
        if first < self.last_registered or next_offset <= first:
            raise ValueError(f"records {first}..{next_offset - 1} registered after {self.last_registered - 1}")
        if self.next_offset is None:
            self.next_offset = first
        self._entries.append([first, next_offset, count, True, ops, nbytes])
        self.registered += count
        self.last_registered = next_offset

    def ready(self) -> bool:
        """Whether the oldest entry is completed (there is a prefix to take)."""
        entries = self._entries
        return bool(entries) and entries[0][DONE]

    def take_ready(self, limit: int, byte_limit: int) -> tuple[list, int, int, int]:
        """Take completed entries from the front, at least one if the front
        is completed, until ``limit`` records or ``byte_limit`` bytes or an
        entry not completed: (their operation lists in offset order, records
        taken, bytes taken, the new progress offset)."""
        entries = self._entries
        out = []
        count = 0
        nbytes = 0
        while entries and count < limit and nbytes < byte_limit:
            entry = entries[0]
            if not entry[DONE]:
                break
            entries.popleft()
            if entry[OPS]:
                out.append(entry[OPS])
            count += entry[COUNT]
            nbytes += entry[BYTES]
            self.next_offset = entry[NEXT]
        self.taken += count
        return out, count, nbytes, self.next_offset

    def clear(self) -> int:
        """Drop every entry (a partition revoked or lost); returns how many
        records were dropped untaken."""
        dropped = self.pending
        self._entries.clear()
        self.taken = self.registered
        return dropped


def complete(entry: list, ops: list | None) -> None:
    """Complete a registered record with its store operations (None or
    empty: nothing to store). Operations first, then the flag."""
    if ops:
        entry[BYTES] = sum(len(k) + (len(v) if v is not None else 0) for k, v in ops)
    entry[OPS] = ops
    entry[DONE] = True
