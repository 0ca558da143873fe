"""PartitionState: everything the loader keeps for one assigned partition.

Its window of fetched, not yet stored records (commit_control.py), its
processor units (units.py; none without a processor), the offsets that
matter (``stored``: what the store holds; ``durable``: what a synced write
made durable and so may be committed to Kafka; ``committed``: what was
committed), the end to reach (``target``, until-caught-up), whether it is
paused, and its lifecycle:

* ``ACTIVE``: records are fetched, dispatched, processed and stored;
* ``REVOKING``: the group is taking it away; no new records are
  dispatched, records in flight may finish and be stored;
* ``FENCED``: it is gone; nothing of it is stored any more (the applier
  checks this under its lock, so once fenced no write includes it), its
  units stop, records still in flight are dropped unstored for the next
  owner to process.

This module holds state; the loader and the applier act on it.
"""

from __future__ import annotations

from .commit_control import OffsetWindow
from .metrics import LoaderMetrics, PartitionMetrics
from ..offsets import encode_offset, meta_name

ACTIVE, REVOKING, FENCED = "active", "revoking", "fenced"


class PartitionState:
    def __init__(self, topic: str, partition: int, start: int | None, capacity: int,
                 loader_metrics: LoaderMetrics) -> None:
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)
        self.meta_name = meta_name(topic, partition)
        self.window = OffsetWindow(capacity, start)
        self.state = ACTIVE
        self.units: list = []
        #: The store this partition is written to: None, the loader's one
        #: store; with partitioned state, the partition's own shard.
        self.db = None
        #: Its shard is catching up to the end the partition had when assigned
        #: (partitioned state: rebuilt from the source topic, or a local shard
        #: left behind); the loader clears it once the shard got there.
        self.restoring = False
        #: ``--changelog``: the restore thread (restore.py) is deciding where
        #: the partition starts (restoring its shard from the changelog, or
        #: checking the changelog covers it); the partition is paused and
        #: its records are not taken until the loader applies the answer.
        self.restore_pending = False
        #: The source offset a changelog restore has applied up to so far
        #: (None: none yet; its progress, before the shard stores an offset).
        self.restore_position: int | None = None
        #: Records this assignment applied from the changelog.
        self.restored = 0
        #: Partitioned state: which partitioners fit the keys its shard
        #: holds (placement.py); its writers count what they write into it
        #: and persist it in the same batch. None: not counted.
        self.placement = None
        #: The store holds every record below this (None: none of this partition yet).
        self.stored: int | None = start
        #: A synced write made ``stored`` durable up to here (safe to commit to Kafka).
        self.durable: int | None = None
        #: Committed to Kafka (by this loader).
        self.committed: int | None = None
        self.target: int | None = None
        #: Where fetching starts when the store has no offset: the group's
        #: committed offset (None: unknown, the beginning).
        self.floor: int | None = start
        #: One past the last offset fetched for this assignment (None: none
        #: yet). Until then the consumer's position may still be the one of
        #: an earlier assignment of the partition, so it proves nothing.
        self.fetched_next: int | None = None
        #: The lowest offset a record dispatched from now on may have: where
        #: the partition was (re)started (its window's start; the loader
        #: moves it to where it assigns or seeks the partition), then one
        #: past the last record dispatched -- the window's
        #: ``last_registered`` once a dispatched batch is registered. A record
        #: below it is a stale fetch and is dropped unregistered: one from
        #: before a seek (librdkafka can still deliver those: a ListOffsets
        #: answer the seek made outdated sends the partition back to its
        #: assigned start, BEGINNING, and it fetches from there again), or
        #: one delivered again. No record is lost that way: every offset
        #: below it was registered, or is below where fetching was meant to start.
        self.position: int = start if start is not None else 0
        self.paused = False
        self.unit_failed = False
        self.loader_metrics = loader_metrics
        self.metrics: PartitionMetrics = loader_metrics.partition(topic, partition)
        self.metrics.start = start
        self.metrics.stored = start
        self.metrics.first_fetched = None
        self.metrics.caught_up = False

    @property
    def fenced(self) -> bool:
        return self.state == FENCED

    @property
    def active(self) -> bool:
        return self.state == ACTIVE

    def stored_value(self) -> bytes:
        return encode_offset(self.stored)

    def caught_up(self, position: int | None = None) -> bool:
        """Whether the store holds everything up to ``target``. ``position``
        (the consumer's) counts too once the window is empty: offsets below
        it that were never delivered (transaction markers, compacted away)
        need no storing."""
        if self.target is None:
            return False
        if self.stored is not None and self.stored >= self.target:
            return True
        return position is not None and position >= self.target and self.window.pending == 0

    def __repr__(self) -> str:
        return f"<PartitionState {self.topic}[{self.partition}] {self.state} stored={self.stored}>"
