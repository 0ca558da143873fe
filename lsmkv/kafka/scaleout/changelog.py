"""The changelog topic: what each shard applied, written by its active owner.

``lsmkv kafka load --changelog`` (partitioned state) keeps, beside the
shards, a topic that holds what the active owner of each source partition
applied to its shard -- Kafka Streams' changelog topic. Its name is
``<group>-<topic>-changelog``; it has the source topic's partition count,
is created with ``cleanup.policy=compact`` if missing, and partition P of
it belongs to source partition P. A record of it is

* key: the key the shard wrote; value: the value it wrote, or null (a
  tombstone) for a delete -- what a ``--processor`` made of the source
  record, so a restore never runs the processor again;
* header ``lsmkv.source.offset``: ``<start> <offset> <run> <seq> <count>``
  in ASCII, the same for every record of one write batch
  (:func:`batch_header`): the batch covers source offsets [start, offset)
  -- ``offset`` is the shard's stored source offset after it, the next one
  to apply, and ``start`` where the previous batch of its run ended (or
  the run started) --; ``run`` names the *run* that wrote it (one
  partition's assignment to one loader: a random id, new each time the
  partition starts being consumed), ``seq`` numbers the run's batches
  from 1, and ``count`` is the batch's record count. A batch that stored
  nothing produces no record (the next batch's range takes its offsets
  in).

A restore (restore.py, ``Batches``) needs all of this: a writer killed
while it produced a batch leaves a prefix of it, which covers only part of
the batch's range (the count tells); a run's next batch proves its
previous one complete even where compaction removed records of it; a new
run's first batch says where that run started; the range's end orders
batches of different runs (a stale writer's).

Order: the applier hands a batch to :meth:`ChangelogWriter.send` only after
the store wrote it (the changelog never holds what no shard held), under
the applier's lock, so batches reach the changelog in the order the shard
applied them (the writer's thread produces them in that order). Before
the loader commits source offsets to Kafka it makes them durable in the
store and, still under that lock, flushes the producer
(:meth:`ChangelogWriter.flush`): a committed source offset is always
covered by the changelog (Kafka Streams' order). The producer is
idempotent: a retried send is neither duplicated nor reordered.

A delivery that fails for good (the broker refused it) sets
:attr:`ChangelogWriter.error`; the loader stops on it (LoaderError), and
its shards, whose offsets stay exact, resume on the next start, where the
restore side (restore.py) notices that the changelog ends before the
shard and reprocesses the difference.

This module owns the changelog's name, its record format and the writing
side; restore.py reads it back.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid

from ..errors import KafkaIntegrationError
from ..settings import with_logger

log = logging.getLogger(__name__)

#: The header of a changelog record: its write batch's range of source
#: offsets, run, number in the run and record count (:func:`batch_header`).
HEADER = "lsmkv.source.offset"

#: Producer settings of the changelog writer (before the client's own).
#: Measured (docs/kafka.md, "The changelog"): one produce() call with this
#: header costs about 2 us of Python; batching is librdkafka's, in its own
#: threads.
TUNED_PRODUCER = {
    "enable.idempotence": True,
    # Never give a record up: a run's records reach the changelog in order
    # and without a hole (a restore counts on it), whatever the broker's
    # outage; close() gives up what is left (the tail of a run is cut).
    "message.timeout.ms": 0,
    "linger.ms": 20,
    "batch.size": 1 << 20,
    "compression.type": "lz4",
    # Room for a few seconds of a fast load ahead of the broker; at the
    # limit send() waits (backpressure on the applier), it never drops.
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1 << 20,
    # Only failed deliveries are reported (a Python call per record would
    # cost as much as the produce itself); flush() is how success is known.
    "delivery.report.only.error": True,
    "client.id": "lsmkv-changelog",
}

#: Records queued for the changelog (written to shards, not yet handed to
#: the producer) before the applier waits for the writer's thread.
MAX_QUEUED = 200_000

#: Client settings the writer and the restore consumer share with the loader.
SHARED_PREFIXES = ("security.", "sasl.", "ssl.", "client.", "socket.", "broker.", "api.")


def changelog_topic(group: str, topic: str) -> str:
    """The changelog of source topic ``topic`` for loader group ``group``."""
    return f"{group}-{topic}-changelog"


def batch_header(start: int, offset: int, run: str, seq: int, count: int) -> bytes:
    """The header value of the records of one write batch covering source
    offsets [``start``, ``offset``), batch ``seq`` of run ``run``, holding
    ``count`` records."""
    return b"%d %d %s %d %d" % (start, offset, run.encode("ascii"), seq, count)


def parse_header(value) -> tuple[int, int, bytes, int, int] | None:
    """(start, offset, run, seq, count) of a :data:`HEADER` value (None: not
    one lsmkv wrote). Records whose header values are equal belong to one
    batch."""
    if not isinstance(value, bytes) or len(value) > 120:
        return None
    parts = value.split(b" ")
    if len(parts) != 5 or not parts[2] or not all(x.isdigit() and len(x) <= 19 for x in parts[:2] + parts[3:]):
        return None
    start, offset, seq, count = int(parts[0]), int(parts[1]), int(parts[3]), int(parts[4])
    if start > offset or seq < 1 or count < 1:
        return None
    return start, offset, parts[2], seq, count


def header_value(headers) -> bytes | None:
    """The :data:`HEADER` value among a record's headers (None: none)."""
    for name, value in headers or ():
        if name == HEADER:
            return value
    return None


def shared_config(client_config: dict) -> dict:
    """The loader's client settings a changelog client needs (security, ...)."""
    return {k: v for k, v in (client_config or {}).items() if k.startswith(SHARED_PREFIXES)}


def ensure_changelog_topic(bootstrap_servers: str, topic: str, partitions: int, *,
                           client_config: dict | None = None, timeout: float = 30.0) -> int:
    """Create the changelog ``topic`` with ``partitions`` partitions and
    ``cleanup.policy=compact`` unless it exists; returns its partition
    count, which must equal ``partitions`` (KafkaIntegrationError otherwise:
    partition P of the changelog belongs to source partition P)."""
    from ..admin import ensure_topic
    count = ensure_topic(bootstrap_servers, topic, partitions, client_config=client_config, timeout=timeout,
                         config={"cleanup.policy": "compact"})
    if count != partitions:
        raise KafkaIntegrationError(f"changelog topic {topic!r} has {count} partitions, the source topic "
                                    f"{partitions}: partition P of a changelog belongs to source partition P; "
                                    f"delete it (it is rebuilt) or use another group")
    return count


class ChangelogWriter:
    """Produces what the active shards applied to ``topic`` (the changelog).

    :meth:`send` only queues a written batch; the writer's own thread
    produces the queued batches in order (so the applier's thread, which
    calls send() holding its lock, does not pay for producing: measured,
    producing in that thread made the loader's partitions pause on their
    backpressure bound twice as often). At most ``max_queued`` records wait;
    send() waits beyond that."""

    def __init__(self, bootstrap_servers: str, topic: str, client_config: dict | None = None, *,
                 max_queued: int = MAX_QUEUED) -> None:
        from confluent_kafka import Producer
        self.topic = topic
        self._lock = threading.Lock()
        #: Records queued by send() (all of them are produced, in order).
        self.produced = 0
        #: The first delivery that failed for good (None: none).
        self.error: str | None = None
        self.failures = 0
        self._max_queued = max_queued
        self._queue: collections.deque = collections.deque()
        self._queued = 0
        #: Records taken off the queue and not yet handed to the producer.
        self._producing = 0
        self._cond = threading.Condition(threading.Lock())
        self._stop = False
        #: Set by close() when the broker did not take what was queued in
        #: time: the writer's thread gives up instead of waiting for room.
        self._abandon = False
        #: {partition: [run id, batches sent, where the next batch starts]}
        #: (begin(); read and written under the applier's lock).
        self._runs: dict[int, list] = {}
        self._producer = Producer(with_logger({
            **TUNED_PRODUCER, **shared_config(client_config), "bootstrap.servers": bootstrap_servers,
            "on_delivery": self._delivered, "error_cb": self._client_error}))
        self._thread = threading.Thread(target=self._run, name="lsmkv-kafka-changelog", daemon=True)
        self._thread.start()

    def _delivered(self, err, msg) -> None:
        # Called only for failures (delivery.report.only.error).
        if err is None:
            return
        with self._lock:
            self.failures += 1
            if self.error is None:
                self.error = (f"a record of {msg.topic()}[{msg.partition()}] was not delivered: {err.str()}")
                log.error("changelog %s: %s", self.topic, self.error)

    def _client_error(self, err) -> None:
        if err.fatal():
            self._fail(f"the changelog producer failed: {err.str()}")
        else:
            log.debug("changelog %s: %s (the client keeps retrying)", self.topic, err.str())

    def _fail(self, text: str) -> None:
        with self._lock:
            if self.error is None:
                self.error = text
                log.error("changelog %s: %s", self.topic, text)

    # -- the applier's side ---------------------------------------------------------------------

    def begin(self, partition: int, start: int) -> None:
        """A new run of ``partition``: its shard is applied from source
        offset ``start`` on (an assignment, once its start is decided)."""
        self._runs[partition] = [uuid.uuid4().hex[:16], 0, start]

    def send(self, partition: int, ops_lists: list, next_offset: int) -> int:
        """Queue the store operations of one write batch of source partition
        ``partition`` (lists of (key, value-or-None), in the order written)
        that brought its shard to ``next_offset``, to be produced with one
        header value (:func:`batch_header`); returns how many records that
        is."""
        n = sum(len(ops) for ops in ops_lists)
        if not n:
            return 0
        run = self._runs.get(partition)
        if run is None:
            # (Not expected: the loader begins a run before it consumes.) A
            # start of 0 makes a restore take nothing of this run for granted.
            log.warning("changelog %s: partition %d written without a run begun", self.topic, partition)
            run = self._runs[partition] = [uuid.uuid4().hex[:16], 0, 0]
        run[1] += 1
        header = batch_header(run[2], next_offset, run[0], run[1], n)
        run[2] = next_offset
        with self._cond:
            while self._queued >= self._max_queued and not self._stop and self.error is None:
                self._cond.wait(0.1)
            self._queue.append((partition, ops_lists, header, n))
            self._queued += n
            self._cond.notify_all()
        self.produced += n
        return n

    def flush(self, timeout: float) -> bool:
        """Wait until every record queued so far is produced and
        acknowledged (at most ``timeout`` seconds); False if some are not
        (or one failed)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._queued or self._producing) and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        left = self._producer.flush(max(0.0, deadline - time.monotonic()))
        return left == 0 and self.error is None

    def close(self, timeout: float = 10.0) -> None:
        """Produce what is queued and wait for the broker (at most
        ``timeout`` seconds), then stop; what is not acknowledged by then is
        given up (a restore finds its batches incomplete and the shards'
        next owners reprocess them)."""
        flushed = self.flush(timeout)
        with self._cond:
            if not flushed:
                log.warning("changelog %s: %d records not acknowledged at close (a restart reprocesses what the "
                            "changelog lacks)", self.topic, self._queued + self._producing + len(self._producer))
                self._abandon = True
            self._stop = True
            self._cond.notify_all()
        self._thread.join()

    # -- the writer's thread ----------------------------------------------------------------------

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._queue and not self._stop:
                    cond.wait(0.1)
                if not self._queue or self._abandon:
                    return
                item = self._queue.popleft()
                self._queued -= item[3]
                self._producing = item[3]
                cond.notify_all()
            try:
                self._produce(*item[:3])
            finally:
                with cond:
                    self._producing = 0
                    cond.notify_all()

    def _produce(self, partition: int, ops_lists: list, header: bytes) -> None:
        from confluent_kafka import KafkaException
        producer = self._producer
        produce = producer.produce
        topic = self.topic
        headers = [(HEADER, header)]
        for ops in ops_lists:
            for key, value in ops:
                while True:
                    try:
                        produce(topic, value, key, partition=partition, headers=headers)
                        break
                    except BufferError:
                        if self._abandon:
                            return
                        producer.poll(0.05)
                    except KafkaException as exc:
                        self._fail(f"producing to {topic}[{partition}]: {exc.args[0].str()}")
                        return
        producer.poll(0)
