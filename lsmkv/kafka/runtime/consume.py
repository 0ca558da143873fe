"""ConsumeLoop: the consumer thread of a running loader (Decaton's ConsumeManager).

Each round (:meth:`run`) it stops the load if something failed for good
(:meth:`check`), lets the assignment source apply a new manual assignment
or look for topics that were missing (subscription.py), resumes partitions
whose restore finished (changelog_role.py), polls up to ``poll_records``
records and dispatches them (dispatch.py), pauses a partition whose window
holds ``max_pending`` records and resumes it once half of them are stored
(backpressure: memory stays bounded whatever the lag), seeks again
partitions whose offset the broker did not have (client_errors.py),
commits every ``commit_interval`` (commits.py), refreshes the gauges, and
asks the end condition whether the load is done (ends.py).

:meth:`drain` ends a run: stop fetching, let what is in flight be stored
(up to ``drain_timeout``), then release every partition while still a
member of the group (its offsets made durable and committed).
"""

from __future__ import annotations

import logging
import time

from ..errors import LoaderError
from .partition import ACTIVE, FENCED

log = logging.getLogger(__name__)

#: Seconds between refreshes of the per-partition gauges.
METRICS_INTERVAL = 0.5


class ConsumeLoop:
    """Polls ``consumer`` for a loader until ``stop`` is set."""

    def __init__(self, consumer, *, name: str, settings, stop, partitions, processing, assignment, commits,
                 source, changelog, end_condition, applier, errors, metrics) -> None:
        self._consumer = consumer
        self._name = name
        self._settings = settings
        #: Set by Loader.stop (the loop ends at the next round), and the reason.
        self._stop = stop
        self._partitions = partitions
        self._processing = processing
        self._assignment = assignment
        self._commits = commits
        self._source = source
        self._changelog = changelog
        self._end_condition = end_condition
        self._applier = applier
        self._errors = errors
        self._metrics = metrics

    def run(self, on_caught_up) -> None:
        """Consume until stopped; ``on_caught_up()`` when the end condition is reached."""
        consumer = self._consumer
        s = self._settings
        partitions = self._partitions
        dispatch = self._processing.dispatch
        consume = consumer.consume
        next_metrics = 0.0
        while not self._stop.is_set():
            self.check()
            self._source.poll(consumer, partitions, time.monotonic())
            self._changelog.resume_restored(consumer)
            msgs = consume(s.poll_records, 0.1)
            if msgs:
                dispatch(msgs)
            self._flow_control()
            now = time.monotonic()
            if self._errors.reseeks:
                self._errors.seek_again(consumer, now, partitions)
            self._commits.maybe_commit(consumer, now)
            if now >= next_metrics:
                self.refresh_metrics()
                self._errors.tick()
                next_metrics = now + METRICS_INTERVAL
            if self._end_condition.reached(consumer):
                on_caught_up()

    def check(self) -> None:
        """LoaderError if the load cannot go on: the store keeps refusing
        writes, the consumer failed, the manual assignment failed, the
        changelog failed, or a processor unit died."""
        applier = self._applier
        if applier.error is not None:
            raise LoaderError(f"the store keeps refusing writes: {applier.error}") from applier.error
        if self._errors.fatal is not None:
            raise LoaderError(f"the consumer failed: {self._errors.fatal}")
        self._source.check()
        self._changelog.check()
        for ps in self._partitions.all():
            if ps.unit_failed:
                raise LoaderError(f"a processor unit of {ps.topic}[{ps.partition}] failed (see the log)")

    def _flow_control(self) -> None:
        from confluent_kafka import TopicPartition
        for ps in self._partitions.all():
            if ps.state != ACTIVE or ps.restore_pending:
                continue
            pending = ps.window.pending
            if pending > ps.metrics.peak_pending:  # (pending grows only by a dispatch, just before)
                ps.metrics.peak_pending = pending
            if not ps.paused and pending >= ps.window.capacity:
                self._consumer.pause([TopicPartition(ps.topic, ps.partition)])
                ps.paused = ps.metrics.paused = True
                ps.metrics.pauses += 1
                self._metrics.pauses += 1
            elif ps.paused and pending <= ps.window.capacity // 2:
                self._consumer.resume([TopicPartition(ps.topic, ps.partition)])
                ps.paused = ps.metrics.paused = False

    def refresh_metrics(self) -> None:
        """Refresh the per-partition gauges (pending, stored, end)."""
        from confluent_kafka import TopicPartition
        for ps in self._partitions.all():
            pm = ps.metrics
            pm.pending = ps.window.pending
            pm.stored = ps.stored
            try:
                _, high = self._consumer.get_watermark_offsets(TopicPartition(ps.topic, ps.partition), cached=True)
            except Exception:  # noqa: BLE001 - gauges only
                high = -1
            end = max(high, pm.next_fetch or 0, pm.end or 0)
            pm.end = end if end > 0 else pm.end

    def drain(self) -> None:
        """Stop fetching, let what is in flight be stored (up to
        ``drain_timeout``), make it durable and commit it."""
        from confluent_kafka import TopicPartition
        consumer = self._consumer
        consume = consumer.consume
        states = self._partitions.active()
        if states:
            try:
                consumer.pause([TopicPartition(ps.topic, ps.partition) for ps in states])
            except Exception as exc:  # noqa: BLE001 - draining goes on regardless
                log.debug("pausing for the drain: %r", exc)
        deadline = time.monotonic() + self._settings.drain_timeout
        while self._partitions.pending(states) and time.monotonic() < deadline and self._applier.error is None:
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
                        "processes them)", self._name, left, self._settings.drain_timeout)
        self.check()
        # Release everything here, while still a member, not in close()'s
        # revoke callback: measured on the embedded broker, the group hands a
        # closing member's partitions to another member while that member's
        # revoke callback is still running, so anything left to it would be
        # written beside the next owner.
        self.refresh_metrics()
        self._assignment.release(consumer, [ps for ps in self._partitions.all() if ps.state != FENCED], lost=False)
