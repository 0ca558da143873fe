"""Scale-out with real processes (issue 15, stages 2-3): `lsmkv kafka load
--serve` instances of one group share a topic's partitions, each keeping
one shard per partition it loads, serving get/scan/status over HTTP and
announcing itself on the <group>-members topic; StoreClient and `lsmkv
kafka query` find the owners there. Three instances load while records
keep arriving; one is SIGKILLed mid-load; the survivors take its
partitions over (rebuilding them from the topic) and end with exactly the
topic's table; queries throughout return values the key really had, never
go back in time unless marked stale (restoring), and a restarted instance
resumes the shards it kept from their own offsets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

import lsmkv
from lsmkv.kafka import StoreClient, WorkloadSpec, stored_offset
from lsmkv.kafka.tools.producer import produce_workload

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instances import (ROOT, Instance, Reader, check_answers, describe_instances, held, table_of,  # noqa: E402
                       wait_for)

pytestmark = [pytest.mark.kafka, pytest.mark.crash, pytest.mark.slow]

def test_three_instances_one_sigkilled_the_survivors_take_over_exactly(broker, name, tmp_path, instances,
                                                                       ground_truth, partition_ends):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    partitions = 6
    first = WorkloadSpec(records=6000, keys=600, tombstone_ratio=0.05, seed=21)
    produce_workload(bs, topic, first, partitions=partitions)
    for i in range(3):
        instances.append(Instance(bs, topic, group, str(tmp_path / f"i{i}")))
    three = wait_for(lambda: (lambda h: h if len(h) == partitions and len({v[0] for v in h.values()}) == 3
                              else None)(held(instances)), 90, "three instances sharing the partitions",
                     describe=lambda: describe_instances(instances))
    client = StoreClient(bs, group, timeout=30)
    # Announcements are eventually visible: an instance announces an
    # assignment within 0.2 s of it, and a reader sees the members topic up
    # to the end it observes (on the embedded broker the watermark can lag
    # the real end: docs/kafka.md), so wait for all three to appear.
    urls = {i.url for i in instances}
    wait_for(lambda: {o.url for o in client.owners(refresh=True).values()} == urls or None, 30,
             "every instance's announcement visible to a client")

    reader = Reader(bs, group, [first.key(i) for i in range(first.keys)])
    reader.start()
    more = WorkloadSpec(records=6000, keys=600, tombstone_ratio=0.05, seed=22)
    producer = threading.Thread(target=produce_workload, args=(bs, topic, more), kwargs={"rate": 2000.0})
    producer.start()
    time.sleep(1.0)                                  # mid-load: records keep arriving
    victim = instances[1]
    victim_parts = sorted(p for p, v in three.items() if v[0] is victim)
    victim.kill()
    killed_at = time.monotonic()
    producer.join()
    survivors = [instances[0], instances[2]]
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)

    def caught_up():
        h = held(survivors)
        return h if len(h) == partitions and all(h[p][1] == ends[p] and not h[p][2] for p in h) else None
    final = wait_for(caught_up, 120, "the survivors holding every partition at its end")
    failover = time.monotonic() - killed_at

    expected: dict[bytes, bytes] = {}
    for p in range(partitions):
        expected.update(table_of(truth[p]))
    assert dict(client.scan()) == expected and list(client.scan()) == sorted(expected.items())
    print(f"\nfailover (kill to the survivors caught up): {failover:.1f} s; the victim held {victim_parts}")

    # The CLI finds the owner through the group, like StoreClient.
    key = next(k for k in sorted(expected))
    out = subprocess.run([sys.executable, "-m", "lsmkv.cli", "kafka", "query", "--bootstrap-servers", bs,
                          "--group", group, key.hex(), "--hex", "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert bytes.fromhex(answer["value"]) == expected[key]
    assert answer["url"] in {i.url for i in survivors} and answer["role"] == "active" and answer["behind"] == 0

    # The killed instance comes back with its shards: what it kept resumes
    # from the shard's own offset; what it never had is rebuilt from the topic.
    kept = {}
    for p in victim_parts:
        with lsmkv.open(os.path.join(victim.db, f"{topic}-{p}"), read_only=True) as db:
            kept[p] = stored_offset(db, topic, p)
    back = Instance(bs, topic, group, victim.db, port=victim.port)
    instances.append(back)
    survivors.append(back)
    got = wait_for(lambda: (lambda st: st if st and st["active"] and not st["restoring"] and all(
        st["active"][p] == ends[int(p)] for p in st["active"]) else None)(back.status()), 90,
        "the restarted instance holding partitions, caught up")
    for p, start in got["starts"].items():
        assert start == kept.get(int(p)), (p, start, kept)
    print(f"restarted: kept {kept}, assigned {got['starts']} (start offsets; None: rebuilt)")
    wait_for(lambda: (lambda h: len(h) == partitions and all(h[p][1] == ends[p] for p in h))(held(survivors)), 60,
             "every partition held at its end after the restart")
    assert dict(client.scan()) == expected
    reader.stop.set()                                # it ran through the kill, the takeover and the restart
    reader.join()
    n, stale = check_answers(reader.answers, truth)
    assert n > 50 and not reader.errors, reader.errors[:3]
    print(f"{n} lookups meanwhile, {stale} marked stale")

    for inst in survivors:
        assert inst.terminate() == 0, inst.output()
    for inst in survivors:                           # every shard: an ordinary store holding exactly the
        for shard in sorted(os.listdir(inst.db)):    # records below its own offset
            if not shard.startswith(topic + "-"):
                continue
            p = int(shard.rpartition("-")[2])
            with lsmkv.open(os.path.join(inst.db, shard), read_only=True) as db:
                offset = stored_offset(db, topic, p) or 0
                assert dict(db.scan()) == table_of([r for r in truth[p] if r[0] < offset])
                if p in final and final[p][0] is inst:
                    assert offset == ends[p]
