"""A loader's changelog, or none: chosen once, from ``settings.changelog``.

* :class:`NoChangelog`: nothing to write, nothing to restore from; a
  partition is fetched as soon as it is assigned.
* :class:`ChangelogRole` (partitioned state only): the changelog topic
  ``<group>-<topic>-changelog`` is created if missing (as many partitions
  as the source topic) and written by the applier's ``on_written`` hook,
  every batch right after a shard applied it (changelog.py); a commit to
  Kafka first flushes it (the durable barrier's ``then``); a partition
  assigned to the loader is *held* -- paused, its records not taken --
  while the restore thread (restore.py) decides where its source
  consumption starts (restored from the changelog when its shard has no
  offset, reprocessed from where the changelog ends when that is before
  the shard's offset), and :meth:`ChangelogRole.resume_restored`, on the
  consumer thread, seeks it there and resumes it.

The loader calls the same methods on either; only this module knows
which one it has.
"""

from __future__ import annotations

import logging

from ..errors import LoaderError
from .commit_control import OffsetWindow
from .partition import ACTIVE, PartitionState

log = logging.getLogger(__name__)


class NoChangelog:
    """A loader without a changelog."""

    #: The applier's ``on_written`` hook: none.
    on_written = None

    def open(self) -> None:
        """Nothing to create."""

    def start(self, loader, applier) -> None:
        """No restore thread."""

    def hold(self, ps: PartitionState) -> None:
        """A partition being assigned is fetched at once."""

    def submit(self, consumer, states: list[PartitionState]) -> None:
        """Nothing to restore."""

    def resume_restored(self, consumer) -> None:
        """Nothing restored to resume."""

    def before_commit(self, synchronous: bool):
        """Nothing must hold the data before a commit (no ``then`` for the durable barrier)."""
        return None

    def check(self) -> None:
        """Nothing can have failed."""

    def stop_restoring(self) -> None:
        """No restore thread."""

    def close(self) -> None:
        """No writer."""


class ChangelogRole:
    """The changelog of a loader's partitioned state: its writer, restore
    thread, and what the consumer thread does with them."""

    def __init__(self, settings, source_topic: str, *, name: str, metrics, partitions, errors) -> None:
        self._settings = settings
        self._source = source_topic
        self._name = name
        self._metrics = metrics
        #: The loader's PartitionContexts and ClientErrors.
        self._partitions = partitions
        self._errors = errors
        self._writer = None
        self._restorer = None
        self._applier = None

    def open(self) -> None:
        """Create the changelog topic if missing and its writer (before the
        applier exists: the applier's hook writes to it)."""
        from ..admin import partition_count
        from ..scaleout.changelog import ChangelogWriter, changelog_topic, ensure_changelog_topic
        s = self._settings
        topic = changelog_topic(s.group, self._source)
        partitions = partition_count(s.bootstrap_servers, self._source, client_config=s.client_config)
        if not partitions:
            raise LoaderError(f"topic {self._source!r} does not exist (its changelog {topic!r} needs its partition "
                              "count)")
        ensure_changelog_topic(s.bootstrap_servers, topic, partitions, client_config=s.client_config)
        self._writer = ChangelogWriter(s.bootstrap_servers, topic, s.client_config)
        log.info("%s: changelog %s (%d partitions)", self._name, topic, partitions)

    def start(self, loader, applier) -> None:
        """Start the restore thread of ``loader``, writing through ``applier``."""
        from ..scaleout.restore import ChangelogRestorer
        self.attach(self._writer, ChangelogRestorer(loader, applier, self._writer.topic), applier)

    def attach(self, writer, restorer, applier) -> None:
        """Work with ``writer`` (a ChangelogWriter), ``restorer`` (a
        ChangelogRestorer) and ``applier`` from now on."""
        self._writer, self._restorer, self._applier = writer, restorer, applier

    # -- the applier's hook and the commits -------------------------------------------------------

    def on_written(self, ps: PartitionState, ops_lists: list, next_offset: int) -> None:
        """The applier's ``on_written``: under its lock, right after a batch of ``ps`` was written."""
        self._metrics.changelog_produced += self._writer.send(ps.partition, ops_lists, next_offset)

    def before_commit(self, synchronous: bool):
        """The durable barrier's ``then``: wait until the changelog holds every
        batch written so far (under the applier's lock)."""
        timeout = 30.0 if synchronous else 5.0
        return lambda: self._flush(timeout)

    def _flush(self, timeout: float) -> bool:
        if self._writer.flush(timeout):
            return True
        self._errors.note(-1001, f"the changelog did not acknowledge every record within {timeout:g} s; offsets "
                                 "are not committed to Kafka until it does")
        return False

    # -- assigned partitions --------------------------------------------------------------------

    def hold(self, ps: PartitionState) -> None:
        """A partition being assigned waits (paused) for the restore thread
        to decide where it starts."""
        ps.restore_pending = ps.paused = ps.metrics.paused = True

    def submit(self, consumer, states: list[PartitionState]) -> None:
        """Pause the newly assigned ``states`` and hand them to the restore thread."""
        from confluent_kafka import TopicPartition
        if not states:
            return
        consumer.pause([TopicPartition(ps.topic, ps.partition) for ps in states])
        for ps in states:
            self._restorer.submit(ps, ps.stored)

    def resume_restored(self, consumer) -> None:
        """Resume the partitions whose start the restore thread decided."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        for ps, start in self._restorer.finished():
            if ps.state != ACTIVE or self._partitions.get(ps.key) is not ps:
                continue
            with self._applier.lock:
                # A new run of the changelog's partition: its batches cover
                # source offsets from ``start`` on (changelog.py).
                self._writer.begin(ps.partition, 0 if start is None else start)
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
            except Exception as exc:  # noqa: BLE001 - the seek is tried again (ClientErrors.seek_again)
                log.warning("%s: resuming %s[%d] at %s: %r", self._name, ps.topic, ps.partition, start, exc)
                self._errors.seek_later(ps.key)
            ps.paused = ps.metrics.paused = False
            log.info("%s: %s[%d] consumes the source from %s", self._name, ps.topic, ps.partition,
                     "its beginning" if start is None else f"offset {start}")

    # -- failures and the end --------------------------------------------------------------------

    def check(self) -> None:
        """LoaderError if the changelog cannot be written or a restore failed for good."""
        if self._writer is not None and self._writer.error is not None:
            raise LoaderError(f"the changelog cannot be written: {self._writer.error} (the shards keep exact "
                              "offsets; a restart reprocesses what the changelog lacks)")
        if self._restorer is not None and self._restorer.error is not None:
            raise LoaderError(f"a restore failed and its shard could not be cleared: {self._restorer.error!r}")

    def stop_restoring(self) -> None:
        """Stop the restore thread (before the applier stops)."""
        if self._restorer is not None:
            self._restorer.close()

    def close(self) -> None:
        """Close the writer (after the applier stopped: nothing more to write)."""
        if self._writer is not None:
            self._writer.close()
