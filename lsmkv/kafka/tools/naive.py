"""The naive loop: what a first Kafka-to-store program does, as a yardstick.

``poll()`` one record, write it to the store (``put`` or, for a null value,
``delete``), commit its offset synchronously, repeat -- optionally after
``io_delay`` seconds of simulated I/O per record (a processor that calls
another service). It joins the group with the same session settings as
the loader (so both pay the same join time on the embedded broker) and
stops, like ``--until-caught-up``, when every assigned partition reaches
the end observed at assignment (end_offsets.py). Otherwise librdkafka's
defaults: no tuning, no batching, no parallelism. It keeps no offsets in
the store, so it is not crash-safe the way the loader is.

The benchmark (bench/suites/kafka.py) runs it beside the loader in the
same run and reports the ratio. Not for production use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..runtime.end_offsets import observe_end_offsets
from ..settings import with_logger


@dataclass
class NaiveResult:
    records: int
    elapsed: float
    #: Seconds from the first assignment to the end (the group join left out).
    elapsed_after_assign: float
    commits: int


def naive_load(bootstrap_servers: str, topics: list[str], group: str, db, *, io_delay: float = 0.0,
               max_records: int | None = None, session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 500,
               client_config: dict | None = None, end_timeout: float = 30.0) -> NaiveResult:
    """Load ``topics`` into ``db`` one record at a time until caught up (or
    ``max_records`` records, for runs too slow to finish)."""
    from confluent_kafka import Consumer
    consumer = Consumer(with_logger({
        **(client_config or {}), "bootstrap.servers": bootstrap_servers, "group.id": group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": heartbeat_interval_ms}))
    targets: dict[tuple[str, int], int] = {}
    reached: dict[tuple[str, int], int] = {}
    assigned_at: list[float] = []

    def on_assign(c, partitions) -> None:
        if not assigned_at:
            assigned_at.append(time.monotonic())
        targets.update(observe_end_offsets(bootstrap_servers, [(tp.topic, tp.partition) for tp in partitions],
                                           client_config=client_config, timeout=end_timeout))

    started = time.monotonic()
    consumer.subscribe(topics, on_assign=on_assign)
    n = commits = 0
    try:
        while True:
            if targets and all(reached.get(tp, -1) >= end for tp, end in targets.items()):
                break
            if max_records is not None and n >= max_records:
                break
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            if io_delay:
                time.sleep(io_delay)
            key = msg.key()
            if key is not None:
                value = msg.value()
                if value is None:
                    db.delete(key)
                else:
                    db.put(key, value)
            consumer.commit(message=msg, asynchronous=False)
            commits += 1
            n += 1
            reached[(msg.topic(), msg.partition())] = msg.offset() + 1
    finally:
        consumer.close()
    end = time.monotonic()
    return NaiveResult(n, end - started, end - (assigned_at[0] if assigned_at else started), commits)
