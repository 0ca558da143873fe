"""Lag-aware assignment with real processes (issue 15): `lsmkv kafka load
--serve` instances coordinate through the `<group>.assignment` group
(coordination.py), whose leader gives a partition active only to a caught
up copy.

* A fourth instance joins three that are loading while records keep
  arriving: it gets a partition active only after warming up a copy of it
  (its shard's offset when it takes over is within the acceptable lag of
  the end the leader saw), every lookup meanwhile is answered (the current
  value, or a copy's marked stale), and the four end with exactly the
  topic's table.
* With one standby among three instances (more instances than copies), a
  SIGKILLed owner's partitions go to the instances holding their standby
  copies, which resume from them (never first to the instance without a
  copy).
* `--standby-replicas` with `--processor` is refused before anything is
  created (exit 2), and so are security settings the group member (on
  kafka-python) has no equivalent for; those it has are mapped."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

import lsmkv
from lsmkv.base.errors import OptionError
from lsmkv.kafka import StoreClient, WorkloadSpec, stored_offset
from lsmkv.kafka.scaleout.group_member import kafka_python_security
from lsmkv.kafka.tools.cli import main
from lsmkv.kafka.tools.producer import produce_workload

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instances import Instance, Reader, check_answers, table_of, wait_for  # noqa: E402

ACCEPTABLE = 300


def _lag_aware(*more) -> tuple:
    return ("--acceptable-recovery-lag", str(ACCEPTABLE), "--probing-rebalance-interval", "2", *more)


def _statuses(insts) -> list:
    return [inst.status() for inst in insts]


def _expected(truth) -> dict:
    out = {}
    for records in truth.values():
        out.update(table_of(records))
    return out


@pytest.mark.kafka
@pytest.mark.crash
@pytest.mark.slow
def test_a_fourth_instance_gets_partitions_only_after_warming_up(broker, name, tmp_path, instances, ground_truth,
                                                                 partition_ends, ends_after_producing):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    partitions = 6
    first = WorkloadSpec(records=24_000, keys=2000, tombstone_ratio=0.05, seed=41)   # ~4000 a partition
    ends0 = ends_after_producing(topic, first, partitions=partitions)
    assert min(ends0.values()) > ACCEPTABLE        # a new instance without copies is not caught up
    for i in range(3):
        instances.append(Instance(bs, topic, group, str(tmp_path / f"i{i}"), extra=_lag_aware()))

    def three_loaded():
        sts = _statuses(instances)
        if not all(sts):
            return None
        active = {int(p): (i, o) for i, st in enumerate(sts) for p, o in st["active"].items()}
        ok = (len(active) == partitions and len({i for i, _ in active.values()}) == 3
              and all(o == ends0[p] for p, (_, o) in active.items()))
        return active if ok else None
    wait_for(three_loaded, 90, "three instances sharing the partitions, loaded")

    reader = Reader(bs, group, [first.key(i) for i in range(first.keys)])
    reader.start()
    more = WorkloadSpec(records=24_000, keys=2000, tombstone_ratio=0.05, seed=42)
    producer = threading.Thread(target=produce_workload, args=(bs, topic, more), kwargs={"rate": 2000.0})
    producer.start()
    time.sleep(1.0)                                  # mid-load: records keep arriving
    fourth = Instance(bs, topic, group, str(tmp_path / "i3"), extra=_lag_aware())
    instances.append(fourth)

    # Watch the fourth: what it warms up, and what it holds active, when.
    copies_seen: set[int] = set()
    took: dict[int, dict] = {}                       # partition -> the status when first seen active

    def watch():
        st = fourth.status()
        if st is None:
            return None
        plan = st.get("assignment") or {}
        copies_seen.update(int(p) for p in plan.get("warmup", []) + plan.get("standby", []))
        for p in st["active"]:
            took.setdefault(int(p), st)
        return took if took and not producer.is_alive() else None
    wait_for(watch, 120, "the fourth instance holding partitions active", every=0.1)
    producer.join()
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)

    def all_caught_up():
        watch()
        sts = _statuses(instances)
        if not all(sts):
            return None
        active = {int(p): (i, o) for i, st in enumerate(sts) for p, o in st["active"].items()}
        ok = (len(active) == partitions and all(o == ends[p] for p, (_, o) in active.items())
              and not any(st["restoring"] for st in sts))
        return sts if ok else None
    final = wait_for(all_caught_up, 120, "four instances holding every partition at its end")
    reader.stop.set()
    reader.join()

    loads = sorted(len(st["active"]) for st in final)
    assert loads == [1, 1, 2, 2], loads                               # balanced over four
    for p, st in took.items():
        assert p in copies_seen, (p, copies_seen)                     # warmed up before it was active
        start = st["starts"][str(p)]
        # The leader found its copy caught up, and the shard it took over
        # held (about) everything the partition had when the fourth joined:
        # resumed from the warm copy, not rebuilt from the topic.
        assert st["assignment"]["lags"][str(p)] <= ACCEPTABLE, st["assignment"]
        assert start is not None and start >= ends0[p] - ACCEPTABLE, (p, start, ends0[p])
    n, stale = check_answers(reader.answers, truth)
    assert n > 100 and not reader.errors, reader.errors[:3]          # every lookup answered meanwhile
    assert dict(StoreClient(bs, group).scan()) == _expected(truth)
    print(f"\nthe fourth took {sorted(took)} after warming up {sorted(copies_seen)}; starts "
          f"{ {p: st['starts'][str(p)] for p, st in took.items()} }; {n} lookups, {stale} stale")
    for inst in instances:
        assert inst.terminate() == 0, inst.output()


@pytest.mark.kafka
@pytest.mark.crash
@pytest.mark.slow
def test_a_killed_owners_partitions_go_to_their_standbys(broker, name, tmp_path, instances, ground_truth,
                                                         partition_ends, ends_after_producing):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    partitions = 6
    first = WorkloadSpec(records=12_000, keys=1200, tombstone_ratio=0.05, seed=51)
    ends0 = ends_after_producing(topic, first, partitions=partitions)
    for i in range(3):
        instances.append(Instance(bs, topic, group, str(tmp_path / f"i{i}"),
                                  extra=_lag_aware("--standby-replicas", "1")))

    def warm():
        sts = _statuses(instances)
        if not all(sts):
            return None
        active = {int(p): i for i, st in enumerate(sts) for p in st["active"]}
        copies = {int(p): (i, o) for i, st in enumerate(sts) for p, o in st["standby"].items()}
        if len(active) != partitions or len(set(active.values())) != 3 or set(copies) != set(active):
            return None
        if any(copies[p][0] == active[p] or copies[p][1] != ends0[p] for p in copies):
            return None
        return active, {p: i for p, (i, _) in copies.items()}
    active, standby_of = wait_for(warm, 90, "three instances active on a third each, with warm standbys")
    victim = next(i for i in range(3) if list(active.values()).count(i) > 0)
    victim_parts = sorted(p for p, i in active.items() if i == victim)
    assert all(standby_of[p] != victim for p in victim_parts)
    instances[victim].kill()
    survivors = [inst for i, inst in enumerate(instances) if i != victim]
    more = WorkloadSpec(records=3000, keys=1200, tombstone_ratio=0.05, seed=52)
    produce_workload(bs, topic, more)
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)

    first: dict[int, tuple] = {}                     # victim partition -> (instance, its start) first seen active

    def taken_over():
        sts = _statuses(survivors)
        if not all(sts):
            return None
        held = {int(p): (inst, st) for inst, st in zip(survivors, sts) for p in st["active"]}
        for p in victim_parts:
            if p in held and p not in first:
                first[p] = (held[p][0], held[p][1]["starts"][str(p)])
        ok = len(held) == partitions and all(st["active"][str(p)] == ends[p] for p, (_, st) in held.items())
        return held if ok else None
    held = wait_for(taken_over, 120, "the survivors holding every partition at its end", every=0.1)
    for p in victim_parts:
        inst, start = first[p]
        # The standby took it, resuming from its copy (a balanced move to the
        # instance without a copy may follow, once that one has warmed up).
        assert inst is instances[standby_of[p]], (p, inst.url, instances[standby_of[p]].url)
        assert start is not None
    assert dict(StoreClient(bs, group).scan()) == _expected(truth)
    for inst in survivors:
        assert inst.terminate() == 0, inst.output()
    for p in range(partitions):
        path = os.path.join(held[p][0].db, f"{topic}-{p}")
        with lsmkv.open(path, read_only=True) as db:
            assert dict(db.scan()) == table_of(truth[p]) and stored_offset(db, topic, p) == ends[p]


def test_standbys_refuse_a_processor_before_anything_is_created(tmp_path, capsys):
    path = tmp_path / "db"
    code = main(["load", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--group", "g", "--db", str(path),
                 "--serve", "127.0.0.1:0", "--standby-replicas", "1", "--processor", "processors:slow"])
    err = capsys.readouterr().err
    assert code == 2 and not path.exists()
    assert err.count("error:") == 1 and "--standby-replicas does not go with --processor" in err
    code = main(["load", "--topic", "t", "--group", "g", "--db", str(path), "--acceptable-recovery-lag", "5"])
    assert code == 2 and "--acceptable-recovery-lag needs --serve" in capsys.readouterr().err
    assert not path.exists()
    code = main(["load", "--topic", "t", "--group", "g", "--db", str(path), "--serve", "127.0.0.1:0",
                 "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=GSSAPI",
                 "-X", "sasl.kerberos.service.name=kafka", "-X", "ssl.ca.location=/etc/ssl/ca.pem"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1 and not path.exists()
    assert "no equivalent of sasl.kerberos.service.name, sasl.mechanism=GSSAPI;" in err   # not the mapped ones


def test_the_group_member_takes_librdkafkas_security_settings_mapped():
    mapped = kafka_python_security({
        "security.protocol": "sasl_ssl", "sasl.mechanisms": "scram-sha-512", "sasl.username": "loader",
        "sasl.password": "secret", "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/cert.pem",
        "ssl.key.location": "/key.pem", "ssl.key.password": "kp", "ssl.crl.location": "/crl.pem",
        "ssl.endpoint.identification.algorithm": "none", "client.id": "x", "socket.timeout.ms": "5000"})
    assert mapped == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                      "sasl_plain_username": "loader", "sasl_plain_password": "secret", "ssl_cafile": "/ca.pem",
                      "ssl_certfile": "/cert.pem", "ssl_keyfile": "/key.pem", "ssl_password": "kp",
                      "ssl_crlfile": "/crl.pem", "ssl_check_hostname": False}
    assert kafka_python_security({"sasl.mechanism": "PLAIN", "ssl.endpoint.identification.algorithm": "https"}) == {
        "sasl_mechanism": "PLAIN", "ssl_check_hostname": True}
    assert kafka_python_security({}) == {} == kafka_python_security({"client.id": "x"})
    # Every setting without an equivalent is named in one error; a secret's value never is.
    with pytest.raises(OptionError) as refused:
        kafka_python_security({"security.protocol": "SSL", "sasl.oauthbearer.client.secret": "hush",
                               "ssl.keystore.location": "/k.p12", "ssl.endpoint.identification.algorithm": "x",
                               "sasl.mechanism": "PLAIN,SCRAM-SHA-256"})
    text = str(refused.value)
    assert ("no equivalent of sasl.mechanism=PLAIN,SCRAM-SHA-256, sasl.oauthbearer.client.secret, "
            "ssl.endpoint.identification.algorithm=x, ssl.keystore.location;") in text and "hush" not in text
