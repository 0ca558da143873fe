"""Who serves what: the group's member announcements, on a compacted topic.

Interactive queries need each partition's owner and its address. Kafka
carries an owner's address in the group protocol's member user data, but
confluent-kafka (librdkafka) lets Python set none, and the embedded broker
does not report members at all: measured, its DescribeGroups answers
``members=[]`` for a stable group of two (and the leader's member id where
the protocol name belongs). So each serving instance announces itself on a
small topic of its own, ``<group>-members`` (one partition,
``cleanup.policy=compact``):

* key: the instance's address (``http://HOST:PORT``; a restart at the same
  address replaces its record, compaction keeps one per instance);
* value: JSON ``{"url", "group", "topic", "partitions" (the topic's count),
  "active": {partition: stored offset}, "restoring": [partition, ...],
  "standby": {partition: stored offset}, "placement": {partition: the
  placement tally of its shard}, "seq", "time"}`` -- what it holds now (and
  keeps warm copies of, standby.py), how far each shard is applied and
  which partitioners fit the keys each active shard holds (placement.py;
  the client routes by it, routing.py);
* a null value (tombstone) when it stops cleanly.

An instance announces whenever its assignment or a shard's set of fitting
partitioners changes (checked every ``CHECK_INTERVAL``) and every
``REFRESH_INTERVAL`` otherwise. A reader
takes the topic from the beginning, the last record of each instance, and
for each partition orders the claims by the position of the record that
made them: the newest claim first (topic order, not clocks, decides; a
partition moved by a rebalance is claimed by its new owner after the old
owner's claim). A claim can be stale -- an instance killed a moment ago --
so the reader treats this as a routing hint: the server answers only for
partitions it holds active right now (serve.py) and a client that is
turned away or cannot connect reads the announcements again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field

from ..errors import KafkaIntegrationError
from ..settings import with_logger

log = logging.getLogger(__name__)

#: Seconds between checks of the loader's assignment.
CHECK_INTERVAL = 0.2
#: Seconds between announcements when nothing changed (offsets move on).
REFRESH_INTERVAL = 2.0


def members_topic(group: str) -> str:
    return f"{group}-members"


def ensure_members_topic(bootstrap_servers: str, topic: str, client_config: dict | None = None,
                         timeout: float = 30.0) -> None:
    """Create the announcements topic (one partition, compacted) if missing."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from ..admin import ensure_topic, partition_count
    admin = AdminClient(with_logger({**(client_config or {}), "bootstrap.servers": bootstrap_servers}))
    if partition_count(bootstrap_servers, topic, client_config=client_config, timeout=timeout, admin=admin):
        return
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                            config={"cleanup.policy": "compact"})], request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            log.warning("creating %s as a compacted topic failed (%s); creating it plain", topic,
                        exc.args[0].str())
    ensure_topic(bootstrap_servers, topic, 1, client_config=client_config, timeout=timeout)


@dataclass
class Member:
    """One instance's latest announcement (``position``: its offset in the topic)."""

    url: str
    topic: str
    partitions: int | None
    active: dict[int, int | None]
    restoring: list[int]
    position: int
    time: float
    #: {partition: stored offset} of its standby copies.
    standby: dict[int, int | None] = field(default_factory=dict)
    #: {partition: placement tally summary (placement.py)} of its active shards.
    placement: dict[int, dict] = field(default_factory=dict)
    raw: dict = field(repr=False, default_factory=dict)


def decode(value: bytes, position: int) -> Member | None:
    try:
        doc = json.loads(value)
        return Member(url=doc["url"], topic=doc["topic"], partitions=doc.get("partitions"),
                      active={int(p): o for p, o in doc.get("active", {}).items()},
                      restoring=[int(p) for p in doc.get("restoring", [])], position=position,
                      time=float(doc.get("time", 0.0)), raw=doc,
                      standby={int(p): o for p, o in doc.get("standby", {}).items()},
                      placement={int(p): t for p, t in (doc.get("placement") or {}).items()})
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning("ignoring a malformed member announcement at offset %d: %r", position, value[:200])
        return None


def read_members(bootstrap_servers: str, group: str, *, topic: str | None = None, client_config: dict | None = None,
                 timeout: float = 10.0) -> list[Member]:
    """Every instance's latest announcement, oldest first (empty if the
    group never announced anything)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from ..admin import partition_count
    topic = topic or members_topic(group)
    if not partition_count(bootstrap_servers, topic, client_config=client_config, timeout=timeout):
        return []
    consumer = Consumer(with_logger({**(client_config or {}), "bootstrap.servers": bootstrap_servers,
                                     "group.id": f"lsmkv-query-{uuid.uuid4().hex}", "enable.auto.commit": False,
                                     "enable.partition.eof": True, "fetch.wait.max.ms": 10}))
    latest: dict[str, Member | None] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise KafkaIntegrationError(f"reading the member announcements ({topic}) took more than "
                                            f"{timeout:g} s")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                log.debug("reading %s: %s", topic, err.str())
                continue
            key = (msg.key() or b"").decode("utf-8", "replace")
            latest[key] = None if msg.value() is None else decode(msg.value(), msg.offset())
    finally:
        consumer.close()
    return sorted((m for m in latest.values() if m is not None), key=lambda m: m.position)


def claims(members: list[Member]) -> dict[int, list[Member]]:
    """{partition: members claiming it active, newest claim first}."""
    out: dict[int, list[Member]] = {}
    for m in sorted(members, key=lambda m: -m.position):
        for p in m.active:
            out.setdefault(p, []).append(m)
    return out


def standby_claims(members: list[Member]) -> dict[int, list[Member]]:
    """{partition: members keeping a standby copy of it, most applied first}."""
    out: dict[int, list[Member]] = {}
    for m in members:
        for p in m.standby:
            out.setdefault(p, []).append(m)
    for p, ms in out.items():
        ms.sort(key=lambda m, p=p: -(m.standby.get(p) or 0))
    return out


class Announcer:
    """Announces what ``loader`` holds, as ``url``, until :meth:`close`
    (which writes the tombstone). Runs its own thread."""

    def __init__(self, loader, url: str, *, topic: str | None = None, check_interval: float = CHECK_INTERVAL,
                 refresh_interval: float = REFRESH_INTERVAL, standby=None) -> None:
        from confluent_kafka import Producer
        s = loader.settings
        self._loader = loader
        self.url = url
        #: The StandbyReplicator whose shards are announced too (None: no standbys).
        self.standby = standby
        self.topic = topic or members_topic(s.group)
        self._check = check_interval
        self._refresh = refresh_interval
        ensure_members_topic(s.bootstrap_servers, self.topic, s.client_config)
        self._producer = Producer({**{k: v for k, v in s.producer_config().items()}, "linger.ms": 0})
        self._seq = 0
        self._stop = threading.Event()
        self._failures = 0
        self.announcements = 0
        self._thread = threading.Thread(target=self._run, name="lsmkv-kafka-announcer", daemon=True)
        self._thread.start()

    def state(self) -> dict:
        loader = self._loader
        shards = loader.shards
        held = loader.held()
        restoring = loader.restoring()
        return {"url": self.url, "group": loader.settings.group, "topic": shards.topic,
                "partitions": shards.partitions,
                "active": {str(p): stored for (t, p), (state, stored) in sorted(held.items()) if state == "active"},
                "restoring": sorted(restoring),
                "standby": {} if self.standby is None else {str(p): o for p, o in sorted(self.standby.held().items())},
                "placement": {str(p): t for p, t in sorted(loader.placements().items())}}

    def _run(self) -> None:
        last: tuple | None = None
        last_time = 0.0
        while not self._stop.wait(self._check):
            try:
                doc = self.state()
                # (A family ruled out for a partition is announced at once:
                # reads routed by it would miss that partition's keys.)
                fits = tuple((p, t["complete"], tuple(t["fitting"]), t["partitions"])
                             for p, t in doc["placement"].items())
                shape = (tuple(doc["active"]), doc["partitions"], tuple(doc["restoring"]), tuple(doc["standby"]),
                         fits)
                now = time.monotonic()
                if shape != last or now - last_time >= self._refresh:
                    self._send(doc)
                    last, last_time = shape, now
            except Exception as exc:  # noqa: BLE001 - announcing again is the retry
                self._failures += 1
                log.warning("announcing %s failed: %r (retrying)", self.url, exc)
                last = None

    def _send(self, doc: dict | None) -> None:
        if doc is not None:
            self._seq += 1
            doc = {**doc, "seq": self._seq, "time": time.time()}
        self._producer.produce(self.topic, key=self.url.encode(),
                               value=None if doc is None else json.dumps(doc).encode())
        left = self._producer.flush(10)
        if left:
            raise KafkaIntegrationError(f"{left} announcement(s) not delivered within 10 s")
        self.announcements += 1

    def close(self) -> None:
        """Stop announcing and withdraw this instance (a tombstone)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        try:
            self._send(None)
        except Exception as exc:  # noqa: BLE001 - readers fall back to asking and being turned away
            log.warning("withdrawing %s from %s failed: %r", self.url, self.topic, exc)
