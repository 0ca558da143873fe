"""Time to live on both engines: expiry at the deadline, across reopening
and crashes, and the space of expired keys reclaimed.

Time is a clock the test holds (the ``ttl_clock`` option): it moves only
when the test moves it, so every assertion is about what is visible at a
given moment, never about how long something took.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import btree
import lsmkv
from lsmkv.base.errors import InvalidArgumentError
from lsmkv.base.fault_fs import FaultInjectionFS

ENGINES = ("lsm", "btree")
START = 1_700_000_000.0


class Clock:
    """A wall clock that stands still until the test moves it."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def open_db(engine: str, path: str, clock: Clock, **options):
    if engine == "lsm":
        options.setdefault("compaction_executor", "thread")
        return lsmkv.open(path, ttl_clock=clock, **options)
    return btree.open(path, ttl_clock=clock, **options)


def flush(db) -> None:
    db.flush()


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


def test_a_key_expires_at_its_deadline(engine, tmp_path):
    clock = Clock()
    db = open_db(engine, str(tmp_path / "db"), clock)
    db.put(b"short", b"1", ttl=10)
    db.put(b"long", b"2", ttl=1000)
    db.put(b"forever", b"3")
    with db.write_batch() as batch:
        batch.put(b"batched", b"4", ttl=10)
        batch.put(b"plain", b"5")
    snap = db.snapshot()
    clock.advance(9.998)
    assert db.get(b"short") == b"1" and db.get(b"batched") == b"4"
    assert list(db.scan()) == [(b"batched", b"4"), (b"forever", b"3"), (b"long", b"2"), (b"plain", b"5"),
                               (b"short", b"1")]
    clock.advance(0.002)  # the deadline itself: gone from here on
    assert db.get(b"short") is None and db.get(b"batched") is None and b"short" not in db
    assert db.get(b"short", b"default") == b"default"
    assert list(db.scan()) == [(b"forever", b"3"), (b"long", b"2"), (b"plain", b"5")]
    assert list(db.scan(reverse=True)) == [(b"plain", b"5"), (b"long", b"2"), (b"forever", b"3")]
    # A snapshot taken before the deadline does not bring it back after it.
    assert snap.get(b"short") is None and dict(snap.scan()) == {b"forever": b"3", b"long": b"2", b"plain": b"5"}
    snap.close()
    clock.advance(1000)
    assert dict(db.scan()) == {b"forever": b"3", b"plain": b"5"}
    db.close()


def test_an_expired_value_hides_older_versions_and_a_new_write_revives_the_key(engine, tmp_path):
    clock = Clock()
    db = open_db(engine, str(tmp_path / "db"), clock)
    db.put(b"k", b"old")
    flush(db)
    db.put(b"k", b"new", ttl=5)
    flush(db)
    clock.advance(5)
    assert db.get(b"k") is None and list(db.scan()) == []  # not the old value
    db.put(b"k", b"again", ttl=5)
    assert db.get(b"k") == b"again"
    db.put(b"k", b"kept")  # an overwrite without a ttl does not expire
    clock.advance(100)
    assert db.get(b"k") == b"kept"
    db.close()


@pytest.mark.parametrize("where", ["log", "tables"])
def test_expiry_survives_reopening(engine, tmp_path, where):
    """The deadline is stored with the value: a reopened database (whatever
    its clock) expires the key at the same moment."""
    path = str(tmp_path / "db")
    clock = Clock()
    db = open_db(engine, path, clock)
    for i in range(50):
        db.put(b"k%02d" % i, b"v", ttl=60 + i)
    if where == "tables":
        flush(db)
    db.close()
    clock.advance(60 + 25 - 0.001)
    with open_db(engine, path, clock) as db:
        assert sorted(k for k, _ in db.scan()) == [b"k%02d" % i for i in range(25, 50)]
        assert db.get(b"k24") is None and db.get(b"k25") == b"v"
    clock.advance(100)
    with open_db(engine, path, clock) as db:
        assert list(db.scan()) == []


def test_expiry_survives_a_power_loss(engine, tmp_path):
    """Sync writes with a ttl, then the machine loses power: after reopening
    each is there until its deadline."""
    path = str(tmp_path / "db")
    fs = FaultInjectionFS()
    clock = Clock()
    db = open_db(engine, path, clock, fs=fs)
    db.put(b"a", b"1", ttl=30, sync=True)
    with db.write_batch(sync=True) as batch:
        batch.put(b"b", b"2", ttl=90)
        batch.put(b"c", b"3")
    db._simulate_crash()
    fs.power_loss()
    clock.advance(60)
    with open_db(engine, path, clock) as db:
        assert dict(db.scan()) == {b"b": b"2", b"c": b"3"}
        clock.advance(30)
        assert dict(db.scan()) == {b"c": b"3"}


def test_bad_ttls_are_refused_and_change_nothing(engine, tmp_path):
    clock = Clock()
    db = open_db(engine, str(tmp_path / "db"), clock)
    for bad in (0, -1, float("nan"), float("inf"), 1e11):
        with pytest.raises(InvalidArgumentError, match="ttl must be a positive number"):
            db.put(b"k", b"v", ttl=bad)
    for bad in ("10", True, b"1"):
        with pytest.raises(TypeError, match="ttl must be a number of seconds"):
            db.put(b"k", b"v", ttl=bad)
    with pytest.raises(InvalidArgumentError):
        with db.write_batch() as batch:
            batch.put(b"k", b"v")
            batch.put(b"k2", b"v", ttl=-5)
    assert list(db.scan()) == []
    db.close()


def test_lsm_compaction_reclaims_the_space_of_expired_keys(tmp_path):
    clock = Clock()
    path = str(tmp_path / "db")
    db = open_db("lsm", path, clock, compression=None)
    for i in range(2000):
        db.put(b"exp%05d" % i, os.urandom(500), ttl=60)
    for i in range(100):
        db.put(b"keep%04d" % i, b"v" * 10)
    db.compact_range()
    full = sum(db.stats()["bytes_per_level"])
    clock.advance(60)
    db.compact_range()
    stats = db.stats()
    assert stats["ttl_expired"] == 2000
    assert stats["entries"] == 100 and stats["table_tombstones"] == 0
    assert sum(stats["bytes_per_level"]) < full / 50, (stats["bytes_per_level"], full)
    assert sum(1 for _ in db.scan()) == 100
    db.close()
    from lsmkv.lsm.check import check_db
    assert check_db(path).ok


def test_lsm_background_compaction_reclaims_expired_keys_on_its_own(tmp_path):
    """No write and no compact_range: the timing wheel wakes the compaction
    thread at the tables' earliest deadline and it rewrites them."""
    import time
    path = str(tmp_path / "db")
    db = lsmkv.open(path, compaction_executor="thread", compression=None)
    for i in range(500):
        db.put(b"exp%04d" % i, b"x" * 300, ttl=0.5)
    db.put(b"keep", b"v")
    db.flush()
    assert db.stats()["ttl_expired"] == 0
    deadline = time.monotonic() + 60
    while db.stats()["ttl_expired"] < 500 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = db.stats()
    assert stats["ttl_expired"] == 500 and list(db.scan()) == [(b"keep", b"v")]
    assert stats["entries"] == 1
    db.close()


def test_lsm_compaction_keeps_an_expired_tombstone_over_older_data(tmp_path):
    """An expired value becomes a tombstone in a compaction that is not at
    the bottom: the older value below must stay hidden."""
    clock = Clock()
    db = open_db("lsm", str(tmp_path / "db"), clock, disable_auto_compactions=True)
    db.put(b"k", b"old")
    db.compact_range()  # old value at the bottom level
    db.put(b"k", b"new", ttl=5)
    db.flush()
    clock.advance(5)
    compactor = db._compactor
    from lsmkv.lsm.compaction import pick_manual
    with compactor._lock:
        compaction = pick_manual(db._state.version, 0, None, None)
        assert compaction is not None and compaction.output_level < 6
        compactor._run(compaction)  # level 0 into level 1, data below it
    assert db.get(b"k") is None
    assert db.stats()["ttl_expired"] == 1
    db.close()


def test_btree_sweep_reclaims_expired_keys_on_the_wheel(tmp_path):
    """The sweep, scheduled on the timing wheel, deletes expired keys: the
    tree's entries drop and their pages go back to the free list."""
    clock = Clock()
    path = str(tmp_path / "db")
    db = open_db("btree", path, clock, page_size=1024, ttl_sweep_interval=0.05)
    for i in range(2000):
        db.put(b"exp%05d" % i, b"x" * 200, ttl=60)
    for i in range(50):
        db.put(b"keep%04d" % i, b"v")
    db.flush()
    before = db.stats()
    assert before["entries"] == 2050
    clock.advance(60)
    assert db.get(b"exp00001") is None  # invisible at once, reclaimed by the sweep
    import time
    deadline = time.monotonic() + 60
    while db.stats()["entries"] > 50 and time.monotonic() < deadline:
        time.sleep(0.02)
    after = db.stats()
    assert after["entries"] == 50 and after["ttl_swept"] == 2000
    assert after["free_pages"] > before["free_pages"] + 100
    assert not db.check_invariants()
    db.close()
    assert btree.check(path).ok
    with open_db("btree", path, clock) as db:
        assert db.stats()["entries"] == 50


def test_check_and_repair_keep_the_deadlines(engine, tmp_path):
    """``check`` accepts a database with values with a ttl (and counts
    them); ``repair`` rebuilds it keeping each deadline."""
    clock = Clock()
    path = str(tmp_path / "db")
    db = open_db(engine, path, clock, **({"page_size": 512} if engine == "btree" else {}))
    for i in range(300):
        db.put(b"k%04d" % i, b"v" * (i % 200), ttl=100 + i if i % 2 else None)
    db.put(b"big", b"B" * 5000, ttl=50)  # an overflow chain behind a deadline (btree)
    flush(db)
    db.put(b"in-log", b"x", ttl=50)
    db.close()
    if engine == "lsm":
        from lsmkv.lsm.check import check_db
        from lsmkv.lsm.repair import repair_db
        assert check_db(path).ok
        repair_db(path)
    else:
        report = btree.check(path)
        assert report.ok, report.problems
        from btree.repair import repair_db
        repair_db(path)
        assert btree.check(path).ok
    clock.advance(100)
    with open_db(engine, path, clock) as db:
        keys = [k for k, _ in db.scan()]
        assert b"big" not in keys and b"in-log" not in keys
        assert keys == sorted([b"k%04d" % i for i in range(300) if i % 2 == 0 or 100 + i > 100])
        clock.advance(300)
        assert [k for k, _ in db.scan()] == [b"k%04d" % i for i in range(0, 300, 2)]


def test_btree_keys_with_a_ttl_are_limited_8_bytes_below_the_key_limit(tmp_path):
    """The deadline shares the leaf cell, so a key with a ttl must leave it
    8 bytes; at that limit the value goes inline or to an overflow chain."""
    clock = Clock()
    path = str(tmp_path / "db")
    db = open_db("btree", path, clock, page_size=512)
    limit = db.stats()["max_key_size"] - 8
    from lsmkv.base.errors import SizeLimitError
    with pytest.raises(SizeLimitError, match=f"the limit is {limit}"):
        db.put(b"k" * (limit + 1), b"v", ttl=10)
    db.put(b"k" * (limit + 1), b"v")  # without a ttl the whole limit is there
    db.put(b"a" * limit, b"small", ttl=10)
    db.put(b"b" * limit, b"B" * 2000, ttl=10)  # an overflow chain behind a deadline
    assert db.get(b"b" * limit) == b"B" * 2000 and not db.check_invariants()
    db.close()
    assert btree.check(path).ok
    clock.advance(10)
    with open_db("btree", path, clock) as db:
        assert db.get(b"a" * limit) is None and db.get(b"b" * limit) is None
        assert db.get(b"k" * (limit + 1)) == b"v"


def test_cursors_skip_expired_keys_in_both_directions(engine, tmp_path):
    """db.iterator() and snapshot.iterator() judge ttls as of their making:
    an expired key is stepped over (and hides an older value of its key in
    a table below) moving forward and backward, and by seeks."""
    clock = Clock()
    db = open_db(engine, str(tmp_path / "db"), clock)
    for i in range(20):
        db.put(b"k%02d" % i, b"old")
    flush(db)
    for i in range(0, 20, 2):
        db.put(b"k%02d" % i, b"new", ttl=5)  # even keys expire, over an older value
    db.put(b"k05", b"short", ttl=1)
    clock.advance(5)
    live = [b"k%02d" % i for i in range(1, 20, 2) if i != 5]
    with db.iterator() as it:
        it.seek_to_first()
        forward = []
        while it.valid():
            forward.append(it.key())
            it.next()
        it.seek_to_last()
        backward = []
        while it.valid():
            backward.append(it.key())
            it.prev()
        it.seek(b"k04")
        assert it.key() == b"k07"
        it.seek_for_prev(b"k06")
        assert it.key() == b"k03"
    assert forward == live and backward == live[::-1]
    with db.snapshot() as snap:
        with snap.iterator() as it:
            assert [k for k, _ in it] == live
    db.close()


# -- every read agrees with len() ------------------------------------------------------

def _model_deadline(now: float, ttl: float) -> int:
    """The documented deadline: the time of the put plus the ttl, in whole
    milliseconds since the epoch, rounded up."""
    return math.ceil((now + ttl) * 1000.0)


def _visible(model: dict, clock: Clock) -> dict[bytes, bytes]:
    now = math.floor(clock.now * 1000.0)
    return {k: v for k, (v, deadline) in model.items() if deadline is None or deadline > now}


def _check_reads_agree(db, model: dict, clock: Clock) -> None:
    """len, bool, iteration, keys(), items(), get, ``in``, a cursor and
    scans in both directions all show the keys the model holds at the
    clock's time."""
    expected = _visible(model, clock)
    in_order = sorted(expected.items())
    assert len(db) == len(expected)
    assert bool(db) == bool(expected)
    assert list(db) == [k for k, _ in in_order]
    assert list(db.keys()) == [k for k, _ in in_order]
    assert list(db.items()) == in_order
    assert list(db.scan(reverse=True)) == in_order[::-1]
    with db.iterator() as cursor:
        assert list(cursor) == in_order
        cursor.seek_to_last()
        backward = []
        while cursor.valid():
            backward.append(cursor.key())
            cursor.prev()
        assert backward == [k for k, _ in in_order][::-1]
    for key in model:
        assert db.get(key) == expected.get(key)
        assert (key in db) == (key in expected)
    assert db.stats()["entries"] >= len(db)  # stored entries: an upper bound


_ttl_keys = st.sampled_from([b"k%02d" % i for i in range(24)])
_ttl_ops = st.lists(st.one_of(
    st.tuples(st.just("put"), _ttl_keys, st.none()),
    st.tuples(st.just("put"), _ttl_keys, st.sampled_from([0.001, 0.5, 1, 2.5, 10])),
    st.tuples(st.just("batch"), _ttl_keys, st.sampled_from([None, 1, 3])),
    st.tuples(st.just("delete"), _ttl_keys, st.none()),
    st.tuples(st.just("advance"), st.none(), st.sampled_from([0.0005, 0.4, 1, 3])),
    st.tuples(st.sampled_from(["back", "flush", "reopen", "clear", "reclaim"]), st.none(), st.none()),
), min_size=1, max_size=60)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ttl_ops, reclaim=st.booleans())
def test_len_and_every_read_agree_as_keys_expire(engine, ops, reclaim):
    """Random puts with and without a ttl, deletes, batches, clears, the
    clock moving (and set back), flushes and reopens: after each step len()
    and every read agree with a model. ``reclaim``: expired keys' space is
    reclaimed now and then (compact_range; and the clock never goes back,
    since reclaimed space stays reclaimed -- lsmkv/base/ttl.py); otherwise the
    clock may go back and expired values are readable again."""
    path = tempfile.mkdtemp(prefix=f"lsmkv-ttl-len-{engine}-")
    clock = Clock()
    # No sweep or background compaction runs during the test: what is
    # reclaimed, and when, is the test's choice.
    options = ({"disable_auto_compactions": True} if engine == "lsm"
               else {"page_size": 512, "ttl_sweep_interval": 86400})
    model: dict[bytes, tuple[bytes, int | None]] = {}
    db = open_db(engine, path + "/db", clock, **options)
    try:
        for step, (op, key, arg) in enumerate(ops):
            value = b"v%d" % step
            if op == "put":
                db.put(key, value, ttl=arg)
                model[key] = (value, None if arg is None else _model_deadline(clock.now, arg))
            elif op == "batch":
                with db.write_batch() as batch:
                    batch.put(key, value, ttl=arg)
                    batch.delete(b"k%02d" % ((int(key[1:]) + 1) % 24))
                model[key] = (value, None if arg is None else _model_deadline(clock.now, arg))
                model.pop(b"k%02d" % ((int(key[1:]) + 1) % 24), None)
            elif op == "delete":
                db.delete(key)
                model.pop(key, None)
            elif op == "advance":
                clock.advance(arg)
            elif op == "back":
                if reclaim:
                    continue
                clock.now -= 1.5
            elif op == "flush":
                db.flush()
            elif op == "reopen":
                db.close()
                db = open_db(engine, path + "/db", clock, **options)
            elif op == "clear":
                db.clear()
                model.clear()
            elif op == "reclaim":
                if not reclaim:
                    continue
                db.compact_range()
                model = {k: entry for k, entry in model.items() if k in _visible(model, clock)}
            _check_reads_agree(db, model, clock)
    finally:
        db.close()
        shutil.rmtree(path, ignore_errors=True)


def test_clear_deletes_expired_values_so_a_clock_set_back_brings_none_back(engine, tmp_path):
    """A value that expired is still stored until reclaimed, and readable
    again if the clock goes back; clear() deletes it all the same (the case
    the model test above found: put with a ttl, expire, clear, clock back)."""
    clock = Clock()
    db = open_db(engine, str(tmp_path / "db"), clock)
    try:
        db.put(b"k00", b"v", ttl=0.001)
        db.put(b"k01", b"w")
        clock.advance(0.4)
        db.clear()
        clock.now -= 1.5
        assert (len(db), db.get(b"k00"), list(db.keys())) == (0, None, [])
    finally:
        db.close()


def test_len_counts_only_live_keys_after_expiry_and_reopen(engine, tmp_path):
    """The reported case: a key with a ttl and one without; once the first
    expired, len() is 1 as keys() says, before and after a reopen."""
    path = str(tmp_path / "db")
    clock = Clock()
    db = open_db(engine, path, clock)
    db.put(b"a", b"1", ttl=0.5)
    db.put(b"b", b"2")
    assert len(db) == 2
    clock.advance(0.7)
    assert len(db) == 1 and list(db.keys()) == [b"b"]
    db.close()
    with open_db(engine, path, clock) as db:
        assert len(db) == 1 and list(db.keys()) == [b"b"] and b"a" not in db


def test_clear_empties_a_database_holding_expired_keys(engine, tmp_path):
    """clear() deletes what reads find; an expired key it cannot see does
    not keep len() at 1 or the database truthy until a sweep runs."""
    clock = Clock()
    db = open_db(engine, str(tmp_path / "db"), clock)
    db.put(b"a", b"1", ttl=1)
    db.put(b"b", b"2")
    clock.advance(2)
    db.clear()
    assert len(db) == 0 and not db and list(db.keys()) == []
    db.close()


def test_btree_len_follows_the_sweep_and_writes_after_it_first_counts(tmp_path):
    """Once len() has counted the deadlines, writes keep the count exact:
    overwrites with and without a ttl, deletes, the sweep's deletes."""
    clock = Clock()
    path = str(tmp_path / "db")
    db = open_db("btree", path, clock, page_size=512, ttl_sweep_interval=86400)
    for i in range(300):
        db.put(b"k%03d" % i, b"v" * 40, ttl=10 + i % 7)
    for i in range(300, 400):
        db.put(b"k%03d" % i, b"v" * 40)
    assert len(db) == 400
    clock.advance(12)  # ttls 10 and 11 passed: 2 in 7 of the first 300
    expired = sum(1 for i in range(300) if 10 + i % 7 <= 12)
    assert len(db) == 400 - expired == len(list(db.keys()))
    for i in range(0, 300, 3):
        db.put(b"k%03d" % i, b"w", ttl=100)  # a fresh deadline, expired or not before
    for i in range(1, 300, 3):
        db.put(b"k%03d" % i, b"w")  # no ttl any more
    for i in range(2, 300, 9):  # (none of them among the ones above)
        db.delete(b"k%03d" % i)
    assert len(db) == len(list(db.keys()))
    db._run_sweep()  # what the timing wheel runs every ttl_sweep_interval
    assert db.stats()["ttl_swept"] > 0
    assert len(db) == len(list(db.keys())) == db.stats()["entries"]
    clock.advance(1000)
    assert len(db) == len(list(db.keys())) == 100 + len(range(1, 300, 3))
    db.close()


def test_when_each_read_judges_expiry(engine, tmp_path):
    """docs/api.md, "Time to live": a get (also a snapshot's) judges at the
    call; an lsmkv scan or cursor once, when it is made; a btree scan or
    cursor at each chunk it reads."""
    clock = Clock()
    db = open_db(engine, str(tmp_path / "db"), clock)
    db.put(b"a", b"1", ttl=10)
    db.put(b"b", b"2")
    snap = db.snapshot()
    scan = db.scan()  # made now; nothing read yet
    cursor = db.iterator()  # made now; not positioned yet
    clock.advance(10)
    assert snap.get(b"a") is None and db.get(b"a") is None
    cursor.seek_to_first()
    if engine == "lsm":
        assert list(scan) == [(b"a", b"1"), (b"b", b"2")]
        assert cursor.key() == b"a"
    else:
        assert list(scan) == [(b"b", b"2")]
        assert cursor.key() == b"b"
    with db.iterator() as later:  # made after the deadline: never shows it
        assert list(later) == [(b"b", b"2")]
    cursor.close()
    snap.close()
    db.close()
