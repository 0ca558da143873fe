"""The public API: the same surface and errors as lsmkv."""

from __future__ import annotations

import gc
import os
import threading

import pytest

import btree
from lsmkv.base.errors import ClosedError, InvalidDatabaseError, LockError, OptionError, ReadOnlyError, SizeLimitError


def test_put_get_delete_and_mapping_protocol(db):
    db.put(b"a", b"1")
    db[bytearray(b"b")] = memoryview(b"2")
    assert db.get(b"a") == b"1"
    assert db[b"b"] == b"2"
    assert type(db.get(memoryview(b"b"))) is bytes
    assert b"a" in db and b"zz" not in db
    assert db.get(b"missing") is None
    assert db.get(b"missing", b"dflt") == b"dflt"
    with pytest.raises(KeyError):
        db[b"missing"]
    db.delete(b"a")
    db.delete(b"never-there")  # not an error
    assert db.get(b"a") is None
    del db[b"b"]
    with pytest.raises(KeyError):
        del db[b"b"]
    db.put(b"empty", b"")
    assert db.get(b"empty") == b"" and b"empty" in db


def test_bad_types_raise_type_error_and_change_nothing(db):
    db.put(b"k", b"v")
    with pytest.raises(TypeError, match="key must be bytes.*not str"):
        db.put("k", b"x")
    with pytest.raises(TypeError, match="value must be bytes.*not int"):
        db.put(b"k", 5)
    with pytest.raises(TypeError, match="not NoneType"):
        db.get(None)
    with pytest.raises(TypeError):
        db.scan(start="a")
    with pytest.raises(TypeError):
        with db.write_batch() as b:
            b.put(b"x", b"1")
            b.put(1, b"2")
    assert db.get(b"k") == b"v" and db.get(b"x") is None
    assert db.stats()["entries"] == 1


def test_key_limit_depends_on_page_size(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        limit = db.stats()["max_key_size"]
        assert limit == 107
        db.put(b"k" * limit, b"v")
        with pytest.raises(SizeLimitError, match=f"the limit is {limit}"):
            db.put(b"k" * (limit + 1), b"v")
        assert db.get(b"k" * (limit + 1)) is None
        db.delete(b"k" * (limit + 1))
        assert db.stats()["entries"] == 1


def test_options(dbpath, tmp_path):
    with pytest.raises(OptionError, match="unknown btree option 'pagesize'"):
        btree.open(dbpath, pagesize=4096)
    with pytest.raises(OptionError, match="page_size"):
        btree.open(dbpath, page_size=1000)
    with pytest.raises(OptionError, match="cache_size"):
        btree.open(dbpath, cache_size=-1)
    with pytest.raises(OptionError, match="read_only"):
        btree.open(dbpath, read_only="yes")
    assert not os.path.exists(dbpath)
    btree.open(dbpath, page_size=1024).close()
    with pytest.raises(OptionError, match="fixed at creation"):
        btree.open(dbpath, page_size=4096)
    with btree.open(dbpath) as db:
        assert db.stats()["page_size"] == 1024


def test_closed_and_read_only(dbpath):
    db = btree.open(dbpath)
    db.put(b"a", b"1")
    it = db.scan()
    db.close()
    db.close()
    for call in (lambda: db.get(b"a"), lambda: db.put(b"a", b"2"), lambda: db.scan(),
                 lambda: db.stats(), lambda: db.flush(), lambda: next(it)):
        with pytest.raises(ClosedError):
            call()
    with btree.open(dbpath, read_only=True) as ro:
        assert ro.get(b"a") == b"1"
        for call in (lambda: ro.put(b"a", b"2"), lambda: ro.delete(b"a"), lambda: ro.flush(),
                     lambda: ro.write_batch()):
            with pytest.raises(ReadOnlyError):
                call()
    with pytest.raises(InvalidDatabaseError):
        btree.open(dbpath + "-missing", read_only=True)


def test_second_writer_gets_lock_error_but_readers_may_open(dbpath):
    with btree.open(dbpath) as db:
        db.put(b"a", b"1", sync=True)
        with pytest.raises(LockError, match="already open for writing in this process"):
            btree.open(dbpath)
        with btree.open(dbpath, read_only=True) as ro:
            assert ro.get(b"a") == b"1"


def test_directory_of_another_kind_is_refused(tmp_path):
    other = tmp_path / "lsm"
    other.mkdir()
    (other / "CURRENT").write_text("MANIFEST-1\n")
    with pytest.raises(InvalidDatabaseError, match="lsm database"):
        btree.open(str(other))
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InvalidDatabaseError, match="is a file"):
        btree.open(str(f))
    assert sorted(os.listdir(other)) == ["CURRENT"]


def test_write_batch_is_atomic_and_discarded_on_exception(db):
    db.put(b"gone", b"x")
    with db.write_batch() as b:
        b.put(b"a", b"1")
        b.put(b"b", b"2")
        b.delete(b"gone")
        b.put(b"a", b"3")  # later operations win
    assert db.get(b"a") == b"3" and db.get(b"b") == b"2" and db.get(b"gone") is None
    with pytest.raises(RuntimeError):
        with db.write_batch(sync=True) as b:
            b.put(b"c", b"1")
            raise RuntimeError("boom")
    assert db.get(b"c") is None
    assert db.stats()["batches"] == 1


def test_scan_bounds_reverse_prefix(db):
    keys = [bytes([a, b]) for a in range(97, 101) for b in range(97, 110)]
    for k in keys:
        db.put(k, k * 3)
    assert [k for k, _ in db.scan()] == keys
    assert [k for k, _ in db.scan(reverse=True)] == keys[::-1]
    assert [k for k, _ in db.scan(b"ab", b"bc")] == [k for k in keys if b"ab" <= k < b"bc"]
    assert [k for k, _ in db.scan(b"ab", b"bc", reverse=True)] == [k for k in keys if b"ab" <= k < b"bc"][::-1]
    assert [k for k, _ in db.scan(prefix=b"c")] == [k for k in keys if k.startswith(b"c")]
    assert [k for k, _ in db.scan(prefix=b"c", reverse=True)] == [k for k in keys if k.startswith(b"c")][::-1]
    assert list(db.scan(b"z")) == [] and list(db.scan(b"b", b"a")) == []
    assert dict(db.scan(prefix=b"a")) == {k: k * 3 for k in keys if k[:1] == b"a"}


@pytest.mark.slow
def test_scan_stays_valid_while_writing(db):
    for i in range(0, 3000, 2):
        db.put(b"%06d" % i, b"v")
    seen = []
    deleted = set()
    inserted = set()
    for n, (k, v) in enumerate(db.scan()):
        seen.append(k)
        if n % 7 == 0:
            i = int(k)
            db.put(b"%06d" % (i + 1), b"new")
            inserted.add(i + 1)
            db.delete(b"%06d" % (i + 4))
            deleted.add(i + 4)
            for j in range(3001, 3101, 2):  # enough inserts to split the leaves under the iterator
                db.put(b"%06d" % (j * 1000 + i), b"pad")
    assert seen == sorted(set(seen))  # ascending, each key at most once
    nums = {int(k) for k in seen}
    untouched = set(range(0, 3000, 2)) - deleted
    assert untouched <= nums  # keys nobody touched are all seen
    assert all(i % 2 == 0 or i in inserted or i > 3_000_000 for i in nums)
    # Writes far ahead of the iterator (beyond its current chunk) are seen.
    assert any(i > 3_000_000 for i in nums)
    assert db.check_invariants() == []


@pytest.mark.parametrize("cache_size", [16 * 512, 1 << 24])  # checkpoints all the time / never
def test_snapshot_is_a_point_in_time_view(dbpath, cache_size):
    db = btree.open(dbpath, page_size=512, cache_size=cache_size)
    try:
        for i in range(600):
            db.put(b"k%04d" % i, b"v%d" % i)
        db.put(b"big", b"B" * 5000)  # an overflow chain
        before = dict(db.scan())
        with db.snapshot() as snap:
            for i in range(0, 600, 2):
                db.delete(b"k%04d" % i)
            for i in range(101, 401, 2):
                db.delete(b"k%04d" % i)  # empties leaves: merges
            for i in range(3, 60, 2):
                db.delete(b"k%04d" % i)  # the leftmost leaves too (their right siblings go)
            for i in range(600, 1500):
                db.put(b"k%04d" % i, b"new")  # splits
            db.put(b"k0001", b"changed")
            db.put(b"big", b"C" * 7000)  # frees the old chain: held back for the snapshot
            db.flush()  # checkpoints and evictions do not disturb the snapshot
            assert snap.get(b"k0000") == b"v0" and snap.get(b"k0001") == b"v1" and snap.get(b"k0003") == b"v3"
            assert snap.get(b"k1000") is None and snap[b"big"] == b"B" * 5000
            assert b"k0002" in snap
            assert dict(snap.scan()) == before
            assert list(snap.scan(b"k0100", b"k0110", reverse=True)) == \
                sorted(((k, v) for k, v in before.items() if b"k0100" <= k < b"k0110"), reverse=True)
            it = snap.scan()
            next(it)
            assert db.get(b"k0001") == b"changed" and db.get(b"k0000") is None
            assert db.get(b"k0201") is None
            assert db.check_invariants() == []
        with pytest.raises(ClosedError):
            snap.get(b"k0001")
        with pytest.raises(ClosedError):
            next(it)
        free_before = db.stats()["free_pages"]
        db.flush()
        assert db.stats()["free_pages"] >= free_before  # the held-back chain came back
        assert db.check_invariants() == []
    finally:
        db.close()
    assert btree.check(dbpath).ok


def test_snapshot_survives_nothing_and_leaks_nothing_across_a_crash(dbpath):
    db = btree.open(dbpath, page_size=512)
    db.put(b"a", b"x" * 3000)
    snap = db.snapshot()
    db.put(b"a", b"y" * 3000)
    db.flush()  # the old chain is free on disk, held back in memory
    assert snap.get(b"a") == b"x" * 3000
    db._simulate_crash()
    report = btree.check(dbpath)
    assert report.ok, report.problems
    with btree.open(dbpath) as db2:
        assert db2.get(b"a") == b"y" * 3000
        snap2 = db2.snapshot()
    with pytest.raises(ClosedError):
        snap2.get(b"a")  # the DB was closed


def test_a_snapshot_dropped_unclosed_lets_go_of_what_it_kept(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        for i in range(300):
            db.put(b"k%04d" % i, b"v")
        db.put(b"big", b"x" * 3000)
        snap = db.snapshot()
        for i in range(300):
            db.put(b"k%04d" % i, b"changed")  # pre-images saved for the snapshot
        db.put(b"big", b"y" * 3000)  # the old chain held back for it
        assert db._tree.snaps[snap._id] and db._tree.deferred
        del snap
        gc.collect()
        assert not db._tree.snaps and not db._tree.deferred
        assert db.check_invariants() == []


def test_stats_has_the_common_keys(db):
    for i in range(300):
        db.put(b"key%05d" % i, b"x" * 100)
    db.delete(b"key00001")
    db.get(b"key00002")
    s = db.stats()
    for key in ("engine", "entries", "user_bytes_written", "bytes_written", "write_amp", "bytes_read", "gets",
                "read_amp", "disk_bytes", "height", "page_count", "fill_factor", "free_pages", "cache_hit_rate",
                "log_bytes_written", "data_bytes_written", "checkpoints"):
        assert key in s, key
    assert s["engine"] == "btree" and s["entries"] == 299 and s["gets"] == 1
    assert s["user_bytes_written"] == 300 * 108 + 8
    assert s["write_amp"] == pytest.approx(s["bytes_written"] / s["user_bytes_written"], rel=1e-3)
    assert s["height"] >= 2 and len(s["fill_factor"]) == s["height"]
    db.flush()
    s2 = db.stats()
    assert s2["checkpoints"] == s["checkpoints"] + 1 and s2["dirty_pages"] == 0
    assert s2["data_bytes_written"] > s["data_bytes_written"]


def test_threads_share_one_db(db):
    errors = []

    def writer(t):
        try:
            for i in range(300):
                with db.write_batch() as b:
                    b.put(b"t%d-%04d-a" % (t, i), b"1")
                    b.put(b"t%d-%04d-b" % (t, i), b"1")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            for _ in range(20):
                keys = [k for k, _ in db.scan()]
                assert keys == sorted(keys)
                for k in keys:
                    if k.endswith(b"-a"):  # batches are atomic: a's partner exists
                        assert db.get(k[:-1] + b"b") == b"1"
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(3)] + \
              [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert db.stats()["entries"] == 1800
    assert db.check_invariants() == []


def test_snapshot_keeps_a_sibling_that_a_merge_frees(dbpath):
    """Emptying the leftmost leaf merges its untouched right sibling into it
    and frees the sibling's page, which new inserts then reuse."""
    with btree.open(dbpath, page_size=512, cache_size=1 << 24) as db:
        for i in range(300):
            db.put(b"k%04d" % i, b"v%d" % i)
        before = dict(db.scan())
        tree = db._tree
        pg = tree.root
        for _ in range(tree.height - 1):
            pg = tree.node(pg, False).kids[0]
        first_leaf_keys = list(tree.node(pg, True).keys)
        with db.snapshot() as snap:
            for k in first_leaf_keys:
                db.delete(k)
            for i in range(300, 400):
                db.put(b"k%04d" % i, b"reuses freed pages")
            assert dict(snap.scan()) == before
            assert dict(snap.scan(reverse=True)) == before


def test_iterators_stop_at_close_mid_chunk(db):
    for i in range(300):
        db.put(b"k%04d" % i, b"v")
    it = db.scan()
    snap = db.snapshot()
    sit = snap.scan()
    other = snap.scan(reverse=True)
    assert next(it)[0] == b"k0000" and next(sit)[0] == b"k0000" and next(other)[0] == b"k0299"
    keep = db.scan()
    assert next(keep)[0] == b"k0000"
    snap.close()
    with pytest.raises(ClosedError):
        next(sit)  # in the middle of its first chunk
    with pytest.raises(ClosedError):
        next(other)
    assert len(list(it)) == 299  # a DB iterator is not affected by the snapshot's close
    db.close()
    with pytest.raises(ClosedError):
        next(keep)


def test_the_default_buffer_pool_follows_lsmkvs_cache_rule(tmp_path):
    from lsmkv.base.cache_size import default_capacity
    from lsmkv.base.errors import OptionError
    with btree.open(str(tmp_path / "d")) as db:
        stats = db.stats()
        assert stats["cache_size"] == default_capacity()
        # The pool is charged by decoded pages (estimated), not page images.
        assert stats["cache_capacity_pages"] > 0
        room = default_capacity() - stats["cache_inner_pages"] * stats["cache_inner_page_bytes"]
        assert abs(stats["cache_capacity_pages"] - stats["cache_inner_pages"]
                   - room / stats["cache_page_bytes"]) < 2
    with btree.open(str(tmp_path / "d"), cache_size=64 * 8192) as db:
        stats = db.stats()
        assert stats["cache_size"] == 64 * 8192
        assert stats["cache_capacity_pages"] < 64 * 2
    with pytest.raises(OptionError, match="cache_size must be a non-negative int"):
        btree.open(str(tmp_path / "e"), cache_size="big")
    assert not os.path.exists(str(tmp_path / "e"))
