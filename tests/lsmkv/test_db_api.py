"""The public API of an lsmkv database: behaviour users rely on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import lsmkv
from lsmkv import ClosedError, InvalidDatabaseError, LockError, OptionError, ReadOnlyError, SizeLimitError


def test_put_get_delete_and_mapping_protocol(db):
    db.put(b"k", b"v")
    assert db.get(b"k") == b"v"
    assert db.get(b"missing") is None
    assert db.get(b"missing", b"dflt") == b"dflt"
    db[b"a"] = b"1"
    assert db[b"a"] == b"1"
    assert b"a" in db and b"zz" not in db
    with pytest.raises(KeyError):
        db[b"zz"]
    del db[b"a"]
    assert b"a" not in db
    with pytest.raises(KeyError):
        del db[b"never-existed"]  # as for a dict (db.delete() is the blind delete)
    db.delete(b"never-existed")
    db.delete(b"k", sync=True)
    assert db.get(b"k") is None


def test_bytes_like_accepted_and_other_types_rejected(db):
    db.put(bytearray(b"ba"), memoryview(b"mv"))
    assert db.get(memoryview(b"ba")) == b"mv"
    assert type(db.get(b"ba")) is bytes
    for bad in ("str", 1, None, 1.5):
        with pytest.raises(TypeError, match="key must be bytes"):
            db.put(bad, b"v")
        with pytest.raises(TypeError, match="value must be bytes"):
            db.put(b"k", bad)
    with pytest.raises(TypeError, match="key must be bytes.*not str"):
        db.get("str")
    with pytest.raises(TypeError):
        db.delete(3)
    with pytest.raises(TypeError, match="start must be bytes"):
        list(db.scan(start="a"))


def test_empty_values_and_empty_key(db):
    db.put(b"e", b"")
    db.put(b"", b"empty key")
    assert db.get(b"e") == b""
    assert b"e" in db
    assert db.get(b"") == b"empty key"
    db.flush()
    assert db.get(b"e") == b"" and db.get(b"") == b"empty key"


def test_size_limits_raise_value_error_and_change_nothing(db):
    with pytest.raises(ValueError, match="key is 65536 bytes; the limit is 65535"):
        db.put(b"x" * 65536, b"v")
    with pytest.raises(SizeLimitError):
        db.put(b"k", b"v" * (lsmkv.MAX_VALUE_SIZE + 1))
    with pytest.raises(SizeLimitError):
        with db.write_batch() as batch:
            batch.put(b"ok", b"1")
            batch.put(b"x" * 70000, b"v")
    assert db.get(b"ok") is None
    assert db.stats()["last_sequence"] == 0
    db.put(b"x" * 65535, b"max key")
    assert db.get(b"x" * 65535) == b"max key"


def test_write_batch_is_atomic_and_discarded_on_error(db):
    db.put(b"b", b"old")
    with db.write_batch(sync=True) as batch:
        batch.put(b"a", b"1")
        batch.delete(b"b")
        batch.put(b"c", b"3")
        assert db.get(b"a") is None  # nothing visible before the block ends
    assert (db.get(b"a"), db.get(b"b"), db.get(b"c")) == (b"1", None, b"3")
    with pytest.raises(RuntimeError):
        with db.write_batch() as batch:
            batch.put(b"d", b"4")
            raise RuntimeError("abort")
    assert db.get(b"d") is None
    with pytest.raises(ClosedError, match="already written"):
        batch.put(b"e", b"5")


def test_later_write_in_batch_wins(db):
    with db.write_batch() as batch:
        batch.put(b"k", b"1")
        batch.delete(b"k")
        batch.put(b"k", b"3")
    assert db.get(b"k") == b"3"


def test_scan_bounds_reverse_and_prefix(db):
    keys = [b"a", b"ab", b"abc", b"b", b"user:1", b"user:2", b"user;", b"\xff", b"\xff\xff"]
    for k in keys:
        db.put(k, k.upper())
    db.delete(b"b")
    live = sorted(set(keys) - {b"b"})
    assert [k for k, _ in db.scan()] == live
    assert [k for k, _ in db.scan(reverse=True)] == live[::-1]
    assert [k for k, _ in db.scan(start=b"ab", end=b"user:2")] == [b"ab", b"abc", b"user:1"]
    assert [k for k, _ in db.scan(start=b"ab", end=b"user:2", reverse=True)] == [b"user:1", b"abc", b"ab"]
    assert [k for k, _ in db.scan(prefix=b"user:")] == [b"user:1", b"user:2"]
    assert [k for k, _ in db.scan(prefix=b"user:", reverse=True)] == [b"user:2", b"user:1"]
    assert [k for k, _ in db.scan(prefix=b"\xff")] == [b"\xff", b"\xff\xff"]
    assert [k for k, _ in db.scan(prefix=b"a", start=b"ab", end=b"abc")] == [b"ab"]
    assert list(db.scan(start=b"z", end=b"a")) == []
    assert dict(db.scan())[b"abc"] == b"ABC"


def test_scan_sees_the_database_as_of_the_call(db):
    for i in range(300):
        db.put(b"k%03d" % i, b"v1")
    it = db.scan()
    first = next(it)
    for i in range(300):
        db.put(b"k%03d" % i, b"v2")
    db.put(b"k999", b"new")
    db.flush()
    rest = list(it)
    assert first == (b"k000", b"v1")
    assert len(rest) == 299 and all(v == b"v1" for _, v in rest)


def test_snapshot_is_a_point_in_time_view(db):
    db.put(b"a", b"1")
    db.put(b"b", b"1")
    with db.snapshot() as snap:
        db.put(b"a", b"2")
        db.delete(b"b")
        db.put(b"c", b"new")
        db.flush()
        db.put(b"a", b"3")
        assert snap.get(b"a") == b"1"
        assert snap[b"b"] == b"1"
        assert b"c" not in snap
        assert list(snap.scan()) == [(b"a", b"1"), (b"b", b"1")]
        assert list(snap.scan(reverse=True)) == [(b"b", b"1"), (b"a", b"1")]
        assert db.get(b"a") == b"3"
    with pytest.raises(ClosedError, match="snapshot used after close"):
        snap.get(b"a")
    assert db.stats()["snapshots"] == 0


def test_flush_moves_memtable_to_a_table(db):
    for i in range(100):
        db.put(b"%03d" % i, b"x" * 10)
    db.flush()
    stats = db.stats()
    assert stats["files_per_level"][0] >= 1
    assert stats["memtable_keys"] == 0 and stats["immutable_memtables"] == 0
    assert db.get(b"050") == b"x" * 10


def test_stats_has_the_documented_keys(db):
    db.put(b"k", b"v" * 100)
    db.flush()
    db.get(b"k")
    stats = db.stats()
    for key in ("engine", "entries", "user_bytes_written", "bytes_written", "write_amp", "bytes_read", "gets",
                "read_amp", "disk_bytes", "files_per_level", "stall_count", "stall_seconds",
                "flush_bytes_written", "wal_bytes_written", "compaction_bytes_written"):
        assert key in stats, key
    assert stats["engine"] == "lsm"
    assert stats["user_bytes_written"] == 101
    assert stats["bytes_written"] >= stats["wal_bytes_written"] + stats["flush_bytes_written"]
    assert stats["write_amp"] == pytest.approx(stats["bytes_written"] / 101)
    assert stats["disk_bytes"] > 0 and stats["gets"] == 1


def test_many_level0_tables_stay_correct(db_path):
    with lsmkv.open(db_path, write_buffer_size=2048, disable_auto_compactions=True) as db:
        model = {}
        for round_ in range(40):
            for i in range(0, 200, 3):
                k = b"key%04d" % ((i * 7 + round_) % 200)
                if (i + round_) % 5 == 0:
                    db.delete(k)
                    model.pop(k, None)
                else:
                    v = b"r%d" % round_
                    db.put(k, v)
                    model[k] = v
        db.flush()
        assert db.stats()["files_per_level"][0] >= 30
        assert dict(db.scan()) == model
        assert all(db.get(b"key%04d" % i) == model.get(b"key%04d" % i) for i in range(200))


def test_use_after_close_is_a_clear_error(db_path):
    db = lsmkv.open(db_path)
    db.put(b"k", b"v")
    db.close()
    db.close()  # idempotent
    for call in (lambda: db.get(b"k"), lambda: db.put(b"k", b"v"), lambda: db.scan(), lambda: db.snapshot(),
                 lambda: db.flush(), lambda: db.write_batch()):
        with pytest.raises(ClosedError, match="closed"):
            call()


def test_context_manager_closes(db_path):
    with lsmkv.open(db_path) as db:
        db.put(b"k", b"v")
    assert db.closed
    with lsmkv.open(db_path) as db:
        assert db.get(b"k") == b"v"


def test_read_only_handles_read_and_refuse_writes(db_path):
    with lsmkv.open(db_path) as db:
        db.put(b"k", b"v")
        db.flush()
        db.put(b"unflushed", b"in the log")
    ro1 = lsmkv.open(db_path, read_only=True)
    ro2 = lsmkv.open(db_path, read_only=True)
    try:
        assert ro1.get(b"k") == b"v" and ro2.get(b"unflushed") == b"in the log"
        with pytest.raises(ReadOnlyError, match="read_only=True"):
            ro1.put(b"x", b"y")
        with pytest.raises(ReadOnlyError):
            ro1.delete(b"k")
        with pytest.raises(ReadOnlyError):
            ro1.flush()
    finally:
        ro1.close()
        ro2.close()
    before = sorted(os.listdir(db_path))
    with lsmkv.open(db_path, read_only=True) as ro:
        list(ro.scan())
    assert sorted(os.listdir(db_path)) == before


def test_read_only_of_missing_database_fails_without_creating(tmp_path):
    path = tmp_path / "nothing"
    with pytest.raises(InvalidDatabaseError, match="does not exist"):
        lsmkv.open(str(path), read_only=True)
    assert not path.exists()


@pytest.mark.subprocess
def test_second_writer_process_gets_a_lock_error(db_path):
    with lsmkv.open(db_path) as db:
        db.put(b"k", b"v", sync=True)
        code = textwrap.dedent(f"""
            import lsmkv, sys
            try:
                lsmkv.open({db_path!r})
            except lsmkv.LockError as exc:
                print("LOCKED", exc)
                sys.exit(0)
            sys.exit(3)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "LOCKED" in out.stdout and "open for writing in another process" in out.stdout
        assert db.get(b"k") == b"v"
    with pytest.raises(LockError):
        a = lsmkv.open(db_path)
        try:
            lsmkv.open(db_path)
        finally:
            a.close()


def test_bad_paths_and_options_are_refused_and_change_nothing(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InvalidDatabaseError, match="is a file"):
        lsmkv.open(str(f))
    other = tmp_path / "other"
    other.mkdir()
    (other / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(InvalidDatabaseError, match="not an lsmkv or btree database"):
        lsmkv.open(str(other))
    assert os.listdir(other) == ["photo.jpg"]
    bt = tmp_path / "bt"
    bt.mkdir()
    (bt / "btree.pages").write_bytes(b"")
    with pytest.raises(InvalidDatabaseError, match="btree database, not a lsm database"):
        lsmkv.open(str(bt))
    with pytest.raises(OptionError, match="unknown option 'write_bufer_size'"):
        lsmkv.open(str(tmp_path / "new"), write_bufer_size=1)
    with pytest.raises(OptionError, match="block_size must be an integer"):
        lsmkv.open(str(tmp_path / "new"), block_size="big")
    with pytest.raises(OptionError, match="compression"):
        lsmkv.open(str(tmp_path / "new"), compression="lz4")
    for bad in (23, -(1 << 17) - 1, True, "fast"):
        with pytest.raises(OptionError, match="upper_compression_level must be an integer from -131072 to 22"):
            lsmkv.open(str(tmp_path / "new"), upper_compression_level=bad)
    with pytest.raises(OptionError, match="option compression_level must be an integer"):
        lsmkv.open(str(tmp_path / "new"), compression_level=None)
    assert not (tmp_path / "new").exists()
    with lsmkv.open(str(tmp_path / "exists")):
        pass
    with pytest.raises(InvalidDatabaseError, match="error_if_exists"):
        lsmkv.open(str(tmp_path / "exists"), error_if_exists=True)


def test_compression_off_and_custom_block_size(db_path):
    with lsmkv.open(db_path, compression=None, block_size=256, bloom_bits_per_key=0) as db:
        for i in range(500):
            db.put(b"%04d" % i, b"v" * 50)
        db.flush()
        assert db.get(b"0250") == b"v" * 50
        assert db.get(b"9999") is None
        assert len(list(db.scan())) == 500
