"""The loader through failures, against the real embedded broker: the
broker stops answering mid-load and comes back; the broker is stopped and
a new one started on the same port (the embedded broker keeps topics in
memory, so the new one is empty until the same seeded stream is published
again, the way a topic is restored from its source); and the loader
process is killed with SIGKILL at random moments and restarted. Every run
ends with exactly the topic's table and offsets."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback

import pytest

import btree
import lsmkv
from lsmkv.kafka import Loader, LoaderSettings, WorkloadSpec, expected_table, stored_offsets
from lsmkv.kafka.tools.producer import produce_workload

pytestmark = pytest.mark.kafka

HERE = os.path.dirname(os.path.abspath(__file__))
OPENERS = {"lsm": lsmkv.open, "btree": btree.open}


def _table_and_offsets(path: str, topic: str, engine: str = "lsm"):
    with OPENERS[engine](path, read_only=True) as db:
        return dict(db.scan()), {p: o for (t, p), o in stored_offsets(db).items() if t == topic}


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.05)


def _hung_loader_report(loader, thread) -> str:
    """What a loader still running past its deadline was doing: its
    metrics, the partitions it holds, its last ownership changes and its
    thread's stack (a failure message, so that a hang seen once can be
    read afterwards)."""
    frame = sys._current_frames().get(thread.ident)
    stack = "".join(traceback.format_stack(frame)) if frame is not None else "(the thread has no frame)"
    return (f"the loader still running: metrics {loader.snapshot()}; held {loader.held()}; "
            f"last ownership changes {loader.ownership[-10:]}; its stack:\n{stack}")


def _slowly(record):
    time.sleep(0.0005)
    return record.key, record.value


def _load_through(broker, name, tmp_path, ground_truth, partition_ends, seed: int, disturb) -> dict:
    """Produce a seeded stream, load it with --until-caught-up in a thread,
    call ``disturb(loader, thread, topic, spec)`` once 2000 records are stored, and check
    that the load still ends caught up with exactly the topic's table and
    offsets. Returns what ``disturb`` returned."""
    topic, path = name(), str(tmp_path / "store")
    spec = WorkloadSpec(records=20_000, keys=2000, tombstone_ratio=0.05, seed=seed)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=2)
    ends = partition_ends(ground_truth(broker.bootstrap_servers, topic))
    settings = LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=[topic], group=name("g"),
                              until_caught_up=True, processor=_slowly, concurrency=2,
                              max_pending=300, poll_records=100)  # a small window: it cannot run ahead
    loader = Loader(settings, path)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("summary", loader.run()))
    thread.start()
    try:
        _wait(lambda: loader.metrics.stored >= 2000, 60, "2000 records stored")
        seen = disturb(loader, thread, topic, spec)
        thread.join(180)
        assert not thread.is_alive(), _hung_loader_report(loader, thread)
    finally:
        broker.resume()
        loader.stop()
        thread.join(30)
    assert result["summary"].reason == "caught up"
    table, offsets = _table_and_offsets(path, topic)
    assert table == expected_table(spec)
    assert offsets == ends
    return {**seen, "records": spec.records}


@pytest.mark.slow
def test_a_broker_that_stops_answering_mid_load(own_broker, name, tmp_path, ground_truth, partition_ends):
    def freeze(loader, thread, topic, spec):
        own_broker.pause()  # frozen: connections stay open, nothing answers
        time.sleep(8)  # longer than the session timeout (6 s)
        assert thread.is_alive()  # the loader waits for the broker, it does not give up
        stored_while_down = loader.metrics.stored
        own_broker.resume()
        return {"stored_while_down": stored_while_down}

    seen = _load_through(own_broker, name, tmp_path, ground_truth, partition_ends, 31, freeze)
    assert seen["stored_while_down"] < seen["records"]


@pytest.mark.slow
def test_a_broker_restarted_mid_load_then_the_topic_restored(own_broker, name, tmp_path, ground_truth,
                                                             partition_ends):
    def restart_and_republish(loader, thread, topic, spec):
        own_broker.restart()  # a new, empty broker on the same port
        time.sleep(3)
        assert thread.is_alive()
        # Publish the same seeded stream again: one producer, keyed
        # partitioning, so every record lands at the offset it had.
        produce_workload(own_broker.bootstrap_servers, topic, spec, partitions=2)
        return {}

    _load_through(own_broker, name, tmp_path, ground_truth, partition_ends, 32, restart_and_republish)


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(OPENERS))
def test_sigkill_at_random_moments_then_a_restart_ends_with_the_exact_table(broker, name, tmp_path, engine,
                                                                          ground_truth, partition_ends, table_below):
    topic, group, path = name(), name("g"), str(tmp_path / "store")
    spec = WorkloadSpec(records=30_000, keys=3000, tombstone_ratio=0.05, seed=21)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=4)
    truth = ground_truth(broker.bootstrap_servers, topic)
    ends = partition_ends(truth)
    command = [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers",
               broker.bootstrap_servers, "--topic", topic, "--group", group, "--engine", engine, "--db", path,
               "--until-caught-up", "--quiet", "--processor", "processors:slow", "--concurrency", "4",
               "--batch-records", "256", "--commit-interval", "0.5"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    rng = random.Random(7)
    kills, progress = 0, []
    def stored_now() -> int:
        try:
            return sum(_table_and_offsets(path, topic, engine)[1].values())
        except Exception:  # noqa: BLE001 -- no store yet, or one being created
            return -1

    for _ in range(4):
        before = max(stored_now(), 0)
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Kill at a random moment after this run stored something of its own
        # (joining the group takes seconds, more on a loaded machine).
        _wait(lambda: proc.poll() is not None or stored_now() > before, 180, "the loader to store records")
        time.sleep(rng.uniform(0.0, 2.5))
        if proc.poll() is not None:
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        table, offsets = _table_and_offsets(path, topic, engine)
        # After a kill the store holds exactly what its offsets say.
        assert table == table_below(truth, offsets)
        progress.append(sum(offsets.values()))
    final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert kills >= 2 and any(0 < p < spec.records for p in progress)  # killed mid-load, not before or after
    table, offsets = _table_and_offsets(path, topic, engine)
    assert table == expected_table(spec)
    assert offsets == ends


@pytest.mark.slow
def test_sigterm_drains_stores_and_commits_then_a_restart_finishes(broker, name, tmp_path, ground_truth,
                                                                  partition_ends, table_below):
    from confluent_kafka import Consumer, TopicPartition
    topic, group, path = name(), name("g"), str(tmp_path / "store")
    spec = WorkloadSpec(records=30_000, keys=3000, tombstone_ratio=0.05, seed=23)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=2)
    truth = ground_truth(broker.bootstrap_servers, topic)
    command = [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", broker.bootstrap_servers,
               "--topic", topic, "--group", group, "--db", path, "--json", "--processor", "processors:slow",
               "--concurrency", "2", "--max-pending", "500"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6)  # joined (about 3 s) and loading
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert summary["reason"].startswith("signal SIGTERM")
    table, offsets = _table_and_offsets(path, topic)
    assert 0 < sum(offsets.values()) < spec.records  # stopped mid-load ...
    assert table == table_below(truth, offsets)  # ... holding exactly what its offsets say
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    committed = consumer.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
    consumer.close()
    assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == offsets  # Kafka saw it too
    final = subprocess.run(command[:-6] + ["--until-caught-up", "--quiet"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    table, offsets = _table_and_offsets(path, topic)
    assert table == expected_table(spec)
    assert offsets == partition_ends(truth)
