"""The dead-letter path: records the loader cannot store go to a topic.

A record goes here when its processor kept raising past the retries,
when it has no key (nothing to store it under), or when its key or value
is too large for the store. It is produced to the dead-letter topic with
its key, value and headers as they were, plus headers saying why and from
where: ``lsmkv.dlq.reason`` (the error), ``lsmkv.dlq.topic``,
``lsmkv.dlq.partition``, ``lsmkv.dlq.offset``, ``lsmkv.dlq.attempts``.

Only once the broker has acknowledged it does the record complete (with
nothing to store), so its offset is never stored or committed before the
record is safe in the dead-letter topic; a delivery that fails is tried
again after a pause (on lsmkv's timing wheel), for as long as it takes (a
dead letter is never dropped). After a crash between the delivery and the store's next write,
the record is processed again and may be dead-lettered twice.

This module owns the dead-letter producer and its delivery thread; it
never touches the store.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from lsmkv.base.timer import Timer

from .processor import Record

log = logging.getLogger(__name__)

#: Seconds between attempts to deliver a dead letter the broker refused.
REDELIVERY_DELAY = 1.0


class DeadLetters:
    """Produces dead letters; ``on_done`` of each runs once it is delivered."""

    def __init__(self, producer_config: dict, topic_for: Callable[[str], str], timer: Timer) -> None:
        from confluent_kafka import Producer
        self._producer = Producer(producer_config)
        self._timer = timer
        self._topic_for = topic_for
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="lsmkv-kafka-dlq", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        #: Records delivered to a dead-letter topic, and deliveries refused (then retried).
        self.delivered = 0
        self.failures = 0
        self.in_flight = 0

    def send(self, record: Record, reason: str, attempts: int, on_done: Callable[[], None]) -> None:
        """Dead-letter ``record`` because of ``reason``; ``on_done()`` runs
        (on the delivery thread) once the broker holds it."""
        topic = self._topic_for(record.topic)
        headers = list(record.headers or ()) + [
            ("lsmkv.dlq.reason", reason.encode("utf-8", "backslashreplace")[:4096]),
            ("lsmkv.dlq.topic", record.topic.encode()),
            ("lsmkv.dlq.partition", b"%d" % record.partition),
            ("lsmkv.dlq.offset", b"%d" % record.offset),
            ("lsmkv.dlq.attempts", b"%d" % attempts),
        ]
        with self._lock:
            self.in_flight += 1
        self._produce(topic, record, headers, on_done)

    def _produce(self, topic: str, record: Record, headers: list, on_done: Callable[[], None]) -> None:
        def delivered(err, msg) -> None:
            if err is None:
                with self._lock:
                    self.delivered += 1
                    self.in_flight -= 1
                on_done()
                return
            with self._lock:
                self.failures += 1
            log.warning("dead letter of %s[%d]@%d not delivered to %s (%s); trying again in %.0f s",
                        record.topic, record.partition, record.offset, topic, err.str(), REDELIVERY_DELAY)
            self._timer.schedule(REDELIVERY_DELAY, lambda: self._produce(topic, record, headers, on_done))

        while True:
            try:
                self._producer.produce(topic, record.value, record.key, headers=headers, on_delivery=delivered)
                return
            except BufferError:
                time.sleep(0.01)

    def _serve(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

    def flush(self, timeout: float) -> int:
        """Wait until every dead letter is delivered, at most ``timeout``
        seconds; returns how many are still in flight."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.in_flight

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)
        self._stop.set()
        self._thread.join()
        self._producer.flush(1.0)
