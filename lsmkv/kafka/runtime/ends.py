"""Where assigned partitions end, and whether a load has reached the end.

:class:`PartitionEnds` observes, on a thread of its own, the end each newly
assigned partition has (end_offsets.py: a broker whose watermark lags is
not trusted), once per run: a partition assigned again (after a
rebalance, a lost session) keeps the end it had -- an end observed later
could be lower (a broker that lost its data, a topic being restored) and
would end the load early. The end is a partition's ``target``: an
``until_caught_up`` load stops once every partition reached it, and a
restoring shard stops counting as restoring once it holds it.

A loader's end condition is chosen once, from ``settings.until_caught_up``:

* :class:`UntilStopped`: the load runs until :meth:`Loader.stop`;
* :class:`UntilCaughtUp`: it also stops once every partition it holds
  reached its target -- and, while other members hold partitions, once the
  assignment has stood still for two session timeouts, so that a dead
  member's partitions have moved to a live one first.
"""

from __future__ import annotations

import logging
import threading
import time

from .end_offsets import observe_end_offsets
from .partition import PartitionState

log = logging.getLogger(__name__)


class PartitionEnds:
    """Observes the ends of a loader's partitions (``settings``' servers)."""

    def __init__(self, settings, *, timeout: float, trust_watermark: bool) -> None:
        self._settings = settings
        self._timeout = timeout
        self._trust_watermark = trust_watermark

    def observe(self, states: list[PartitionState]) -> None:
        """Give ``states`` (newly assigned) their targets: the end known from
        earlier in the run, else one observed now (on a thread)."""
        unseen = []
        for ps in states:
            if ps.metrics.target is not None:
                ps.target = ps.metrics.target
            else:
                unseen.append(ps)
        if unseen:
            threading.Thread(target=self._observe, args=(unseen,), name="lsmkv-kafka-ends", daemon=True).start()

    def _observe(self, states: list[PartitionState]) -> None:
        s = self._settings
        try:
            ends = observe_end_offsets(s.bootstrap_servers, [ps.key for ps in states],
                                       client_config=s.client_config, timeout=self._timeout,
                                       trust_watermark=self._trust_watermark)
        except Exception as exc:  # noqa: BLE001 - retried by the next assignment; the run goes on
            log.warning("could not observe the end of %s: %r", [ps.key for ps in states], exc)
            return
        for ps in states:
            ps.target = ends.get(ps.key)
            ps.metrics.target = ps.target


class UntilStopped:
    """The load runs until it is stopped."""

    #: Partitions need their ends only if their shards restore.
    needs_ends = False

    def reached(self, consumer) -> bool:
        return False


class UntilCaughtUp:
    """The load stops once every partition held reached its target."""

    #: Every partition needs its end.
    needs_ends = True

    def __init__(self, settings, *, name: str, partitions, assignment) -> None:
        self._settings = settings
        self._name = name
        #: The loader's PartitionContexts, and its AssignmentManager (when the
        #: assignment last changed).
        self._partitions = partitions
        self._assignment = assignment

    def reached(self, consumer) -> bool:
        from confluent_kafka import TopicPartition
        if not self._assignment.assigned_once:
            return False
        states = self._partitions.active()
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
            quiet = 2 * self._settings.session_timeout_ms / 1000.0
            if time.monotonic() - self._assignment.changed_at < quiet:
                return False
        return True

    def _owns_every_partition(self, consumer) -> bool:
        """Whether this loader holds every partition of its topics."""
        try:
            metadata = consumer.list_topics(timeout=10)  # all topics: naming one may auto-create it
        except Exception as exc:  # noqa: BLE001 - not knowing means not owning everything
            log.debug("%s: reading the topics' metadata: %r", self._name, exc)
            return False
        owned = {ps.key for ps in self._partitions.active()}
        for topic in self._settings.topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                return False
            if any((topic, p) not in owned for p in info.partitions):
                return False
        return True
