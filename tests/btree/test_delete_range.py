"""``db.delete_range(start, end)`` on the B+tree (btree/range_delete.py):
exactly the keys in [start, end) go, whatever the range's shape in the
tree; whole leaves go back to the free list without being decoded; the
delete is one log record replayed at recovery and read by repair;
snapshots, cursors and scans open across it keep the old keys; overflow
chains, ttls and the hash index are kept exact; bad ranges change nothing."""

from __future__ import annotations

import os

import pytest

import btree
from btree.wal import LOG_VERSION, OP_RANGE_DELETE, RangeDelete, decode_batch, encode_batch, parse_log
from lsmkv.base.errors import InvalidArgumentError, ReadOnlyError

KEYS = 3000


def key(i: int) -> bytes:
    return b"k%05d" % i


def fill(db, n: int = KEYS, size: int = 20) -> dict[bytes, bytes]:
    model = {}
    with db.write_batch() as batch:
        for i in range(n):
            value = b"%d-" % i + bytes([i % 251]) * size
            batch.put(key(i), value)
            model[key(i)] = value
    return model


def remove_range(model: dict, start: bytes, end: bytes) -> None:
    for k in [k for k in model if start <= k < end]:
        del model[k]


RANGES = [
    (key(100), key(2900)),        # most of the tree: whole subtrees at every level
    (key(0), key(KEYS)),          # everything
    (b"", b"zzz"),                # everything, by bounds that are no keys
    (b"", key(1500)),             # the lower half, from the first key
    (key(1500), b"\xff"),         # the upper half, to past the last key
    (key(10), key(13)),           # inside one leaf
    (key(10), key(10) + b"\x00"),  # one key
    (b"k00100x", b"k00200x"),     # ends that fall between keys
    (key(5000), key(6000)),       # past every key
    (b"a", b"b"),                 # before every key
]


@pytest.mark.parametrize("start,end", RANGES)
def test_exactly_the_keys_in_range_go_and_the_tree_stays_well_formed(db, start, end):
    model = fill(db)
    assert db.stats()["height"] >= 3  # internal levels for whole subtrees to be cut out of
    db.delete_range(start, end)
    remove_range(model, start, end)
    assert db.check_invariants() == []
    assert list(db.scan()) == sorted(model.items())
    assert list(db.scan(reverse=True)) == sorted(model.items(), reverse=True)
    assert len(db) == len(model) == db.stats()["entries"]
    for k in (start, end, key(99), key(100), key(2900)):
        assert db.get(k) == model.get(k)
    # The tree goes on taking writes where the range was.
    for i in range(0, KEYS, 3):
        db.put(key(i), b"again")
        model[key(i)] = b"again"
    assert db.check_invariants() == []
    assert list(db.scan()) == sorted(model.items())


def test_many_range_deletes_in_a_row_keep_the_model(db):
    model = fill(db)
    for i in range(40):
        lo = (i * 977) % KEYS
        hi = lo + (i * 131) % 400
        db.delete_range(key(lo), key(hi))
        remove_range(model, key(lo), key(hi))
        assert db.check_invariants() == []
        if i % 5 == 0:
            for j in range(lo, lo + 200, 2):
                db.put(key(j), b"x" * (j % 90))
                model[key(j)] = b"x" * (j % 90)
    assert list(db.scan()) == sorted(model.items())


def test_edge_leaves_that_merge_into_a_root_leaf_leave_a_tree_of_one_leaf(db):
    # Two leaves under a root: the range delete trims both, their merge
    # makes the tree one leaf again before the second edge is looked at.
    for i in range(20):
        db.put(b"a%05d" % i, b"a" * 8)
    db.put(b"", b"")
    db.put(b"aa", b"a")
    assert db.stats()["height"] == 2
    with db.write_batch() as batch:
        batch.put(b"a", b"a")
        batch.delete_range(b"a", b"aa")
    assert db.stats()["height"] == 1 and db.check_invariants() == []
    assert list(db.scan()) == [(b"", b""), (b"aa", b"a")]


def test_whole_leaves_are_freed_without_being_read_into_the_pool(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        fill(db, 20000)
    # A pool far smaller than the tree: most leaves are on disk only.
    with btree.open(dbpath, page_size=512, cache_size=64 * 512) as db:
        before = db.stats()
        db.delete_range(key(1000), key(19000))
        after = db.stats()
        freed = after["range_delete_pages_freed"]
        assert freed > 1000  # leaves and internal pages of 18,000 keys
        assert after["free_pages"] - before["free_pages"] >= freed - 10  # (merges free a few more)
        # Pages decoded: the internal pages and the two edges, not the leaves.
        leaves = before["pages_per_level"][-1]
        assert after["cache_misses"] - before["cache_misses"] < leaves // 10
        assert after["entries"] == 2000 and db.check_invariants() == []


def test_the_space_is_reused_by_later_writes(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        fill(db, 10000)
        db.flush()
        pages = db.stats()["page_count"]
        db.delete_range(key(0), key(9000))
        stats = db.stats()
        freed = stats["range_delete_pages_freed"]
        assert stats["free_pages"] >= freed > pages // 2
        fill(db, 9000)  # the same keys again: into the freed pages first
        after = db.stats()
        assert after["free_pages"] < freed // 10
        # (Inserted in front of the keys left, leaves split in the middle: more
        # pages than the ordered load, which leaves every leaf full, took.)
        assert after["page_count"] - pages < freed
        db.flush()
        assert db.check_invariants() == []


def test_the_next_flush_gives_the_space_back_to_the_file_system(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        fill(db, 20000)
        db.flush()
        before = os.path.getsize(os.path.join(dbpath, "btree.pages"))
        db.delete_range(key(100), key(19900))
        db.flush()
        after = os.path.getsize(os.path.join(dbpath, "btree.pages"))
        assert after * 10 < before  # 200 keys of 20,000 left: the file is cut to what they take
        assert db.stats()["data_file_bytes"] == after and db.check_invariants() == []
    with btree.open(dbpath) as db:
        assert len(db) == 200


@pytest.mark.parametrize("checkpoint", [False, True], ids=["log_only", "after_checkpoint"])
def test_a_range_delete_survives_a_crash_as_one_log_record(dbpath, checkpoint):
    with btree.open(dbpath, page_size=512) as db:
        model = fill(db)
    db = btree.open(dbpath, page_size=512)
    with db.write_batch() as batch:
        batch.put(key(500), b"before")       # deleted by the range after it
        batch.delete_range(key(400), key(2600))
        batch.put(key(501), b"after")        # kept: written after the range delete
    db.delete_range(key(10), key(20), sync=True)
    remove_range(model, key(400), key(2600))
    remove_range(model, key(10), key(20))
    model[key(501)] = b"after"
    if checkpoint:
        db.flush()
    db._simulate_crash()
    with btree.open(dbpath, page_size=512) as db:
        assert list(db.scan()) == sorted(model.items())
        assert db.check_invariants() == []


def test_the_log_record_of_a_range_delete():
    ops = [(b"a", b"1"), (b"b", RangeDelete(b"m")), (b"c", None)]
    record = encode_batch(ops)
    assert decode_batch(record[8:], "log", 0) == ops
    assert OP_RANGE_DELETE == 5 and LOG_VERSION == 4


def test_a_log_range_delete_whose_start_is_not_below_its_end_is_corruption():
    from lsmkv.base.errors import CorruptionError
    record = encode_batch([(b"m", RangeDelete(b"b"))])
    with pytest.raises(CorruptionError, match="start is not below its end"):
        decode_batch(record[8:], "log", 0)


def test_one_record_holds_the_range_however_many_keys_it_covers(db):
    fill(db)
    db.flush()  # a new log
    db.delete_range(key(0), key(KEYS))
    with open(os.path.join(db.path, "btree.log"), "rb") as f:
        log = parse_log(f.read(), "btree.log")
    assert [ops for _, _, ops in log.records] == [[(key(0), RangeDelete(key(KEYS)))]]


def test_snapshots_cursors_and_scans_open_across_it_keep_the_old_keys(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        model = fill(db, 5000)
    with btree.open(dbpath, page_size=512, cache_size=64 * 512) as db:  # leaves on disk too
        snap = db.snapshot()
        cursor = db.iterator()
        cursor.seek(key(100))
        scan = db.scan(key(200))
        assert next(scan)[0] == key(200)
        db.delete_range(key(50), key(4950))
        for i in range(60, 4900, 7):  # new keys into the freed pages
            db.put(key(i), b"new")
        assert list(snap.scan()) == sorted(model.items())
        assert snap.get(key(2000)) == model[key(2000)]
        walked = [cursor.key()]
        for _ in range(300):
            cursor.next()
            walked.append(cursor.key())
        assert walked == [key(i) for i in range(100, 401)]
        # The scan reads the tree as it is now past its position (docs/btree.md: a
        # key deleted ahead of it is not seen).
        rest = [k for k, _ in scan]
        assert key(4960) in rest and key(1000) not in rest
        cursor.close()
        snap.close()
        assert db.check_invariants() == []


def test_overflow_chains_and_ttls_inside_the_range_are_freed_and_counted_out(dbpath):
    now = [1_000_000.0]
    with btree.open(dbpath, page_size=512, ttl_clock=lambda: now[0]) as db:
        with db.write_batch() as batch:
            for i in range(2000):
                if i % 3 == 0:
                    batch.put(key(i), b"big" * 300)          # an overflow chain
                elif i % 3 == 1:
                    batch.put(key(i), b"short", ttl=3600)    # a ttl
                else:
                    batch.put(key(i), b"plain")
        db.flush()
        pages = db.stats()["page_count"]
        snap = db.snapshot()  # overflow pages are held back while it lives
        db.delete_range(key(0), key(1990))
        assert snap.get(key(3)) == b"big" * 300
        snap.close()
        stats = db.stats()
        assert stats["ttl_entries"] == len([i for i in range(1990, 2000) if i % 3 == 1])
        assert stats["free_pages"] > pages * 0.9
        assert db.check_invariants() == []
        db.flush()
    with btree.open(dbpath, page_size=512, cache_size=64 * 512) as db:  # leaves read from disk
        with db.write_batch() as batch:
            for i in range(2000):
                batch.put(key(i), b"big" * 300 if i % 2 else b"v", ttl=None if i % 5 else 60)
        db.flush()
    with btree.open(dbpath, page_size=512, cache_size=64 * 512) as db:
        db.delete_range(key(0), key(1995))
        assert db.stats()["ttl_entries"] == len([i for i in range(1995, 2000) if i % 5 == 0])
        assert db.check_invariants() == []
        assert [k for k, _ in db.scan()] == [key(i) for i in range(1995, 2000)]


def test_the_hash_index_forgets_the_deleted_keys(db):
    model = fill(db, 1000)
    for _ in range(2):  # (the second read of a leaf's keys indexes them)
        for k in model:
            assert db.get(k) == model[k]
    assert db.stats()["hash_index_entries"] == 1000
    db.delete_range(key(100), key(900))
    remove_range(model, key(100), key(900))
    assert db.check_invariants() == []  # (checks the hash index too)
    for i in range(1000):
        assert db.get(key(i)) == model.get(key(i))


def test_bad_ranges_raise_and_change_nothing(db):
    model = fill(db, 500)
    log_bytes = db.stats()["log_bytes"]
    with pytest.raises(InvalidArgumentError, match=r"start b'k00300' is above end b'k00200'"):
        db.delete_range(key(300), key(200))
    with pytest.raises(TypeError):
        db.delete_range("k1", key(200))
    db.delete_range(key(300), key(300))  # empty: writes nothing
    with pytest.raises(InvalidArgumentError, match="above end"):
        with db.write_batch() as batch:
            batch.put(b"x", b"y")
            batch.delete_range(b"b", b"a")
    assert db.stats()["log_bytes"] == log_bytes
    assert list(db.scan()) == sorted(model.items())


def test_a_read_only_handle_refuses_a_range_delete(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        fill(db, 100)
    with btree.open(dbpath, read_only=True) as db:
        with pytest.raises(ReadOnlyError):
            db.delete_range(key(0), key(50))
        assert len(db) == 100


def test_a_read_only_handle_following_the_writer_replays_the_range_delete(dbpath):
    with btree.open(dbpath, page_size=512) as writer:
        model = fill(writer)
        writer.flush()
        with btree.open(dbpath, read_only=True, cache_size=0) as reader:
            assert len(reader) == KEYS
            writer.delete_range(key(100), key(2900))  # in the writer's log only
            remove_range(model, key(100), key(2900))
            assert reader.refresh() and dict(reader.scan()) == model
            writer.flush()  # now in the page file
            reader.refresh()
            assert dict(reader.scan()) == model and reader.check_invariants() == []


def test_repair_applies_a_range_delete_from_the_log(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        model = fill(db, 2000)
    db = btree.open(dbpath, page_size=512)
    db.delete_range(key(100), key(1900))
    db.put(key(150), b"after")
    db._simulate_crash()
    remove_range(model, key(100), key(1900))
    model[key(150)] = b"after"
    btree.repair(dbpath)
    with btree.open(dbpath) as db:
        assert list(db.scan()) == sorted(model.items())
        assert db.check_invariants() == []


CHILD = r"""
import sys
import btree
path = sys.argv[1]
db = btree.open(path, page_size=512)
with db.write_batch() as batch:
    for i in range(5000):
        batch.put(b"k%05d" % i, b"v" * 20)
db.flush()
db.delete_range(b"k00100", b"k04900", sync=True)
print("range", flush=True)
i = 0
while True:  # acknowledged durable puts into the deleted range, until killed
    db.put(b"k%05d" % (100 + i % 4800), b"again %d" % i, sync=True)
    print("put", i, flush=True)
    i += 1
"""


@pytest.mark.crash
def test_a_durable_range_delete_and_the_writes_after_it_survive_a_sigkill(tmp_path):
    import signal
    import subprocess
    import sys
    path = str(tmp_path / "db")
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert child.stdout.readline() == "range\n"
        acked = -1
        while acked < 300:
            line = child.stdout.readline()
            assert line.startswith("put "), line
            acked = int(line.split()[1])
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with btree.open(path, page_size=512) as db:
        assert db.check_invariants() == []
        got = dict(db.scan())
    assert [k for k in got if not (b"k00100" <= k < b"k04900")] == \
        [key(i) for i in list(range(100)) + list(range(4900, 5000))]
    for i in range(acked + 1):  # every acknowledged put: there, or overwritten by a later one
        assert got[key(100 + i % 4800)].startswith(b"again ")
    inside = [k for k in got if b"k00100" <= k < b"k04900"]
    assert all(got[k].startswith(b"again ") for k in inside)  # no deleted key is back
