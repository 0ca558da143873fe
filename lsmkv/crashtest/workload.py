"""What a crash-test child thread does next: a seeded stream of operations.

Each thread writes only its own keys (:meth:`KeySpace.owned_by`): puts,
deletes, merges into its counters (``UInt64Add`` operands), range deletes
over a stretch of one run of its keys, write batches (small ones mixing
all of these, and now and then a large one spanning keys of every kind)
and transactions (a few reads of its own keys, then a few writes of every
kind, committed; now and then rolled back instead), a share of them with
``sync=True`` (most of them, on the threads that are sync writers: they
meet in group commit), and a share of the puts with a ttl (short ones that
expire during the test, long ones that do not; never on a counter); a
small hot set of its keys takes half of the writes, so keys are
overwritten, merged into and deleted over and over. Merges, range deletes
and transactions appear only where the engine supports them (the
``features`` of its adapter in :mod:`.engines`). Between writes a thread sometimes asks for maintenance: ``flush``
(the B+tree's flush is a checkpoint) and, on engines that have it,
``compact`` (``compact_range`` over a random range or everything). Now and
then a thread bulk-loads: an ``ingest`` of a table file holding 5 to 200 of
its keys (values and tombstones), always durable.

The stream is a pure function of the seed, so a cycle can be replayed. This
module decides only *what* to do; the child executes it and the oracle
records it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .keyspace import KeySpace, is_counter
from .oracle import MERGE, RANGE, Intent, op_id

#: What an engine may support beyond puts, deletes, batches and ingest.
FEATURES = frozenset({"merge", "delete_range", "txn"})


@dataclass(frozen=True)
class Mix:
    """Probabilities of each operation (writes share what maintenance leaves)."""

    put: float = 0.42
    delete: float = 0.14
    batch: float = 0.25
    large_batch: float = 0.02
    #: Single merges (into a counter) and range deletes, and transactions.
    merge: float = 0.06
    delete_range: float = 0.03
    txn: float = 0.08
    #: Share of transactions rolled back instead of committed.
    rollback: float = 0.15
    #: Share of the items of batches and transactions that merge, and that
    #: delete a range (the others put or delete).
    merge_item: float = 0.15
    range_item: float = 0.06
    sync: float = 0.05
    #: Share of put items that get a ttl, and of those, the share with a
    #: short one (up to ``short_ttl_ms``: expiring during the cycle or soon
    #: after); the others get ``long_ttl_ms`` (never expiring during a run).
    ttl: float = 0.15
    short_ttl: float = 0.4
    short_ttl_ms: int = 3000
    long_ttl_ms: int = 86_400_000
    #: Maintenance, per operation: flush (LSM), checkpoint (B+tree's flush), compact_range.
    flush: float = 0.003
    checkpoint: float = 0.003
    compact: float = 0.0008
    #: Share of operations that ingest a table file of the thread's keys.
    ingest: float = 0.003
    hot_share: float = 0.5


@dataclass(frozen=True)
class Planned:
    """An operation to run: its oracle record, plus the key range of a
    compaction, or the keys a transaction reads before it writes."""

    intent: Intent
    compact_range: tuple[int | None, int | None] = (None, None)
    reads: tuple[int, ...] = ()


class ThreadWorkload:
    """The operations of one child thread in one cycle."""

    def __init__(self, space: KeySpace, cycle: int, thread: int, seed: int, *, maintenance: tuple[str, ...],
                 features: frozenset[str] = FEATURES, mix: Mix = Mix()) -> None:
        unknown = set(features) - FEATURES
        if unknown:
            raise ValueError(f"unknown workload features {sorted(unknown)}; choose from {sorted(FEATURES)}")
        self._space = space
        self._cycle = cycle
        self._thread = thread
        self._rng = random.Random(seed)
        self._mix = mix
        self._maintenance = maintenance
        self._features = frozenset(features)
        self.keys = space.owned_by(thread)
        self._hot = self.keys[:max(2, len(self.keys) // 20)]
        self._excluded: set[int] = set()
        self._counters = [i for i in self.keys if is_counter(i)]
        self._n = 0

    def exclude(self, index: int) -> None:
        """Never choose this key (it is kept for a deliberate fault)."""
        self._excluded.add(index)
        self.keys = [i for i in self.keys if i != index]
        self._hot = [i for i in self._hot if i != index] or self.keys[:2]
        self._counters = [i for i in self._counters if i != index]

    @property
    def started(self) -> int:
        """Operations handed out so far."""
        return self._n

    def next_id(self) -> str:
        self._n += 1
        return op_id(self._cycle, self._thread, self._n)

    def _key(self) -> int:
        rng = self._rng
        return rng.choice(self._hot if rng.random() < self._mix.hot_share else self.keys)

    def _counter(self) -> int:
        rng = self._rng
        hot = [i for i in self._hot if is_counter(i)]
        return rng.choice(hot if hot and rng.random() < self._mix.hot_share else self._counters)

    def _merge_item(self) -> tuple:
        return self._counter(), MERGE, self._rng.randint(1, 1000)

    def _range_item(self) -> tuple:
        """A range delete of a stretch around one of the thread's keys:
        within its run (one kind, one block), never over an excluded key."""
        rng = self._rng
        index = self._key()
        low, high = self._space.run_of(index)
        first = last = index
        stop_low, stop_high = rng.randint(low, index), rng.randint(index, high)
        while first > stop_low and first - 1 not in self._excluded:
            first -= 1
        while last < stop_high and last + 1 not in self._excluded:
            last += 1
        return first, RANGE, last

    def _mixed_item(self, delete_share: float) -> tuple:
        """An item of a batch or a transaction: a put, delete, merge or range delete."""
        rng, mix = self._rng, self._mix
        r = rng.random()
        if "merge" in self._features and r < mix.merge_item:
            return self._merge_item()
        if "delete_range" in self._features and r > 1 - mix.range_item:
            return self._range_item()
        return self._item(self._key(), delete_share)

    def _item(self, index: int, delete_share: float) -> tuple:
        rng, mix = self._rng, self._mix
        if rng.random() < delete_share:
            return index, None
        length = self._space.value_length(index, rng)
        if rng.random() < mix.ttl and not is_counter(index):
            ttl = rng.randint(1, mix.short_ttl_ms) if rng.random() < mix.short_ttl else mix.long_ttl_ms
            return index, length, ttl
        return index, length

    def next(self) -> Planned:
        rng, mix = self._rng, self._mix
        r = rng.random()
        for kind in self._maintenance:
            chance = getattr(mix, kind)
            if r < chance:
                if kind != "compact" or rng.random() < 0.5:
                    return Planned(Intent(self.next_id(), kind))
                low, high = sorted(rng.sample(range(self._space.size), 2))
                return Planned(Intent(self.next_id(), kind), (low, high))
            r -= chance
        if rng.random() < mix.ingest:
            chosen = rng.sample(self.keys, min(len(self.keys), rng.randint(5, 200)))
            items = tuple((index, None) if rng.random() < 0.2 else (index, self._space.value_length(index, rng))
                          for index in chosen)
            return Planned(Intent(self.next_id(), "ingest", items, True))
        sync = rng.random() < mix.sync
        merge = mix.merge if "merge" in self._features else 0.0
        delete_range = mix.delete_range if "delete_range" in self._features else 0.0
        txn = mix.txn if "txn" in self._features else 0.0
        r = rng.random() * (mix.put + mix.delete + mix.batch + mix.large_batch + merge + delete_range + txn)
        if r < merge:
            return Planned(Intent(self.next_id(), "merge", (self._merge_item(),), sync))
        r -= merge
        if r < delete_range:
            return Planned(Intent(self.next_id(), "delete_range", (self._range_item(),), sync))
        r -= delete_range
        if r < txn:
            reads = tuple(self._key() for _ in range(rng.randint(1, 4)))
            items = tuple(self._mixed_item(0.25) for _ in range(rng.randint(1, 6)))
            kind = "rollback" if rng.random() < mix.rollback else "txn"
            return Planned(Intent(self.next_id(), kind, items, sync), reads=reads)
        r -= txn
        if r < mix.put:
            return Planned(Intent(self.next_id(), "put", (self._item(self._key(), 0.0),), sync))
        r -= mix.put
        if r < mix.delete:
            return Planned(Intent(self.next_id(), "delete", ((self._key(), None),), sync))
        r -= mix.delete
        if r < mix.batch:
            # Hot keys too, so a batch may hold one key twice (the later item wins).
            items = tuple(self._mixed_item(0.25) for _ in range(rng.randint(1, 12)))
            return Planned(Intent(self.next_id(), "batch", items, sync))
        items = tuple(self._item(index, 0.2) for index in rng.sample(self.keys, min(len(self.keys),
                                                                                     rng.randint(20, 100))))
        return Planned(Intent(self.next_id(), "batch", items, sync))
