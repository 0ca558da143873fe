"""Fixtures of the Kafka tests: the real embedded broker, topics, streams.

``broker`` is one embedded broker (Tansu, a Kafka-protocol broker) on a
free loopback port for the whole session, started and stopped here; tests
that stop or restart a broker start their own (``own_broker``). Every
test uses topics and groups of its own, so tests never see each other's
records. ``ground_truth`` reads a topic back as it is stored on the
broker (partition -> offset-ordered records), which is what a load must
reproduce.
"""

from __future__ import annotations

import itertools
import os
import time

import pytest

from lsmkv.kafka import EmbeddedBroker

_names = itertools.count()


@pytest.fixture(scope="session")
def broker():
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def own_broker():
    b = EmbeddedBroker().start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def name():
    """A fresh topic (and group) name for each call."""
    def fresh(prefix: str = "t") -> str:
        return f"{prefix}-{os.getpid()}-{int(time.time() * 1000) % 10**8}-{next(_names)}"
    return fresh


def _ground_truth(bootstrap_servers: str, topic: str, timeout: float = 30.0) -> dict[int, list]:
    """{partition: [(offset, key, value), ...]} of everything ``topic`` holds now."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from lsmkv.kafka.admin import partition_count
    partitions = partition_count(bootstrap_servers, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"truth-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "queued.min.messages": 1_000_000})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"reading {topic} back took more than {timeout} s"
            for msg in consumer.consume(10_000, 0.2):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(msg.partition())
                    continue
                out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def _table_below(truth: dict[int, list], offsets: dict[int, int]) -> dict[bytes, bytes]:
    """The table a store holds after applying, per partition, exactly the
    records below ``offsets[partition]`` (0 if absent) in offset order."""
    table: dict[bytes, bytes] = {}
    for partition, records in truth.items():
        limit = offsets.get(partition, 0)
        for offset, key, value in records:
            if offset >= limit:
                break
            if key is None:
                continue
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
    return table


def _ends(truth: dict[int, list]) -> dict[int, int]:
    return {p: (records[-1][0] + 1 if records else 0) for p, records in truth.items()}


@pytest.fixture
def ground_truth():
    return _ground_truth


@pytest.fixture
def table_below():
    return _table_below


@pytest.fixture
def partition_ends():
    return _ends


@pytest.fixture
def ends_after_producing(broker):
    """``ends_after_producing(topic, spec, partitions=None)``: ``spec``'s
    stream produced to ``topic`` on the session broker (created with
    ``partitions`` partitions when given), then each partition's end, as
    the broker stores it."""
    from lsmkv.kafka.tools.producer import produce_workload

    def produce(topic: str, spec, partitions: int | None = None) -> dict[int, int]:
        produce_workload(broker.bootstrap_servers, topic, spec, partitions=partitions)
        return _ends(_ground_truth(broker.bootstrap_servers, topic))
    return produce


@pytest.fixture
def instances():
    """A list to put `lsmkv kafka load` process wrappers (tests/kafka/instances.py)
    in: whatever is still running at the end is SIGKILLed."""
    started: list = []
    yield started
    for inst in started:
        if inst.proc.poll() is None:
            inst.kill()
        if not inst.log.closed:
            inst.log.close()
