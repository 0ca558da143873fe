"""The applier: completed records into the store, in offset order, in batches.

One thread per loader. It takes each partition's completed prefix from
its window (commit_control.py) and writes them as engine write batches --
the producer's RecordAccumulator idea on the apply side: a batch closes at
``batch_records`` records or ``batch_bytes`` bytes, or when ``linger``
has passed since it had something to write. Every batch also sets, for
each partition it holds records of, the partition's progress (offsets.py)
in the store's metadata, in the same atomic batch. So the store holds
exactly the records below each partition's stored offset: after a crash
the loader resumes there and applies nothing twice, skips nothing.

Records of one key are written in offset order (the window hands them
out in that order), so a reader of the store sees each key's values in
stream order, batch by batch (a batch is atomic).

A write the store refuses (a full disk, say) is retried, after
``db.resume()``, with a growing pause; only after ``write_attempts``
failures does the applier give up (the loader then stops with
LoaderError). Nothing it has not written counts as stored.

The lock (``lock``) is held while a batch is built and written, and by
whoever fences a partition (partition.py) or asks for a durable barrier,
so a fenced partition is never in a later write.

``on_written(partition state, operation lists, next offset)``, if given,
is called under the lock right after each partition's batch is written
(the loader's changelog writer, changelog.py, produces it there: what the
changelog holds, a shard held first, in the order the shard applied it);
A partition's placement tally (placement.py), if it has one, counts the
keys of each batch and is written in it beside the offset.
``durable_barrier(..., then=...)`` runs ``then`` under the lock after the
synced write (the changelog's flush before a Kafka commit). This module
never talks to Kafka itself.
"""

from __future__ import annotations

import logging
import threading
import time

from .partition import PartitionState

log = logging.getLogger(__name__)

#: Attempts at one write batch before the applier gives up.
WRITE_ATTEMPTS = 8


class Applier:
    def __init__(self, db, partitions: dict, *, batch_records: int, batch_bytes: int, linger: float,
                 metrics, write_attempts: int = WRITE_ATTEMPTS, on_written=None) -> None:
        self._db = db
        #: The loader's {(topic, partition): PartitionState}; read under ``lock``.
        self._partitions = partitions
        self._batch_records = batch_records
        self._batch_bytes = batch_bytes
        self._linger = linger
        self._metrics = metrics
        self._write_attempts = write_attempts
        self._on_written = on_written
        self.lock = threading.Lock()
        self._cond = threading.Condition(threading.Lock())
        #: Records completed since the last write (a hint for when to write).
        self._completed = 0
        self._stop = False
        #: Set when the store keeps refusing writes (the loader raises it).
        self.error: BaseException | None = None
        #: Waiters for progress (revoke, drain, caught-up) wait on this.
        self.progress = threading.Condition(threading.Lock())
        self._thread = threading.Thread(target=self._run, name="lsmkv-kafka-applier", daemon=True)
        self._thread.start()

    # -- called by other threads -----------------------------------------------------

    def completed(self, n: int) -> None:
        """``n`` records were completed (somewhere): maybe time to write."""
        self._completed += n
        with self._cond:
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join()

    def wait_progress(self, timeout: float) -> None:
        with self.progress:
            self.progress.wait(timeout)

    def durable_barrier(self, partitions: list[PartitionState], include_fenced: bool = False,
                        then=None) -> dict[PartitionState, int]:
        """Make what the store holds of ``partitions`` durable (one synced
        write, restating their offsets); returns {partition: offset} now
        safe to commit to Kafka (partitions with nothing stored are left out).
        ``include_fenced``: fenced partitions count too (a revoke restating
        the offsets of partitions it still owns until it returns). ``then()``
        runs next, still under the lock (no batch is written meanwhile); if
        it returns False nothing is safe to commit yet ({} is returned)."""
        with self.lock:
            live = [ps for ps in partitions if ps.stored is not None and (include_fenced or not ps.fenced)]
            if not live:
                return {}
            for db, group in self._by_store(live):
                self._write(db, [], {ps: ps.stored for ps in group}, sync=True)
            for ps in live:
                ps.durable = ps.stored
            if then is not None and not then():
                return {}
            return {ps: ps.stored for ps in live}

    # -- the applier's thread -----------------------------------------------------------

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._stop and not self._any_ready():
                    cond.wait(0.05)
                if self._stop and not self._any_ready():
                    return
            if self._completed < self._batch_records and self._linger > 0 and not self._stop:
                time.sleep(self._linger)  # let the batch fill (a short linger)
            try:
                while self._write_ready():
                    pass
            except BaseException as exc:  # noqa: BLE001 - reported to the loader, which stops
                self.error = exc
                log.error("the store keeps refusing writes; the loader stops: %r", exc)
                with self.progress:
                    self.progress.notify_all()
                return

    def _any_ready(self) -> bool:
        return any(ps.window.ready() for ps in list(self._partitions.values()) if not ps.fenced)

    def _write_ready(self) -> bool:
        """Write one batch of what is ready; False if nothing was."""
        with self.lock:
            self._completed = 0
            records = self._batch_records
            budget = self._batch_bytes
            ops_lists: dict[PartitionState, list] = {}
            offsets: dict[PartitionState, int] = {}
            counts: dict[PartitionState, int] = {}
            for ps in list(self._partitions.values()):
                if ps.fenced or records <= 0 or budget <= 0:
                    continue
                window = ps.window
                if not window.ready():
                    continue
                taken, count, nbytes, next_offset = window.take_ready(records, budget)
                records -= count
                budget -= nbytes
                ops_lists[ps] = taken
                offsets[ps] = next_offset
                if ps.placement is not None:
                    ps.placement.observe(taken)
                counts[ps] = count
            if not offsets:
                return False
            for db, group in self._by_store(list(offsets)):
                self._write(db, [ops for ps in group for ops in ops_lists[ps]], {ps: offsets[ps] for ps in group},
                            sync=False)
            if self._on_written is not None:
                for ps, offset in offsets.items():
                    self._on_written(ps, ops_lists[ps], offset)
            stored = sum(len(ops) for taken in ops_lists.values() for ops in taken)
            metrics = self._metrics
            metrics.stored += stored
            metrics.skipped += sum(counts.values()) - stored
            metrics.writes += 1
            for ps, offset in offsets.items():
                ps.stored = offset
                ps.metrics.stored = offset
        with self.progress:
            self.progress.notify_all()
        return True

    def _by_store(self, states) -> list:
        """``states`` grouped by the store they are written to: the loader's
        one store, or, with partitioned state (shards.py), each partition's
        own shard (``ps.db``), so each shard's batch holds its own records
        and offset, atomically."""
        groups: dict = {}
        for ps in states:
            db = ps.db if ps.db is not None else self._db
            groups.setdefault(id(db), (db, []))[1].append(ps)
        return list(groups.values())

    def _write(self, db, ops_lists: list, offsets: dict, sync: bool) -> None:
        """One atomic write batch of ``ops_lists`` plus each partition's
        offset in ``db``; retried (after ``db.resume()``) while the store
        refuses it."""
        delay = 0.05
        for attempt in range(1, self._write_attempts + 1):
            try:
                with db.write_batch(sync=sync) as batch:
                    put = batch.put
                    delete = batch.delete
                    for ops in ops_lists:
                        for key, value in ops:
                            if value is None:
                                delete(key)
                            else:
                                put(key, value)
                    for ps, offset in offsets.items():
                        batch.set_meta(ps.meta_name, b"%d" % offset)
                        if ps.placement is not None:
                            ps.placement.persist(batch, offset)
                return
            except Exception as exc:  # noqa: BLE001 - the store's failure: retried, then the loader's error
                if attempt == self._write_attempts:
                    raise
                log.warning("store write failed (attempt %d of %d: %r); resuming the store and retrying in "
                            "%.2f s", attempt, self._write_attempts, exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                try:
                    db.resume()
                except Exception as again:  # noqa: BLE001 - the next attempt reports it
                    log.warning("store resume failed: %r", again)
