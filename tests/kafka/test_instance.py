"""ServingInstance (lsmkv/kafka/runtime/instance.py): a loader instance
built and run from one InstanceSettings by library code, as `lsmkv kafka
load` runs it: serving its partitions to StoreClient, loading until caught
up in the calling thread, and closing what it built (also when it never
ran)."""

from __future__ import annotations

import pytest

import lsmkv
from lsmkv.kafka import (InstanceSettings, LoaderError, ServingInstance, ShardedStore, StoreClient, WorkloadSpec,
                         expected_table)
from lsmkv.kafka.admin import ensure_topic
from lsmkv.kafka.tools.producer import produce_workload


def _wait_for(condition, timeout: float, what: str):
    import time
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.1)


def test_an_instance_built_and_never_run_closes_its_store(tmp_path):
    db = tmp_path / "store"
    instance = ServingInstance(InstanceSettings(topics="t", group="g", db=db, bootstrap_servers="127.0.0.1:1"))
    assert not db.exists() and instance.url is None and instance.snapshot() == {}
    instance.open()   # a long-running load checks nothing at start: the store is opened at once
    assert db.exists() and instance.loader.db is not None
    assert instance.close() is None and instance.summary is None
    with lsmkv.open(db) as store:   # closed by the instance: it opens again
        assert len(store) == 0
    with pytest.raises(LoaderError, match="this instance is closed"):
        instance.run()


def test_an_instance_started_in_the_background_stops_and_closes_its_store(tmp_path):
    # No broker answers: a long-running load waits for one (logging it), and stops when told.
    db = tmp_path / "store"
    instance = ServingInstance(InstanceSettings(topics="t", group="g", db=db, bootstrap_servers="127.0.0.1:1"))
    with instance as started:
        assert started is instance and instance.wait(0.2) is None   # still running
        instance.stop("asked to")
        summary = instance.wait(30)
    assert summary.reason == "asked to" and summary.records_stored == 0 and instance.summary is summary
    assert instance.close() is summary
    with lsmkv.open(db) as store:
        assert len(store) == 0


@pytest.mark.kafka
@pytest.mark.slow
def test_a_serving_instance_run_from_python_answers_every_key_through_the_store_client(broker, name, tmp_path,
                                                                                         ground_truth,
                                                                                         partition_ends):
    bs, topic, group = broker.bootstrap_servers, name(), name("g")
    spec = WorkloadSpec(records=3000, keys=400, tombstone_ratio=0.1, seed=11)
    produce_workload(bs, topic, spec, partitions=3)
    ends = partition_ends(ground_truth(bs, topic))
    table = expected_table(spec)
    settings = InstanceSettings(topics=topic, group=group, db=tmp_path / "shards", bootstrap_servers=bs,
                                serve="127.0.0.1:0", startup_timeout=30)
    with ServingInstance(settings) as instance:
        assert instance.url.startswith("http://127.0.0.1:") and instance.members_topic == f"{group}-members"

        client = StoreClient(bs, group)

        def announced_caught_up() -> bool:
            # (Reads route by the placement tallies the instance announced:
            # once it announces every partition at its end, they cover every key.)
            owners = client.owners(refresh=True)
            return ({p: o.stored for p, o in owners.items()} == ends
                    and {o.url for o in owners.values()} == {instance.url}
                    and not any(o.restoring for o in owners.values()))

        _wait_for(announced_caught_up, 90, "the instance announcing every partition at its end")
        for index in range(spec.keys):
            key = spec.key(index)
            assert client.get(key) == table.get(key), key
        assert dict(client.scan()) == table
    summary = instance.summary
    assert summary.reason == "closed" and summary.records_stored == spec.records
    with ShardedStore(tmp_path / "shards", None, read_only=True) as shards:   # closed: it opens again
        assert dict(shards.scan()) == table and shards.offsets() == ends


@pytest.mark.kafka
@pytest.mark.slow
def test_an_instance_run_in_the_calling_thread_loads_until_caught_up(broker, name, tmp_path):
    bs, topic = broker.bootstrap_servers, name()
    spec = WorkloadSpec(records=1000, keys=100, seed=2)
    ensure_topic(bs, topic, 2)
    produce_workload(bs, topic, spec)
    db = tmp_path / "store"
    instance = ServingInstance(InstanceSettings(topics=[topic], group=name("g"), db=db, bootstrap_servers=bs,
                                                engine="btree", until_caught_up=True))
    summary = instance.run()
    assert summary.reason == "caught up" and summary.records_stored == spec.records
    assert instance.wait(0) is summary
    with pytest.raises(LoaderError, match="runs once"):
        instance.run()
    assert instance.close() is summary
    import btree
    with btree.open(db, read_only=True) as store:
        assert dict(store.scan()) == expected_table(spec)
