"""``db.multi_get(keys)`` and ``snap.multi_get(keys)`` on both engines,
through their public open(): the same answers as a loop of get() over a
database whose keys sit in every kind of place (tables at several levels or
leaves on disk, the memtable or the buffer pool, tombstones, overwrites,
expired ttls), duplicates and absent keys; a snapshot's answers while
writes go on; a hypothesis model against a dict; bad input refused before
anything is read; a closed database."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

import btree
import lsmkv
from lsmkv import ClosedError

ENGINES = ["lsm", "btree"]
#: Small memtables and pages, so that a few thousand writes make tables at
#: several levels (lsm) and a tree of several levels (btree).
SMALL = {"lsm": {"write_buffer_size": 8 * 1024, "compaction_executor": "thread"}, "btree": {"page_size": 512}}
START = 1_700_000_000.0


class Clock:
    """A wall clock that stands still until the test moves it (ttl_clock)."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def open_db(engine: str, path, **options):
    opener = lsmkv.open if engine == "lsm" else btree.open
    return opener(str(path), **{**SMALL[engine], **options})


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    return request.param


def key(i: int) -> bytes:
    return b"key%05d" % i


def fill(db, clock: Clock, rnd: random.Random, rounds: int = 4, writes: int = 1500, space: int = 4000) -> None:
    """Overwrites, deletes and ttl values over ``space`` keys, flushed round by
    round (tables at several levels on lsm), the last round left in the
    memtable; then the clock moves past the shorter ttls."""
    for r in range(rounds):
        for i in range(writes):
            k = key(rnd.randrange(space))
            roll = rnd.random()
            if roll < 0.15:
                db.delete(k)
            elif roll < 0.25:
                db.put(k, b"ttl-%d-%d" % (r, i), ttl=rnd.choice([5, 500]))
            else:
                db.put(k, b"v-%d-%d" % (r, i) * rnd.randrange(1, 4))
        if r < rounds - 1:
            db.flush()
    clock.now += 60  # the 5 s ttls have expired, the 500 s ones not


def probe_keys(rnd: random.Random, n: int, space: int = 4400) -> list[bytes]:
    """Random keys, some beyond the written space (absent), some repeated."""
    keys = [key(rnd.randrange(space)) for _ in range(n)]
    keys += rnd.sample(keys, n // 10)
    rnd.shuffle(keys)
    return keys


def test_multi_get_equals_a_loop_of_gets(engine, tmp_path):
    clock = Clock()
    rnd = random.Random(29)
    with open_db(engine, tmp_path / "db", ttl_clock=clock) as db:
        fill(db, clock, rnd)
        if engine == "lsm":
            levels = [row["level"] for row in db.stats()["levels"] if row["files"]]
            assert len(levels) >= 2, levels  # tables at several levels
        expired = [k for k in map(key, range(4000)) if db.get(k) is None]
        assert expired
        for n in (0, 1, 7, 300, 2000):
            keys = probe_keys(rnd, n)
            assert db.multi_get(keys) == [db.get(k) for k in keys]
        every = [key(i) for i in range(4400)]
        answers = db.multi_get(every)
        assert answers == [db.get(k) for k in every]
        assert any(v is None for v in answers[:4000]) and any(v is not None for v in answers)
        assert db.multi_get(every[::-1]) == answers[::-1]
    # Reopened: every block or leaf is read from the file again (the btree
    # searches leaves it does not keep in their page images).
    with open_db(engine, tmp_path / "db", ttl_clock=clock) as db:
        assert db.multi_get(every) == answers
        assert db.multi_get(every) == answers == [db.get(k) for k in every]


def test_duplicates_and_key_types(engine, tmp_path):
    with open_db(engine, tmp_path / "db") as db:
        db.put(b"a", b"1")
        db.put(b"b", b"2")
        db.flush()
        db.put(b"c", b"3")
        keys = [b"b", bytearray(b"a"), b"zz", memoryview(b"b"), b"c", b"a", b""]
        assert db.multi_get(keys) == [b"2", b"1", None, b"2", b"3", b"1", None]
        assert db.multi_get(k for k in (b"c", b"c")) == [b"3", b"3"]
        assert db.multi_get([]) == []


def test_ttl_expiry_as_get_sees_it(engine, tmp_path):
    clock = Clock()
    with open_db(engine, tmp_path / "db", ttl_clock=clock) as db:
        db.put(b"short", b"s", ttl=10)
        db.put(b"long", b"l", ttl=100)
        db.flush()
        db.put(b"mem-short", b"ms", ttl=10)
        keys = [b"short", b"long", b"mem-short"]
        assert db.multi_get(keys) == [b"s", b"l", b"ms"]
        clock.now += 10  # the deadline itself: gone from here on
        assert db.multi_get(keys) == [None, b"l", None] == [db.get(k) for k in keys]


def test_snapshot_multi_get_while_writes_go_on(engine, tmp_path):
    clock = Clock()
    rnd = random.Random(7)
    with open_db(engine, tmp_path / "db", ttl_clock=clock) as db:
        fill(db, clock, rnd, rounds=3, writes=1000)
        keys = probe_keys(rnd, 1500)
        with db.snapshot() as snap:
            before = [db.get(k) for k in keys]
            assert snap.multi_get(keys) == before
            for i in range(3000):  # overwrites, deletes, new keys, flushes under the snapshot
                k = key(rnd.randrange(4400))
                if i % 5 == 0:
                    db.delete(k)
                else:
                    db.put(k, b"after-%d" % i)
                if i % 1000 == 999:
                    db.flush()
            assert db.multi_get(keys) != before
            assert snap.multi_get(keys) == before == [snap.get(k) for k in keys]
        assert db.multi_get(keys) == [db.get(k) for k in keys]
        with pytest.raises(ClosedError):
            snap.multi_get(keys)


@pytest.mark.parametrize("bad, says", [
    ([b"a", 3], "keys[1]: key must be bytes, bytearray or memoryview, not int"),
    ([b"a", b"b", "c"], "keys[2]: key must be bytes, bytearray or memoryview, not str"),
    ([None], "keys[0]: key must be bytes, bytearray or memoryview, not NoneType"),
    (b"abc", "multi_get takes an iterable of keys, not a single bytes"),
    ("abc", "multi_get takes an iterable of keys, not a single str"),
    (5, "multi_get takes an iterable of keys, not int"),
])
def test_bad_input_is_refused_before_reading(engine, tmp_path, bad, says):
    with open_db(engine, tmp_path / "db") as db:
        db.put(b"a", b"1")
        with pytest.raises(TypeError) as raised:
            db.multi_get(bad)
        assert str(raised.value) == says
        with db.snapshot() as snap:
            with pytest.raises(TypeError) as raised:
                snap.multi_get(bad)
            assert str(raised.value) == says
        assert db.multi_get([b"a"]) == [b"1"]


def test_closed_database(engine, tmp_path):
    db = open_db(engine, tmp_path / "db")
    db.put(b"a", b"1")
    snap = db.snapshot()
    db.close()
    with pytest.raises(ClosedError):
        db.multi_get([b"a"])
    with pytest.raises(ClosedError):
        snap.multi_get([b"a"])


operations = st.lists(st.tuples(st.sampled_from(["put", "delete", "flush", "read"]),
                                st.integers(0, 60), st.binary(max_size=40),
                                st.lists(st.integers(0, 70), max_size=30)), max_size=120)


@pytest.mark.parametrize("engine_name", ENGINES)
@settings(max_examples=25, deadline=None)
@given(ops=operations)
def test_model(engine_name, tmp_path_factory, ops):
    """Random puts, deletes, flushes and multi_gets against a dict."""
    model: dict[bytes, bytes] = {}
    with open_db(engine_name, tmp_path_factory.mktemp("model") / "db") as db:
        for op, k, value, probe in ops:
            if op == "put":
                db.put(key(k), value)
                model[key(k)] = value
            elif op == "delete":
                db.delete(key(k))
                model.pop(key(k), None)
            elif op == "flush":
                db.flush()
            else:
                keys = [key(i) for i in probe]
                assert db.multi_get(keys) == [model.get(k) for k in keys]
        keys = [key(i) for i in range(71)]
        assert db.multi_get(keys) == [model.get(k) for k in keys]
