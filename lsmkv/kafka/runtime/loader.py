"""Loader: a Kafka topic materialized into an lsmkv or btree store.

``Loader(settings, store).run()`` consumes the settings' topics as a member
of a consumer group and keeps the store equal to the topics' current
table: a record with a value puts it under its key, a record with a null
value deletes the key, a record without a key is dead-lettered.

How a record travels (docs/kafka.md has the picture):

1. The consumer thread (the one calling :meth:`run`) polls batches of
   records, registers each in its partition's window (commit_control.py)
   and hands it to the processor unit its key hashes to (units.py), or,
   without a processor, completes it at once. A record below its
   partition's position (partition.py) is a stale fetch and is dropped.
2. Units run the processor concurrently, records of one key in order,
   and complete records in any order; failures are retried on the timing
   wheel and finally dead-lettered.
3. The applier (applier.py) writes each partition's completed prefix in
   engine write batches, each also recording the partition's progress in
   the store's metadata, atomically (with partitioned state, also the
   shard's placement tally: which partitioners fit its keys, placement.py).
4. Every ``commit_interval`` the consumer thread makes the stored offsets
   durable (one synced write) and commits them to Kafka, so lag tools see
   progress; Kafka's offset never runs ahead of the store.

On assignment a partition starts at the offset the store holds (else the
group's committed offset, else the beginning): the store's data and
offsets always agree, so after any crash the load resumes exactly where
the store ends -- at-least-once delivery, exactly-once effect.

Backpressure: a partition whose window holds ``max_pending`` records is
paused and resumed once half of them are stored, so memory stays bounded
whatever the lag. Rebalancing is cooperative: on revoke, the revoked
partitions stop taking records, in-flight ones may finish (up to
``revoke_timeout``), their offsets are made durable and committed, then
they are fenced (never written again by this loader) and released. A
lost partition is fenced at once. ``stop()`` (SIGTERM, Ctrl-C in the CLI)
drains and commits the same way.

Partitions come from the group (``subscribe``, librdkafka's cooperative
assignment) or, after :meth:`use_manual_assignment`, from a coordinator
that calls :meth:`set_assignment` (coordination.py: the lag-aware
assignment of a serving group); the consumer thread then releases and
claims partitions exactly as the revoke and assign callbacks do, with
``incremental_unassign``/``incremental_assign``, and still commits to the
group.

With ``settings.changelog`` (partitioned state only) the applier hands
every batch it wrote to the changelog writer (changelog.py), commits
flush the changelog before they reach Kafka, and a partition assigned to
this loader first goes through the restore thread (restore.py): restored
from the changelog when its shard has no offset, reprocessed from where
the changelog ends when that is before the shard's offset; it stays
paused until the answer is applied on the consumer thread.

Start-up: when the settings ask for it (``startup_wait``: an
``until_caught_up`` load by default), the constructor first waits for the
servers to answer and every topic to exist (admin.wait_for_topics) and
raises StartupError if they do not within the timeout -- before it opens
or creates any store, so a load that cannot start leaves nothing behind.

The loader never prints (the CLI shows :meth:`snapshot`); it logs through
``logging`` and never crashes on an unavailable broker once running:
librdkafka keeps reconnecting, and the loader logs the first report of
each kind and then how many followed (client_log.py), so an outage is a
few lines however long it lasts, and loading resumes when the servers
are back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE
from lsmkv.base.timer import Timer

from ..admin import wait_for_topics
from .applier import Applier
from ..client_log import CLIENT_LOG, ClientLog
from .dead_letters import DeadLetters
from .end_offsets import observe_end_offsets
from ..errors import LoaderError
from .metrics import LoaderMetrics
from ..offsets import stored_offset
from .partition import ACTIVE, FENCED, REVOKING, PartitionState
from .processor import Record
from .retry import RetryPolicy, RetryScheduler
from ..settings import LoaderSettings
from ..scaleout.shards import ShardedStore
from ..store import open_store
from .units import ProcessorUnit, unit_of

log = logging.getLogger(__name__)

#: Seconds between refreshes of the per-partition gauges.
METRICS_INTERVAL = 0.5
#: Seconds between attempts to fetch from an offset the broker did not have.
RESEEK_INTERVAL = 1.0
#: Seconds between looks for the topics of a loader the group assigned
#: nothing while one of them was missing (_rejoin_when_topics_exist).
TOPIC_RECHECK_INTERVAL = 1.0


@dataclass
class LoadSummary:
    """How a run ended and what it did (``metrics`` is a snapshot)."""

    reason: str
    elapsed: float
    records_stored: int
    metrics: dict

    @property
    def records_per_sec(self) -> float:
        return self.records_stored / self.elapsed if self.elapsed > 0 else 0.0


def check_startup(settings: LoaderSettings) -> None:
    """Wait ``settings.startup_wait`` seconds at most for the servers to
    answer and every topic to exist (StartupError if not); nothing to do
    when it is None (a long-running load waits for them as it runs)."""
    if settings.startup_wait is not None:
        wait_for_topics(settings.bootstrap_servers, settings.topics, client_config=settings.client_config,
                        timeout=settings.startup_wait)


class Loader:
    """Loads ``settings.topics`` into ``store``: an open lsmkv/btree DB (shared
    with the caller, who closes it) or a path (opened with ``engine``,
    closed when the run ends). With ``settings.startup_wait`` set the
    constructor first checks the servers and topics (StartupError)."""

    def __init__(self, settings: LoaderSettings, store, *, engine: str = "lsm", store_options: dict | None = None,
                 end_timeout: float = 30.0, trust_watermark: bool = False, name: str = "loader",
                 partitioned: bool = False) -> None:
        if not isinstance(settings, LoaderSettings):
            raise TypeError(f"settings must be LoaderSettings, not {type(settings).__name__}")
        self.settings = settings
        self.name = name
        #: Partitioned state (shards.py): one store per partition, or None.
        self._shards: ShardedStore | None = None
        if (partitioned or isinstance(store, ShardedStore)) and len(settings.topics) != 1:
            raise LoaderError(f"partitioned state holds one topic (a shard is one of its partitions), not "
                              f"{len(settings.topics)}: {settings.topics!r}")
        if settings.changelog and not (partitioned or isinstance(store, ShardedStore)):
            raise LoaderError("a changelog needs partitioned state (--partitioned or --serve): it holds what each "
                              "partition's shard applied")
        check_startup(settings)
        if isinstance(store, ShardedStore):
            if store.topic != settings.topics[0]:
                raise LoaderError(f"{store.path} holds shards of topic {store.topic!r}, not {settings.topics[0]!r}")
            self._db = self._shards = store
            self._owns_db = False
        elif partitioned:
            if not isinstance(store, (str, bytes, os.PathLike)):
                raise TypeError(f"partitioned state needs a directory path or a ShardedStore, not "
                                f"{type(store).__name__}")
            self._db = self._shards = ShardedStore(os.fsdecode(store), engine, topic=settings.topics[0],
                                                   options=store_options)
            self._owns_db = True
        elif isinstance(store, (str, bytes, os.PathLike)):
            self._db = open_store(store, engine, store_options)
            self._owns_db = True
        else:
            for attr in ("write_batch", "get_meta", "meta"):
                if not hasattr(store, attr):
                    raise TypeError(f"store must be a path or an open lsmkv/btree DB, not {type(store).__name__}")
            self._db = store
            self._owns_db = False
        self._end_timeout = end_timeout
        self._trust_watermark = trust_watermark
        self.metrics = LoaderMetrics()
        self._parts: dict[tuple[str, int], PartitionState] = {}
        self._stop = threading.Event()
        self._stop_reason = "stopped"
        self._fatal: BaseException | None = None
        self._assigned_once = False
        #: When this member's assignment last changed (assign, revoke, lost).
        self._assignment_changed = time.monotonic()
        self._commit_started: list[float] = []
        #: librdkafka's log lines and error events (the consumer's and the
        #: dead-letter producer's), and the loader's own consumer errors:
        #: each kind logged once, then counted (client_log.py).
        self._client_log = ClientLog(CLIENT_LOG, f"{name}: ")
        self._errors = ClientLog(log, f"{name}: ")
        #: (topic, partition) -> when to seek again to an offset the broker did not have.
        self._reseek: dict[tuple[str, int], float] = {}
        #: When to look again whether the topics exist, after the group
        #: assigned this loader nothing while one was missing (None: no need).
        self._topics_recheck_at: float | None = None
        #: (monotonic time, "assign" | "release" | "lost", topic, partition): who owned what when.
        self.ownership: list[tuple[float, str, str, int]] = []
        self._max_key = MAX_KEY_SIZE
        self._running = False
        self._consumer = None
        self._applier: Applier | None = None
        #: ``settings.changelog``: the writer (changelog.py) and the restore thread (restore.py).
        self._changelog = None
        self._restorer = None
        #: Manual assignment (coordination.py): who decides, the partitions
        #: it gave this loader, and whether they changed since applied.
        self._assigner = None
        self._wanted: frozenset[int] = frozenset()
        self._wanted_changed = False
        self._wanted_lock = threading.Lock()

    @property
    def db(self):
        return self._db

    @property
    def shards(self):
        """The ShardedStore of partitioned state (None: one store)."""
        return self._shards

    def held(self) -> dict[tuple[str, int], tuple[str, int | None]]:
        """{(topic, partition): (state, stored offset)} of the partitions this
        loader holds now (safe from any thread; serve.py and the member
        announcements read it)."""
        return {key: (ps.state, ps.stored) for key, ps in list(self._parts.items())}

    def restoring(self) -> list[int]:
        """Partitions whose shard is catching up (partitioned state): rebuilt
        from the source topic, or resumed from a local shard that is behind,
        and not yet at the end the partition had when assigned."""
        return sorted(self.restore_lag())

    def restore_lag(self) -> dict[int, int | None]:
        """{partition: records still to restore (None: its end not observed
        yet)} of the partitions :meth:`restoring` names. A partition stops
        restoring once its shard holds the end observed when it was assigned
        (end_offsets.py), never earlier: a read it answers from then on is at
        least as new as any its previous owner answered."""
        out = {}
        for ps in list(self._parts.values()):
            if ps.restoring and ps.state == ACTIVE:
                target = ps.target
                # A changelog restore's progress counts before the shard
                # stores an offset (its last batch sets it).
                held = max(ps.stored or 0, ps.restore_position or 0)
                if target is not None and held >= target:
                    if not ps.restore_pending:   # (pending: it may yet go back to where the changelog ends)
                        ps.restoring = False
                else:
                    out[ps.partition] = None if target is None else target - held
        return out

    def placements(self) -> dict[int, dict]:
        """{partition: its shard's placement tally summary (placement.py)} of
        the partitions held active (partitioned state; safe from any thread)."""
        return {ps.partition: ps.placement.summary() for ps in list(self._parts.values())
                if ps.state == ACTIVE and ps.placement is not None}

    def shard_of(self, partition: int):
        """The open shard of ``partition`` if this loader holds it active
        (partitioned state), else None."""
        ps = self._parts.get((self._shards.topic, partition)) if self._shards is not None else None
        return ps.db if ps is not None and ps.state == ACTIVE else None

    # -- control ----------------------------------------------------------------------------

    def use_manual_assignment(self, assigner) -> None:
        """Take partitions from ``assigner`` (coordination.py: it calls
        :meth:`set_assignment`) instead of subscribing to the group; the
        consumer assigns them manually and still commits to the group.
        Partitioned state only; before :meth:`run`."""
        if self._shards is None:
            raise LoaderError("manual (lag-aware) assignment needs partitioned state")
        if self._running:
            raise LoaderError("choose the assignment before the loader runs")
        self._assigner = assigner

    @property
    def _incremental(self) -> bool:
        """Whether partitions are added and removed one by one (a cooperative
        group, or manual assignment whatever the strategy setting) rather
        than the whole assignment replaced (an eager group)."""
        return self._assigner is not None or self.settings.cooperative

    def set_assignment(self, partitions) -> None:
        """The partitions of the topic this loader is to hold active from
        now on (safe from any thread; applied by the consumer thread)."""
        with self._wanted_lock:
            self._wanted = frozenset(int(p) for p in partitions)
            self._wanted_changed = True

    def _apply_assignment(self, consumer) -> None:
        """Release the partitions no longer assigned (as a cooperative
        revoke does: in-flight records may finish, offsets are committed),
        then take the new ones (as an assignment does)."""
        from confluent_kafka import TopicPartition
        with self._wanted_lock:
            wanted, self._wanted_changed = self._wanted, False
        topic = self._shards.topic
        held = {p for (t, p), ps in list(self._parts.items()) if ps.state == ACTIVE}
        drop = [TopicPartition(topic, p) for p in sorted(held - wanted)]
        add = [TopicPartition(topic, p) for p in sorted(wanted - held)]
        if drop:
            self._on_revoke(consumer, drop)
            consumer.incremental_unassign(drop)
        if add:
            self._on_assign(consumer, add)

    def stop(self, reason: str = "stopped") -> None:
        """Ask :meth:`run` to drain, commit and return (safe from any thread
        and from a signal handler)."""
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop.set()

    def snapshot(self) -> dict:
        """The loader's metrics as a plain dict (safe from any thread)."""
        return self.metrics.snapshot()

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> LoadSummary:
        """Consume until stopped (or, with ``until_caught_up``, until every
        assigned partition reached the end it had when assigned)."""
        from confluent_kafka import Consumer
        if self._running:
            raise LoaderError("this loader is already running")
        self._running = True
        s = self.settings
        stats = self._db.stats()
        self._max_key = stats.get("max_key_size", MAX_KEY_SIZE)
        started = time.monotonic()
        self.metrics.started = started
        if s.changelog:
            try:
                self._start_changelog()
            except BaseException:
                self._running = False
                if self._owns_db:
                    self._db.close()
                raise
        timer = Timer(tick=0.001, name=f"lsmkv-kafka-{self.name}-timer")
        self._scheduler = RetryScheduler(RetryPolicy(s.max_retries, s.retry_backoff, s.retry_backoff_max), timer)
        self._dlq = DeadLetters({**s.producer_config(), "logger": self._client_log}, s.dlq_for, timer)
        self._applier = Applier(self._db, self._parts, batch_records=s.batch_records, batch_bytes=s.batch_bytes,
                                linger=s.linger, metrics=self.metrics,
                                on_written=self._to_changelog if self._changelog is not None else None)
        if self._changelog is not None:
            from ..scaleout.restore import ChangelogRestorer
            self._restorer = ChangelogRestorer(self, self._applier, self._changelog.topic)
        consumer = Consumer({**s.consumer_config(), "logger": self._client_log, "on_commit": self._on_commit,
                             "error_cb": self._on_error})
        self._consumer = consumer
        try:
            if self._assigner is None:
                consumer.subscribe(s.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                   on_lost=self._on_lost)
            self._loop(consumer)
            self._drain(consumer)
        finally:
            try:
                consumer.close()  # leaves the group: the revoke callback releases what is left
            except Exception as exc:  # noqa: BLE001 - closing after a failure must not hide it
                log.warning("closing the consumer: %r", exc)
            self._shutdown(timer)
        self._raise_if_failed()
        self.metrics.ended = time.monotonic()
        summary = self.metrics.snapshot()
        return LoadSummary(self._stop_reason, time.monotonic() - started, summary["records_stored"], summary)

    def _start_changelog(self) -> None:
        """Create the changelog topic if missing (as many partitions as the
        source topic) and its writer."""
        from ..admin import partition_count
        from ..scaleout.changelog import ChangelogWriter, changelog_topic, ensure_changelog_topic
        s = self.settings
        source = self._shards.topic
        topic = changelog_topic(s.group, source)
        partitions = partition_count(s.bootstrap_servers, source, client_config=s.client_config)
        if not partitions:
            raise LoaderError(f"topic {source!r} does not exist (its changelog {topic!r} needs its partition count)")
        ensure_changelog_topic(s.bootstrap_servers, topic, partitions, client_config=s.client_config)
        self._changelog = ChangelogWriter(s.bootstrap_servers, topic, s.client_config)
        log.info("%s: changelog %s (%d partitions)", self.name, topic, partitions)

    def _to_changelog(self, ps: PartitionState, ops_lists: list, next_offset: int) -> None:
        # The applier's on_written: under its lock, right after the batch was written.
        self.metrics.changelog_produced += self._changelog.send(ps.partition, ops_lists, next_offset)

    def _flush_changelog(self, timeout: float) -> bool:
        """Wait until the changelog holds every batch written so far (under
        the applier's lock: durable_barrier's ``then``)."""
        if self._changelog.flush(timeout):
            return True
        self._log_error(-1001, f"the changelog did not acknowledge every record within {timeout:g} s; offsets "
                               "are not committed to Kafka until it does")
        return False

    def _restored(self, consumer) -> None:
        """Resume partitions whose start the restore thread decided (restore.py)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        from .commit_control import OffsetWindow
        for ps, start in self._restorer.finished():
            if ps.state != ACTIVE or self._parts.get(ps.key) is not ps:
                continue
            with self._applier.lock:
                # A new run of the changelog's partition: its batches cover
                # source offsets from ``start`` on (changelog.py).
                self._changelog.begin(ps.partition, 0 if start is None else start)
                # Nothing was registered while it waited: the window starts
                # afresh, and so does the position (records fetched from the
                # assigned start, before the seek below, are stale from now on).
                ps.window = OffsetWindow(ps.window.capacity, start)
                ps.position = 0 if start is None else start
                if start != ps.stored:
                    # Reprocessing from where the changelog ends: the shard
                    # goes back to older values for a while (restoring).
                    ps.stored = ps.metrics.stored = start
                    ps.restoring = True
                # Fetching starts here now: the caught-up check counts the
                # floor as a position reached, and the offset committed
                # before (the shard's, when it is reprocessed) is past it.
                ps.floor = start
                ps.restore_pending = False
                ps.metrics.start = start
            tp = TopicPartition(ps.topic, ps.partition, OFFSET_BEGINNING if start is None else start)
            try:
                consumer.seek(tp)
                consumer.resume([tp])
            except Exception as exc:  # noqa: BLE001 - the re-seek below tries again
                log.warning("%s: resuming %s[%d] at %s: %r", self.name, ps.topic, ps.partition, start, exc)
                self._reseek[ps.key] = time.monotonic() + RESEEK_INTERVAL
            ps.paused = ps.metrics.paused = False
            log.info("%s: %s[%d] consumes the source from %s", self.name, ps.topic, ps.partition,
                     "its beginning" if start is None else f"offset {start}")

    def _loop(self, consumer) -> None:
        s = self.settings
        next_commit = time.monotonic() + s.commit_interval
        next_metrics = 0.0
        consume = consumer.consume
        while not self._stop.is_set():
            self._raise_if_failed()
            if self._wanted_changed:
                self._apply_assignment(consumer)
            if self._restorer is not None:
                self._restored(consumer)
            msgs = consume(s.poll_records, 0.1)
            if msgs:
                self._dispatch(msgs)
            self._flow_control(consumer)
            now = time.monotonic()
            if self._reseek:
                self._seek_again(consumer, now)
            if self._topics_recheck_at is not None and now >= self._topics_recheck_at:
                self._rejoin_when_topics_exist(consumer, now)
            if now >= next_commit:
                self._commit(consumer, synchronous=False)
                next_commit = now + s.commit_interval
            if now >= next_metrics:
                self._refresh_metrics(consumer)
                self._client_log.tick()
                self._errors.tick()
                next_metrics = now + METRICS_INTERVAL
            if s.until_caught_up and self._caught_up(consumer):
                self.stop("caught up")

    def _rejoin_when_topics_exist(self, consumer, now: float) -> None:
        """The group assigned this loader nothing while one of its topics
        was missing (a broker that came back empty, a topic deleted and
        created again). librdkafka does not ask the group for a new
        assignment when such a topic exists again (measured on the embedded
        broker restarted empty and the topic published again once the
        loader had rejoined: it held nothing for the 400 s watched), so once
        every topic exists the loader subscribes again, which makes the
        group assign anew."""
        if any(ps.state == ACTIVE for ps in list(self._parts.values())):
            self._topics_recheck_at = None   # assigned meanwhile
            return
        missing = self._missing_topics(consumer)
        if missing:
            self._topics_recheck_at = now + TOPIC_RECHECK_INTERVAL
            return
        self._topics_recheck_at = None
        log.info("%s: %s exist%s again; joining the group anew for an assignment", self.name,
                 ", ".join(self.settings.topics), "s" if len(self.settings.topics) == 1 else "")
        consumer.subscribe(self.settings.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)

    def _missing_topics(self, consumer) -> list[str]:
        """The loader's topics the broker does not know now (all of them
        when its metadata cannot be read)."""
        try:
            metadata = consumer.list_topics(timeout=5)  # all topics: naming one may auto-create it
        except Exception as exc:  # noqa: BLE001 - not knowing counts as missing
            log.debug("%s: reading the topics' metadata: %r", self.name, exc)
            return list(self.settings.topics)
        return [t for t in self.settings.topics
                if (info := metadata.topics.get(t)) is None or info.error is not None or not info.partitions]

    def _seek_again(self, consumer, now: float) -> None:
        """Seek partitions whose fetch offset the broker did not have back
        to that offset (see _consumer_error)."""
        from confluent_kafka import TopicPartition
        for key, when in list(self._reseek.items()):
            if when > now:
                continue
            del self._reseek[key]
            ps = self._parts.get(key)
            if ps is None or ps.state != ACTIVE:
                continue
            if ps.fetched_next is not None:
                offset = ps.fetched_next
            elif ps.stored is not None:
                offset = ps.stored
            else:
                offset = ps.floor if ps.floor is not None else 0
            tp = TopicPartition(key[0], key[1], offset)
            try:
                consumer.seek(tp)
                if not ps.paused:
                    # A seek that failed in _restored left the partition
                    # paused in the client while the loader counts it as
                    # running: it resumes once the seek is done.
                    consumer.resume([tp])
            except Exception as exc:  # noqa: BLE001 - the next error event schedules another try
                log.debug("%s: seeking %s to %d: %r", self.name, key, offset, exc)
                self._reseek[key] = now + RESEEK_INTERVAL

    def _raise_if_failed(self) -> None:
        applier = self._applier
        if applier is not None and applier.error is not None:
            raise LoaderError(f"the store keeps refusing writes: {applier.error}") from applier.error
        if self._fatal is not None:
            raise LoaderError(f"the consumer failed: {self._fatal}")
        if self._assigner is not None and self._assigner.error is not None:
            raise LoaderError(f"the lag-aware assignment failed: {self._assigner.error!r}")
        if self._changelog is not None and self._changelog.error is not None:
            raise LoaderError(f"the changelog cannot be written: {self._changelog.error} (the shards keep exact "
                              "offsets; a restart reprocesses what the changelog lacks)")
        if self._restorer is not None and self._restorer.error is not None:
            raise LoaderError(f"a restore failed and its shard could not be cleared: {self._restorer.error!r}")
        for ps in list(self._parts.values()):
            if ps.unit_failed:
                raise LoaderError(f"a processor unit of {ps.topic}[{ps.partition}] failed (see the log)")

    # -- records ----------------------------------------------------------------------------------

    def _dispatch(self, msgs: list) -> None:
        parts = self._parts
        processor = self.settings.processor
        max_key = self._max_key
        chunks: dict[PartitionState, list] = {}
        routed: dict[PartitionState, list] = {}
        stale: dict[PartitionState, list] = {}
        fetched = 0
        for msg in msgs:
            err = msg.error()
            if err is not None:
                self._consumer_error(err, msg)
                continue
            ps = parts.get((msg.topic(), msg.partition()))
            if ps is None or ps.state != ACTIVE or ps.restore_pending:
                continue  # revoked meanwhile (the next owner fetches it again), or not restored yet
            offset = msg.offset()
            if offset < ps.position:
                # A stale fetch (PartitionState.position): from before a seek,
                # or delivered again. Registering it would break the window's
                # offset order; dropping it loses nothing.
                stale.setdefault(ps, []).append(offset)
                continue
            key = msg.key()
            value = msg.value()
            fetched += 1
            pm = ps.metrics
            if pm.first_fetched is None:
                pm.first_fetched = offset
            pm.next_fetch = ps.fetched_next = ps.position = offset + 1
            pm.fetched += 1
            invalid = None
            if key is None:
                invalid = "record has no key"
            elif len(key) > max_key:
                invalid = f"key is {len(key)} bytes; the store takes at most {max_key}"
            elif value is not None and len(value) > MAX_VALUE_SIZE:
                invalid = f"value is {len(value)} bytes; the store takes at most {MAX_VALUE_SIZE}"
            if processor is None and invalid is None:
                chunk = chunks.get(ps)
                if chunk is None:
                    chunks[ps] = [offset, offset + 1, 1, [(key, value)], len(key) + (len(value) if value else 0)]
                else:
                    chunk[1] = offset + 1
                    chunk[2] += 1
                    chunk[3].append((key, value))
                    chunk[4] += len(key) + (len(value) if value else 0)
                continue
            chunk = chunks.pop(ps, None)
            if chunk is not None:
                ps.window.register_done(*chunk)
            record = Record(msg.topic(), msg.partition(), offset, key, value, msg.headers(), msg.timestamp()[1])
            entry = ps.window.register(offset)
            if invalid is not None:
                self._dead_letter(ps, record, entry, invalid)
                continue
            units = ps.units
            routed.setdefault(ps, [[] for _ in units])[unit_of(key, len(units))].append((record, entry))
        self.metrics.fetched += fetched
        for ps, offsets in stale.items():
            ps.metrics.stale += len(offsets)
            self.metrics.stale += len(offsets)
            log.info("%s: %s[%d]: dropped %d records fetched from below its position (offsets %d..%d: fetched "
                     "before a seek, or delivered again)", self.name, ps.topic, ps.partition, len(offsets),
                     min(offsets), max(offsets))
        done = 0
        for ps, chunk in chunks.items():
            ps.window.register_done(*chunk)
            done += chunk[2]
        for ps, per_unit in routed.items():
            for unit, items in zip(ps.units, per_unit):
                if items:
                    unit.submit(items)
        if done:
            self._applier.completed(done)

    def _dead_letter(self, ps: PartitionState, record: Record, entry: list, reason: str) -> None:
        from .commit_control import complete
        log.warning("%s[%d]@%d: %s; dead-lettering it", record.topic, record.partition, record.offset, reason)

        def done() -> None:
            complete(entry, None)
            ps.metrics.dead_letters += 1
            self.metrics.dead_letters += 1
            self._applier.completed(1)

        self._dlq.send(record, reason, 0, done)

    def _flow_control(self, consumer) -> None:
        from confluent_kafka import TopicPartition
        for ps in list(self._parts.values()):
            if ps.state != ACTIVE or ps.restore_pending:
                continue
            pending = ps.window.pending
            if not ps.paused and pending >= ps.window.capacity:
                consumer.pause([TopicPartition(ps.topic, ps.partition)])
                ps.paused = ps.metrics.paused = True
                ps.metrics.pauses += 1
                self.metrics.pauses += 1
            elif ps.paused and pending <= ps.window.capacity // 2:
                consumer.resume([TopicPartition(ps.topic, ps.partition)])
                ps.paused = ps.metrics.paused = False

    # -- offsets to Kafka ---------------------------------------------------------------------------

    def _commit(self, consumer, synchronous: bool, states: list[PartitionState] | None = None) -> None:
        """Make the stored offsets durable, then commit them to Kafka."""
        from confluent_kafka import KafkaException, TopicPartition
        if states is None:
            states = [ps for ps in list(self._parts.values()) if ps.state == ACTIVE]
        # (A partition the restore thread has not decided on yet is left
        # out: its shard's offset may be ahead of the changelog.)
        changed = [ps for ps in states if ps.stored is not None and ps.stored != ps.committed
                   and not ps.restore_pending]
        if not changed:
            return
        then = None
        if self._changelog is not None:
            # Kafka Streams' order: the store durable, the changelog flushed, then the commit.
            timeout = 30.0 if synchronous else 5.0
            then = lambda: self._flush_changelog(timeout)  # noqa: E731
        durable = self._applier.durable_barrier(changed, include_fenced=True, then=then)
        offsets = [TopicPartition(ps.topic, ps.partition, off) for ps, off in durable.items()]
        if not offsets:
            return
        if not synchronous:
            self._commit_started.append(time.monotonic())
            try:
                consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                self._commit_started.pop()
                self.metrics.commit_done(0.0, ok=False)
                log.warning("committing offsets failed: %s (the next commit retries)", exc.args[0].str())
            return
        started = time.monotonic()
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self.metrics.commit_done(0.0, ok=False)
            log.warning("committing offsets failed: %s (the store keeps them; the next owner resumes from "
                        "the store)", exc.args[0].str())
            return
        self.metrics.commit_done((time.monotonic() - started) * 1000, ok=True)
        self._note_committed(result or [])

    def _on_commit(self, err, partitions) -> None:
        started = self._commit_started.pop(0) if self._commit_started else None
        if err is not None:
            self.metrics.commit_done(0.0, ok=False)
            self._log_error(err.code(), f"committing offsets failed: {err.str()} (the next commit retries)")
            return
        if started is not None:
            self.metrics.commit_done((time.monotonic() - started) * 1000, ok=True)
        self._note_committed(partitions)

    def _note_committed(self, partitions) -> None:
        for tp in partitions:
            ps = self._parts.get((tp.topic, tp.partition))
            if ps is not None and tp.error is None and tp.offset >= 0:
                ps.committed = tp.offset

    # -- rebalancing ----------------------------------------------------------------------------------

    def _on_assign(self, consumer, partitions) -> None:
        from confluent_kafka import OFFSET_BEGINNING
        s = self.settings
        # The group answered: whatever the client kept reporting is over
        # (its count is logged now; if it goes on, it is logged anew).
        self._client_log.settle()
        self._errors.settle()
        self.metrics.rebalances += 1
        self._assigned_once = True
        self._assignment_changed = time.monotonic()
        if self.metrics.assigned_at is None and partitions:
            self.metrics.assigned_at = time.monotonic()
        new: list[PartitionState] = []
        if self._shards is not None and partitions:
            self._note_partition_count(consumer)
        for tp in partitions:
            if self._shards is not None:
                self._shards.claim(tp.partition)  # a standby of it on this instance stops writing first
            db = self._db if self._shards is None else self._shards.shard(tp.partition)
            if self._shards is not None:
                self._max_key = min(self._max_key, db.stats().get("max_key_size", MAX_KEY_SIZE))
            stored = stored_offset(db, tp.topic, tp.partition)
            ps = PartitionState(tp.topic, tp.partition, stored, s.max_pending, self.metrics)
            ps.db = None if self._shards is None else db
            if self._shards is not None:
                from ..scaleout.placement import PlacementTally
                ps.placement = PlacementTally.load(db, tp.topic, tp.partition, self._shards.partitions, stored,
                                                   declared=s.partitioner)
            # A shard counts as restoring until it holds the end the partition
            # had when assigned: rebuilt from nothing, or a local shard left
            # behind while another instance owned the partition.
            ps.restoring = self._shards is not None
            # With a changelog the restore thread decides where it starts;
            # it is assigned paused meanwhile (resumed by _restored).
            ps.restore_pending = ps.paused = ps.metrics.paused = self._restorer is not None
            if stored is not None:
                tp.offset = stored
            elif self._shards is not None:
                # Partitioned state without a local offset: the shard is
                # rebuilt from the source topic (a compacted topic is its own
                # changelog). The group's committed offset belongs to the
                # shard of another instance and says nothing about this one.
                tp.offset = OFFSET_BEGINNING
            else:
                ps.floor = self._committed_offset(consumer, tp)
                tp.offset = ps.floor if ps.floor is not None else OFFSET_BEGINNING
                if ps.floor is not None:
                    ps.position = ps.floor
            if s.processor is not None:
                ps.units = [ProcessorUnit(f"lsmkv-kafka-{tp.topic}-{tp.partition}-u{i}", s.processor,
                                          self._max_key, scheduler=self._scheduler, dead_letters=self._dlq,
                                          on_complete=self._applier.completed, partition_state=ps)
                            for i in range(s.concurrency)]
            new.append(ps)
        with self._applier.lock:
            for ps in new:
                self._parts[ps.key] = ps
        now = time.monotonic()
        for ps in new:
            self.ownership.append((now, "assign", ps.topic, ps.partition))
            if ps.restore_pending:
                log.info("%s: assigned %s[%d] (shard offset %s): checking its changelog first", self.name, ps.topic,
                         ps.partition, ps.stored)
            elif ps.restoring and ps.stored is None:
                log.info("%s: assigned %s[%d] with no local shard offset: restoring its shard from the start of "
                         "the topic", self.name, ps.topic, ps.partition)
            else:
                log.info("%s: assigned %s[%d], starting at %s", self.name, ps.topic, ps.partition,
                         ps.stored if ps.stored is not None else "the group's offset")
        self.metrics.assigned += len(new)
        if self._incremental:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if (not new and self._assigner is None and not any(ps.state == ACTIVE for ps in list(self._parts.values()))
                and self._missing_topics(consumer)):
            # Nothing to hold because a topic is missing: the group will not
            # assign it by itself once it exists (_rejoin_when_topics_exist).
            self._topics_recheck_at = time.monotonic() + TOPIC_RECHECK_INTERVAL
        if self._restorer is not None and new:
            from confluent_kafka import TopicPartition
            consumer.pause([TopicPartition(ps.topic, ps.partition) for ps in new])
            for ps in new:
                self._restorer.submit(ps, ps.stored)
        if (s.until_caught_up or any(ps.restoring for ps in new)) and new:
            # (Restoring shards need the end too: they count as restored
            # once they reach it.) A partition's end is observed once per run: assigned again (after
            # a rebalance, a lost session), it keeps the end it had. An end
            # observed later could be lower (a broker that lost its data, a
            # topic being restored) and would end the load early.
            unseen = []
            for ps in new:
                if ps.metrics.target is not None:
                    ps.target = ps.metrics.target
                else:
                    unseen.append(ps)
            if unseen:
                threading.Thread(target=self._observe_ends, args=(unseen,), name="lsmkv-kafka-ends",
                                 daemon=True).start()

    def _note_partition_count(self, consumer) -> None:
        """Record the topic's partition count in the shard directory (key
        routing of reads needs it)."""
        topic = self._shards.topic
        try:
            info = consumer.list_topics(topic, timeout=10).topics.get(topic)
        except Exception as exc:  # noqa: BLE001 - the next assignment tries again
            log.warning("%s: reading %s's partition count: %r", self.name, topic, exc)
            return
        if info is not None and info.error is None and info.partitions:
            self._shards.note_partitions(len(info.partitions))

    def _committed_offset(self, consumer, tp) -> int | None:
        from confluent_kafka import KafkaException, TopicPartition
        try:
            got = consumer.committed([TopicPartition(tp.topic, tp.partition)], timeout=10)
        except KafkaException:
            return None
        return got[0].offset if got and got[0].offset >= 0 else None

    def _observe_ends(self, states: list[PartitionState]) -> None:
        s = self.settings
        try:
            ends = observe_end_offsets(s.bootstrap_servers, [ps.key for ps in states],
                                       client_config=s.client_config, timeout=self._end_timeout,
                                       trust_watermark=self._trust_watermark)
        except Exception as exc:  # noqa: BLE001 - retried by the next assignment; the run goes on
            log.warning("could not observe the end of %s: %r", [ps.key for ps in states], exc)
            return
        for ps in states:
            ps.target = ends.get(ps.key)
            ps.metrics.target = ps.target

    def _on_revoke(self, consumer, partitions) -> None:
        self.metrics.rebalances += 1
        self._assignment_changed = time.monotonic()
        states = [self._parts[(tp.topic, tp.partition)] for tp in partitions
                  if (tp.topic, tp.partition) in self._parts]
        for ps in states:
            ps.state = REVOKING
        deadline = time.monotonic() + self.settings.revoke_timeout
        while (any(ps.window.pending for ps in states) and time.monotonic() < deadline
               and self._applier.error is None):
            self._applier.wait_progress(0.05)
        self._release(consumer, states, lost=False)
        if not self._incremental:
            consumer.unassign()

    def _on_lost(self, consumer, partitions) -> None:
        self.metrics.rebalances += 1
        self._assignment_changed = time.monotonic()
        states = [self._parts[(tp.topic, tp.partition)] for tp in partitions
                  if (tp.topic, tp.partition) in self._parts]
        log.warning("%s: lost %s (the group moved them without a revoke: a session timeout); their records in "
                    "flight are dropped unstored", self.name, [ps.key for ps in states])
        self._release(consumer, states, lost=True)

    def _release(self, consumer, states: list[PartitionState], lost: bool) -> None:
        """Fence ``states`` (no write includes them from now on), make their
        stored offsets durable and commit them (unless ``lost``: the group
        may have given them to another member already), stop their units."""
        if not states:
            return
        with self._applier.lock:
            for ps in states:
                ps.state = FENCED
                dropped = ps.window.clear()
                if dropped:
                    log.info("%s: %s[%d] released with %d records not stored (the next owner processes them)",
                             self.name, ps.topic, ps.partition, dropped)
        if not lost:
            try:
                self._commit(consumer, synchronous=True, states=states)
            except LoaderError:
                raise
            except Exception as exc:  # noqa: BLE001 - the store holds the offsets; the next owner uses them
                log.warning("%s: final commit of %s failed: %r", self.name, [ps.key for ps in states], exc)
        now = time.monotonic()
        with self._applier.lock:
            for ps in states:
                self._parts.pop(ps.key, None)
        if self._shards is not None:
            for ps in states:
                self._shards.unclaim(ps.partition)
        for ps in states:
            self._scheduler.cancel(ps)
            for unit in ps.units:
                unit.stop()
            self.ownership.append((now, "lost" if lost else "release", ps.topic, ps.partition))
        if lost:
            self.metrics.lost += len(states)
        else:
            self.metrics.revoked += len(states)

    # -- caught up, drain, shutdown -------------------------------------------------------------------

    def _caught_up(self, consumer) -> bool:
        from confluent_kafka import TopicPartition
        if not self._assigned_once:
            return False
        states = [ps for ps in list(self._parts.values()) if ps.state == ACTIVE]
        if not states:
            return False  # holding nothing (lost, or waiting for the group): nothing is caught up yet
        for ps in states:
            if ps.metrics.caught_up:
                continue
            if ps.target is None or ps.restore_pending:
                return False
            position = None
            if ps.window.pending == 0:
                # The group's committed offset (floor) counts; the consumer's
                # position only once this assignment fetched something
                # (measured: a partition lost and assigned again reported the
                # position its lost assignment had reached, past records
                # that were dropped unstored).
                known = [ps.floor] if ps.floor is not None else []
                if ps.fetched_next is not None:
                    known.append(consumer.position([TopicPartition(ps.topic, ps.partition)])[0].offset)
                position = max(known) if known else None
            if not ps.caught_up(position):
                return False
            ps.metrics.caught_up = True
        if not self._owns_every_partition(consumer):
            # Other members hold partitions, and one may be dead (a loader
            # killed a moment ago keeps its partitions until its session
            # times out; measured on the embedded broker, a restarted loader
            # got half of the partitions and the dead member kept the rest
            # until then). Finish only once the assignment has stood still
            # for two session timeouts: a dead member's partitions have
            # moved to a live one by then.
            quiet = 2 * self.settings.session_timeout_ms / 1000.0
            if time.monotonic() - self._assignment_changed < quiet:
                return False
        return True

    def _owns_every_partition(self, consumer) -> bool:
        """Whether this loader holds every partition of its topics."""
        try:
            metadata = consumer.list_topics(timeout=10)  # all topics: naming one may auto-create it
        except Exception as exc:  # noqa: BLE001 - not knowing means not owning everything
            log.debug("%s: reading the topics' metadata: %r", self.name, exc)
            return False
        owned = {key for key, ps in list(self._parts.items()) if ps.state == ACTIVE}
        for topic in self.settings.topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                return False
            if any((topic, p) not in owned for p in info.partitions):
                return False
        return True

    def _drain(self, consumer) -> None:
        """Stop fetching, let what is in flight be stored (up to
        ``drain_timeout``), make it durable and commit it."""
        from confluent_kafka import TopicPartition
        consume = consumer.consume
        states = [ps for ps in list(self._parts.values()) if ps.state == ACTIVE]
        if states:
            try:
                consumer.pause([TopicPartition(ps.topic, ps.partition) for ps in states])
            except Exception as exc:  # noqa: BLE001 - draining goes on regardless
                log.debug("pausing for the drain: %r", exc)
        deadline = time.monotonic() + self.settings.drain_timeout
        while (any(ps.window.pending for ps in states) and time.monotonic() < deadline
               and self._applier.error is None):
            # Keep serving the group while draining: a drain longer than the
            # group's rebalance timeout would otherwise get this member
            # evicted while it still writes, and the partitions' next owner
            # would write beside it. Polling runs the revoke/lost callbacks,
            # which fence the partitions at once. The partitions are paused,
            # so records still buffered are dropped unregistered (the next
            # owner fetches them again).
            consume(1000, 0.05)
            states = [ps for ps in states if ps.state == ACTIVE]
        left = sum(ps.window.pending for ps in states)
        if left:
            log.warning("%s: %d records still in flight after the %.0f s drain; they are not stored (a restart "
                        "processes them)", self.name, left, self.settings.drain_timeout)
        self._raise_if_failed()
        # Release everything here, while still a member, not in close()'s
        # revoke callback: measured on the embedded broker, the group hands a
        # closing member's partitions to another member while that member's
        # revoke callback is still running, so anything left to it would be
        # written beside the next owner.
        self._refresh_metrics(consumer)
        self._release(consumer, [ps for ps in list(self._parts.values()) if ps.state != FENCED], lost=False)

    def _shutdown(self, timer: Timer) -> None:
        for ps in list(self._parts.values()):
            ps.state = FENCED
            for unit in ps.units:
                unit.stop()
        if self._restorer is not None:
            self._restorer.close()
        if self._applier is not None:
            self._applier.stop()
        if self._changelog is not None:
            self._changelog.close()
        self._dlq.close(timeout=5.0)
        self._scheduler.close()
        timer.close()
        if self._owns_db:
            self._db.close()
        self._running = False

    # -- errors and metrics ----------------------------------------------------------------------

    def _consumer_error(self, err, msg=None) -> None:
        from confluent_kafka import KafkaError
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        self.metrics.consumer_errors += 1
        if code == KafkaError._AUTO_OFFSET_RESET and msg is not None and msg.topic() is not None:
            # The broker no longer has the offset this partition fetches from
            # (the topic was truncated, or deleted and created again, or the
            # broker lost its data: the embedded broker keeps topics in
            # memory). Going back to the beginning would write old values
            # over newer ones; skipping ahead would lose records. The loader
            # does neither: it seeks to the same offset again a moment
            # later, until the partition holds it again.
            key = (msg.topic(), msg.partition())
            if key not in self._reseek:
                self._reseek[key] = time.monotonic() + RESEEK_INTERVAL
            self._log_error(code, f"{key[0]}[{key[1]}]: the broker does not have the offset to fetch from "
                                  f"({err.str()}); not skipping ahead or going back: trying the same offset "
                                  f"again every {RESEEK_INTERVAL:g} s")
            return
        if err.fatal():
            self._fatal = err.str()
        self._log_error(code, f"consumer: {err.str()}")

    def _on_error(self, err) -> None:
        self.metrics.consumer_errors += 1
        if err.fatal():
            self._fatal = err.str()
        self._client_log.note(("error", err.code()), logging.WARNING,
                              f"kafka client: {err.str()} (the client keeps retrying)")

    def _log_error(self, code: int, text: str) -> None:
        """Log ``text`` if it is the first of its error ``code`` lately, else
        count it (client_log.py says how many followed)."""
        self._errors.note(code, logging.WARNING, text)

    def _refresh_metrics(self, consumer) -> None:
        from confluent_kafka import TopicPartition
        for ps in list(self._parts.values()):
            pm = ps.metrics
            pm.pending = ps.window.pending
            pm.stored = ps.stored
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(ps.topic, ps.partition), cached=True)
            except Exception:  # noqa: BLE001 - gauges only
                high = -1
            end = max(high, pm.next_fetch or 0, pm.end or 0)
            pm.end = end if end > 0 else pm.end
