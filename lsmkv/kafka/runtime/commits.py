"""CommitManager: the stored offsets made durable, then committed to Kafka.

Every ``commit_interval`` (:meth:`maybe_commit`, on the consumer thread)
and when partitions are released, the offsets the store holds are made
durable by one synced write (the applier's durable barrier), then
committed to the group, so lag tools see progress. Kafka's offset never
runs ahead of the store: only offsets a synced write made durable are
committed, and with a changelog only once the changelog holds every batch
written so far (Kafka Streams' order: the store durable, the changelog
flushed, then the commit; changelog_role.py). A partition the restore
thread has not decided on yet is left out: its shard's offset may be
ahead of the changelog.

Periodic commits are asynchronous (their latency is measured from the
commit to its ``on_commit`` callback); the final commit of partitions
being released is synchronous. A failed commit is logged and left to the
next one: the store keeps the offsets, which is where a load resumes.

This module owns the commit timing and the committed offsets; it never
writes the store itself.
"""

from __future__ import annotations

import logging
import time

from .partition import PartitionState

log = logging.getLogger(__name__)


class CommitManager:
    """Commits the stored offsets of ``partitions`` (PartitionContexts)."""

    def __init__(self, *, interval: float, partitions, applier, changelog, metrics, errors) -> None:
        self._interval = interval
        self._partitions = partitions
        self._applier = applier
        #: The loader's changelog role: what must hold the data before a commit.
        self._changelog = changelog
        self._metrics = metrics
        #: ClientErrors: a failed asynchronous commit is one of its kinds.
        self._errors = errors
        #: When each asynchronous commit in flight started (its callback takes the oldest).
        self._started: list[float] = []
        self._next = time.monotonic() + interval

    def maybe_commit(self, consumer, now: float) -> None:
        """Commit asynchronously if ``commit_interval`` has passed since the last time."""
        if now >= self._next:
            self.commit(consumer, synchronous=False)
            self._next = now + self._interval

    def commit(self, consumer, synchronous: bool, states: list[PartitionState] | None = None) -> None:
        """Make the stored offsets of ``states`` (default: the partitions held
        active) durable, then commit them to Kafka."""
        from confluent_kafka import KafkaException, TopicPartition
        if states is None:
            states = self._partitions.active()
        changed = [ps for ps in states if ps.stored is not None and ps.stored != ps.committed
                   and not ps.restore_pending]
        if not changed:
            return
        durable = self._applier.durable_barrier(changed, include_fenced=True,
                                                then=self._changelog.before_commit(synchronous))
        offsets = [TopicPartition(ps.topic, ps.partition, off) for ps, off in durable.items()]
        if not offsets:
            return
        if not synchronous:
            self._started.append(time.monotonic())
            try:
                consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                self._started.pop()
                self._metrics.commit_done(0.0, ok=False)
                log.warning("committing offsets failed: %s (the next commit retries)", exc.args[0].str())
            return
        started = time.monotonic()
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self._metrics.commit_done(0.0, ok=False)
            log.warning("committing offsets failed: %s (the store keeps them; the next owner resumes from "
                        "the store)", exc.args[0].str())
            return
        self._metrics.commit_done((time.monotonic() - started) * 1000, ok=True)
        self._note_committed(result or [])

    def on_commit(self, err, partitions) -> None:
        """The consumer's ``on_commit`` callback: an asynchronous commit's outcome."""
        started = self._started.pop(0) if self._started else None
        if err is not None:
            self._metrics.commit_done(0.0, ok=False)
            self._errors.note(err.code(), f"committing offsets failed: {err.str()} (the next commit retries)")
            return
        if started is not None:
            self._metrics.commit_done((time.monotonic() - started) * 1000, ok=True)
        self._note_committed(partitions)

    def _note_committed(self, partitions) -> None:
        for tp in partitions:
            ps = self._partitions.get((tp.topic, tp.partition))
            if ps is not None and tp.error is None and tp.offset >= 0:
                ps.committed = tp.offset
