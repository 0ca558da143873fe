"""The loader against the real embedded broker: both engines end with
exactly the topic's table and offsets; --until-caught-up never stops
early (and a loader that trusted the watermark would have); per-key order
holds under parallelism in every state a reader sees; poison and keyless
records go to the dead-letter topic while the rest proceeds; backpressure
bounds the window; two loaders sharing a store hand partitions over
without ever processing one at the same time; a stop drains and commits
and a restart finishes; and the CLI does the same from the terminal."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

import pytest

import btree
import lsmkv
from lsmkv.cli import main as lsmkv_main
from lsmkv.kafka import Loader, LoaderSettings, WorkloadSpec, expected_table, stored_offsets
from lsmkv.kafka.tools.producer import produce_workload, producer_config
from lsmkv.kafka.tools.workload import parse_value

pytestmark = pytest.mark.kafka

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import processors  # noqa: E402  (tests/kafka/processors.py)

OPENERS = {"lsm": lsmkv.open, "btree": btree.open}


def settings(broker, topic, group, **kw) -> LoaderSettings:
    return LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=[topic], group=group, **kw)


def store_table(path: str, engine: str = "lsm") -> dict[bytes, bytes]:
    with OPENERS[engine](path, read_only=True) as db:
        return dict(db.scan())


def offsets_of(db_or_path, topic: str, engine: str = "lsm") -> dict[int, int]:
    if isinstance(db_or_path, str):
        with OPENERS[engine](db_or_path, read_only=True) as db:
            return {p: o for (t, p), o in stored_offsets(db).items() if t == topic}
    return {p: o for (t, p), o in stored_offsets(db_or_path).items() if t == topic}


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["lsm", "btree"])
def test_a_load_ends_with_exactly_the_topics_table_and_offsets(broker, name, tmp_path, engine, ground_truth,
                                                               partition_ends):
    topic = name()
    spec = WorkloadSpec(records=20_000, keys=2000, tombstone_ratio=0.1, seed=11)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=4)
    path = str(tmp_path / "store")
    summary = Loader(settings(broker, topic, name("g"), until_caught_up=True), path, engine=engine).run()
    assert summary.reason == "caught up" and summary.records_stored == 20_000
    assert store_table(path, engine) == expected_table(spec)
    truth = ground_truth(broker.bootstrap_servers, topic)
    assert offsets_of(path, topic, engine) == partition_ends(truth)
    with OPENERS[engine](path, read_only=True) as db:  # the table and nothing else; offsets only in metadata
        assert all(not k.startswith(b"kafka:") for k, _ in db.scan())
        assert db.get_meta(f"kafka:{topic}:0") == b"%d" % partition_ends(truth)[0]
    assert [p["first_fetched"] for p in summary.metrics["partitions"]] == [0, 0, 0, 0]


@pytest.mark.slow
def test_until_caught_up_does_not_stop_at_a_lagging_watermark(broker, name, tmp_path, ground_truth, partition_ends):
    """The broker's watermark lags the end by most of a record batch. A
    loader that took it as the end stops early (the first run, which
    trusts it, shows the check catches that); the loader does not."""
    topic = name()
    spec = WorkloadSpec(records=12_000, keys=5000, seed=2)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=3, linger_ms=300)
    truth = ground_truth(broker.bootstrap_servers, topic)
    path = str(tmp_path / "store")
    # A loader slow enough (and with a window small enough) to reach a low
    # target long before it has fetched everything.
    early = Loader(settings(broker, topic, name("g"), until_caught_up=True, processor=processors.slow,
                            concurrency=1, max_pending=100, poll_records=50), path, trust_watermark=True).run()
    assert early.reason == "caught up"
    stopped_at = offsets_of(path, topic)
    assert sum(stopped_at.values()) < spec.records  # stopped early ...
    assert store_table(path) != expected_table(spec)  # ... and the table shows it
    summary = Loader(settings(broker, topic, name("g"), until_caught_up=True), path).run()
    assert summary.reason == "caught up"
    assert offsets_of(path, topic) == partition_ends(truth)
    assert store_table(path) == expected_table(spec)
    # The second run resumed where the store ended: nothing fetched twice.
    for p in summary.metrics["partitions"]:
        if p["first_fetched"] is not None:
            assert p["first_fetched"] == stopped_at[p["partition"]] == p["start"]


@pytest.mark.slow
def test_per_key_order_holds_under_parallelism_in_every_observed_state(broker, name, tmp_path):
    topic = name()
    spec = WorkloadSpec(records=30_000, keys=300, distribution="zipfian", value_size=40, seed=4)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=4)
    stream_values = {}
    from lsmkv.kafka.tools.workload import generate
    for key, value in generate(spec):
        stream_values[(key, parse_value(value)[1])] = value
    unit_threads: set[str] = set()

    def processor(record):
        unit_threads.add(threading.current_thread().name)
        time.sleep(random.random() * 0.002)
        return record.key, record.value

    db = lsmkv.open(str(tmp_path / "store"))
    loader = Loader(settings(broker, topic, name("g"), until_caught_up=True, concurrency=8, processor=processor), db)
    seen: dict[bytes, int] = {}
    problems: list[str] = []
    samples = []

    def read_a_state() -> None:
        with db.snapshot() as snap:
            state = dict(snap.scan())
        samples.append(len(state))
        for key, value in state.items():
            _, counter = parse_value(value)
            if stream_values.get((key, counter)) != value:
                problems.append(f"{key!r} holds a value the stream never had: {value[:30]!r}")
            if counter < seen.get(key, 0):
                problems.append(f"{key!r} went back from counter {seen[key]} to {counter}")
            seen[key] = counter

    summary = _run_watching(loader, read_a_state, 0.01)
    try:
        assert not problems, problems[:5]
        assert len(samples) > 5 and len({s for s in samples}) > 2  # the reader saw the load in progress
        assert dict(db.scan()) == expected_table(spec)
        assert summary.reason == "caught up" and len(unit_threads) >= 8
    finally:
        db.close()


def _produce_records(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    from confluent_kafka import Producer

    from lsmkv.kafka.admin import ensure_topic
    ensure_topic(bootstrap, topic, 3)
    errors = []
    p = Producer({**producer_config(bootstrap), "on_delivery": lambda e, m: errors.append(e) if e else None})
    for key, value in records:
        p.produce(topic, value, key)
    assert p.flush(30) == 0 and not errors


@pytest.mark.slow
def test_poison_and_keyless_records_go_to_the_dead_letter_topic_and_the_rest_proceeds(broker, name, tmp_path,
                                                                                      ground_truth, partition_ends):
    topic, dlq = name(), name("dlq")
    records: list[tuple[bytes | None, bytes | None]] = []
    expected: dict[bytes, bytes] = {}
    poison, keyless = [], []
    for i in range(4000):
        key = b"k%03d" % (i % 150)
        if i % 401 == 7:
            records.append((None, b"keyless %d" % i))
            keyless.append(b"keyless %d" % i)
        elif i % 333 == 5:
            records.append((key, b"POISON %d" % i))
            poison.append(b"POISON %d" % i)
        else:
            records.append((key, b"v%d" % i))
            expected[key] = b"v%d" % i
    _produce_records(broker.bootstrap_servers, topic, records)
    path = str(tmp_path / "store")
    s = settings(broker, topic, name("g"), until_caught_up=True, processor=processors.poison, max_retries=2,
                 retry_backoff=0.01, retry_backoff_max=0.02, dlq_topic=dlq, concurrency=3)
    summary = Loader(s, path).run()
    m = summary.metrics
    assert store_table(path) == expected
    truth = ground_truth(broker.bootstrap_servers, topic)
    assert offsets_of(path, topic) == partition_ends(truth)  # progress went past every dead letter
    assert m["dead_letters"] == len(poison) + len(keyless) and m["retries"] == 2 * len(poison)
    dead = [rec for recs in ground_truth(broker.bootstrap_servers, dlq).values() for rec in recs]
    assert sorted(v for _, _, v in dead) == sorted(poison + keyless)
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": name("h"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(dlq, p, 0) for p in range(len(ground_truth(broker.bootstrap_servers, dlq)))])
    got = 0
    deadline = time.monotonic() + 20
    while got < len(dead) and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.2):
            if msg.error():
                continue
            got += 1
            headers = dict(msg.headers())
            assert headers["lsmkv.dlq.topic"] == topic.encode()
            original = [r for r in truth[int(headers["lsmkv.dlq.partition"])]
                        if r[0] == int(headers["lsmkv.dlq.offset"])]
            assert original and original[0][2] == msg.value()
            if msg.value().startswith(b"POISON"):
                assert b"ValueError: poison record" in headers["lsmkv.dlq.reason"]
                assert headers["lsmkv.dlq.attempts"] == b"3"
            else:
                assert headers["lsmkv.dlq.reason"] == b"record has no key" and msg.key() is None
    consumer.close()
    assert got == len(dead)


@pytest.mark.slow
def test_backpressure_pauses_a_partition_and_bounds_its_window(broker, name, tmp_path):
    topic = name()
    spec = WorkloadSpec(records=4000, keys=500, seed=6)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=2)
    s = settings(broker, topic, name("g"), until_caught_up=True, max_pending=300, poll_records=100,
                 processor=processors.slow, concurrency=4)
    loader = Loader(s, str(tmp_path / "store"))
    summary = loader.run()
    assert summary.metrics["pauses"] >= 2
    # The window's high-water mark: the capacity plus at most one poll's records.
    # (The ``pending`` gauge, refreshed every 0.5 s, can miss a window that
    # fills and drains within one refresh.)
    peaks = [p["peak_pending"] for p in summary.metrics["partitions"]]
    assert max(peaks) >= 300 and all(peak <= 300 + 100 for peak in peaks), peaks
    assert store_table(str(tmp_path / "store")) == expected_table(spec)


@pytest.mark.slow
def test_two_loaders_share_a_store_and_never_process_a_partition_at_once(broker, name, tmp_path, ground_truth,
                                                                         partition_ends):
    topic, group = name(), name("g")
    spec = WorkloadSpec(records=60_000, keys=3000, tombstone_ratio=0.05, seed=9)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=8)
    truth = ground_truth(broker.bootstrap_servers, topic)
    lock = threading.Lock()
    work: list[tuple[str, int, float, float]] = []

    # Loader a is slow (20 ms a record, about 800 records/s over 8 partitions x 2
    # units), so the topic is far from done when b joins: the broker's
    # cooperative rebalance hands b its partitions about 11 s after it
    # subscribes (measured: two rounds of about 3 s each plus the sync). b is
    # fast, so it finishes everything once a has left.
    def processor_of(who: str, delay: float):
        def process(record):
            start = time.monotonic()
            time.sleep(delay)
            with lock:
                work.append((who, record.partition, start, time.monotonic()))
            return record.key, record.value
        return process

    db = lsmkv.open(str(tmp_path / "store"))
    a = Loader(settings(broker, topic, group, processor=processor_of("a", 0.02), concurrency=2, revoke_timeout=20,
                        max_pending=400, poll_records=200),
               db, name="a")
    b = Loader(settings(broker, topic, group, processor=processor_of("b", 0.001), concurrency=2, revoke_timeout=20),
               db, name="b")
    results = {}
    ta = threading.Thread(target=lambda: results.setdefault("a", a.run()))
    tb = threading.Thread(target=lambda: results.setdefault("b", b.run()))
    ta.start()
    try:
        _wait(lambda: a.metrics.stored >= 4000, 60, "loader a to store 4000 records")
        tb.start()
        _wait(lambda: b.metrics.stored >= 2000, 60, "loader b to take partitions and store 2000 records")
        assert a.metrics.revoked >= 1  # partitions moved from a to b
        a.stop()
        ta.join(60)
        ends = partition_ends(truth)
        _wait(lambda: offsets_of(db, topic) == ends, 120, "loader b to reach the end of every partition")
        b.stop()
        tb.join(60)
    finally:
        a.stop()
        b.stop()
        ta.join(60)
        if tb.is_alive() or tb.ident is not None:
            tb.join(60)
    try:
        assert dict(db.scan()) == expected_table(spec)
        assert {w for w, _, _, _ in work} == {"a", "b"}
        assert b.metrics.assigned >= 8 - a.metrics.assigned + 1  # b held partitions while a ran, then all
        for partition in range(8):
            spans = {who: [(s, e) for w, p, s, e in work if w == who and p == partition] for who in ("a", "b")}
            for sa, ea in spans["a"]:
                for sb, eb in spans["b"]:
                    assert ea <= sb or eb <= sa, f"partition {partition} processed by both loaders at once"
            for who, loader in (("a", a), ("b", b)):
                owned = _owned_intervals(loader.ownership, topic, partition)
                for s, e in spans[who]:
                    assert any(lo <= s and e <= hi for lo, hi in owned), \
                        f"loader {who} processed partition {partition} while not owning it"
    finally:
        db.close()


def _owned_intervals(ownership, topic, partition) -> list[tuple[float, float]]:
    out, start = [], None
    for t, event, top, part in ownership:
        if top != topic or part != partition:
            continue
        if event == "assign":
            start = t
        elif start is not None:
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, float("inf")))
    return out


def _run_watching(loader, look, interval: float):
    """Run ``loader`` while another thread calls ``look()`` every
    ``interval`` seconds; returns the loader's summary."""
    done = threading.Event()

    def watcher() -> None:
        while not done.is_set():
            look()
            time.sleep(interval)

    t = threading.Thread(target=watcher)
    t.start()
    try:
        return loader.run()
    finally:
        done.set()
        t.join()


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_stop_drains_and_commits_and_a_restart_finishes_where_the_store_ends(broker, name, tmp_path, ground_truth,
                                                                            table_below, partition_ends):
    from confluent_kafka import Consumer, TopicPartition
    topic, group = name(), name("g")
    spec = WorkloadSpec(records=20_000, keys=1000, seed=12)
    produce_workload(broker.bootstrap_servers, topic, spec, partitions=4)
    truth = ground_truth(broker.bootstrap_servers, topic)
    path = str(tmp_path / "store")
    loader = Loader(settings(broker, topic, group, processor=processors.slow, concurrency=2, max_pending=500,
                             poll_records=200), path)
    t = threading.Thread(target=loader.run)
    t.start()
    _wait(lambda: loader.metrics.stored >= 3000, 60, "3000 records stored")
    loader.stop()
    t.join(60)
    assert not t.is_alive()
    stored = offsets_of(path, topic)
    assert 3000 <= sum(stored.values()) < spec.records
    assert store_table(path) == table_below(truth, stored)  # exactly what the offsets say, nothing more
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    committed = consumer.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    consumer.close()
    assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == stored  # Kafka saw the progress
    summary = Loader(settings(broker, topic, group, until_caught_up=True), path).run()
    assert store_table(path) == expected_table(spec)
    assert offsets_of(path, topic) == partition_ends(truth)
    assert all(p["first_fetched"] in (None, p["start"]) for p in summary.metrics["partitions"])


@pytest.mark.slow
def test_the_cli_produces_loads_and_shows_the_offsets(broker, name, tmp_path, capsys, partition_ends, ground_truth):
    topic = name()
    path = str(tmp_path / "store")
    from lsmkv.kafka.tools.cli import main
    assert main(["produce", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--records", "5000",
                 "--keys", "400", "--partitions", "2", "--tombstone-ratio", "0.1", "--seed", "3", "--json"]) == 0
    produced = json.loads(capsys.readouterr().out)
    assert produced["delivered"] == 5000 and produced["errors"] == 0
    assert lsmkv_main(["kafka", "load", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                       "--group", name("g"), "--engine", "btree", "--db", path, "--until-caught-up", "--json",
                       "--processor", "processors:slow", "--concurrency", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["reason"] == "caught up" and summary["records_stored"] == 5000
    spec = WorkloadSpec(records=5000, keys=400, tombstone_ratio=0.1, seed=3)
    assert store_table(path, "btree") == expected_table(spec)
    assert lsmkv_main(["stats", path]) == 0
    out = capsys.readouterr().out
    ends = partition_ends(ground_truth(broker.bootstrap_servers, topic))
    assert f"'kafka:{topic}:0': '{ends[0]}'" in out and f"'kafka:{topic}:1': '{ends[1]}'" in out
    assert main(["load", "--topic", topic, "--group", "g", "--db", path, "--processor", "nocolon"]) == 1
    assert "processor must be given as module:function" in capsys.readouterr().err
    assert main(["load", "--topic", topic, "--group", "g", "--db", path, "-X", "novalue"]) == 1
    assert "is not of the form name=value" in capsys.readouterr().err
