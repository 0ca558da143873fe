"""AssignmentManager: partitions taken and given back (the rebalance listener).

Kafka Streams' rebalance listener and TaskManager in the loader's terms.
Its :meth:`on_assign`, :meth:`on_revoke` and :meth:`on_lost` are the
consumer's rebalance callbacks (subscription.py: the group calls them, or
the manual assignment does, the same way), all on the consumer thread.

* **Assign**: each partition's state is built by the store role
  (store_role.py: its store or shard, and where fetching starts -- the
  offset the store holds, so the store's data and offsets always agree
  and a load resumes exactly where the store ends), held back by the
  changelog role while a restore decides where it starts
  (changelog_role.py), given its processor units (dispatch.py), added to
  the partition contexts (partitions.py) under the applier's lock, and
  assigned; its end is observed when the load needs it (ends.py).
* **Revoke** (cooperative): the partitions stop taking records, records in
  flight may finish (up to ``revoke_timeout``), then they are released.
* **Lost** (the group moved them without a revoke: a session timeout): they
  are released at once, their records in flight dropped unstored.
* **Release**: fence (no write includes them from now on: the applier
  checks under its lock), make their stored offsets durable and commit
  them (unless lost: the group may have given them to another member
  already), remove them, give their shards back, stop their units.
"""

from __future__ import annotations

import logging
import time

from ..errors import LoaderError
from .partition import FENCED, REVOKING, PartitionState

log = logging.getLogger(__name__)


class AssignmentManager:
    """Takes partitions into a loader's PartitionContexts and releases them."""

    def __init__(self, *, name: str, settings, partitions, stores, processing, changelog, source, ends,
                 needs_ends: bool, applier, commits, scheduler, errors, metrics) -> None:
        self._name = name
        self._settings = settings
        #: The loader's PartitionContexts, its roles (store, processing,
        #: changelog, where partitions come from), the end observer (and
        #: whether every partition needs its end: an until-caught-up load),
        #: and the run's applier, commits, retry scheduler and client error
        #: reports.
        self._partitions = partitions
        self._stores = stores
        self._processing = processing
        self._changelog = changelog
        self._source = source
        self._ends = ends
        self._needs_ends = needs_ends
        self._applier = applier
        self._commits = commits
        self._scheduler = scheduler
        self._errors = errors
        self._metrics = metrics
        #: Whether anything was assigned yet, and when this member's
        #: assignment last changed (assign, revoke, lost).
        self.assigned_once = False
        self.changed_at = time.monotonic()

    # -- the rebalance callbacks ---------------------------------------------------------------------

    def on_assign(self, consumer, partitions) -> None:
        # The group answered: whatever the clients kept reporting is over.
        self._errors.settle()
        self._metrics.rebalances += 1
        self.assigned_once = True
        self.changed_at = time.monotonic()
        if self._metrics.assigned_at is None and partitions:
            self._metrics.assigned_at = time.monotonic()
        if partitions:
            self._stores.assigning(consumer)
        new: list[PartitionState] = []
        for tp in partitions:
            ps = self._stores.take(consumer, tp)
            self._changelog.hold(ps)
            ps.units = self._processing.units_for(ps)
            new.append(ps)
        with self._applier.lock:
            self._partitions.add(new)
        self._partitions.record(time.monotonic(), "assign", new)
        for ps in new:
            self._log_assigned(ps)
        self._metrics.assigned += len(new)
        self._source.take(consumer, partitions)
        if not new and not self._partitions.active():
            self._source.holding_nothing(consumer)
        self._changelog.submit(consumer, new)
        # (Restoring shards need the end too: they count as restored once they reach it.)
        if new and (self._needs_ends or any(ps.restoring for ps in new)):
            self._ends.observe(new)

    def on_revoke(self, consumer, partitions) -> None:
        self._metrics.rebalances += 1
        self.changed_at = time.monotonic()
        states = self._partitions.of(partitions)
        for ps in states:
            ps.state = REVOKING
        deadline = time.monotonic() + self._settings.revoke_timeout
        while self._partitions.pending(states) and time.monotonic() < deadline and self._applier.error is None:
            self._applier.wait_progress(0.05)
        self.release(consumer, states, lost=False)
        self._source.revoked(consumer)

    def on_lost(self, consumer, partitions) -> None:
        self._metrics.rebalances += 1
        self.changed_at = time.monotonic()
        states = self._partitions.of(partitions)
        log.warning("%s: lost %s (the group moved them without a revoke: a session timeout); their records in "
                    "flight are dropped unstored", self._name, [ps.key for ps in states])
        self.release(consumer, states, lost=True)

    # -- releasing ------------------------------------------------------------------------------

    def release(self, consumer, states: list[PartitionState], lost: bool) -> None:
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
                             self._name, ps.topic, ps.partition, dropped)
        if not lost:
            try:
                self._commits.commit(consumer, synchronous=True, states=states)
            except LoaderError:
                raise
            except Exception as exc:  # noqa: BLE001 - the store holds the offsets; the next owner uses them
                log.warning("%s: final commit of %s failed: %r", self._name, [ps.key for ps in states], exc)
        now = time.monotonic()
        with self._applier.lock:
            self._partitions.remove(states)
        self._stores.release(states)
        for ps in states:
            self._scheduler.cancel(ps)
            for unit in ps.units:
                unit.stop()
        self._partitions.record(now, "lost" if lost else "release", states)
        if lost:
            self._metrics.lost += len(states)
        else:
            self._metrics.revoked += len(states)

    def _log_assigned(self, ps: PartitionState) -> None:
        if ps.restore_pending:
            log.info("%s: assigned %s[%d] (shard offset %s): checking its changelog first", self._name, ps.topic,
                     ps.partition, ps.stored)
        elif ps.restoring and ps.stored is None:
            log.info("%s: assigned %s[%d] with no local shard offset: restoring its shard from the start of "
                     "the topic", self._name, ps.topic, ps.partition)
        else:
            log.info("%s: assigned %s[%d], starting at %s", self._name, ps.topic, ps.partition,
                     ps.stored if ps.stored is not None else "the group's offset")
