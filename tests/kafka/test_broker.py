"""The embedded broker and what it is like: it starts on a free loopback
port, stops, restarts empty, refuses a taken port; a seeded workload
round-trips through it; and its high watermark lags the real end of a
partition, which observe_end_offsets sees past."""

from __future__ import annotations

import socket

import pytest

from lsmkv.kafka import EmbeddedBroker, WorkloadSpec
from lsmkv.kafka.admin import ensure_topic, partition_count
from lsmkv.kafka.end_offsets import observe_end_offsets
from lsmkv.kafka.errors import BrokerError
from lsmkv.kafka.producer import produce_workload
from lsmkv.kafka.workload import generate

pytestmark = pytest.mark.kafka


def test_broker_lifecycle_and_a_taken_port(own_broker, name):
    assert own_broker.running and own_broker.bootstrap_servers.startswith("127.0.0.1:")
    topic = name()
    assert ensure_topic(own_broker.bootstrap_servers, topic, 3) == 3
    assert ensure_topic(own_broker.bootstrap_servers, topic, 5) == 3  # exists: left as it is
    with pytest.raises(BrokerError, match="taken"):
        EmbeddedBroker(port=own_broker.port).start()
    own_broker.restart()
    assert own_broker.running and own_broker.starts == 2
    assert partition_count(own_broker.bootstrap_servers, topic) == 0  # memory only: the restart is empty
    own_broker.stop()
    assert not own_broker.running
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", own_broker.port)) != 0
    with pytest.raises(ValueError, match="port"):
        EmbeddedBroker(port=70000)


def test_workload_round_trips_keyed_by_murmur2(broker, name, ground_truth):
    topic = name()
    spec = WorkloadSpec(records=3000, keys=200, tombstone_ratio=0.1, seed=5)
    result = produce_workload(broker.bootstrap_servers, topic, spec, partitions=4)
    assert (result.delivered, result.errors) == (3000, 0)
    truth = ground_truth(broker.bootstrap_servers, topic)
    assert sum(len(r) for r in truth.values()) == 3000
    owner: dict[bytes, int] = {}
    for partition, records in truth.items():
        assert [o for o, _, _ in records] == list(range(len(records)))  # no gaps, stream order kept
        for _, key, _ in records:
            assert owner.setdefault(key, partition) == partition  # a key lives in one partition
    stream = list(generate(spec))
    by_partition = {p: [(k, v) for _, k, v in records] for p, records in truth.items()}
    for p, records in by_partition.items():
        assert records == [(k, v) for k, v in stream if owner[k] == p]


def test_the_watermark_lags_the_end_and_the_end_is_observed_past_it(broker, name, ground_truth, partition_ends):
    """Measured quirk: the broker's high watermark is the offset after the
    first record of the last record batch it stored, so a batched producer
    makes it lag far behind the end. observe_end_offsets reads past it."""
    topic = name()
    spec = WorkloadSpec(records=6000, keys=1000, seed=1)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=6, linger_ms=200)
    truth = ground_truth(broker.bootstrap_servers, topic)
    real = partition_ends(truth)
    parts = [(topic, p) for p in range(6)]
    marks = observe_end_offsets(broker.bootstrap_servers, parts, trust_watermark=True)
    observed = observe_end_offsets(broker.bootstrap_servers, parts)
    assert observed == {(topic, p): real[p] for p in range(6)}
    assert sum(marks.values()) < sum(real.values())  # the watermark alone would stop early
    assert all(marks[tp] <= observed[tp] for tp in parts)
