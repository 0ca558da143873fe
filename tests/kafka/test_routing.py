"""Interactive queries find a key wherever its producer put it (real broker,
real processes).

* Where a real librdkafka producer puts keyed records is where
  lsmkv/kafka/partitioners.py says: its default (``consistent_random``,
  CRC-32), ``murmur2_random`` and ``fnv1a_random``.
* Three `lsmkv kafka load --serve` instances share a topic produced by
  confluent-kafka with its default configuration, one produced with
  ``murmur2_random`` (declared with ``--partitioner``), and one produced
  with explicit partition numbers (some keys in two partitions): the
  client routes the first by CRC-32, the second by murmur2, and asks every
  owner for the third; `StoreClient.get`, `lookup` and `scan` are exact
  for every key, before and after an owner is SIGKILLed and the survivors
  took its partitions over; `lookup` says how it routed.
"""

from __future__ import annotations

import os
import random
import sys
import time

import pytest

from lsmkv.kafka import StoreClient
from lsmkv.kafka.admin import ensure_topic
from lsmkv.kafka.partitioners import family_of, partition_of
from lsmkv.kafka.scaleout.client import route_of
from lsmkv.kafka.scaleout.members import Member, claims, decode, members_topic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instances import Instance, held, table_of, wait_for  # noqa: E402

pytestmark = pytest.mark.kafka

PARTITIONS = 6


def _keys(count: int) -> list[bytes]:
    return [b"user-%04d" % i for i in range(count)] + [bytes(range(n)) for n in range(1, 12)] + [b"\xff" * 9]


@pytest.mark.parametrize("partitioner", [None, "murmur2_random", "fnv1a_random"])
def test_a_librdkafka_producer_puts_keys_where_partitioners_py_says(broker, name, ground_truth, partitioner):
    from confluent_kafka import Producer
    topic = name()
    ensure_topic(broker.bootstrap_servers, topic, PARTITIONS)
    config = {"bootstrap.servers": broker.bootstrap_servers}
    if partitioner is not None:
        config["partitioner"] = partitioner
    producer = Producer(config)                   # otherwise librdkafka's defaults, partitioner included
    keys = _keys(200)
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(30) == 0
    placed = {key: p for p, records in ground_truth(broker.bootstrap_servers, topic).items()
              for _, key, _ in records}
    assert len(placed) == len(keys)
    family = family_of(partitioner or "consistent_random")
    assert {key: partition_of(family, key, PARTITIONS) for key in keys} == placed
    if partitioner is None:
        agree = sum(partition_of("murmur2", k, PARTITIONS) == p for k, p in placed.items())
        print(f"\ndefault config: {len(placed)} keys, {agree} where murmur2 puts them")
        assert agree < len(placed) // 2


# -- serving instances -------------------------------------------------------------------------------

def _produce(bs: str, topic: str, kind: str) -> None:
    """200 keys, some updated and some deleted; ``kind``: "default" (a
    Producer with its default configuration), "murmur2" (murmur2_random)
    or "explicit" (partition numbers chosen here, 10 keys in two partitions)."""
    from confluent_kafka import Producer
    ensure_topic(bs, topic, PARTITIONS)
    config = {"bootstrap.servers": bs}
    if kind == "murmur2":
        config["partitioner"] = "murmur2_random"
    producer = Producer(config)
    rng = random.Random(11)
    keys = [b"user-%04d" % i for i in range(200)]
    home = {k: rng.randrange(PARTITIONS) for k in keys}

    def send(key, value, partition=None):
        if kind == "explicit":
            producer.produce(topic, key=key, value=value, partition=home[key] if partition is None else partition)
        else:
            producer.produce(topic, key=key, value=value)

    for key in keys:
        send(key, b"first " + key)
    for key in keys[::3]:
        send(key, b"second " + key)
    for key in keys[1::17]:
        send(key, None)                            # deleted
    if kind == "explicit":
        for key in keys[2:200:20]:                 # a second partition holding the key
            send(key, b"elsewhere " + key, partition=(home[key] + 1) % PARTITIONS)
    assert producer.flush(30) == 0


def _expected(truth) -> tuple[dict[bytes, bytes], dict[bytes, list[int]]]:
    """(the table a get answers: a key in several partitions from the lowest,
    {key: partitions holding it})."""
    table: dict[bytes, bytes] = {}
    holders: dict[bytes, list[int]] = {}
    for p in sorted(truth):
        for key, value in table_of(truth[p]).items():
            holders.setdefault(key, []).append(p)
            table.setdefault(key, value)
    return table, holders


def _check_every_route_in_the_history(announcements, holders, routed_by) -> int:
    """The route a client reading the announcements at any moment would
    have taken never answers a key from the wrong partition: replayed
    announcement by announcement, with every partition claimed (while a
    partition is being restored its fresh tally may fit any family: the
    route is checked once none is). Returns how many announcements listed
    a partition as restoring. ``announcements``: the members topic's
    records, (offset, url, announcement; None: withdrawn)."""
    latest: dict[str, Member | None] = {}
    restoring = 0
    for offset, url, value in announcements:
        member = None if value is None else decode(value, offset)
        latest[url] = member
        members = sorted((m for m in latest.values() if m is not None), key=lambda m: m.position)
        restoring += bool(member is not None and member.restoring)
        claimed = claims(members)
        if len(claimed) < PARTITIONS:
            continue
        route = route_of(members, PARTITIONS)
        if not any(p in ms[0].restoring for p, ms in claimed.items()):
            assert route.partitioner in (routed_by, None), (route, members)
        for key, held_by in holders.items():
            if len(held_by) > 1:
                assert route.prefer(key, held_by) == held_by[0], (key, held_by, route, members)
    return restoring


def _announced(client: StoreClient) -> dict:
    """{partition: (the newest claimant's url, position, its tally summary)}
    as the client sees the announcements now (a failed check shows them)."""
    return {p: (ms[0].url, ms[0].position, ms[0].placement.get(p)) for p, ms in sorted(claims(client.members()).items())}


def _check_every_key(client: StoreClient, table, holders, routed_by) -> None:
    asked = list(table) + [b"user-%04d" % i for i in range(1, 200, 17)] + [b"never-written", b""]
    started = time.monotonic()
    for key in asked:
        got = client.lookup(key)
        assert got.value == table.get(key), (key, got, _announced(client))
        assert got.routed_by == routed_by and got.role == "active", got
        if key in table:
            assert got.found_in == tuple(holders[key]) and got.partition == holders[key][0], got
        assert client.get(key) == table.get(key)
    took = time.monotonic() - started
    print(f"{2 * len(asked)} reads ({'routed by ' + routed_by if routed_by else 'every owner asked'}) in "
          f"{took:.2f} s: {took / (2 * len(asked)) * 1000:.1f} ms each")
    assert list(client.scan()) == sorted(table.items())
    first, last = sorted(table)[10], sorted(table)[60]
    assert list(client.scan(first, last)) == sorted((k, v) for k, v in table.items() if first <= k < last)


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.parametrize("kind,routed_by,declare", [
    ("default", "consistent", ()),
    ("murmur2", "murmur2", ("--partitioner", "murmur2_random")),
    ("explicit", None, ()),
])
def test_gets_and_scans_are_exact_however_keys_were_placed_across_a_sigkill(broker, name, tmp_path, instances,
                                                                          ground_truth, partition_ends, kind,
                                                                          routed_by, declare):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    _produce(bs, topic, kind)
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)
    table, holders = _expected(truth)
    if kind == "explicit":
        assert sum(len(h) > 1 for h in holders.values()) >= 5
    for i in range(3):
        instances.append(Instance(bs, topic, group, str(tmp_path / f"i{i}"), extra=declare))

    def caught_up(live, owners):
        h = held(live)
        ok = len(h) == PARTITIONS and len({v[0] for v in h.values()}) == owners and all(
            h[p][1] == ends[p] and not h[p][2] for p in h)
        return h if ok else None

    three = wait_for(lambda: caught_up(instances, 3), 120, "three instances holding every partition at its end")
    client = StoreClient(bs, group, timeout=30)
    if routed_by is not None:
        wait_for(lambda: client.route(refresh=True).partitioner == routed_by, 30, f"reads routed by {routed_by}")
    else:
        wait_for(lambda: "fit no partitioner" in client.route(refresh=True).reason, 30,
                 "every partition announced with keys that fit no partitioner")
    route = client.route()
    print(f"\n{kind}: {route.reason}")
    _check_every_key(client, table, holders, routed_by)
    if declare:
        status = instances[0].status()
        assert all(t["declared"] == "murmur2_random" and t["contradicting"] == 0
                   for t in status["placement"].values()) and status["placement"]

    victim = next(inst for inst in instances if any(v[0] is inst for v in three.values()))
    victim.kill()
    survivors = [inst for inst in instances if inst is not victim]
    wait_for(lambda: caught_up(survivors, 2), 120, "the survivors holding every partition at its end")
    urls = {inst.url for inst in survivors}
    wait_for(lambda: {o.url for o in client.owners(refresh=True).values()} <= urls or None, 30,
             "the survivors' claims announced")
    if routed_by is not None:
        wait_for(lambda: client.route(refresh=True).partitioner == routed_by, 30, "reads routed again")
    else:
        wait_for(lambda: "fit no partitioner" in client.route(refresh=True).reason, 30, "the takeover announced")
    _check_every_key(client, table, holders, routed_by)
    # The new owners announced the partitions they took before rebuilding
    # them (restoring, a fresh tally that fits every family): no route of
    # the whole history trusts such a tally.
    assert _check_every_route_in_the_history(ground_truth(bs, members_topic(group))[0], holders, routed_by) > 0
    for inst in survivors:
        assert inst.terminate() == 0, inst.output()


# -- tallies kept by the changelog restore and by standby copies ---------------------------------------

def _tallies(db_path: str, topic: str) -> dict[int, tuple]:
    from lsmkv.kafka import ShardedStore, stored_offset
    from lsmkv.kafka.scaleout.placement import PlacementTally
    out = {}
    with ShardedStore(db_path, None, read_only=True) as store:
        for p in store.present():
            shard = store.shard(p, create=False)
            t = PlacementTally.load(shard, topic, p, store.partitions, stored_offset(shard, topic, p))
            out[p] = (t.complete, t.keys, t.fitting())
    return out


@pytest.mark.slow
def test_a_shard_restored_from_the_changelog_keeps_an_exact_tally(broker, name, tmp_path):
    import json
    import subprocess

    from lsmkv.kafka import WorkloadSpec
    from lsmkv.kafka.tools.producer import produce_workload
    from instances import ROOT
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    produce_workload(bs, topic, WorkloadSpec(records=8000, keys=800, seed=3), partitions=4)   # murmur2_random
    for db in ("a", "b"):                          # b: an empty --db, every shard restored from a's changelog
        out = subprocess.run([sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bs,
                              "--topic", topic, "--group", group, "--db", str(tmp_path / db), "--partitioned",
                              "--changelog", "--until-caught-up", "--quiet", "--json"], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        restored = json.loads(out.stdout)["records_restored_from_changelog"]
    assert restored == 8000
    loaded, rebuilt = _tallies(str(tmp_path / "a"), topic), _tallies(str(tmp_path / "b"), topic)
    assert rebuilt == loaded and sum(t[1] for t in loaded.values()) == 8000
    assert all(t[0] and t[2] == ["murmur2"] for t in rebuilt.values()), rebuilt


@pytest.mark.crash
@pytest.mark.slow
def test_a_standby_copy_that_takes_over_keeps_an_exact_tally(broker, name, tmp_path, instances, ground_truth,
                                                              partition_ends):
    from lsmkv.kafka import WorkloadSpec
    from lsmkv.kafka.tools.producer import produce_workload
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    produce_workload(bs, topic, WorkloadSpec(records=8000, keys=800, seed=4), partitions=4)
    truth = ground_truth(bs, topic)
    ends = partition_ends(truth)
    for i in range(2):
        instances.append(Instance(bs, topic, group, str(tmp_path / f"i{i}"), extra=("--standby-replicas", "1")))
    wait_for(lambda: (lambda h: len(h) == 4 and len({v[0] for v in h.values()}) == 2 and all(
        h[p][1] == ends[p] and not h[p][2] for p in h))(held(instances)), 120, "two instances sharing the partitions")
    wait_for(lambda: all((lambda st: st and len(st["standby"]) == 2 and all(
        o == ends[int(p)] for p, o in st["standby"].items()))(inst.status()) for inst in instances) or None, 60,
        "each instance's standby copies at the end")
    instances[0].kill()
    survivor = instances[1]
    st = wait_for(lambda: (lambda s: s if s and len(s["active"]) == 4 and not s["restoring"] else None)(
        survivor.status()), 120, "the survivor holding every partition")
    took_over = [p for p, start in st["starts"].items() if start is not None]
    assert took_over, st["starts"]                 # resumed from its standby copies
    assert all(st["placement"][p]["complete"] and st["placement"][p]["fitting"] == ["murmur2"] for p in took_over)
    client = StoreClient(bs, group, timeout=30)
    wait_for(lambda: client.route(refresh=True).partitioner == "murmur2", 30, "reads routed by murmur2")
    table: dict[bytes, bytes] = {}
    for records in truth.values():
        table.update(table_of(records))
    assert all(client.get(k) == v for k, v in table.items())


@pytest.mark.slow
def test_a_standby_copy_taken_before_the_shard_directory_knows_the_partition_count_keeps_an_exact_tally(
        broker, name, tmp_path, ground_truth, partition_ends):
    """An instance that holds no partition active yet has not noted the
    topic's partition count in its shard directory; a standby copy it takes
    then still keeps a tally that routes (complete, checked against the count)."""
    from lsmkv.kafka import Loader, LoaderSettings, ShardedStore, WorkloadSpec
    from lsmkv.kafka.scaleout.placement import PlacementTally
    from lsmkv.kafka.scaleout.standby import StandbyReplicator
    from lsmkv.kafka.tools.producer import produce_workload
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    produce_workload(bs, topic, WorkloadSpec(records=2000, keys=200, seed=8), partitions=4)   # murmur2_random
    ends = partition_ends(ground_truth(bs, topic))
    with ShardedStore(tmp_path / "s", "lsm", topic=topic) as shards:
        assert shards.partitions is None
        loader = Loader(LoaderSettings(bootstrap_servers=bs, topics=[topic], group=group), shards)
        standby = StandbyReplicator(loader, "http://copy", 1, wanted=lambda: {1})
        try:
            wait_for(lambda: standby.held().get(1) == ends[1], 60, "the copy of partition 1 at its end")
        finally:
            standby.close()
        assert shards.partitions == 4
        tally = PlacementTally.load(shards.shard(1), topic, 1, 4, ends[1])
    assert tally.complete and tally.summary()["fitting"] == ["murmur2"]
