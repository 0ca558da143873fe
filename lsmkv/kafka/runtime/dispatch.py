"""Fetched records into their partitions' windows: stored as they are, or processed.

A loader's processing is chosen once, from ``settings.processor``:

* :class:`StoreAsIs` (no processor): a record is its own store operation.
  The records a poll returned for a partition are registered in its
  window (commit_control.py) as completed runs, one entry per run, and
  the applier is told they are ready.
* :class:`ProcessorUnits`: each record is registered on its own and handed
  to the processor unit its key hashes to (units.py); each partition gets
  ``concurrency`` units when it is assigned (:meth:`ProcessorUnits.units_for`).

Both take a poll's records the same way (:meth:`Dispatch.dispatch`): an
error in place of a record goes to ClientErrors; a record of a partition
not held active, or still waiting for its restore, is left (the next owner,
or the seek after the restore, fetches it again); a record below its
partition's position is a stale fetch -- from before a seek, or delivered
again -- and is dropped (PartitionState.position); a record without a key,
or with a key or value the store cannot hold, is dead-lettered
(dead_letters.py) and completes once the dead-letter topic holds it.

This module runs on the consumer thread; it never writes the store.
"""

from __future__ import annotations

import logging
from typing import Iterator

from lsmkv.base.keys import MAX_VALUE_SIZE

from .commit_control import complete
from .partition import ACTIVE, PartitionState
from .processor import Record
from .units import ProcessorUnit, unit_of

log = logging.getLogger(__name__)


class Dispatch:
    """What both kinds of processing share: stale fetches, invalid records, counts."""

    def __init__(self, *, name: str, partitions, stores, applier, dead_letters, errors, metrics) -> None:
        self._name = name
        #: The loader's PartitionContexts, store role (for the longest key
        #: the store takes), applier, DeadLetters and ClientErrors.
        self._by_key = partitions.by_key
        self._stores = stores
        self._applier = applier
        self._dead_letters = dead_letters
        self._errors = errors
        self._metrics = metrics

    def dispatch(self, msgs: list) -> None:
        raise NotImplementedError

    def units_for(self, ps: PartitionState) -> list:
        """The processor units of a partition being assigned (none)."""
        return []

    def _accepted(self, msgs: list) -> Iterator[tuple[PartitionState, object, int]]:
        """The records of a poll to take, each with its partition and offset,
        counted as fetched (the partition's position moves past it). An error
        in place of a record goes to ClientErrors; a record of a partition not
        held active (revoked meanwhile: the next owner fetches it again) or
        not restored yet is left; a stale one (below the position: fetched
        before a seek, or delivered again) is dropped -- registering it would
        break the window's offset order, dropping it loses nothing -- and
        logged once the poll's records are all taken."""
        by_key = self._by_key
        stale: dict[PartitionState, list] = {}
        fetched = 0
        try:
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    self._errors.consumer_error(err, msg)
                    continue
                ps = by_key.get((msg.topic(), msg.partition()))
                if ps is None or ps.state != ACTIVE or ps.restore_pending:
                    continue
                offset = msg.offset()
                if offset < ps.position:
                    stale.setdefault(ps, []).append(offset)
                    continue
                fetched += 1
                pm = ps.metrics
                if pm.first_fetched is None:
                    pm.first_fetched = offset
                pm.next_fetch = ps.fetched_next = ps.position = offset + 1
                pm.fetched += 1
                yield ps, msg, offset
        finally:
            self._metrics.fetched += fetched
            if stale:
                self._dropped_stale(stale)

    def _invalid(self, key, value, max_key: int) -> str | None:
        """Why a record cannot be stored (None: it can)."""
        if key is None:
            return "record has no key"
        if len(key) > max_key:
            return f"key is {len(key)} bytes; the store takes at most {max_key}"
        if value is not None and len(value) > MAX_VALUE_SIZE:
            return f"value is {len(value)} bytes; the store takes at most {MAX_VALUE_SIZE}"
        return None

    def _dead_letter(self, ps: PartitionState, record: Record, entry: list, reason: str) -> None:
        log.warning("%s[%d]@%d: %s; dead-lettering it", record.topic, record.partition, record.offset, reason)

        def done() -> None:
            complete(entry, None)
            ps.metrics.dead_letters += 1
            self._metrics.dead_letters += 1
            self._applier.completed(1)

        self._dead_letters.send(record, reason, 0, done)

    def _dropped_stale(self, stale: dict) -> None:
        for ps, offsets in stale.items():
            ps.metrics.stale += len(offsets)
            self._metrics.stale += len(offsets)
            log.info("%s: %s[%d]: dropped %d records fetched from below its position (offsets %d..%d: fetched "
                     "before a seek, or delivered again)", self._name, ps.topic, ps.partition, len(offsets),
                     min(offsets), max(offsets))


class StoreAsIs(Dispatch):
    """No processor: records are registered completed, in runs."""

    def dispatch(self, msgs: list) -> None:
        max_key = self._stores.max_key
        max_value = MAX_VALUE_SIZE
        #: partition state -> its run: [first offset, next offset, records, [(key, value)], bytes]
        runs: dict[PartitionState, list] = {}
        for ps, msg, offset in self._accepted(msgs):
            key = msg.key()
            value = msg.value()
            if key is not None and len(key) <= max_key and (value is None or len(value) <= max_value):
                run = runs.get(ps)
                if run is None:
                    runs[ps] = [offset, offset + 1, 1, [(key, value)], len(key) + (len(value) if value else 0)]
                else:
                    run[1] = offset + 1
                    run[2] += 1
                    run[3].append((key, value))
                    run[4] += len(key) + (len(value) if value else 0)
                continue
            # An invalid record ends the partition's run (the window takes offsets in order).
            run = runs.pop(ps, None)
            if run is not None:
                ps.window.register_done(*run)
            record = Record(msg.topic(), msg.partition(), offset, key, value, msg.headers(), msg.timestamp()[1])
            self._dead_letter(ps, record, ps.window.register(offset), self._invalid(key, value, max_key))
        done = 0
        for ps, run in runs.items():
            ps.window.register_done(*run)
            done += run[2]
        if done:
            self._applier.completed(done)


class ProcessorUnits(Dispatch):
    """``settings.processor`` runs on ``concurrency`` units per partition."""

    def __init__(self, *, processor, concurrency: int, scheduler, **shared) -> None:
        super().__init__(**shared)
        self._processor = processor
        self._concurrency = concurrency
        #: The retry scheduler of the units (retry.py).
        self._scheduler = scheduler

    def units_for(self, ps: PartitionState) -> list:
        return [ProcessorUnit(f"lsmkv-kafka-{ps.topic}-{ps.partition}-u{i}", self._processor, self._stores.max_key,
                              scheduler=self._scheduler, dead_letters=self._dead_letters,
                              on_complete=self._applier.completed, partition_state=ps)
                for i in range(self._concurrency)]

    def dispatch(self, msgs: list) -> None:
        max_key = self._stores.max_key
        #: partition state -> [[(record, entry), ...] per unit]
        routed: dict[PartitionState, list] = {}
        for ps, msg, offset in self._accepted(msgs):
            key = msg.key()
            value = msg.value()
            record = Record(msg.topic(), msg.partition(), offset, key, value, msg.headers(), msg.timestamp()[1])
            entry = ps.window.register(offset)
            invalid = self._invalid(key, value, max_key)
            if invalid is not None:
                self._dead_letter(ps, record, entry, invalid)
                continue
            units = ps.units
            routed.setdefault(ps, [[] for _ in units])[unit_of(key, len(units))].append((record, entry))
        for ps, per_unit in routed.items():
            for unit, items in zip(ps.units, per_unit):
                if items:
                    unit.submit(items)
