"""The changelog topic (``lsmkv kafka load --changelog``, changelog.py and
restore.py), on the real broker: an instance with an empty --db restores
every shard from the changelog another instance wrote and never runs the
processor for what the changelog held; a stale writer's batches are
skipped, and a batch cut short (its writer killed while producing it) is
left out, the source reprocessed from before it; after a SIGKILL of a
loader mid-load, two restores in a row are exact; deletes arrive as
deletes (btree shards); a shard ahead of its changelog (records stored
but never produced) is reprocessed from where the changelog ends, so a
later restore is exact; a changelog the store refuses falls back to the
source topic and leaves nothing of itself; --changelog without
partitioned state is refused before anything exists. The batch rules
(restore.Batches) are tested on their own in test_changelog_batches.py."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

import lsmkv
from lsmkv.kafka import Loader, LoaderSettings, ShardedStore, WorkloadSpec, expected_table, stored_offset
from lsmkv.kafka.admin import ensure_topic, partition_count
from lsmkv.kafka.scaleout.changelog import HEADER, batch_header, changelog_topic, ensure_changelog_topic
from lsmkv.kafka.tools.cli import main as kafka_main
from lsmkv.kafka.tools.producer import produce_workload

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from instances import ROOT, table_of  # noqa: E402
from processors import CALLS_FILE  # noqa: E402

pytestmark = pytest.mark.kafka


def _settings(broker, topic, group, **kw):
    return LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=[topic], group=group,
                          until_caught_up=True, changelog=True, **kw)


def _cli_load(broker, topic, group, db, calls) -> dict:
    """`lsmkv kafka load --partitioned --changelog` with the counting
    processor, until caught up; its JSON summary."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]),
               **{CALLS_FILE: str(calls)})
    out = subprocess.run(
        [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", broker.bootstrap_servers,
         "--topic", topic, "--group", group, "--db", str(db), "--partitioned", "--changelog", "--until-caught-up",
         "--json", "--processor", "processors:counted"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _calls(path) -> list[tuple[int, int]]:
    with open(path) as f:
        return [tuple(int(x) for x in line.split()) for line in f]


@pytest.mark.slow
def test_a_new_instance_restores_from_the_changelog_without_running_the_processor_again(
        broker, name, tmp_path, ground_truth, partition_ends, ends_after_producing):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    first_ends = ends_after_producing(topic, WorkloadSpec(records=8000, keys=1000, tombstone_ratio=0.1, seed=31),
                                      partitions=3)
    a = _cli_load(broker, topic, group, tmp_path / "a", tmp_path / "a.calls")
    assert a["reason"] == "caught up" and a["records_stored"] == 8000
    assert len(_calls(tmp_path / "a.calls")) == 8000 == a["changelog_records_produced"]
    produce_workload(bs, topic, WorkloadSpec(records=600, keys=1000, seed=32))   # after A stopped
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)

    b = _cli_load(broker, topic, group, tmp_path / "b", tmp_path / "b.calls")   # an empty --db
    assert b["reason"] == "caught up"
    # Every shard restored from what A wrote (the embedded broker does not compact) ...
    assert b["records_restored_from_changelog"] == a["changelog_records_produced"]
    assert {p["partition"]: (p["start"], p["restored_from_changelog"]) for p in b["partitions"]} == {
        p: (first_ends[p], first_ends[p]) for p in range(3)}
    # ... the processor ran only for the records produced after A stopped, once each ...
    assert sorted(_calls(tmp_path / "b.calls")) == [(p, o) for p in range(3) for o in range(first_ends[p], ends[p])]
    assert b["records_stored"] == b["changelog_records_produced"] == 600
    # ... and B holds exactly the processed table.
    expected = {k: b"processed:" + v for p in range(3) for k, v in table_of(truth[p]).items()}
    with ShardedStore(tmp_path / "b", None, read_only=True) as store:
        assert store.offsets() == ends
        assert dict(store.scan()) == expected


def _produce_batch(producer, topic, records, start, offset, run, seq, count=None):
    """Produce ``records`` [(_, key, value), ...] to changelog ``topic`` as
    batch ``seq`` of run ``run``, covering source offsets [start, offset)
    (``count``: the records the batch claims to have; fewer produced: a
    writer killed while producing it)."""
    header = [(HEADER, batch_header(start, offset, run, seq, len(records) if count is None else count))]
    for _, key, value in records:
        producer.produce(topic, value, key, partition=0, headers=header)


@pytest.mark.slow
def test_stale_writers_and_batches_cut_short_are_left_out(broker, name, tmp_path, ground_truth):
    from confluent_kafka import Producer
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    ensure_topic(bs, topic, 1)
    producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    for i in range(300):   # k0..k59 last written below offset 200; late<i> from 200 on
        producer.produce(topic, b"v%d" % i, b"k%d" % (i % 60) if i < 200 else b"late%d" % i, partition=0)
    assert producer.flush(30) == 0
    truth = ground_truth(bs, topic)[0]
    changelog = changelog_topic(group, topic)
    ensure_changelog_topic(bs, changelog, 1)

    _produce_batch(producer, changelog, truth[:60], 0, 60, "old", 1)
    # The partition moved: its new owner's run starts at 60 ...
    _produce_batch(producer, changelog, truth[60:100], 60, 100, "new", 1)
    _produce_batch(producer, changelog, truth[100:200], 100, 200, "new", 2)
    # ... while the old owner still writes: a batch (older values of k0..k9,
    # a delete of k10), and one of which it produced 5 records of 20 before
    # it was killed: applied, they would put these values back.
    _produce_batch(producer, changelog, [(None, b"k%d" % i, b"STALE") for i in range(10)] + [(None, b"k10", None)],
                   60, 150, "old", 2)
    _produce_batch(producer, changelog, [(None, b"k%d" % i, b"CUT") for i in range(5)], 150, 260, "old", 3, count=20)
    _produce_batch(producer, changelog, truth[200:250], 200, 250, "new", 3)
    assert producer.flush(30) == 0

    summary = Loader(_settings(broker, topic, group), tmp_path / "s", partitioned=True).run()
    m = summary.metrics
    assert m["changelog_records_skipped"] == 16
    assert m["records_restored_from_changelog"] == 250
    assert [p["start"] for p in m["partitions"]] == [250] and summary.records_stored == 50
    with ShardedStore(tmp_path / "s", None, read_only=True) as store:
        assert dict(store.scan()) == table_of(truth)


@pytest.mark.slow
def test_a_batch_cut_short_is_reprocessed_and_later_restores_are_exact(broker, name, tmp_path, ground_truth):
    from confluent_kafka import Producer
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    ensure_topic(bs, topic, 1)
    producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    for i in range(400):
        producer.produce(topic, b"v%d" % i, b"k%d" % (i % 70), partition=0)
    assert producer.flush(30) == 0
    truth = ground_truth(bs, topic)[0]
    changelog = changelog_topic(group, topic)
    ensure_changelog_topic(bs, changelog, 1)
    _produce_batch(producer, changelog, truth[:150], 0, 150, "dead", 1)
    # The owner was killed while producing its batch of [150, 300): 40 of its 150 records got out.
    _produce_batch(producer, changelog, truth[150:190], 150, 300, "dead", 2, count=150)
    assert producer.flush(30) == 0

    # The new owner restores up to 150 (not 300) and reprocesses the source from there ...
    b = Loader(_settings(broker, topic, group), tmp_path / "b", partitioned=True).run()
    assert [(p["start"], p["restored_from_changelog"]) for p in b.metrics["partitions"]] == [(150, 150)]
    assert b.records_stored == 250 == b.metrics["changelog_records_produced"]
    # ... and a later restore, which reads the cut batch and then the new
    # owner's run (its first batch starts at 150, inside the cut batch),
    # is exact too.
    c = Loader(_settings(broker, topic, group), tmp_path / "c", partitioned=True).run()
    assert [p["start"] for p in c.metrics["partitions"]] == [400] and c.records_stored == 0
    assert c.metrics["records_restored_from_changelog"] == 400
    for db in ("b", "c"):
        with ShardedStore(tmp_path / db, None, read_only=True) as store:
            assert dict(store.scan()) == table_of(truth), db


@pytest.mark.crash
@pytest.mark.slow
def test_a_writer_sigkilled_mid_load_then_restores_from_its_changelog_are_exact(broker, name, tmp_path,
                                                                                 ends_after_producing):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    # Most keys are written once: a record missing from a restore is a key missing or wrong.
    spec = WorkloadSpec(records=60_000, keys=40_000, tombstone_ratio=0.05, seed=71)
    ends = ends_after_producing(topic, spec, partitions=2)
    changelog = changelog_topic(group, topic)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    a = subprocess.Popen(
        [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bs, "--topic", topic,
         "--group", group, "--db", str(tmp_path / "a"), "--partitioned", "--changelog", "--until-caught-up",
         "--quiet", "--processor", "processors:slow", "--batch-records", "500", "--session-timeout-ms", "3000"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # SIGKILL it once its shards hold a quarter of the load (the slow
    # processor takes about 1 ms a record, 4 units a partition), while it
    # writes more. (The embedded broker's ListOffsets lags far behind.)
    stored, deadline = 0, time.monotonic() + 120
    while stored < 15_000 and a.poll() is None and time.monotonic() < deadline:
        stored = 0
        for p in range(2):
            shard = tmp_path / "a" / f"{topic}-{p}"
            if shard.exists():
                try:
                    with lsmkv.open(str(shard), read_only=True) as db:
                        stored += stored_offset(db, topic, p) or 0
                except lsmkv.LsmkvError:
                    pass   # (being created)
        time.sleep(0.05)
    assert a.poll() is None and stored >= 15_000
    os.kill(a.pid, signal.SIGKILL)
    a.wait()

    # B (an empty --db) restores what A's changelog holds, then loads the rest ...
    settings = _settings(broker, topic, group, batch_records=500, session_timeout_ms=3000)
    b = Loader(settings, tmp_path / "b", partitioned=True).run()
    restored = b.metrics["records_restored_from_changelog"]
    assert 0 < restored < spec.records and b.records_stored == spec.records - restored
    # ... and C (another empty --db) restores A's and B's runs.
    c = Loader(settings, tmp_path / "c", partitioned=True).run()
    assert c.records_stored == 0 and {p["partition"]: p["start"] for p in c.metrics["partitions"]} == ends
    for db in ("b", "c"):
        with ShardedStore(tmp_path / db, None, read_only=True) as store:
            assert store.offsets() == ends
            assert dict(store.scan()) == expected_table(spec), db
    print(f"changelog after a SIGKILL: A's shards held {stored:,}+ records; B restored {restored:,} and left "
          f"{b.metrics['changelog_records_skipped']:,} unapplied (of batches A's kill cut short)")


@pytest.mark.slow
def test_deletes_reach_a_restored_shard_as_deletes(broker, name, tmp_path, ground_truth):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    spec = WorkloadSpec(records=6000, keys=300, tombstone_ratio=0.3, seed=41)
    produce_workload(bs, topic, spec, partitions=2)
    a = Loader(_settings(broker, topic, group), tmp_path / "a", engine="btree", partitioned=True).run()
    written = ground_truth(bs, changelog_topic(group, topic))
    tombstones = sum(1 for records in written.values() for _, _, value in records if value is None)
    assert sum(len(r) for r in written.values()) == a.metrics["changelog_records_produced"] == 6000
    assert tombstones > 1000
    # Keys that had a value and whose last record deletes them.
    deleted = {k for records in ground_truth(bs, topic).values() for _, k, v in records if v is not None}
    deleted -= expected_table(spec).keys()
    assert len(deleted) > 20

    b = Loader(_settings(broker, topic, group), tmp_path / "b", engine="btree", partitioned=True).run()
    assert b.metrics["records_restored_from_changelog"] == 6000 and b.records_stored == 0
    with ShardedStore(tmp_path / "b", None, read_only=True) as store:
        assert store.engine == "btree"
        table = dict(store.scan())
    assert table == expected_table(spec)
    assert not deleted & table.keys()


@pytest.mark.slow
def test_a_shard_ahead_of_its_changelog_is_reprocessed_from_where_the_changelog_ends(
        broker, name, tmp_path, ground_truth, ends_after_producing):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    first = ends_after_producing(topic, WorkloadSpec(records=3000, keys=500, tombstone_ratio=0.1, seed=51),
                                 partitions=2)
    Loader(_settings(broker, topic, group), tmp_path / "a", partitioned=True).run()
    ends = ends_after_producing(topic, WorkloadSpec(records=1000, keys=500, tombstone_ratio=0.1, seed=52))
    # Stored, never produced to the changelog (as after a crash between the two).
    without = LoaderSettings(bootstrap_servers=bs, topics=[topic], group=group, until_caught_up=True)
    Loader(without, tmp_path / "a", partitioned=True).run()

    # (batch_records=64: the check reads the changelog's last 128 records
    # first, less than each partition holds.)
    again = Loader(_settings(broker, topic, group, batch_records=64), tmp_path / "a", partitioned=True).run()
    assert {p["partition"]: p["start"] for p in again.metrics["partitions"]} == first
    assert again.records_stored == again.metrics["changelog_records_produced"] == 1000

    fresh = Loader(_settings(broker, topic, group), tmp_path / "b", partitioned=True).run()
    assert {p["partition"]: p["start"] for p in fresh.metrics["partitions"]} == ends
    assert fresh.records_stored == 0
    truth = ground_truth(bs, topic)
    with ShardedStore(tmp_path / "b", None, read_only=True) as store:
        assert dict(store.scan()) == {k: v for p in truth for k, v in table_of(truth[p]).items()}


@pytest.mark.slow
def test_a_changelog_the_store_refuses_falls_back_to_the_source_and_leaves_nothing(broker, name, tmp_path,
                                                                                 ground_truth, caplog):
    from confluent_kafka import Producer
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    produce_workload(bs, topic, WorkloadSpec(records=500, keys=100, seed=61), partitions=1)
    changelog = changelog_topic(group, topic)
    ensure_changelog_topic(bs, changelog, 1)
    producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    # A batch of 40, written to the shard in write batches of 16 before the bad record comes.
    _produce_batch(producer, changelog, [(None, b"only-in-the-changelog-%d" % i, b"x") for i in range(40)], 0, 100,
                   "w", 1)
    producer.produce(changelog, b"x", b"k1", partition=0)            # no offset header
    _produce_batch(producer, changelog, [(None, b"k%d" % i, b"x") for i in range(5)], 100, 200, "w", 2)
    assert producer.flush(30) == 0
    caplog.set_level(logging.INFO, logger="lsmkv.kafka")
    summary = Loader(_settings(broker, topic, group, batch_records=16), tmp_path / "s", partitioned=True).run()
    assert summary.metrics["changelog_restore_failures"] == 1
    assert summary.metrics["records_restored_from_changelog"] == 0
    assert [p["start"] for p in summary.metrics["partitions"]] == [None] and summary.records_stored == 500
    assert any("failed (its record at offset 40 has no valid lsmkv.source.offset header); rebuilding it from "
               "the source topic" in r.getMessage() for r in caplog.records)
    assert any("deleted 32 keys" in r.getMessage() for r in caplog.records)
    with ShardedStore(tmp_path / "s", None, read_only=True) as store:
        assert dict(store.scan()) == table_of(ground_truth(bs, topic)[0])


def test_changelog_without_partitioned_state_is_refused_before_anything_exists(broker, name, tmp_path, capsys):
    topic, group = name(), name("g")
    ensure_topic(broker.bootstrap_servers, topic, 2)
    path = tmp_path / "db"
    code = kafka_main(["load", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--group", group,
                       "--db", str(path), "--changelog", "--until-caught-up"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.count("error:") == 1
    assert "--changelog needs partitioned state (--partitioned or --serve)" in err
    assert not path.exists()
    assert partition_count(broker.bootstrap_servers, changelog_topic(group, topic)) == 0


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.crash
def test_serving_instances_take_a_killed_owners_partitions_from_the_changelog(broker, name, tmp_path, instances,
                                                                              ground_truth, partition_ends,
                                                                              ends_after_producing):
    """Two `--serve --changelog` instances (lag-aware assignment, no
    standby; the second started once the first had loaded every
    partition) share four partitions; the first is SIGKILLed. The survivor has no
    copy of its partitions: it restores them from the changelog the dead
    one wrote, then follows the source, and ends with exactly the topic's
    table."""
    from instances import Instance, wait_for
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    partitions = 4
    ends0 = ends_after_producing(topic, WorkloadSpec(records=6000, keys=800, tombstone_ratio=0.05, seed=61),
                                 partitions=partitions)
    extra = ("--changelog", "--acceptable-recovery-lag", "300", "--probing-rebalance-interval", "2")
    # The victim first, alone: it loads every partition. Started together,
    # either could hold every partition for a moment and keep a shard of
    # it, which a takeover would resume from instead of restoring.
    instances.append(Instance(bs, topic, group, str(tmp_path / "i0"), extra=extra))

    def alone():
        st = instances[0].status()
        return st if st and len(st["active"]) == partitions and all(
            o == ends0[int(p)] for p, o in st["active"].items()) else None
    wait_for(alone, 120, "the first instance active on every partition at its end")
    # The second warms up copies of the two partitions it is to take (and
    # only those: the lag-aware assignment is sticky for the rest).
    instances.append(Instance(bs, topic, group, str(tmp_path / "i1"), extra=extra))

    def loaded():
        sts = [inst.status() for inst in instances]
        if not all(sts):
            return None
        active = {int(p): i for i, st in enumerate(sts) for p, o in st["active"].items() if o == ends0[int(p)]}
        return active if len(active) == partitions and len(set(active.values())) == 2 else None
    active = wait_for(loaded, 120, "two instances each active on two partitions at their ends")
    victim, survivor = instances[0], instances[1]
    victim_parts = sorted(p for p, i in active.items() if i == 0)
    assert not set(victim_parts) & {int(p) for p in survivor.status()["standby"]}  # (no copy of them)
    victim.kill()
    produce_workload(bs, topic, WorkloadSpec(records=1500, keys=800, tombstone_ratio=0.05, seed=62))
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)

    def taken_over():
        st = survivor.status()
        if not st or len(st["active"]) != partitions:
            return None
        return st if all(st["active"][str(p)] == ends[p] for p in range(partitions)) else None
    st = wait_for(taken_over, 120, "the survivor holding every partition at its end")
    restored = {int(p): n for p, n in st["restored_from_changelog"].items()}
    for p in victim_parts:
        # Its copy came from the changelog, not a rebuild from the source.
        assert restored.get(p, 0) > 0, (p, restored, survivor.output())
    assert survivor.terminate() == 0, survivor.output()
    expected = {}
    for records in truth.values():
        expected.update(table_of(records))
    with ShardedStore(survivor.db, None, read_only=True) as store:
        assert dict(store.scan()) == expected
        assert store.offsets() == ends
