"""Restoring shards from the changelog topic (``--changelog``).

When the loader is given a partition with ``--changelog`` on, the
partition stays paused on the loader's consumer while this module's thread
(one per loader, one partition at a time) decides where its source
consumption starts, and hands the answer back (:meth:`finished`); the
loader's consumer thread then seeks the partition there and resumes it.

A changelog record names its write batch (changelog.py: the source offsets
it covers, its run, its number in the run, its record count), and
:class:`Batches` decides which batches a restore applies: finished ones
(all records read, or proven complete by what came after), skipping those
that end below the highest end applied (a stale writer's), dropping those
cut short (a writer killed while it produced them leaves a prefix, which
covers part of its range only: applied, and its end taken as the shard's
offset, it would lose the rest).

* **A shard without a stored offset** (missing, or never written) is
  restored from changelog partition P: first emptied (what an interrupted
  restore left), then read with a consumer of its own (manual assignment,
  no group, no commits) from the beginning to its end, the batches
  :class:`Batches` applies written to the shard in write batches, the last
  one setting the shard's stored source offset, atomically, to the highest
  batch end applied; the source follows from there, so the processor never
  runs again for what the changelog held. A changelog partition without a
  finished batch: the shard is rebuilt from the source topic, as without
  ``--changelog``.
* **A shard with a stored offset S** resumes from S, unless the changelog
  ends before it: where a restore from it would bring a shard, H < S (the
  previous owner stored records it never got into the changelog -- a
  crash -- or this copy was ahead of its owner's changelog), or nowhere.
  Then the source is consumed from H (from the beginning) so the changelog
  gets those records too. Replaying records a shard already applied is
  harmless: the table after applying offsets [0, S) and then [H, S) again
  is the table at S (each key ends with its last value in [H, S)); the
  shard counts as restoring meanwhile. H is read from the changelog's
  tail (the last 2 x ``batch_records`` records, more while no batch is
  finished among them): a batch finished there is finished in the whole
  partition too, so H can come out lower than a restore would reach (more
  is reprocessed), never higher. A changelog that cannot be read now is
  tried again (the partition waits); one with a record lsmkv did not write
  is left alone, and the shard resumes at S.

The end of a changelog partition: the embedded broker's ListOffsets can
answer far below it (docs/kafka.md, "The changelog"), its fetch responses
carry the right high watermark. So a read ends at the partition-EOF event
(``enable.partition.eof``: the fetch position reached the high watermark of
a fetch response).

A restore into a shard without an offset that fails (the changelog
unreadable or without an end within ``timeout``, a record without lsmkv's
header, a record the store refuses) falls back to rebuilding the shard
from the source topic, with a log line saying why; what the failed
restore wrote is deleted first, and no offset was set, so a shard never
claims an offset it does not hold. A partition revoked meanwhile is
dropped at the next batch: writes happen under the applier's lock only
while the partition is active (partition.py).
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
import uuid

from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE

from .changelog import HEADER, header_value, parse_header, shared_config
from ..offsets import encode_offset
from ..settings import with_logger

log = logging.getLogger(__name__)

#: Seconds a read may go without a record or an end before it is given up.
READ_TIMEOUT = 30.0
#: Seconds between progress lines of a long restore.
PROGRESS_INTERVAL = 5.0
#: Keys deleted per write batch when clearing what a failed restore wrote.
CLEAR_BATCH = 8192


class _Batch:
    __slots__ = ("start", "offset", "run", "seq", "count", "records")

    def __init__(self, start: int, offset: int, run: bytes, seq: int, count: int) -> None:
        self.start, self.offset, self.run, self.seq, self.count = start, offset, run, seq, count
        self.records: list = []


class Batches:
    """Which changelog batches a restore applies, in which order.

    :meth:`add` takes one record (its header value, key, value) in
    changelog order and returns the records to apply now (those of the
    batches it finished; often none). The rules (changelog.py describes the
    header):

    * a batch is *finished* when all ``count`` of its records were read;
      when a later batch of its run begins (a run's records arrive in
      order, so what is missing was removed by compaction, which removes
      only records that a later one of the same key replaces); or when
      another run's first batch begins exactly at its end (that run
      started there because it saw the batch finished);
    * a finished batch ending below :attr:`highest` (the highest end
      applied) is skipped: a stale writer's, whose offsets are covered.
      Others are applied, and their end becomes the highest. A finished
      batch covers every source offset from its start, where its run's
      previous batch ended or the run started (never above the highest
      the run saw), so applying one leaves each key it touches at its value
      at the batch's end and the table holds every source offset below the
      highest;
    * :meth:`close` at the end: the batches still open were cut short
      (their writer was killed, or is still producing) and are dropped;
      they cover only part of their range.

    :attr:`highest` is the highest end of a batch finished so far, so over
    the last records of a partition it is at most what it is over all of
    them (a batch finished there is finished in the whole too).
    """

    def __init__(self) -> None:
        #: The highest end of a batch applied (None: none yet): the shard's
        #: stored offset once the records returned are written.
        self.highest: int | None = None
        #: Records not applied: of stale batches, and of batches cut short.
        self.skipped = 0
        #: Records of batches dropped at close() (cut short).
        self.incomplete = 0
        self._open: dict[bytes, _Batch] = {}

    def add(self, header: bytes, key, value) -> list:
        batch = self._open.get(header)
        out: list = []
        if batch is None:
            parsed = parse_header(header)
            if parsed is None:
                raise NotAChangelog(f"no valid {HEADER} header")
            start, offset, run, seq, count = parsed
            if self._open:
                done = [h for h, b in self._open.items()
                        if (b.run == run and b.seq < seq) or (b.run != run and seq == 1 and b.offset == start)]
                for h in sorted(done, key=lambda h: self._open[h].offset):
                    self._finish(self._open.pop(h), out)
            batch = self._open[header] = _Batch(start, offset, run, seq, count)
        batch.records.append((key, value))
        if len(batch.records) >= batch.count:
            del self._open[header]
            self._finish(batch, out)
        return out

    def _finish(self, batch: _Batch, out: list) -> None:
        if self.highest is not None and batch.offset < self.highest:
            self.skipped += len(batch.records)
            return
        self.highest = batch.offset
        out.extend(batch.records)

    def close(self) -> None:
        """The end of the changelog: the batches still open are dropped."""
        n = sum(len(b.records) for b in self._open.values())
        self.incomplete += n
        self.skipped += n
        self._open.clear()


class RestoreFailed(Exception):
    """The changelog cannot restore this shard (the message says why)."""


class NotAChangelog(RestoreFailed):
    """A changelog record without lsmkv's offset header."""


class _Gone(Exception):
    """The partition was revoked (or the loader stops): drop the job."""


class ChangelogRestorer:
    """The restore thread of one loader: :meth:`submit` partitions as they
    are assigned, take :meth:`finished` answers (partition state, source
    offset to start at, None: the beginning) on the consumer thread."""

    def __init__(self, loader, applier, topic: str, *, timeout: float = READ_TIMEOUT) -> None:
        s = loader.settings
        self._loader = loader
        self._applier = applier
        self.topic = topic
        self._timeout = timeout
        self._name = loader.name
        self._metrics = loader.metrics
        self._batch_records = s.batch_records
        self._batch_bytes = s.batch_bytes
        self._config = with_logger({
            **shared_config(s.client_config), "bootstrap.servers": s.bootstrap_servers,
            "group.id": f"{s.group}-changelog-restore-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100, "max.partition.fetch.bytes": 8 << 20, "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 65536, "client.id": "lsmkv-changelog-restore"})
        self._jobs: collections.deque = collections.deque()
        self._done: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        #: Set when clearing a failed restore's writes failed too (the loader stops on it).
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lsmkv-kafka-restore", daemon=True)
        self._thread.start()

    # -- the consumer thread's side ---------------------------------------------------------------

    def submit(self, ps, stored: int | None) -> None:
        """Decide where ``ps`` (paused, its shard claimed) starts; ``stored``
        is its shard's stored offset (None: none)."""
        self._jobs.append((ps, stored))
        self._wake.set()

    def finished(self) -> list:
        """[(partition state, start offset or None), ...] decided since the last call."""
        out = []
        while self._done:
            out.append(self._done.popleft())
        return out

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()

    # -- the thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._jobs:
                self._wake.wait(0.1)
                self._wake.clear()
                continue
            ps, stored = self._jobs.popleft()
            began = time.monotonic()
            try:
                start = self._decide(ps, stored)
            except _Gone:
                continue
            except BaseException as exc:  # noqa: BLE001 - reported; the loader stops on it
                self.error = exc
                log.error("%s: restoring %s[%d] failed, and so did deleting what it wrote (the loader stops): %r",
                          self._name, ps.topic, ps.partition, exc)
                return
            ps.metrics.restore_seconds = time.monotonic() - began
            self._done.append((ps, start))

    def _decide(self, ps, stored: int | None) -> int | None:
        """Where ``ps``'s source consumption starts (None: the beginning)."""
        if stored is not None:
            return self._resume_point(ps, stored)
        p = ps.partition
        try:
            return self._restore(ps)
        except _Gone:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the source topic
            why = str(exc) if isinstance(exc, RestoreFailed) else repr(exc)
            log.warning("%s: restoring %s[%d] from changelog %s[%d] failed (%s); rebuilding it from the source "
                        "topic instead", self._name, ps.topic, p, self.topic, p, why)
            self._metrics.changelog_restore_failures += 1
            self._clear(ps)
            self._metrics.restored -= ps.restored
            ps.metrics.restored -= ps.restored
            ps.restored = 0
            return None

    def _resume_point(self, ps, stored: int) -> int:
        """Where a shard with stored offset ``stored`` resumes: there, or
        where a restore from the changelog would reach if that is before
        (:meth:`_complete_end`). A
        changelog that cannot be read now is tried again (the shard stays
        paused, restoring); one with a record lsmkv did not write is left as
        it is (a restore from it falls back to the source anyway)."""
        p = ps.partition
        pause = 1.0
        while True:
            try:
                return self._resume_from(ps, stored, self._complete_end(ps))
            except NotAChangelog as exc:
                log.warning("%s: changelog %s[%d] cannot say where it ends (%s); %s[%d] resumes from its shard's "
                            "offset %d", self._name, self.topic, p, exc, ps.topic, p, stored)
                return stored
            except _Gone:
                raise
            except Exception as exc:  # noqa: BLE001 - the broker's trouble: try again
                why = str(exc) if isinstance(exc, RestoreFailed) else repr(exc)
                log.warning("%s: reading changelog %s[%d] failed (%s); %s[%d] waits, trying again in %.0f s",
                            self._name, self.topic, p, why, ps.topic, p, pause)
                deadline = time.monotonic() + pause
                while time.monotonic() < deadline:
                    self._check_active(ps)
                    time.sleep(0.1)
                pause = min(pause * 2, 30.0)

    def _resume_from(self, ps, stored: int, last: int | None) -> int:
        p = ps.partition
        if last is None and stored > 0:
            log.info("%s: %s[%d]'s shard holds source offsets below %d but changelog %s[%d] holds no complete "
                     "batch: reprocessing the source from its beginning so the changelog holds the shard's table",
                     self._name, ps.topic, p, stored, self.topic, p)
            return 0
        if last is not None and last < stored:
            log.info("%s: changelog %s[%d] ends at source offset %d, %s[%d]'s shard at %d (records stored but "
                     "not in the changelog: a crash, or a copy ahead of its owner's changelog): reprocessing "
                     "from %d so the changelog gets them", self._name, self.topic, p, last, ps.topic, p, stored,
                     last)
            return last
        return stored

    # -- reading the changelog ----------------------------------------------------------------------

    def _consumer(self, partition: int | None = None, offset: int = 0):
        """A consumer of its own (no group, no commits), assigned to
        ``partition`` of the changelog from ``offset`` if one is given."""
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer(self._config)
        if partition is not None:
            consumer.assign([TopicPartition(self.topic, partition, offset)])
        return consumer

    def _check_active(self, ps) -> None:
        if self._stop.is_set() or not ps.active:
            raise _Gone()

    def _read(self, ps, consumer):
        """Yield lists of changelog messages of ``ps``'s partition until its
        end (the EOF event), as (messages, None) and finally (messages, end);
        RestoreFailed if the broker reports a fatal error or the partition
        does not exist, or neither a record nor the end comes within the
        timeout (transient errors, which librdkafka retries, only count
        against the timeout)."""
        from confluent_kafka import KafkaError
        quiet_since = time.monotonic()
        trouble = None
        while True:
            self._check_active(ps)
            msgs = consumer.consume(10_000, 0.2)
            records = []
            for msg in msgs:
                err = msg.error()
                if err is None:
                    records.append(msg)
                elif err.code() == KafkaError._PARTITION_EOF:
                    yield records, msg.offset()
                    return
                elif err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                                                   KafkaError.TOPIC_AUTHORIZATION_FAILED):
                    raise RestoreFailed(f"reading it: {err.str()}")
                else:
                    trouble = err.str()
            if records:
                quiet_since = time.monotonic()
                yield records, None
            elif time.monotonic() - quiet_since > self._timeout:
                raise RestoreFailed(f"neither a record nor the end of the partition within {self._timeout:.0f} s"
                                    + (f" (last error: {trouble})" if trouble else ""))

    def _complete_end(self, ps) -> int | None:
        """Where a restore from the changelog partition would bring a shard
        (None: nowhere), or less, never more: the highest end of a batch
        finished among its last 2 x ``batch_records`` records (from this
        thread's own ListOffsets answer, which may be below the end: then
        more is read), four times as many while none is, up to the whole
        partition (:class:`Batches`)."""
        from confluent_kafka import TopicPartition
        probe = self._consumer()
        try:
            # This thread's own consumer: asking one that another thread
            # consumes from can block for good.
            low, high = probe.get_watermark_offsets(TopicPartition(self.topic, ps.partition),
                                                    timeout=self._timeout, cached=False)
        finally:
            probe.close()
        low = max(low, 0)
        window = 2 * self._batch_records
        while True:
            begin = max(low, high - window)
            batches = Batches()
            for header in self._headers(ps, begin):
                try:
                    batches.add(header, None, None)
                except NotAChangelog:
                    raise NotAChangelog(f"a record with an invalid {HEADER} header ({header[:60]!r})") from None
            if batches.highest is not None or begin <= low:
                return batches.highest
            window *= 4

    def _headers(self, ps, begin: int):
        """Yield the header values of the changelog partition's records from
        ``begin`` to its end (NotAChangelog at a record without one)."""
        consumer = self._consumer(ps.partition, begin)
        try:
            for msgs, end in self._read(ps, consumer):
                for msg in msgs:
                    header = header_value(msg.headers())
                    if header is None:
                        raise NotAChangelog(f"its record at offset {msg.offset()} has no valid {HEADER} header "
                                            "(not a changelog lsmkv wrote)")
                    yield header
                if end is not None:
                    return
        finally:
            consumer.close()
        raise RestoreFailed("it ended without an end-of-partition event")

    def _restore(self, ps) -> int | None:
        """Apply changelog partition ``ps.partition``'s complete batches to
        the (emptied) shard; returns the source offset the shard holds
        afterwards (None: the changelog held no complete batch, nothing was
        written)."""
        p = ps.partition
        db = ps.db
        max_key = db.stats().get("max_key_size", MAX_KEY_SIZE)
        started = time.monotonic()
        log.info("%s: restoring %s[%d] (no local shard offset) from changelog %s[%d]", self._name, ps.topic, p,
                 self.topic, p)
        self._clear(ps)
        batches = Batches()
        applied = 0
        pending: list = []
        nbytes = 0
        limit_records, limit_bytes = self._batch_records, self._batch_bytes
        next_log = started + PROGRESS_INTERVAL
        consumer = self._consumer(p, 0)
        read = counted = 0
        try:
            for msgs, _ in self._read(ps, consumer):
                read += len(msgs)
                for msg in msgs:
                    key = msg.key()
                    value = msg.value()
                    headers = msg.headers()
                    header = headers[0][1] if headers and len(headers) == 1 and headers[0][0] == HEADER \
                        else header_value(headers)
                    if header is None:
                        raise NotAChangelog(f"its record at offset {msg.offset()} has no valid {HEADER} header")
                    if key is None or len(key) > max_key:
                        raise RestoreFailed(f"the store refuses its record at offset {msg.offset()} "
                                            f"({'no key' if key is None else f'a {len(key)}-byte key'})")
                    if value is not None and len(value) > MAX_VALUE_SIZE:
                        raise RestoreFailed(f"the store refuses its record at offset {msg.offset()} (a "
                                            f"{len(value)}-byte value)")
                    try:
                        done = batches.add(header, key, value)
                    except NotAChangelog:
                        raise NotAChangelog(f"its record at offset {msg.offset()} has no valid {HEADER} "
                                            "header") from None
                    if not done:
                        continue
                    pending.extend(done)
                    nbytes += sum(len(k) + (len(v) if v is not None else 0) for k, v in done)
                    while len(pending) >= limit_records or (pending and nbytes >= limit_bytes):
                        chunk, pending = pending[:limit_records], pending[limit_records:]
                        self._write(ps, chunk, None)
                        applied += len(chunk)
                        nbytes = sum(len(k) + (len(v) if v is not None else 0) for k, v in pending)
                        ps.restore_position = batches.highest
                self._metrics.changelog_records_skipped += batches.skipped - counted
                counted = batches.skipped
                now = time.monotonic()
                if now >= next_log:
                    next_log = now + PROGRESS_INTERVAL
                    log.info("%s: restoring %s[%d] from the changelog: %d records read, %d applied (source offset "
                             "%s), %d not applied", self._name, ps.topic, p, read, applied + len(pending),
                             batches.highest, batches.skipped)
        finally:
            consumer.close()
        batches.close()
        if batches.highest is None:
            log.info("%s: changelog %s[%d] holds no complete batch (%d records read): rebuilding %s[%d]'s shard "
                     "from the source topic", self._name, self.topic, p, read, ps.topic, p)
            return None
        self._write(ps, pending, batches.highest)
        applied += len(pending)
        took = time.monotonic() - started
        self._metrics.changelog_records_skipped += batches.skipped - counted
        log.info("%s: restored %s[%d] from changelog %s[%d]: %d records in %.1f s (%.0f records/s), %d not applied "
                 "(stale, or of %d records of batches cut short); the source follows from offset %d", self._name,
                 ps.topic, p, self.topic, p, applied, took, applied / took if took > 0 else 0.0, batches.skipped,
                 batches.incomplete, batches.highest)
        return batches.highest

    # -- writing the shard ------------------------------------------------------------------------

    def _write(self, ps, ops: list, offset: int | None) -> None:
        """One write batch of ``ops`` to ``ps``'s shard; with ``offset``, also
        its stored source offset (the restore's last batch)."""
        with self._applier.lock:
            self._check_active(ps)
            if ps.placement is not None:
                ps.placement.observe([ops])
            with ps.db.write_batch() as batch:
                put, delete = batch.put, batch.delete
                for key, value in ops:
                    if value is None:
                        delete(key)
                    else:
                        put(key, value)
                if offset is not None:
                    batch.set_meta(ps.meta_name, encode_offset(offset))
                    if ps.placement is not None:
                        ps.placement.persist(batch, offset)
            if offset is not None:
                ps.stored = offset
                ps.metrics.stored = offset
            ps.restored += len(ops)
            ps.metrics.restored += len(ops)
            self._metrics.restored += len(ops)

    def _clear(self, ps) -> None:
        """Delete every key of ``ps``'s shard: what an interrupted or failed
        restore wrote (the shard has no stored offset, so nothing in it
        counts)."""
        db = ps.db
        cleared = 0
        start = None
        while True:
            self._check_active(ps)
            keys = [k for k, _ in itertools.islice(db.scan(start), CLEAR_BATCH)]
            if not keys:
                break
            with self._applier.lock:
                self._check_active(ps)
                with db.write_batch() as batch:
                    for key in keys:
                        batch.delete(key)
            cleared += len(keys)
            start = keys[-1] + b"\x00"
        if ps.placement is not None:
            ps.placement.reset()
        if cleared:
            log.info("%s: deleted %d keys an interrupted or failed restore had written to %s[%d]'s shard",
                     self._name, cleared, ps.topic, ps.partition)
        ps.restore_position = None
