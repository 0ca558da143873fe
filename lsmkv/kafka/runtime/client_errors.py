"""ClientErrors: what the Kafka clients of a loader report, and what it does about it.

librdkafka's log lines (the consumer's and the dead-letter producer's:
:attr:`client_log`, their ``logger``), its error events (``error_cb``:
:meth:`on_error`) and the errors the consumer returns in place of records
(:meth:`consumer_error`) are each logged once per kind and then counted
(client_log.py), so an outage is a few lines however long it lasts.

A fatal error is kept (:attr:`fatal`) for the consumer thread to stop the
load with. An offset the broker no longer has (the topic was truncated,
deleted and created again, or the broker lost its data: the embedded
broker keeps topics in memory) is neither skipped nor gone back from --
going back would write old values over newer ones, skipping ahead would
lose records: the partition is sought to the same offset again a moment
later (:meth:`seek_again`), until the broker holds it again.

This module never touches the store.
"""

from __future__ import annotations

import logging
import time

from ..client_log import CLIENT_LOG, ClientLog
from .partition import ACTIVE

log = logging.getLogger(__name__)

#: Seconds between attempts to fetch from an offset the broker did not have.
RESEEK_INTERVAL = 1.0


class ClientErrors:
    """The reports of one loader's (``name``) Kafka clients."""

    def __init__(self, name: str, metrics) -> None:
        self._name = name
        self._metrics = metrics
        #: librdkafka's log lines and error events (consumer and dead-letter producer).
        self.client_log = ClientLog(CLIENT_LOG, f"{name}: ")
        #: The loader's own consumer errors.
        self._errors = ClientLog(log, f"{name}: ")
        #: The text of a fatal client error (None: none): the load stops.
        self.fatal: str | None = None
        #: (topic, partition) -> when to seek again to an offset the broker did not have.
        self.reseeks: dict[tuple[str, int], float] = {}

    # -- reports ----------------------------------------------------------------------------------

    def consumer_error(self, err, msg=None) -> None:
        """An error the consumer returned in place of a record (``msg``)."""
        from confluent_kafka import KafkaError
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        self._metrics.consumer_errors += 1
        if code == KafkaError._AUTO_OFFSET_RESET and msg is not None and msg.topic() is not None:
            key = (msg.topic(), msg.partition())
            if key not in self.reseeks:
                self.reseeks[key] = time.monotonic() + RESEEK_INTERVAL
            self.note(code, f"{key[0]}[{key[1]}]: the broker does not have the offset to fetch from "
                            f"({err.str()}); not skipping ahead or going back: trying the same offset "
                            f"again every {RESEEK_INTERVAL:g} s")
            return
        if err.fatal():
            self.fatal = err.str()
        self.note(code, f"consumer: {err.str()}")

    def on_error(self, err) -> None:
        """librdkafka's ``error_cb``."""
        self._metrics.consumer_errors += 1
        if err.fatal():
            self.fatal = err.str()
        self.client_log.note(("error", err.code()), logging.WARNING,
                             f"kafka client: {err.str()} (the client keeps retrying)")

    def note(self, code: int, text: str) -> None:
        """Log ``text`` if it is the first of its error ``code`` lately, else
        count it (client_log.py says how many followed)."""
        self._errors.note(code, logging.WARNING, text)

    def tick(self) -> None:
        """Log how many reports of each kind followed its first (now and then)."""
        self.client_log.tick()
        self._errors.tick()

    def settle(self) -> None:
        """The group answered: whatever the clients kept reporting is over
        (its count is logged now; if it goes on, it is logged anew)."""
        self.client_log.settle()
        self._errors.settle()

    # -- seeking again ---------------------------------------------------------------------------

    def seek_later(self, key: tuple[str, int]) -> None:
        """Seek partition ``key`` again in a moment (a seek that failed)."""
        self.reseeks[key] = time.monotonic() + RESEEK_INTERVAL

    def seek_again(self, consumer, now: float, partitions) -> None:
        """Seek the partitions due (of ``partitions``, the loader's
        PartitionContexts) back to the offset they are to fetch from."""
        from confluent_kafka import TopicPartition
        for key, when in list(self.reseeks.items()):
            if when > now:
                continue
            del self.reseeks[key]
            ps = partitions.get(key)
            if ps is None or ps.state != ACTIVE:
                continue
            if ps.fetched_next is not None:
                offset = ps.fetched_next
            elif ps.stored is not None:
                offset = ps.stored
            else:
                offset = ps.floor if ps.floor is not None else 0
            tp = TopicPartition(key[0], key[1], offset)
            try:
                consumer.seek(tp)
                if not ps.paused:
                    # A seek that failed when a restored partition resumed
                    # (changelog_role.py) left it paused in the client while
                    # the loader counts it as running: it resumes once the
                    # seek is done.
                    consumer.resume([tp])
            except Exception as exc:  # noqa: BLE001 - the next error event schedules another try
                log.debug("%s: seeking %s to %d: %r", self._name, key, offset, exc)
                self.reseeks[key] = now + RESEEK_INTERVAL
