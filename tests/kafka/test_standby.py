"""Standby replicas (issue 15, stage 4, the part librdkafka's assignor
allows): placement never puts a copy on the owner and spreads the copies;
two `--serve --standby-replicas 1` instances keep warm copies of each
other's partitions; one is SIGKILLed mid-load: while its session has not
timed out, lookups of its keys are answered by the standby (marked
stale), and the survivor takes its partitions over from the standby's
offset, replaying at most the standby's lag, ending with exactly the
topic's table."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

import lsmkv
from lsmkv.kafka import StoreClient, WorkloadSpec, stored_offset
from lsmkv.kafka.scaleout.members import Member
from lsmkv.kafka.scaleout.standby import place_standbys
from lsmkv.kafka.tools.producer import produce_workload

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instances import Instance, Reader, check_answers, table_of, wait_for  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.crash, pytest.mark.slow]


def _member(url, active, position, t=100.0):
    return Member(url=url, topic="t", partitions=6, active={p: 0 for p in active}, restoring=[], position=position,
                  time=t)


def test_standbys_never_sit_on_the_owner_and_spread_evenly():
    members = [_member("http://a", [0, 3], 1), _member("http://b", [1, 4], 2), _member("http://c", [2, 5], 3)]
    one = place_standbys(members, 1)
    assert one == {0: ["http://b"], 3: ["http://b"], 1: ["http://c"], 4: ["http://c"], 2: ["http://a"],
                   5: ["http://a"]}
    two = place_standbys(members, 2)
    for p, urls in two.items():
        owner = next(m.url for m in members if p in m.active)
        assert owner not in urls and len(set(urls)) == 2
    assert place_standbys(members, 5)[0] == ["http://b", "http://c"]     # at most the other instances
    assert place_standbys(members, 0) == {}
    # An instance silent for long is taken for dead: no copies go there.
    stale = [_member("http://a", [0], 1, t=10.0), _member("http://b", [1], 2), _member("http://c", [2], 3)]
    assert place_standbys(stale, 1) == {0: ["http://b"], 1: ["http://c"], 2: ["http://b"]}
    # A newer claim of a partition wins over an older one.
    moved = [_member("http://a", [0], 1), _member("http://b", [0], 2), _member("http://c", [], 3)]
    assert place_standbys(moved, 1) == {0: ["http://c"]}


def test_with_one_standby_the_takeover_replays_at_most_the_standbys_lag(broker, name, tmp_path, instances,
                                                                         ground_truth, partition_ends):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    partitions = 4
    first = WorkloadSpec(records=4000, keys=400, tombstone_ratio=0.05, seed=31)
    produce_workload(bs, topic, first, partitions=partitions)
    ends0 = partition_ends(ground_truth(bs, topic))
    for i in range(2):
        instances.append(Instance(bs, topic, group, str(tmp_path / f"i{i}"), extra=("--standby-replicas", "1")))

    def warm():
        sts = [inst.status() for inst in instances]
        if not all(sts):
            return None
        active = {int(p): i for i, st in enumerate(sts) for p in st["active"]}
        copies = {int(p): (i, o) for i, st in enumerate(sts) for p, o in st["standby"].items()}
        if len(active) != partitions or len(set(active.values())) != 2 or set(copies) != set(active):
            return None
        if any(copies[p][0] == active[p] or copies[p][1] != ends0[p] for p in copies):
            return None
        return active
    active = wait_for(warm, 90, "both instances active on half and warm standbys of the other half")
    victim, survivor = instances[1], instances[0]
    victim_parts = sorted(p for p, i in active.items() if i == 1)

    reader = Reader(bs, group, [first.key(i) for i in range(first.keys)])
    reader.start()
    more = WorkloadSpec(records=4000, keys=400, tombstone_ratio=0.05, seed=32)
    producer = threading.Thread(target=produce_workload, args=(bs, topic, more), kwargs={"rate": 2000.0})
    producer.start()
    time.sleep(1.0)
    at_kill = {int(p): o for p, o in survivor.status()["standby"].items()}
    victim.kill()
    killed_at = time.monotonic()
    producer.join()
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)

    def taken_over():
        st = survivor.status()
        return st if st and len(st["active"]) == partitions and not st["restoring"] and all(
            st["active"][str(p)] == ends[p] for p in range(partitions)) else None
    final = wait_for(taken_over, 120, "the survivor holding every partition at its end")
    failover = time.monotonic() - killed_at
    time.sleep(0.5)
    reader.stop.set()
    reader.join()

    replayed = {}
    for p in victim_parts:
        start = final["starts"][str(p)]
        assert start is not None and start >= at_kill[p], (p, start, at_kill)   # resumed from the warm copy
        replayed[p] = ends[p] - start
        assert replayed[p] <= ends[p] - at_kill[p]        # at most the standby's lag at the kill
    n, stale = check_answers(reader.answers, truth)
    by_standby = [a for a in reader.answers if a.role == "standby"]
    assert not reader.errors, reader.errors[:3]
    assert by_standby and all(a.partition in victim_parts and a.url == survivor.url for a in by_standby)
    print(f"\nfailover with one standby: {failover:.1f} s; replayed {replayed} records (standby lag at the kill "
          f"{ {p: ends[p] - at_kill[p] for p in victim_parts} } of ends {ends}); {n} lookups, "
          f"{len(by_standby)} answered by the standby")

    expected: dict[bytes, bytes] = {}
    for p in range(partitions):
        expected.update(table_of(truth[p]))
    assert dict(StoreClient(bs, group).scan()) == expected
    assert survivor.terminate() == 0, survivor.output()
    for p in range(partitions):
        with lsmkv.open(os.path.join(survivor.db, f"{topic}-{p}"), read_only=True) as db:
            assert dict(db.scan()) == table_of(truth[p]) and stored_offset(db, topic, p) == ends[p]
