"""Where a loader's partitions come from: the consumer group, or a coordinator.

* :class:`GroupSubscription` (the default): the consumer subscribes to the
  topics and the group assigns partitions through the rebalance callbacks
  (the AssignmentManager's :meth:`on_assign`, :meth:`on_revoke`,
  :meth:`on_lost`); incrementally with librdkafka's cooperative
  assignment, or by replacing the whole assignment with an eager one.
* :class:`ManualAssignment` (``Loader.use_manual_assignment``): a
  coordinator (coordination.py: the lag-aware assignment of a serving
  group) says which partitions the loader holds (``set_assignment``, from
  any thread); the consumer thread releases and takes partitions exactly
  as the revoke and assign callbacks do, with
  ``incremental_unassign``/``incremental_assign``, and still commits to
  the group.

The AssignmentManager and the consume loop call the same methods on
either; only this module knows which one it is.
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import LoaderError

log = logging.getLogger(__name__)

#: Seconds between looks for the topics of a loader the group assigned
#: nothing while one of them was missing (GroupSubscription.poll).
TOPIC_RECHECK_INTERVAL = 1.0


def missing_topics(consumer, topics: list[str], name: str) -> list[str]:
    """The ``topics`` the broker does not know now (all of them when its
    metadata cannot be read)."""
    try:
        metadata = consumer.list_topics(timeout=5)  # all topics: naming one may auto-create it
    except Exception as exc:  # noqa: BLE001 - not knowing counts as missing
        log.debug("%s: reading the topics' metadata: %r", name, exc)
        return list(topics)
    return [t for t in topics
            if (info := metadata.topics.get(t)) is None or info.error is not None or not info.partitions]


class GroupSubscription:
    """Partitions from the consumer group ``settings.group``."""

    def __init__(self, settings, name: str) -> None:
        self._topics = settings.topics
        self._name = name
        #: Partitions are added and removed one by one (cooperative), not the
        #: whole assignment replaced (eager).
        self._incremental = settings.cooperative
        #: When to look again whether the topics exist, after the group
        #: assigned this loader nothing while one was missing (None: no need).
        self._recheck_at: float | None = None
        self._listener = None

    def start(self, consumer, listener) -> None:
        """Subscribe, ``listener`` (the AssignmentManager) taking the callbacks."""
        self._listener = listener
        consumer.subscribe(self._topics, on_assign=listener.on_assign, on_revoke=listener.on_revoke,
                           on_lost=listener.on_lost)

    def take(self, consumer, partitions) -> None:
        """Assign ``partitions`` (the assign callback's, their offsets set)."""
        if self._incremental:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)

    def revoked(self, consumer) -> None:
        """The revoke callback released its partitions: an eager group's
        consumer gives up its whole assignment."""
        if not self._incremental:
            consumer.unassign()

    def holding_nothing(self, consumer) -> None:
        """The group assigned nothing and the loader holds nothing: if a topic
        is missing, the group will not assign it by itself once it exists,
        so look again in a moment (:meth:`poll`)."""
        if missing_topics(consumer, self._topics, self._name):
            self._recheck_at = time.monotonic() + TOPIC_RECHECK_INTERVAL

    def poll(self, consumer, partitions, now: float) -> None:
        """On the consumer thread, each round: once every topic exists again
        after the group assigned nothing while one was missing (a broker that
        came back empty, a topic deleted and created again), subscribe again,
        which makes the group assign anew. librdkafka does not ask for a new
        assignment by itself (measured on the embedded broker restarted
        empty and the topic published again once the loader had rejoined: it
        held nothing for the 400 s watched)."""
        if self._recheck_at is None or now < self._recheck_at:
            return
        if partitions.active():
            self._recheck_at = None   # assigned meanwhile
            return
        if missing_topics(consumer, self._topics, self._name):
            self._recheck_at = now + TOPIC_RECHECK_INTERVAL
            return
        self._recheck_at = None
        log.info("%s: %s exist%s again; joining the group anew for an assignment", self._name,
                 ", ".join(self._topics), "s" if len(self._topics) == 1 else "")
        self.start(consumer, self._listener)

    def set_assignment(self, partitions) -> None:
        raise LoaderError("set_assignment needs manual assignment (Loader.use_manual_assignment)")

    def check(self) -> None:
        """Nothing of the group's assignment fails on its own."""


class ManualAssignment:
    """Partitions of ``topic`` from ``assigner`` (it calls :meth:`set_assignment`;
    its ``error`` stops the load)."""

    def __init__(self, assigner, topic: str) -> None:
        self._assigner = assigner
        self._topic = topic
        #: The partitions the assigner gave this loader, and whether they
        #: changed since applied.
        self._wanted: frozenset[int] = frozenset()
        self._changed = False
        self._lock = threading.Lock()
        self._listener = None

    def start(self, consumer, listener) -> None:
        """No subscription: the partitions come from :meth:`set_assignment`."""
        self._listener = listener

    def set_assignment(self, partitions) -> None:
        """The partitions to hold active from now on (safe from any thread;
        applied by the consumer thread)."""
        with self._lock:
            self._wanted = frozenset(int(p) for p in partitions)
            self._changed = True

    def take(self, consumer, partitions) -> None:
        consumer.incremental_assign(partitions)

    def revoked(self, consumer) -> None:
        """Partitions are given back one by one (:meth:`poll`)."""

    def holding_nothing(self, consumer) -> None:
        """The assigner decides; nothing to look for."""

    def poll(self, consumer, partitions, now: float) -> None:
        """On the consumer thread, each round: release the partitions no
        longer assigned (as a cooperative revoke does: in-flight records may
        finish, offsets are committed), then take the new ones (as an
        assignment does)."""
        from confluent_kafka import TopicPartition
        if not self._changed:
            return
        with self._lock:
            wanted, self._changed = self._wanted, False
        held = {ps.partition for ps in partitions.active()}
        drop = [TopicPartition(self._topic, p) for p in sorted(held - wanted)]
        add = [TopicPartition(self._topic, p) for p in sorted(wanted - held)]
        if drop:
            self._listener.on_revoke(consumer, drop)
            consumer.incremental_unassign(drop)
        if add:
            self._listener.on_assign(consumer, add)

    def check(self) -> None:
        """LoaderError if the assigner failed."""
        if self._assigner.error is not None:
            raise LoaderError(f"the lag-aware assignment failed: {self._assigner.error!r}")
