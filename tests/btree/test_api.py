"""The public API: the same surface and errors as lsmkv."""

from __future__ import annotations

import os
import threading

import pytest

import btree
from lsmkv.errors import (ClosedError, InvalidDatabaseError, LockError, OptionError, ReadOnlyError,
                          SizeLimitError)


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
        with pytest.raises(LockError, match="open for writing in another process"):
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


def test_snapshot_is_not_offered(db):
    with pytest.raises(NotImplementedError, match="snapshot"):
        db.snapshot()


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
