"""Publishing a keyed workload (``lsmkv kafka produce``).

:func:`produce_workload` publishes a :class:`~lsmkv.kafka.tools.workload.WorkloadSpec`'s
stream to a topic: each record keyed, a tombstone's value null, keys
placed on partitions by murmur2 (``murmur2_random``: the partitioner of
Kafka's Java client, so every client puts a key on the same partition),
optionally at a steady ``rate``. Producer batching and compression are
exposed (``linger_ms``, ``batch_bytes``, ``compression``); ``client_config``
passes anything else (security) to librdkafka as it is. It waits until
every record is delivered or failed and reports the throughput and the
delivery errors; with one producer the records of a partition keep their
stream order (idempotent delivery).

This module never prints: ``progress`` is a callback.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from ..admin import ensure_topic
from ..errors import ProducerError
from ..settings import with_logger
from .workload import WorkloadSpec, generate

log = logging.getLogger(__name__)

COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass
class ProduceResult:
    topic: str
    records: int = 0
    delivered: int = 0
    errors: int = 0
    bytes: int = 0
    elapsed: float = 0.0
    #: The first delivery errors (up to 10), as text.
    error_samples: list[str] = field(default_factory=list)

    @property
    def records_per_sec(self) -> float:
        return self.delivered / self.elapsed if self.elapsed > 0 else 0.0


def producer_config(bootstrap_servers: str, *, linger_ms: float = 20, batch_bytes: int = 1 << 20,
                    compression: str = "lz4", client_config: dict | None = None) -> dict:
    if compression not in COMPRESSION:
        raise ValueError(f"compression must be one of {', '.join(COMPRESSION)}, not {compression!r}")
    return with_logger({
        "linger.ms": linger_ms,
        "batch.size": batch_bytes,
        "compression.type": compression,
        "partitioner": "murmur2_random",
        "queue.buffering.max.messages": 1_000_000,
        # Idempotent delivery: a partition's records keep their stream order
        # and none is written twice, across retries (acks=all with it).
        "enable.idempotence": True,
        "delivery.report.only.error": True,
        **(client_config or {}),
        "bootstrap.servers": bootstrap_servers,
    })


def produce_workload(bootstrap_servers: str, topic: str, spec: WorkloadSpec, *, partitions: int | None = None,
                     rate: float | None = None, linger_ms: float = 20, batch_bytes: int = 1 << 20,
                     compression: str = "lz4", client_config: dict | None = None, timeout: float = 300.0,
                     progress: Callable[[int, float], None] | None = None) -> ProduceResult:
    """Publish ``spec``'s stream to ``topic`` (created with ``partitions``
    partitions if given and missing). ``rate``: records per second (None:
    as fast as the producer goes). ``progress(records, elapsed)`` is called
    about every second."""
    from confluent_kafka import KafkaException, Producer
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0):
        raise ValueError(f"rate must be a positive number of records per second, not {rate!r}")
    if partitions is not None:
        ensure_topic(bootstrap_servers, topic, partitions, client_config=client_config)
    result = ProduceResult(topic)

    def delivered(err, msg) -> None:
        if err is not None:
            result.errors += 1
            if len(result.error_samples) < 10:
                result.error_samples.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    producer = Producer({**producer_config(bootstrap_servers, linger_ms=linger_ms, batch_bytes=batch_bytes,
                                           compression=compression, client_config=client_config),
                         "on_delivery": delivered})
    produce = producer.produce
    poll = producer.poll
    started = time.perf_counter()
    next_report = started + 1.0
    n = 0
    nbytes = 0
    try:
        for key, value in generate(spec):
            while True:
                try:
                    produce(topic, value, key)
                    break
                except BufferError:
                    poll(0.01)  # the local queue is full: let deliveries drain it
            n += 1
            nbytes += len(key) + (len(value) if value is not None else 0)
            if not n & 0x3FF:
                poll(0)
                now = time.perf_counter()
                if rate is not None:
                    ahead = n / rate - (now - started)
                    if ahead > 0:
                        time.sleep(ahead)
                if progress is not None and now >= next_report:
                    progress(n, now - started)
                    next_report = now + 1.0
        left = producer.flush(timeout)
    except KafkaException as exc:
        raise ProducerError(f"producing to {topic!r} failed: {exc.args[0].str()}") from None
    result.elapsed = time.perf_counter() - started
    result.records = n
    result.bytes = nbytes
    if left:
        result.errors += left
        result.error_samples.append(f"{left} records still undelivered after {timeout:.0f} s")
    result.delivered = n - result.errors
    if result.errors:
        log.warning("%d of %d records to %s were not delivered: %s", result.errors, n, topic,
                    "; ".join(result.error_samples[:3]))
    return result
