"""Where a loader's partitions are stored: one store, or a shard a partition.

A :class:`~.loader.Loader` chooses its store role once, when it is made:

* :class:`OneStore`: every partition of every topic into one store (a path
  the loader opens, or an open DB the caller shares). A partition without
  an offset in the store starts at the group's committed offset (else the
  beginning): the store may be new, the group's progress is its own.
* :class:`PartitionedStore`: partitioned state (shards.py: one store per
  partition of the one topic, Kafka Streams' task state). A partition is
  *claimed* in the shard directory before its shard is read (a standby
  writing it on this instance stops first), keeps a placement tally of its
  shard's keys (placement.py), starts at its shard's offset or else at the
  beginning -- the group's committed offset belongs to another instance's
  shard and says nothing of this one -- and counts as restoring until its
  shard holds the end the partition had when assigned.

Both build the :class:`~.partition.PartitionState` of a partition being
assigned (:meth:`take`) and set where its fetching starts; the rest of the
loader does not ask which one it has.
"""

from __future__ import annotations

import logging
import os

from lsmkv.base.keys import MAX_KEY_SIZE

from ..errors import LoaderError
from ..offsets import stored_offset
from ..scaleout.placement import PlacementTally
from ..scaleout.shards import ShardedStore
from ..settings import LoaderSettings
from ..store import open_store
from .metrics import LoaderMetrics
from .partition import PartitionState

log = logging.getLogger(__name__)


def partitioned(store, partitioned: bool) -> bool:
    """Whether a loader of ``store`` keeps partitioned state (asked for, or a ShardedStore given)."""
    return partitioned or isinstance(store, ShardedStore)


class OneStore:
    """Every partition into one store: ``db``."""

    #: One store holds no shards (the loader's ``shards`` is None).
    shards = None

    @staticmethod
    def check(settings: LoaderSettings) -> None:
        """Refuse what needs partitioned state (before anything is opened)."""
        if settings.changelog:
            raise LoaderError("a changelog needs partitioned state (--partitioned or --serve): it holds what each "
                              "partition's shard applied")

    def __init__(self, settings: LoaderSettings, store, *, engine: str, options: dict | None,
                 metrics: LoaderMetrics, name: str) -> None:
        if isinstance(store, (str, bytes, os.PathLike)):
            self.db = open_store(store, engine, options)
            self._owns_db = True
        else:
            for attr in ("write_batch", "get_meta", "meta"):
                if not hasattr(store, attr):
                    raise TypeError(f"store must be a path or an open lsmkv/btree DB, not {type(store).__name__}")
            self.db = store
            self._owns_db = False
        self._settings = settings
        self._metrics = metrics
        #: The longest key the store takes (read when the run starts).
        self.max_key = MAX_KEY_SIZE

    def start(self) -> None:
        self.max_key = self.db.stats().get("max_key_size", MAX_KEY_SIZE)

    def assigning(self, consumer) -> None:
        """Partitions are about to be taken (nothing to prepare for one store)."""

    def take(self, consumer, tp) -> PartitionState:
        """The state of partition ``tp`` (a TopicPartition whose offset this
        sets to where fetching starts: the store's offset, else the group's
        committed one, else the beginning)."""
        from confluent_kafka import OFFSET_BEGINNING
        stored = stored_offset(self.db, tp.topic, tp.partition)
        ps = PartitionState(tp.topic, tp.partition, stored, self._settings.max_pending, self._metrics)
        if stored is not None:
            tp.offset = stored
        else:
            ps.floor = _committed_offset(consumer, tp)
            tp.offset = ps.floor if ps.floor is not None else OFFSET_BEGINNING
            if ps.floor is not None:
                ps.position = ps.floor
        return ps

    def release(self, states: list[PartitionState]) -> None:
        """``states`` are released (nothing to give back for one store)."""

    def shard_of(self, partition: int, partitions) -> None:
        """One store has no shard of a partition."""
        return None

    def close(self) -> None:
        """Close the store if the loader opened it."""
        if self._owns_db:
            self.db.close()


class PartitionedStore:
    """A shard per partition of the one topic: ``shards`` (a ShardedStore)."""

    @staticmethod
    def check(settings: LoaderSettings) -> None:
        """Refuse what partitioned state cannot hold (before anything is opened)."""
        if len(settings.topics) != 1:
            raise LoaderError(f"partitioned state holds one topic (a shard is one of its partitions), not "
                              f"{len(settings.topics)}: {settings.topics!r}")

    def __init__(self, settings: LoaderSettings, store, *, engine: str, options: dict | None,
                 metrics: LoaderMetrics, name: str) -> None:
        if isinstance(store, ShardedStore):
            if store.topic != settings.topics[0]:
                raise LoaderError(f"{store.path} holds shards of topic {store.topic!r}, not {settings.topics[0]!r}")
            self.shards = store
            self._owns_db = False
        else:
            if not isinstance(store, (str, bytes, os.PathLike)):
                raise TypeError(f"partitioned state needs a directory path or a ShardedStore, not "
                                f"{type(store).__name__}")
            self.shards = ShardedStore(os.fsdecode(store), engine, topic=settings.topics[0], options=options)
            self._owns_db = True
        self.db = self.shards
        self._settings = settings
        self._metrics = metrics
        self._name = name
        #: The longest key every shard taken so far takes.
        self.max_key = MAX_KEY_SIZE

    def start(self) -> None:
        self.max_key = self.shards.stats().get("max_key_size", MAX_KEY_SIZE)

    def assigning(self, consumer) -> None:
        """Record the topic's partition count in the shard directory (the
        routing of reads needs it) before partitions are taken."""
        topic = self.shards.topic
        try:
            info = consumer.list_topics(topic, timeout=10).topics.get(topic)
        except Exception as exc:  # noqa: BLE001 - the next assignment tries again
            log.warning("%s: reading %s's partition count: %r", self._name, topic, exc)
            return
        if info is not None and info.error is None and info.partitions:
            self.shards.note_partitions(len(info.partitions))

    def take(self, consumer, tp) -> PartitionState:
        """The state of partition ``tp``, its shard claimed and opened (``tp``'s
        offset set to where fetching starts: the shard's offset, else the
        beginning: the shard is rebuilt from the source topic, which a
        compacted topic is its own changelog of)."""
        from confluent_kafka import OFFSET_BEGINNING
        s = self._settings
        self.shards.claim(tp.partition)  # a standby of it on this instance stops writing first
        db = self.shards.shard(tp.partition)
        self.max_key = min(self.max_key, db.stats().get("max_key_size", MAX_KEY_SIZE))
        stored = stored_offset(db, tp.topic, tp.partition)
        ps = PartitionState(tp.topic, tp.partition, stored, s.max_pending, self._metrics)
        ps.db = db
        ps.placement = PlacementTally.load(db, tp.topic, tp.partition, self.shards.partitions, stored,
                                           declared=s.partitioner)
        # A shard counts as restoring until it holds the end the partition
        # had when assigned: rebuilt from nothing, or a local shard left
        # behind while another instance owned the partition.
        ps.restoring = True
        tp.offset = stored if stored is not None else OFFSET_BEGINNING
        return ps

    def release(self, states: list[PartitionState]) -> None:
        """Give ``states``' shards back (a standby may take them again)."""
        for ps in states:
            self.shards.unclaim(ps.partition)

    def shard_of(self, partition: int, partitions):
        """The open shard of ``partition`` if ``partitions`` (the loader's
        PartitionContexts) hold it active, else None."""
        ps = partitions.get((self.shards.topic, partition))
        return ps.db if ps is not None and ps.active else None

    def close(self) -> None:
        """Close the shard directory if the loader opened it."""
        if self._owns_db:
            self.shards.close()


def _committed_offset(consumer, tp) -> int | None:
    """The group's committed offset of ``tp`` (None: none, or unknown)."""
    from confluent_kafka import KafkaException, TopicPartition
    try:
        got = consumer.committed([TopicPartition(tp.topic, tp.partition)], timeout=10)
    except KafkaException:
        return None
    return got[0].offset if got and got[0].offset >= 0 else None
