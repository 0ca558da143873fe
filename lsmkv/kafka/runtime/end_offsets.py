"""The end of a partition at a moment: where ``--until-caught-up`` stops.

A broker answers "where does this partition end" with its high watermark
(ListOffsets latest; librdkafka's ``get_watermark_offsets``). On a Kafka
cluster that is the offset after the last record. The embedded broker
(Tansu) answers with the offset after the *first* record of the last
record batch it stored, so a partition whose last batch held 100 records
reports an end 99 records short (measured: docs/kafka.md). Its fetch
responses, though, carry the right watermark.

So the end is observed in two steps: ask for the watermark W, then read
the partition from W with a throwaway consumer (assigned, never joining a
group, never committing) until the broker says there is nothing more
(the partition-EOF event a fetch response raises when the fetch position
reaches the watermark it carries). The end is that EOF offset, which is
W itself on a broker that reports W right (one empty fetch). Records
appended meanwhile may be counted in; that only moves the end to a later
moment of the same observation. If no EOF comes within ``timeout`` the
end is the last record seen plus one, at least W (logged).

``trust_watermark=True`` skips the read and returns W: what a loader that
took the watermark alone as the end would do (the tests show it stops
early on the embedded broker). This module never commits or joins a group.
"""

from __future__ import annotations

import logging
import time
import uuid

from ..settings import with_logger

log = logging.getLogger(__name__)


def observe_end_offsets(bootstrap_servers: str, partitions: list[tuple[str, int]], *,
                        client_config: dict | None = None, timeout: float = 30.0,
                        trust_watermark: bool = False) -> dict[tuple[str, int], int]:
    """{(topic, partition): end offset} for ``partitions``, now."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    if not partitions:
        return {}
    shared = {k: v for k, v in (client_config or {}).items()
              if k.startswith(("security.", "sasl.", "ssl.", "client.", "socket.", "broker.", "api."))}
    consumer = Consumer(with_logger({**shared, "bootstrap.servers": bootstrap_servers,
                         "group.id": f"lsmkv-end-probe-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "enable.auto.offset.store": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 50, "auto.offset.reset": "latest"}))
    try:
        marks = {}
        for topic, partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout,
                                                       cached=False)
            marks[(topic, partition)] = (low, high)
        if trust_watermark:
            return {tp: high for tp, (_, high) in marks.items()}
        ends: dict[tuple[str, int], int] = {}
        seen = {tp: high for tp, (_, high) in marks.items()}
        consumer.assign([TopicPartition(t, p, max(low, high)) for (t, p), (low, high) in marks.items()])
        deadline = time.monotonic() + timeout
        while len(ends) < len(marks) and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.2):
                tp = (msg.topic(), msg.partition())
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        ends.setdefault(tp, max(msg.offset(), seen[tp]))
                    else:
                        log.warning("observing the end of %s[%d]: %s", tp[0], tp[1], err.str())
                    continue
                if tp not in ends:
                    seen[tp] = max(seen[tp], msg.offset() + 1)
        for tp in marks:
            if tp not in ends:
                log.warning("%s[%d]: no end-of-partition within %.0f s; taking %d (watermark %d)", tp[0], tp[1],
                            timeout, seen[tp], marks[tp][1])
                ends[tp] = seen[tp]
        for tp, end in ends.items():
            if end != marks[tp][1]:
                log.info("%s[%d]: the broker's watermark says %d, the partition ends at %d", tp[0], tp[1],
                         marks[tp][1], end)
        return ends
    finally:
        consumer.close()
