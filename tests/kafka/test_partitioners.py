"""Key partitioners, placement tallies and read routing, pure (no broker):
murmur2, CRC-32 (``consistent``) and FNV-1a against their published test
values and their definitions, the vectorized placement against the
one-key one; a shard's placement tally (one misfit rules a partitioner out,
the empty key is no evidence under ``consistent``, a declared partitioner
is checked too, the tally persisted with the offset and trusted only when
it covers the shard); the group's route from the partitions' tallies; a
shard directory read exactly whatever placed its keys."""

from __future__ import annotations

import logging
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lsmkv
from lsmkv.base.errors import OptionError
from lsmkv.kafka.offsets import encode_offset, meta_name
from lsmkv.kafka.partitioners import FAMILIES, NAMES, family_of, fnv1a, murmur2, partition_of, partitions_of
from lsmkv.kafka.scaleout.placement import PlacementTally, placement_meta_name
from lsmkv.kafka.scaleout.routing import accepted, choose_route, partition_for
from lsmkv.kafka.scaleout.shards import ShardedStore
from lsmkv.kafka.settings import LoaderSettings

# Kafka's UtilsTest.testMurmur2 values.
MURMUR2 = [(b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
           (b"a-little-bit-longer-string", -1486304829),
           (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971), (b"abc", 479470107)]
# librdkafka's unittest_fnv1a values (Go's hash/fnv, as Sarama's hash partitioner uses it).
FNV1A = [(b"kafka", 0x0D33C4E1), (b"giberish123456789", 0x77A58295), (b"1234", 0x023BDD03), (b"234", 0x2DEA3CD2),
         (b"34", 0x740FA83E), (b"4", 0x310CA263), (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x65CBD69C),
         (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x6E49C79A), (b"", 0x7EE3623B)]


@pytest.mark.parametrize("data,expected", MURMUR2)
def test_murmur2_equals_kafkas_known_values(data, expected):
    assert murmur2(data) == expected
    assert partition_of("murmur2", data, 7) == (expected & 0x7FFFFFFF) % 7 == partition_for(data, 7)


def test_partition_for_is_positive_mod_and_checks_input():
    assert partition_for(b"21", 1) == 0
    assert all(0 <= partition_for(bytes([i]) * i, 7) < 7 for i in range(40))
    assert partition_for(b"", 5) == (murmur2(b"") & 0x7FFFFFFF) % 5
    with pytest.raises(ValueError, match="partitions must be a positive int"):
        partition_for(b"k", 0)
    with pytest.raises(TypeError, match="murmur2 hashes bytes"):
        murmur2("text")


@pytest.mark.parametrize("data,expected", FNV1A)
def test_fnv1a_equals_librdkafkas_known_values(data, expected):
    assert fnv1a(data) == expected
    assert partition_of("fnv1a", data, 5) == expected % 5


def test_fnv1a_makes_the_hash_positive_as_a_signed_int():
    # A key whose raw FNV-1a has the sign bit set comes out as its two's
    # complement negation (abs() of the signed int), found by search.
    raw = 0x811C9DC5
    key = next(bytes([b]) for b in range(256) if ((raw ^ b) * 0x01000193) & 0xFFFFFFFF > 0x80000000)
    h = ((raw ^ key[0]) * 0x01000193) & 0xFFFFFFFF
    assert fnv1a(key) == (1 << 32) - h < 0x80000000


def test_consistent_is_zlibs_crc32_mod_partitions_and_places_no_empty_key():
    assert zlib.crc32(b"123456789") == 0xCBF43926            # the CRC-32 check value
    assert partition_of("consistent", b"123456789", 10) == 0xCBF43926 % 10
    assert [partition_of("consistent", b"k%d" % i, 6) for i in range(50)] == \
        [zlib.crc32(b"k%d" % i) % 6 for i in range(50)]
    assert partition_of("consistent", b"", 6) is None       # consistent_random puts it anywhere


def test_names_and_bad_input():
    assert {family_of(n) for n in NAMES} == set(FAMILIES) | {None}
    assert family_of("consistent_random") == "consistent" and family_of("murmur2_random") == "murmur2"
    with pytest.raises(ValueError, match="unknown partitioner 'crc'"):
        family_of("crc")
    with pytest.raises(ValueError, match="partitions must be a positive int"):
        partition_of("consistent", b"k", 0)
    with pytest.raises(ValueError, match="unknown partitioner family"):
        partitions_of("sha", [b"k"], 3)
    with pytest.raises(TypeError, match="bytes"):
        partition_of("fnv1a", "text", 3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=60), st.integers(1, 40))
def test_many_keys_at_once_place_each_key_as_one_at_a_time(keys, partitions):
    for family in FAMILIES:
        one = [partition_of(family, k, partitions) for k in keys]
        assert partitions_of(family, keys, partitions).tolist() == [-1 if p is None else p for p in one]


# -- the placement tally -----------------------------------------------------------------------------

def _placed(family, partition, partitions, count, seed=1):
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        key = b"key-%d" % rng.randrange(10**9)
        if partition_of(family, key, partitions) == partition:
            out.append(key)
    return out


def test_a_tally_keeps_the_partitioners_that_fit_every_key():
    tally = PlacementTally("t", 2, 6)
    assert tally.fitting() == list(FAMILIES)                  # nothing seen: all fit
    keys = _placed("consistent", 2, 6, 40)
    tally.observe([[(k, b"v") for k in keys[:20]], [(k, None) for k in keys[20:]]])   # puts and deletes
    assert tally.keys == 40 and tally.fitting() == ["consistent"]
    assert tally.misfits["murmur2"] >= 1 and tally.misfits["fnv1a"] >= 1
    tally.observe([[(_placed("murmur2", 3, 6, 1)[0], b"v")]])  # one key elsewhere under CRC-32
    assert tally.fitting() == [] and tally.misfits["consistent"] == 1


def test_the_empty_key_is_no_evidence_under_consistent():
    tally = PlacementTally("t", 4, 6)
    tally.observe_keys([b""] + _placed("consistent", 4, 6, 30))
    assert partition_of("consistent", b"", 6) is None and tally.empty == 1
    assert "consistent" in tally.fitting()


def test_a_declared_partitioner_is_checked_and_a_contradiction_counted_and_logged(caplog):
    tally = PlacementTally("t", 1, 4, declared="murmur2_random")
    tally.observe_keys(_placed("murmur2", 1, 4, 10))
    assert tally.contradicting == 0 and "murmur2" in tally.fitting()
    stray = _placed("consistent", 1, 4, 30, seed=7)
    with caplog.at_level(logging.WARNING, logger="lsmkv.kafka.scaleout.placement"):
        tally.observe_keys(stray)
        tally.observe_keys(stray)
    wrong = sum(partition_of("murmur2", k, 4) != 1 for k in stray)
    assert wrong and tally.contradicting == 2 * wrong == tally.misfits["murmur2"]   # counted every time
    assert len([r for r in caplog.records if "declared partitioner murmur2_random" in r.message]) == 1
    decided = accepted(tally.summary(), 4)                    # the keys decide, not the declaration
    assert "murmur2" not in decided and decided == frozenset(tally.fitting())
    with pytest.raises(ValueError, match="unknown partitioner"):
        PlacementTally("t", 0, 4, declared="crc32")


def _write(db, tally, ops, offset):
    tally.observe([ops])
    with db.write_batch() as batch:
        for k, v in ops:
            batch.put(k, v)
        batch.set_meta(meta_name(tally.topic, tally.partition), encode_offset(offset))
        tally.persist(batch, offset)


def test_a_tally_is_persisted_with_the_offset_and_trusted_only_when_it_covers_the_shard(tmp_path, caplog):
    keys = _placed("fnv1a", 0, 3, 25)
    with lsmkv.open(tmp_path / "s") as db:
        tally = PlacementTally.load(db, "t", 0, 3, None)      # no offset: a fresh, complete tally
        assert tally.complete and tally.keys == 0
        _write(db, tally, [(k, b"v") for k in keys], 25)
        again = PlacementTally.load(db, "t", 0, 3, 25)
        assert again.complete and again.keys == 25 and again.fitting() == ["fnv1a"]
        with caplog.at_level(logging.INFO, logger="lsmkv.kafka.scaleout.placement"):
            behind = PlacementTally.load(db, "t", 0, 3, 30)   # offset 30: 5 records no tally counted
            grown = PlacementTally.load(db, "t", 0, 4, 25)    # the topic grew: keys placed for 3 partitions
        assert not behind.complete and not grown.complete
        assert accepted(behind.summary(), 3) is None and accepted(grown.summary(), 4) is None
        assert any("a tally through offset 25" in r.message for r in caplog.records)
        declared = PlacementTally.load(db, "t", 0, 3, 30, declared="fnv1a_random")
        assert accepted(declared.summary(), 3) == frozenset({"fnv1a"})   # the declaration stands in
        assert accepted(PlacementTally.load(db, "t", 0, 3, 30, declared="consistent").summary(), 3) is None
        with db.write_batch() as batch:                       # a shard without a tally (an older writer)
            batch.set_meta(placement_meta_name("t", 0), b"{not json")
        with caplog.at_level(logging.ERROR, logger="lsmkv.kafka.scaleout.placement"):
            broken = PlacementTally.load(db, "t", 0, 3, 25)
        assert not broken.complete and any("not a placement tally" in r.message for r in caplog.records)


# -- routing -----------------------------------------------------------------------------------------

def _summary(fitting, partitions=6, complete=True, declared=None, keys=10):
    return {"partitions": partitions, "complete": complete, "keys": keys, "fitting": list(fitting),
            "declared": declared, "contradicting": 0, "empty": 0}


def test_reads_are_routed_by_the_partitioner_every_partition_fits():
    route = choose_route(6, {p: _summary(["consistent"]) for p in range(6)})
    assert route.partitioner == "consistent" and "60 keys checked" in route.reason
    assert route.partition_of(b"k1") == zlib.crc32(b"k1") % 6 and route.partition_of(b"") is None
    both = choose_route(6, {p: _summary(["consistent", "murmur2"] if p else ["murmur2"]) for p in range(6)})
    assert both.partitioner == "murmur2"
    several = {p: _summary(FAMILIES) for p in range(6)}
    assert choose_route(6, several).partitioner == "consistent"       # librdkafka's default first
    declared = {p: _summary(FAMILIES, declared="fnv1a_random") for p in range(6)}
    assert choose_route(6, declared).partitioner == "fnv1a"


@pytest.mark.parametrize("summaries,why", [
    ({p: _summary(["consistent"]) for p in range(5)}, "partition 5 has no announced owner"),
    ({**{p: _summary(["consistent"]) for p in range(5)}, 5: None}, "partition 5's owner announced no placement"),
    ({**{p: _summary(["consistent"]) for p in range(5)}, 5: _summary(["consistent"], partitions=4)},
     "checked against 4 partitions, the topic has 6"),
    ({**{p: _summary(["consistent"]) for p in range(5)}, 5: _summary([], complete=False)}, "no tally covers"),
    ({**{p: _summary(["consistent"]) for p in range(5)}, 5: _summary([])}, "partition 5 fit no partitioner"),
    ({p: _summary(["consistent"] if p < 3 else ["murmur2"]) for p in range(6)}, "no partitioner fits every"),
    ({p: _summary(FAMILIES, declared="random") for p in range(6)}, "the declared partitioner is random"),
])
def test_every_owner_is_asked_when_no_partitioner_is_known_to_fit_and_the_route_says_why(summaries, why):
    route = choose_route(6, summaries)
    assert route.partitioner is None and route.partition_of(b"k") is None
    assert route.reason.startswith("asked every owner") and why in route.reason


def test_a_key_in_several_partitions_is_answered_from_the_one_a_fitting_partitioner_names():
    key = b"dup"
    home = partition_of("murmur2", key, 6)
    other = (home + 1) % 6
    route = choose_route(6, {p: _summary(["murmur2"] if p == home else []) for p in range(6)})
    assert route.partitioner is None
    assert route.prefer(key, [other, home]) == home
    nobody = choose_route(6, {p: _summary([]) for p in range(6)})
    assert nobody.prefer(key, [5, 3]) == 3                    # none fits: the lowest partition


def test_a_partition_being_restored_answers_no_key_several_hold_first():
    # Its new owner announces it before replaying it: a fresh tally that
    # fits every family, then, once the records came, the real one.
    key = next(b"k%d" % i for i in range(100) if partition_of("murmur2", b"k%d" % i, 6) == 5)
    explicit = {**{p: _summary([]) for p in range(5)}, 5: _summary(FAMILIES, keys=0)}
    assert choose_route(6, explicit).prefer(key, [2, 5]) == 5         # trusted, it would win
    restoring = choose_route(6, explicit, restoring={5})
    assert restoring.partitioner is None and restoring.prefer(key, [2, 5]) == 2
    home = {**{p: _summary([]) for p in range(5)}, 5: _summary(["murmur2"])}
    assert choose_route(6, home, restoring={2}).prefer(key, [2, 5]) == 5   # a restored one still wins
    # Its tally still counts for the route, as a live partition's does.
    crc = {**{p: _summary(["consistent"]) for p in range(5)}, 5: _summary(FAMILIES, keys=0)}
    assert choose_route(6, crc, restoring={5}).partitioner == "consistent"


# -- a shard directory read offline ------------------------------------------------------------------

def _shards(tmp_path, topic, placement: dict[int, dict[bytes, bytes]], partitions=4):
    store = ShardedStore(tmp_path / "shards", "lsm", topic=topic)
    store.note_partitions(partitions)
    for p, table in placement.items():
        db = store.shard(p)
        tally = PlacementTally.load(db, topic, p, partitions, None)
        _write(db, tally, sorted(table.items()), len(table))
    return store


def test_a_shard_directory_routes_by_its_tallies_and_finds_keys_any_partitioner_placed(tmp_path):
    crc = {p: {k: b"v" + k for k in _placed("consistent", p, 4, 20, seed=p)} for p in range(4)}
    with _shards(tmp_path / "a", "t", crc) as store:
        assert store.route().partitioner == "consistent"
        for table in crc.values():
            assert all(store.get(k) == v for k, v in table.items())
        assert store.get(b"absent") is None
        assert list(store.scan()) == sorted(kv for t in crc.values() for kv in t.items())
    rng = random.Random(3)
    explicit: dict[int, dict[bytes, bytes]] = {p: {} for p in range(4)}
    for i in range(80):
        explicit[rng.randrange(4)][b"k%d" % i] = b"v%d" % i
    explicit[3][b"k7"] = b"also in 3"
    holders = sorted(p for p in range(4) if b"k7" in explicit[p])
    with _shards(tmp_path / "b", "t", explicit) as store:
        assert store.route().partitioner is None
        for table in explicit.values():
            for k, v in table.items():
                assert store.get(k) == explicit[holders[0]][k] if k == b"k7" else store.get(k) == v
        listed = list(store.scan())
        assert len(listed) == 80 and dict(listed)[b"k7"] == explicit[holders[0]][b"k7"]


def test_the_partitioner_setting_takes_librdkafkas_names_only():
    ok = LoaderSettings(bootstrap_servers="h:1", topics=["t"], group="g", partitioner="consistent_random")
    assert ok.partitioner == "consistent_random"
    with pytest.raises(OptionError, match="partitioner must be one of librdkafka's .*not 'crc32'"):
        LoaderSettings(bootstrap_servers="h:1", topics=["t"], group="g", partitioner="crc32")


def test_partitioner_without_partitioned_state_is_refused_before_anything_is_created(tmp_path, capsys):
    from lsmkv.kafka.tools.cli import main
    db = tmp_path / "db"
    code = main(["load", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--group", "g", "--db", str(db),
                 "--partitioner", "murmur2"])
    assert code == 2 and "--partitioner needs partitioned state" in capsys.readouterr().err
    assert not db.exists()
    with pytest.raises(SystemExit) as exc:
        main(["load", "--topic", "t", "--group", "g", "--db", str(db), "--partitioned", "--partitioner", "crc32"])
    assert exc.value.code == 2 and "invalid choice: 'crc32'" in capsys.readouterr().err


def test_the_server_reads_the_partition_it_is_told_and_names_a_missing_or_unknown_one(tmp_path):
    import json
    import urllib.error
    import urllib.request

    from lsmkv.kafka import Loader
    from lsmkv.kafka.scaleout.serve import QueryServer
    store = ShardedStore(tmp_path / "shards", "lsm", topic="t")
    store.note_partitions(3)
    loader = Loader(LoaderSettings(bootstrap_servers="127.0.0.1:1", topics=["t"], group="g"), store)
    server = QueryServer(loader, "127.0.0.1", 0)
    try:
        for query, status, text in [("key=6b", 400, "missing query parameter 'partition'"),
                                    ("key=6b&partition=3", 400, "partition 3 does not exist (the topic has 3)"),
                                    ("key=6b&partition=1", 421, "does not hold partition 1 active")]:
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(f"{server.url}/v1/get?{query}", timeout=5)
            assert exc.value.code == status and text in json.loads(exc.value.read())["error"]
    finally:
        server.close()
        store.close()
