"""Loader: a Kafka topic materialized into an lsmkv or btree store.

``Loader(settings, store).run()`` consumes the settings' topics as a member
of a consumer group and keeps the store equal to the topics' current
table: a record with a value puts it under its key, a record with a null
value deletes the key, a record without a key is dead-lettered.

How a record travels (docs/kafka.md has the picture):

1. The consumer thread (the one calling :meth:`run`: consume.py) polls
   batches of records, registers each in its partition's window
   (commit_control.py) and hands it to the processor unit its key hashes
   to (units.py), or, without a processor, completes it at once
   (dispatch.py). A record below its partition's position (partition.py)
   is a stale fetch and is dropped.
2. Units run the processor concurrently, records of one key in order,
   and complete records in any order; failures are retried on the timing
   wheel and finally dead-lettered.
3. The applier (applier.py) writes each partition's completed prefix in
   engine write batches, each also recording the partition's progress in
   the store's metadata, atomically (with partitioned state, also the
   shard's placement tally: which partitioners fit its keys, placement.py).
4. Every ``commit_interval`` the consumer thread makes the stored offsets
   durable (one synced write) and commits them to Kafka, so lag tools see
   progress; Kafka's offset never runs ahead of the store (commits.py).

On assignment a partition starts at the offset the store holds (else the
group's committed offset, else the beginning): the store's data and
offsets always agree, so after any crash the load resumes exactly where
the store ends -- at-least-once delivery, exactly-once effect. Partitions
are taken and released by the AssignmentManager (assignment.py): on
revoke, in-flight records may finish (up to ``revoke_timeout``), their
offsets are made durable and committed, then they are fenced (never
written again by this loader) and released; a lost partition is fenced at
once. ``stop()`` (SIGTERM, Ctrl-C in the CLI) drains and commits the same
way.

What differs between loads is chosen once, when the loader is made, as
objects the rest of it uses without asking which one it has:

* the store role (store_role.py): one store, or partitioned state (a shard
  per partition: ``partitioned=True`` or a ShardedStore);
* the processing (dispatch.py): records stored as they are, or through
  ``settings.processor`` on processor units;
* where partitions come from (subscription.py): the consumer group, or,
  after :meth:`use_manual_assignment`, a coordinator calling
  :meth:`set_assignment` (coordination.py: the lag-aware assignment of a
  serving group);
* the changelog role (changelog_role.py): with ``settings.changelog``
  (partitioned state only) the changelog is written and restored from;
* the end condition (ends.py): until stopped, or until caught up.

Start-up: when the settings ask for it (``startup_wait``: an
``until_caught_up`` load by default), the constructor first waits for the
servers to answer and every topic to exist (admin.wait_for_topics) and
raises StartupError if they do not within the timeout -- before it opens
or creates any store, so a load that cannot start leaves nothing behind.

The loader never prints (the CLI shows :meth:`snapshot`); it logs through
``logging`` and never crashes on an unavailable broker once running:
librdkafka keeps reconnecting, and the loader logs the first report of
each kind and then how many followed (client_errors.py), so an outage is
a few lines however long it lasts, and loading resumes when the servers
are back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from lsmkv.base.timer import Timer

from ..admin import wait_for_topics
from ..errors import LoaderError
from ..settings import LoaderSettings
from .applier import Applier
from .assignment import AssignmentManager
from .changelog_role import ChangelogRole, NoChangelog
from .client_errors import ClientErrors
from .commits import CommitManager
from .consume import ConsumeLoop
from .dead_letters import DeadLetters
from .dispatch import ProcessorUnits, StoreAsIs
from .ends import PartitionEnds, UntilCaughtUp, UntilStopped
from .metrics import LoaderMetrics
from .partition import FENCED
from .partitions import PartitionContexts
from .retry import RetryPolicy, RetryScheduler
from .store_role import OneStore, PartitionedStore, partitioned as is_partitioned
from .subscription import GroupSubscription, ManualAssignment

log = logging.getLogger(__name__)


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
    closed when the run ends); with ``partitioned`` (or a ShardedStore) a
    shard directory, one store per partition. With ``settings.startup_wait``
    set the constructor first checks the servers and topics (StartupError)."""

    def __init__(self, settings: LoaderSettings, store, *, engine: str = "lsm", store_options: dict | None = None,
                 end_timeout: float = 30.0, trust_watermark: bool = False, name: str = "loader",
                 partitioned: bool = False) -> None:
        if not isinstance(settings, LoaderSettings):
            raise TypeError(f"settings must be LoaderSettings, not {type(settings).__name__}")
        self.settings = settings
        self.name = name
        self.metrics = LoaderMetrics()
        role = PartitionedStore if is_partitioned(store, partitioned) else OneStore
        role.check(settings)
        check_startup(settings)
        self._stores = role(settings, store, engine=engine, options=store_options, metrics=self.metrics,
                            name=name)
        #: The partitions held (PartitionContexts) and the Kafka clients' reports.
        self.partitions = PartitionContexts()
        self._errors = ClientErrors(name, self.metrics)
        self._source = GroupSubscription(settings, name)
        self._changelog = (ChangelogRole(settings, settings.topics[0], name=name, metrics=self.metrics,
                                         partitions=self.partitions, errors=self._errors)
                           if settings.changelog else NoChangelog())
        self._ends = PartitionEnds(settings, timeout=end_timeout, trust_watermark=trust_watermark)
        self._stop = threading.Event()
        self._stop_reason = "stopped"
        self._running = False
        #: Whether a run started (it closes the store role as it ends) and whether close() closed it.
        self._ran = False
        self._closed = False

    # -- what others read (any thread) -----------------------------------------------------------------

    @property
    def db(self):
        """The store (with partitioned state, the ShardedStore)."""
        return self._stores.db

    @property
    def shards(self):
        """The ShardedStore of partitioned state (None: one store)."""
        return self._stores.shards

    @property
    def ownership(self) -> list[tuple[float, str, str, int]]:
        """(monotonic time, "assign" | "release" | "lost", topic, partition): who owned what when."""
        return self.partitions.ownership

    def held(self) -> dict[tuple[str, int], tuple[str, int | None]]:
        """{(topic, partition): (state, stored offset)} of the partitions this
        loader holds now (serve.py and the member announcements read it)."""
        return self.partitions.held()

    def restoring(self) -> list[int]:
        """Partitions whose shard is catching up (partitioned state): rebuilt
        from the source topic, or resumed from a local shard that is behind,
        and not yet at the end the partition had when assigned."""
        return sorted(self.restore_lag())

    def restore_lag(self) -> dict[int, int | None]:
        """{partition: records still to restore (None: its end not observed
        yet)} of the partitions :meth:`restoring` names (partitions.py)."""
        return self.partitions.restore_lag()

    def placements(self) -> dict[int, dict]:
        """{partition: its shard's placement tally summary (placement.py)} of
        the partitions held active (partitioned state)."""
        return self.partitions.placements()

    def shard_of(self, partition: int):
        """The open shard of ``partition`` if this loader holds it active
        (partitioned state), else None."""
        return self._stores.shard_of(partition, self.partitions)

    def snapshot(self) -> dict:
        """The loader's metrics as a plain dict."""
        return self.metrics.snapshot()

    # -- control ----------------------------------------------------------------------------

    def use_manual_assignment(self, assigner) -> None:
        """Take partitions from ``assigner`` (coordination.py: it calls
        :meth:`set_assignment`) instead of subscribing to the group; the
        consumer assigns them manually and still commits to the group.
        Partitioned state only; before :meth:`run`."""
        if self.shards is None:
            raise LoaderError("manual (lag-aware) assignment needs partitioned state")
        if self._running:
            raise LoaderError("choose the assignment before the loader runs")
        self._source = ManualAssignment(assigner, self.shards.topic)

    def set_assignment(self, partitions) -> None:
        """The partitions of the topic this loader is to hold active from
        now on (manual assignment; safe from any thread, applied by the
        consumer thread)."""
        self._source.set_assignment(partitions)

    def stop(self, reason: str = "stopped") -> None:
        """Ask :meth:`run` to drain, commit and return (safe from any thread
        and from a signal handler)."""
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop.set()

    def close(self) -> None:
        """Close the store the constructor opened (given a path) if no run
        did: a run closes it as it ends. Not while running."""
        if self._running:
            raise LoaderError("stop the loader and let its run return before closing it")
        if not self._ran and not self._closed:
            self._closed = True
            self._stores.close()

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> LoadSummary:
        """Consume until stopped (or, with ``until_caught_up``, until every
        assigned partition reached the end it had when assigned)."""
        from confluent_kafka import Consumer
        if self._running:
            raise LoaderError("this loader is already running")
        if self._closed:
            raise LoaderError("this loader is closed (make a new Loader to load again)")
        self._ran = True
        self._running = True
        s = self.settings
        self._stores.start()
        started = time.monotonic()
        self.metrics.started = started
        try:
            self._changelog.open()
        except BaseException:
            self._running = False
            self._stores.close()
            raise
        timer = Timer(tick=0.001, name=f"lsmkv-kafka-{self.name}-timer")
        scheduler = RetryScheduler(RetryPolicy(s.max_retries, s.retry_backoff, s.retry_backoff_max), timer)
        dead_letters = DeadLetters({**s.producer_config(), "logger": self._errors.client_log}, s.dlq_for, timer)
        applier = Applier(self._stores.db, self.partitions.by_key, batch_records=s.batch_records,
                          batch_bytes=s.batch_bytes, linger=s.linger, metrics=self.metrics,
                          on_written=self._changelog.on_written)
        self._changelog.start(self, applier)
        commits = CommitManager(interval=s.commit_interval, partitions=self.partitions, applier=applier,
                                changelog=self._changelog, metrics=self.metrics, errors=self._errors)
        consumer = Consumer({**s.consumer_config(), "logger": self._errors.client_log,
                             "on_commit": commits.on_commit, "error_cb": self._errors.on_error})
        try:
            loop = self._consume_loop(consumer, applier, scheduler, dead_letters, commits)
            loop.run(on_caught_up=lambda: self.stop("caught up"))
            loop.drain()
        finally:
            try:
                consumer.close()  # leaves the group: the revoke callback releases what is left
            except Exception as exc:  # noqa: BLE001 - closing after a failure must not hide it
                log.warning("closing the consumer: %r", exc)
            self._shutdown(timer, scheduler, dead_letters, applier)
        loop.check()
        self.metrics.ended = time.monotonic()
        summary = self.metrics.snapshot()
        return LoadSummary(self._stop_reason, time.monotonic() - started, summary["records_stored"], summary)

    def _processing(self, applier, scheduler, dead_letters) -> StoreAsIs | ProcessorUnits:
        """The run's processing: records stored as they are, or through the processor on units."""
        s = self.settings
        shared = dict(name=self.name, partitions=self.partitions, stores=self._stores, applier=applier,
                      dead_letters=dead_letters, errors=self._errors, metrics=self.metrics)
        if s.processor is None:
            return StoreAsIs(**shared)
        return ProcessorUnits(processor=s.processor, concurrency=s.concurrency, scheduler=scheduler, **shared)

    def _consume_loop(self, consumer, applier, scheduler, dead_letters, commits) -> ConsumeLoop:
        """The run's consume loop, with its processing, assignment manager and
        end condition (the source subscribes here)."""
        s = self.settings
        processing = self._processing(applier, scheduler, dead_letters)
        assignment = AssignmentManager(
            name=self.name, settings=s, partitions=self.partitions, stores=self._stores, processing=processing,
            changelog=self._changelog, source=self._source, ends=self._ends, needs_ends=s.until_caught_up,
            applier=applier, commits=commits, scheduler=scheduler, errors=self._errors, metrics=self.metrics)
        until = (UntilCaughtUp(s, name=self.name, partitions=self.partitions, assignment=assignment)
                 if s.until_caught_up else UntilStopped())
        self._source.start(consumer, assignment)
        return ConsumeLoop(consumer, name=self.name, settings=s, stop=self._stop, partitions=self.partitions,
                           processing=processing, assignment=assignment, commits=commits, source=self._source,
                           changelog=self._changelog, end_condition=until, applier=applier, errors=self._errors,
                           metrics=self.metrics)

    def _shutdown(self, timer: Timer, scheduler: RetryScheduler, dead_letters: DeadLetters,
                  applier: Applier) -> None:
        for ps in self.partitions.all():
            ps.state = FENCED
            for unit in ps.units:
                unit.stop()
        self._changelog.stop_restoring()
        applier.stop()
        self._changelog.close()
        dead_letters.close(timeout=5.0)
        scheduler.close()
        timer.close()
        self._stores.close()
        self._running = False
