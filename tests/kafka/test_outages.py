"""A load whose servers or topic are missing, against the real embedded
broker: a batch load (--until-caught-up) that cannot start exits 1 within
its --startup-timeout with one line naming the topic or the servers, and
creates no store (a store that was there stays as it was); a long-running
load whose broker stops and comes back empty logs the outage as a few
lines, one with the count of what it did not repeat, and loads again once
the topic is published again. Log lines are counted, not just looked for."""

from __future__ import annotations

import collections
import logging
import os
import re
import subprocess
import sys
import threading
import time

import pytest

import lsmkv
from lsmkv.base.errors import OptionError
from lsmkv.kafka import (Loader, LoaderSettings, ServersUnreachableError, TopicNotFoundError, WorkloadSpec,
                         expected_table, stored_offsets)
from lsmkv.kafka.tools.broker import free_port
from lsmkv.kafka.tools.producer import produce_workload

pytestmark = pytest.mark.kafka


def _load(bootstrap: str, topic: str, db: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bootstrap,
                           "--topic", topic, "--group", "g", "--db", db, *extra],
                          capture_output=True, text=True, timeout=120)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_batch_load_of_a_missing_topic_exits_with_one_line_and_creates_no_store(broker, name, tmp_path):
    near = name()
    produce_workload(broker.bootstrap_servers, near, WorkloadSpec(records=10, keys=10), partitions=1)
    db = str(tmp_path / "store")
    done = _load(broker.bootstrap_servers, near + "x", db, "--until-caught-up", "--startup-timeout", "2")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"lsmkv kafka: error: topic '{near}x' does not exist on {broker.bootstrap_servers} (waited 2 s; "
        f"'{near}x': did you mean '{near}'?)"]
    assert done.stdout == ""
    assert not os.path.exists(db)


@pytest.mark.slow
def test_a_batch_load_against_unreachable_servers_exits_with_one_line_and_creates_no_store(tmp_path):
    servers = f"127.0.0.1:{free_port()}"   # nothing listens there
    db = str(tmp_path / "store")
    done = _load(servers, "orders", db, "--until-caught-up", "--startup-timeout", "3")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"lsmkv kafka: error: the Kafka servers {servers} did not answer within 3 s (")
    assert "Connection refused" in line
    assert not os.path.exists(db)


def test_a_store_that_was_there_stays_as_it_was(tmp_path):
    db = str(tmp_path / "store")
    with lsmkv.open(db) as store:
        store.put(b"k", b"v", sync=True)
    before = sorted(os.listdir(db))
    done = _load(f"127.0.0.1:{free_port()}", "orders", db, "--until-caught-up", "--startup-timeout", "1")
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert sorted(os.listdir(db)) == before
    with lsmkv.open(db, read_only=True) as store:
        assert dict(store.scan()) == {b"k": b"v"}


def test_the_library_raises_the_start_up_errors_before_creating_anything(broker, name, tmp_path):
    missing, path = name(), tmp_path / "store"
    settings = LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=[missing], group="g",
                              until_caught_up=True, startup_timeout=1)
    with pytest.raises(TopicNotFoundError) as caught:
        Loader(settings, path)
    assert caught.value.topics == [missing] and caught.value.servers == broker.bootstrap_servers
    servers = f"127.0.0.1:{free_port()}"
    settings = LoaderSettings(bootstrap_servers=servers, topics=[missing], group="g", startup_timeout=1)
    with pytest.raises(ServersUnreachableError) as caught:
        Loader(settings, path, partitioned=True)
    assert caught.value.servers == servers
    assert not path.exists()
    # The default: a batch load checks (20 s), a long-running one waits as it runs.
    assert LoaderSettings(bootstrap_servers=servers, topics=["t"], group="g", until_caught_up=True).startup_wait == 20
    assert LoaderSettings(bootstrap_servers=servers, topics=["t"], group="g").startup_wait is None
    with pytest.raises(OptionError, match="startup_timeout must be a number of seconds"):
        LoaderSettings(bootstrap_servers=servers, topics=["t"], group="g", startup_timeout=0)


class _Lines(logging.Handler):
    """Every log line of lsmkv.kafka at WARNING and above, in order."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.slow
def test_a_long_running_load_logs_an_outage_once_with_a_count_and_loads_again(own_broker, name, tmp_path,
                                                                             ground_truth, partition_ends):
    topic, path = name(), str(tmp_path / "store")
    first = WorkloadSpec(records=5000, keys=500, tombstone_ratio=0.05, seed=41)
    then = WorkloadSpec(records=2000, keys=500, seed=42)
    produce_workload(own_broker.bootstrap_servers, topic, first, partitions=2)
    settings = LoaderSettings(bootstrap_servers=own_broker.bootstrap_servers, topics=[topic], group=name("g"),
                              commit_interval=1)
    lines = _Lines()
    kafka_log = logging.getLogger("lsmkv.kafka")
    kafka_log.addHandler(lines)
    loader = Loader(settings, path)
    thread = threading.Thread(target=loader.run)
    thread.start()
    try:
        _wait(lambda: loader.metrics.stored == first.records, 60, "the first records stored")
        before_outage = len(lines.lines)
        own_broker.stop()
        # Down past the session timeout: the group takes the partitions away.
        _wait(lambda: loader.metrics.lost > 0, 60, "the partitions lost")
        rebalances = loader.metrics.rebalances
        own_broker.start()   # the same port, empty: no topic, no group
        # The loader rejoins its group while its topic is missing, and is
        # assigned nothing ...
        _wait(lambda: loader.metrics.rebalances > rebalances, 60, "the loader back in its group")
        # ... then the topic is published again (one producer, keyed: every
        # record lands at the offset it had), and more records after it.
        produce_workload(own_broker.bootstrap_servers, topic, first, partitions=2)
        produce_workload(own_broker.bootstrap_servers, topic, then, partitions=2)
        _wait(lambda: loader.metrics.stored == first.records + then.records, 60, "the new records stored")
    finally:
        loader.stop()
        thread.join(60)
        kafka_log.removeHandler(lines)
    assert not thread.is_alive()
    with lsmkv.open(path, read_only=True) as db:
        assert dict(db.scan()) == {**expected_table(first), **expected_table(then)}
        offsets = {p: o for (t, p), o in stored_offsets(db).items() if t == topic}
    assert offsets == partition_ends(ground_truth(own_broker.bootstrap_servers, topic))

    outage = lines.lines[before_outage:]
    shapes = collections.Counter(re.sub(r"\d+", "#", line) for line in outage)
    assert max(shapes.values()) == 1, shapes   # no line twice, whatever its numbers
    refused = [line for line in outage if "Connection refused" in line]
    assert 1 <= len(refused) <= 4, outage   # the first of each kind, and its count
    counts = [int(m.group(1).replace(",", "")) for line in refused
              if (m := re.match(r"loader: ([\d,]+) more like this over", line))]
    assert counts and max(counts) >= 10, outage   # the rest were counted, not logged
    assert len(outage) <= 15, outage
