"""The ceiling of a Kafka load: a bare confluent-kafka consumer that reads a
topic to its end and stores nothing.

Run as a program by the kafka-e2e suite (bench/suites/kafka_end_to_end.py),
in a process of its own, so that its time from start to exit and its peak
RSS compare with ``lsmkv kafka load --until-caught-up`` doing the same
reading plus the writes::

    python -m bench.kafka_bare_consumer BOOTSTRAP TOPIC GROUP

It joins ``GROUP`` with the loader's session settings (so both pay the same
join on the same broker), reads in batches of up to 10,000 records with
librdkafka's other defaults, touches each record's key and value, and
stops when every assigned partition reaches the end observed at
assignment. It prints one JSON line: ``records``, ``elapsed_s`` (from
before the consumer is made to after it is closed) and ``join_s`` (to the
first assignment).
"""

from __future__ import annotations

import json
import sys
import time


def consume_to_end(bootstrap_servers: str, topic: str, group: str) -> dict:
    """Read ``topic`` to the ends seen at assignment; the figures."""
    from confluent_kafka import Consumer

    from lsmkv.kafka.runtime.end_offsets import observe_end_offsets

    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    targets: dict[int, int] = {}
    reached: dict[int, int] = {}
    assigned_at: list[float] = []

    def on_assign(_consumer, partitions) -> None:
        assigned_at.append(time.monotonic())
        ends = observe_end_offsets(bootstrap_servers, [(tp.topic, tp.partition) for tp in partitions])
        targets.update({p: end for (_, p), end in ends.items()})

    consumer.subscribe([topic], on_assign=on_assign)
    records = 0
    size = 0
    try:
        while not targets or any(reached.get(p, 0) < end for p, end in targets.items()):
            for msg in consumer.consume(10_000, 0.1):
                if msg.error() is not None:
                    continue
                key, value = msg.key(), msg.value()
                size += len(key or b"") + len(value or b"")
                reached[msg.partition()] = msg.offset() + 1
                records += 1
    finally:
        consumer.close()
    done = time.monotonic()
    return {"records": records, "bytes": size, "elapsed_s": round(done - started, 3),
            "join_s": round(assigned_at[0] - started, 3) if assigned_at else None}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m bench.kafka_bare_consumer BOOTSTRAP TOPIC GROUP", file=sys.stderr)
        return 2
    print(json.dumps(consume_to_end(*args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
