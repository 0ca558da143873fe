"""Standby replicas: warm shard copies of partitions another instance owns.

``lsmkv kafka load --serve ... --standby-replicas N`` keeps, beside the
partitions the group assigns this instance, up to N copies of every
partition among the *other* live instances (Kafka Streams' standby
tasks). Each instance computes the same placement from the member
announcements (members.py): the live instances sorted by URL form a
ring, and partition P's standbys are the N instances that follow its
active owner on the ring -- never the owner, one per instance, spread
evenly when the active partitions are. A standby is applied like the
active copy (same records, same shard layout, the offset in the same
atomic batch) by a consumer of its own on manual assignment (no group:
it does not take part in the rebalance), so when the group gives the
partition to this instance the loader resumes from the standby's offset
and replays only what the standby had not applied yet.

Who writes a shard is decided under the shard directory's ``ownership``
lock (shards.py): the loader *claims* a partition on assignment, which
makes this replicator drop it at once (no later write includes it)
before the loader reads the shard's offset; the replicator takes a
partition only while nobody claims it.

Where the copies go: with the lag-aware assignment of a serving group
(coordination.py, assignor.py) the group leader places standbys and
warm-ups, and the replicator keeps exactly the partitions its
``wanted()`` callable returns (this instance's standby and warm-up
partitions). Without it (``wanted=None``) each instance places standbys
itself from the announcements, on the ring described above. Standbys
store records as they are, so they refuse a processor (instance_settings.py).
"""

from __future__ import annotations

import logging
import threading
import time

from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE

from .members import Member, read_members
from ..offsets import meta_name, stored_offset
from .placement import PlacementTally
from ..settings import with_logger

log = logging.getLogger(__name__)

#: Seconds between readings of the announcements (placement changes).
PLACEMENT_INTERVAL = 1.0
#: An instance whose last announcement is this much older than the newest
#: one is taken for dead when placing standbys (it announces every 2 s).
LIVE_WINDOW = 8.0


def place_standbys(members: list[Member], replicas: int) -> dict[int, list[str]]:
    """{partition: URLs of its standby instances}: the ``replicas`` live
    instances after its active owner on the ring of URLs, never the owner."""
    if replicas <= 0 or not members:
        return {}
    newest = max(m.time for m in members)
    live = sorted({m.url for m in members if newest - m.time <= LIVE_WINDOW})
    owner: dict[int, str] = {}
    for m in sorted(members, key=lambda m: m.position):   # the newest claim wins
        for p in m.active:
            owner[p] = m.url
    out = {}
    for p, url in owner.items():
        if url in live:
            i = live.index(url)
            ring = live[i + 1:] + live[:i]
        else:
            ring = live                                    # a dead owner: the first live ones
        out[p] = [u for u in ring if u != url][:replicas]
    return out


class StandbyReplicator:
    """Keeps the standby shards of ``loader``'s instance (``url``) warm."""

    def __init__(self, loader, url: str, replicas: int, *, placement_interval: float = PLACEMENT_INTERVAL,
                 wanted=None) -> None:
        from confluent_kafka import Consumer
        if type(replicas) is not int or replicas < 0:
            raise ValueError(f"standby replicas must be a non-negative int, not {replicas!r}")
        self._loader = loader
        self._shards = loader.shards
        self.url = url
        self.replicas = replicas
        self._interval = placement_interval
        #: Callable returning the partitions to keep copies of (None: place them from the announcements).
        self._wanted = wanted
        s = loader.settings
        self._topic = self._shards.topic
        self._max_key = MAX_KEY_SIZE
        self._consumer = Consumer(with_logger({
            **s.client_config, "bootstrap.servers": s.bootstrap_servers,
            "group.id": f"{s.group}-standby", "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "error", "fetch.wait.max.ms": 100, "queued.min.messages": 100_000,
            "client.id": "lsmkv-standby"}))
        #: partition -> its shard's stored offset (partitions this replicator writes).
        self._held: dict[int, int | None] = {}
        #: {partition: the placement tally of its copy} (placement.py), kept
        #: as the loader keeps an active shard's, so a copy taking over
        #: routes as exactly.
        self._tallies: dict[int, PlacementTally] = {}
        #: Partitions to stop fetching (given up under the lock; unassigned by our thread).
        self._dropped: set[int] = set()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.applied = 0
        #: partition -> the end the consumer last saw (its thread notes it after each fetch).
        self._seen: dict[int, int] = {}
        self._shards.on_claim = self._on_claim
        self._thread = threading.Thread(target=self._run, name="lsmkv-kafka-standby", daemon=True)
        self._thread.start()

    # -- what others read ---------------------------------------------------------------------------

    def held(self) -> dict[int, int | None]:
        """{partition: stored offset} of the standby shards written now."""
        with self._shards.ownership:
            return dict(self._held)

    def seen_ends(self) -> dict[int, int]:
        """{partition: the end its consumer last saw in a fetch response}
        of the copies written now (partitions not fetched yet are left out).
        Noted by the replicator's own thread: measured, asking its consumer
        from another thread while it consumes can block for good."""
        with self._shards.ownership:
            return {p: e for p, e in self._seen.items() if p in self._held}

    def shard_of(self, partition: int):
        """The standby shard of ``partition`` (None: not a standby here)."""
        with self._shards.ownership:
            if partition not in self._held:
                return None
        return self._shards.shard(partition)

    # -- ownership --------------------------------------------------------------------------------

    def _on_claim(self, partition: int) -> None:
        # Called under ``ownership`` by the loader's claim: from now on no
        # write of ours includes this partition.
        if partition in self._held:
            del self._held[partition]
            self._dropped.add(partition)
            log.info("standby %s[%d] becomes active here", self._topic, partition)

    # -- the thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        from confluent_kafka import TopicPartition
        s = self._loader.settings
        next_placement = 0.0
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if self._wanted is not None:
                    self._keep(set(self._wanted()))
                elif now >= next_placement:
                    next_placement = now + self._interval
                    try:
                        members = read_members(s.bootstrap_servers, s.group, client_config=s.client_config,
                                               timeout=10)
                        self._replace(place_standbys(members, self.replicas))
                    except Exception as exc:  # noqa: BLE001 - the next round tries again
                        log.warning("placing standbys: %r", exc)
                with self._shards.ownership:
                    dropped, self._dropped = self._dropped, set()
                if dropped:
                    self._consumer.incremental_unassign([TopicPartition(self._topic, p) for p in dropped])
                if not self._held:
                    self._stop.wait(0.1)
                    continue
                msgs = self._consumer.consume(10_000, 0.1)
                if msgs:
                    self._apply(msgs)
                self._note_ends()
        except BaseException as exc:  # noqa: BLE001 - reported; the active load goes on
            self.error = exc
            log.error("the standby replicator stopped: %r", exc)

    def _note_ends(self) -> None:
        from confluent_kafka import TopicPartition
        seen = {}
        for p in list(self._held):
            try:
                _, high = self._consumer.get_watermark_offsets(TopicPartition(self._topic, p), cached=True)
            except Exception:  # noqa: BLE001 - not known yet
                continue
            if high is not None and high >= 0:
                seen[p] = high
        with self._shards.ownership:
            self._seen = seen

    def _replace(self, placement: dict[int, list[str]]) -> None:
        self._keep({p for p, urls in placement.items() if self.url in urls})

    def _keep(self, want: set[int]) -> None:
        """Keep copies of exactly ``want`` (less what this instance holds active)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        if want == set(self._held):
            return
        if want - set(self._held) and self._partition_count() is None:
            return   # a copy's placement tally is checked against the count: taken on a later round
        add = []
        with self._shards.ownership:
            for p in sorted(set(self._held) - want):
                del self._held[p]
                self._dropped.add(p)
            for p in sorted(want - set(self._held)):
                if self._shards.claimed(p):
                    continue  # active here
                db = self._shards.shard(p)
                self._max_key = min(self._max_key, db.stats().get("max_key_size", MAX_KEY_SIZE))
                offset = stored_offset(db, self._topic, p)
                self._held[p] = offset
                self._tallies[p] = PlacementTally.load(db, self._topic, p, self._shards.partitions, offset)
                self._dropped.discard(p)
                add.append(TopicPartition(self._topic, p, OFFSET_BEGINNING if offset is None else offset))
        if add:
            log.info("standby of %s from %s", [tp.partition for tp in add], [tp.offset for tp in add])
            self._consumer.incremental_assign(add)

    def _partition_count(self) -> int | None:
        """The topic's partition count, noted in the shard directory first if
        nothing noted it yet (an instance holding no partition active): a
        tally started without it checks no key, and a copy taking over
        could not route reads (placement.py). None: not known yet."""
        if self._shards.partitions is None:
            try:
                info = self._consumer.list_topics(self._topic, timeout=10).topics.get(self._topic)
            except Exception as exc:  # noqa: BLE001 - the next round asks again
                log.warning("reading %s's partition count: %r", self._topic, exc)
                return None
            if info is not None and info.error is None and info.partitions:
                self._shards.note_partitions(len(info.partitions))
        return self._shards.partitions

    def _apply(self, msgs: list) -> None:
        groups: dict[int, list] = {}
        max_key = self._max_key
        for msg in msgs:
            if msg.error() is not None:
                continue
            key, value = msg.key(), msg.value()
            if key is None or len(key) > max_key or (value is not None and len(value) > MAX_VALUE_SIZE):
                key = None    # the active loader dead-letters it: the copy skips it too
            groups.setdefault(msg.partition(), []).append((msg.offset(), key, value))
        with self._shards.ownership:
            for p, records in groups.items():
                stored = self._held.get(p, -1)
                if stored == -1:
                    continue                      # not ours any more
                records = [r for r in records if stored is None or r[0] >= stored]
                if not records:
                    continue
                db = self._shards.shard(p)
                tally = self._tallies[p]
                tally.observe_keys([key for _, key, _ in records if key is not None])
                with db.write_batch() as batch:
                    for _, key, value in records:
                        if key is None:
                            continue
                        if value is None:
                            batch.delete(key)
                        else:
                            batch.put(key, value)
                    batch.set_meta(meta_name(self._topic, p), b"%d" % (records[-1][0] + 1))
                    tally.persist(batch, records[-1][0] + 1)
                self._held[p] = records[-1][0] + 1
                self.applied += len(records)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._shards.ownership:
            self._shards.on_claim = None
            self._held.clear()
        try:
            self._consumer.close()
        except Exception as exc:  # noqa: BLE001 - closing
            log.debug("closing the standby consumer: %r", exc)
