"""Partitioned state (stage 1 of issue 15): Kafka's murmur2 exactly (where
librdkafka's murmur2 partitioner really puts records; the known values from
Kafka's own tests are in test_partitioners.py), a sharded load on both
engines ending with each shard holding exactly its partition's table and
offset (each shard an ordinary store lsmkv.open/btree.open opens),
ShardedStore reads (get routed to one shard, scan merged in key order), a
dropped shard rebuilt from the source topic while the others resume from
their own offsets, and bad layouts refused with one clear error (the
command line's own checks, which need no broker, are in test_cli_checks.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

import btree
import lsmkv
from lsmkv.kafka import Loader, LoaderSettings, LoaderError, WorkloadSpec, stored_offset
from lsmkv.kafka.scaleout.routing import partition_for
from lsmkv.kafka.scaleout.shards import MARKER, ShardedStore
from lsmkv.kafka.tools.cli import main as kafka_main
from lsmkv.kafka.tools.producer import produce_workload

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instances import table_of  # noqa: E402

pytestmark = pytest.mark.kafka

OPENERS = {"lsm": lsmkv.open, "btree": btree.open}

def test_partition_for_agrees_with_librdkafkas_murmur2_partitioner(broker, name, ground_truth):
    from confluent_kafka import Producer

    from lsmkv.kafka.admin import ensure_topic
    topic = name()
    ensure_topic(broker.bootstrap_servers, topic, 7)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random",
                         "linger.ms": 5})
    keys = [b"k%d" % i for i in range(300)] + [bytes(range(n)) for n in range(1, 40)] + [b"\xff" * 9]
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(30) == 0
    truth = ground_truth(broker.bootstrap_servers, topic)
    placed = {key: p for p, records in truth.items() for _, key, _ in records}
    assert len(placed) == len(keys)
    assert {key: partition_for(key, 7) for key in keys} == placed


def _settings(broker, topic, group, **kw):
    return LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=[topic], group=group, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["lsm", "btree"])
def test_a_sharded_load_keeps_one_exact_store_per_partition(broker, name, tmp_path, engine, ground_truth,
                                                            partition_ends, capsys):
    topic = name()
    spec = WorkloadSpec(records=6000, keys=800, tombstone_ratio=0.1, seed=3)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=4)
    path = tmp_path / "shards"
    summary = Loader(_settings(broker, topic, name("g"), until_caught_up=True), path, engine=engine,
                     partitioned=True).run()
    assert summary.reason == "caught up"
    truth = ground_truth(broker.bootstrap_servers, topic)
    ends = partition_ends(truth)
    assert sorted(os.listdir(path)) == sorted([MARKER] + [f"{topic}-{p}" for p in range(4)])
    expected: dict[bytes, bytes] = {}
    for p in range(4):
        with OPENERS[engine](str(path / f"{topic}-{p}"), read_only=True) as db:   # an ordinary store
            assert dict(db.scan()) == table_of(truth[p])
            assert stored_offset(db, topic, p) == ends[p]
        expected.update(table_of(truth[p]))
    assert kafka_main(["shards", str(path), "--check", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["partition"], r["offset"], r["ok"]) for r in listed["shards"]] == [(p, ends[p], True) for p in range(4)]
    # The engines' own commands understand the layout: shard by shard.
    from lsmkv.cli import main as lsmkv_main
    assert lsmkv_main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert all(f"{topic}-{p}: offset" in out and out.count("  OK") == 4 for p in range(4)), out
    assert lsmkv_main(["stats", str(path), "--json"]) == 0
    assert [r["offset"] for r in json.loads(capsys.readouterr().out)["shards"]] == [ends[p] for p in range(4)]
    with ShardedStore(path, None, read_only=True) as store:
        assert (store.engine, store.topic, store.partitions) == (engine, topic, 4)
        assert store.offsets() == ends
        assert list(store.scan()) == sorted(expected.items())
        lo, hi = b"k2", b"k5"
        assert list(store.scan(lo, hi)) == sorted((k, v) for k, v in expected.items() if lo <= k < hi)
        for i in range(spec.keys):
            key = spec.key(i)
            assert store.get(key) == expected.get(key)


@pytest.mark.slow
def test_a_dropped_shard_is_restored_from_the_topic_and_the_rest_resume(broker, name, tmp_path, ground_truth,
                                                                         partition_ends):
    topic = name()
    spec = WorkloadSpec(records=3000, keys=400, tombstone_ratio=0.1, seed=5)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=3)
    path = tmp_path / "shards"
    group = name("g")
    Loader(_settings(broker, topic, group, until_caught_up=True), path, partitioned=True).run()
    shutil.rmtree(path / f"{topic}-1")
    produce_workload(broker.bootstrap_servers, topic, WorkloadSpec(records=600, keys=400, seed=6))
    summary = Loader(_settings(broker, topic, group, until_caught_up=True), path, partitioned=True).run()
    truth = ground_truth(broker.bootstrap_servers, topic)
    ends = partition_ends(truth)
    starts = {p["partition"]: p["start"] for p in summary.metrics["partitions"]}
    assert starts[1] is None                          # rebuilt from the beginning of the topic
    assert starts[0] > 0 and starts[2] > 0            # resumed from their own shards' offsets
    assert summary.records_stored == sum(ends[p] - (starts[p] or 0) for p in range(3))
    with ShardedStore(path, "lsm", read_only=True) as store:
        assert store.offsets() == ends
        for p in range(3):
            assert dict(store.shard(p).scan()) == table_of(truth[p])


def test_bad_layouts_get_one_clear_error(broker, name, tmp_path):
    single = tmp_path / "single"
    with lsmkv.open(str(single)) as db:
        db.put(b"a", b"1")
    with pytest.raises(LoaderError, match="holds a single lsm store, not a shard directory"):
        ShardedStore(single, "lsm", topic="t")
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("x")
    with pytest.raises(LoaderError, match="non-empty directory without a LSMKV-SHARDS marker"):
        ShardedStore(junk, "lsm", topic="t")
    with pytest.raises(LoaderError, match="is not a shard directory"):
        ShardedStore(tmp_path / "missing", None, read_only=True)
    ShardedStore(tmp_path / "s", "lsm", topic="t").close()
    with pytest.raises(LoaderError, match="holds lsm shards, not btree"):
        ShardedStore(tmp_path / "s", "btree", topic="t")
    with pytest.raises(LoaderError, match="holds shards of topic 't', not 'u'"):
        ShardedStore(tmp_path / "s", "lsm", topic="u")
    (tmp_path / "s" / MARKER).write_text("{not json")
    with pytest.raises(LoaderError, match="not a readable shard layout marker"):
        ShardedStore(tmp_path / "s", "lsm", topic="t")
    ShardedStore(tmp_path / "s2", "lsm", topic="t").close()
    one = LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=["t"], group="g")
    with pytest.raises(LoaderError, match="is a shard directory .partitioned state., not one store"):
        Loader(one, tmp_path / "s2")
    two = LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=["a", "b"], group="g")
    with pytest.raises(LoaderError, match="partitioned state holds one topic"):
        Loader(two, tmp_path / "p2", partitioned=True)


def test_threads_noting_the_partition_count_at_once_leave_one_whole_marker(tmp_path):
    """The store role, the coordination and the standby replicator each note
    the partition count from their own thread: concurrent notes must not
    race through the marker's temporary file (a standby replicator once
    died of the FileNotFoundError), and the marker ends with a count one of
    them noted."""
    import threading
    store = ShardedStore(tmp_path / "shards", "lsm", topic="t")
    start = threading.Barrier(4)
    errors = []

    def note(first: int) -> None:
        start.wait()
        try:
            for i in range(40):
                store.note_partitions((first + i) % 3 + 1)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=note, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with open(tmp_path / "shards" / MARKER) as f:
        assert json.load(f)["partitions"] == store.partitions in (1, 2, 3)
    assert sorted(os.listdir(tmp_path / "shards")) == [MARKER]
    store.close()
