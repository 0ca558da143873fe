"""Recovery at open: logs, torn tails, corruption, leftovers of crashes."""

from __future__ import annotations

import os

import pytest

import lsmkv
from lsmkv import CorruptionError, InvalidDatabaseError
from lsmkv.lsm.check import check_db
from lsmkv.lsm.version import DB_FORMAT_VERSION, VersionEdit
from lsmkv.lsm.wal import HEADER_SIZE, LogWriter


def logs(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".log"))


def tables(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".sst"))


def write_unflushed(path, n=50, **opts):
    """Write n keys that stay in the log (close() does not flush the memtable)."""
    with lsmkv.open(path, **opts) as db:
        for i in range(n):
            db.put(b"key%03d" % i, b"value%03d" % i, sync=True)
    return os.path.join(path, logs(path)[-1])


def test_unflushed_writes_are_replayed_from_the_log(db_path):
    write_unflushed(db_path)
    with lsmkv.open(db_path) as db:
        assert [db.get(b"key%03d" % i) for i in range(50)] == [b"value%03d" % i for i in range(50)]
        stats = db.stats()
        assert stats["recovery"]["batches"] == 50
        # Recovery flushed the replayed memtable to a table and started a new log.
        assert stats["files_per_level"][0] == 1
    assert len(logs(db_path)) == 1


def test_torn_tail_is_dropped_quietly(db_path):
    log = write_unflushed(db_path)
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.truncate(size - 5)  # cut into the last record
    with lsmkv.open(db_path) as db:
        assert db.get(b"key048") == b"value048"
        assert db.get(b"key049") is None
        assert db.stats()["recovery"]["torn_tail_bytes"] > 0


def test_corrupt_record_before_valid_ones_raises_naming_file_and_offset(db_path):
    log = write_unflushed(db_path, n=1600, write_buffer_size=1 << 20)
    assert os.path.getsize(log) > 40000  # spans two 32 KiB log blocks
    with open(log, "r+b") as f:
        f.seek(HEADER_SIZE + 20)
        byte = f.read(1)
        f.seek(HEADER_SIZE + 20)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        lsmkv.open(db_path)
    assert info.value.path == log and info.value.offset == 0
    assert lsmkv.open  # the failed open changed nothing:
    with pytest.raises(CorruptionError):
        lsmkv.open(db_path)
    # Salvage mode keeps every intact batch and reports the damage.
    with lsmkv.open(db_path, wal_recovery_mode="salvage") as db:
        assert db.get(b"key000") is None
        assert db.get(b"key1599") == b"value1599"
        dropped = db.stats()["recovery"]["dropped"]
        assert dropped and dropped[0][0] == log


def test_leftover_files_of_a_crash_are_removed(db_path):
    with lsmkv.open(db_path) as db:
        db.put(b"a", b"1")
        db.flush()
    for name in ("000999.sst", "001000.sst.tmp", "MANIFEST-000998"):
        with open(os.path.join(db_path, name), "wb") as f:
            f.write(b"junk")
    with lsmkv.open(db_path) as db:
        assert db.get(b"a") == b"1"
    names = os.listdir(db_path)
    assert "000999.sst" not in names and "001000.sst.tmp" not in names and "MANIFEST-000998" not in names


def test_interrupted_creation_is_created_afresh(db_path):
    os.makedirs(db_path)
    open(os.path.join(db_path, "LOCK"), "wb").close()
    with open(os.path.join(db_path, "MANIFEST-000002"), "wb") as f:
        f.write(b"partial")
    with lsmkv.open(db_path) as db:
        db.put(b"k", b"v")
    with lsmkv.open(db_path) as db:
        assert db.get(b"k") == b"v"


def test_damaged_current_and_missing_manifest(db_path):
    with lsmkv.open(db_path) as db:
        db.put(b"k", b"v")
    current = os.path.join(db_path, "CURRENT")
    good = open(current, "rb").read()
    with open(current, "wb") as f:
        f.write(b"garbage")
    with pytest.raises(CorruptionError, match="CURRENT does not name a manifest"):
        lsmkv.open(db_path)
    with open(current, "wb") as f:
        f.write(b"MANIFEST-777777\n")
    with pytest.raises(CorruptionError, match="which is missing"):
        lsmkv.open(db_path)
    with open(current, "wb") as f:
        f.write(good)
    with lsmkv.open(db_path) as db:
        assert db.get(b"k") == b"v"


def test_missing_table_is_reported_at_open_and_by_check(db_path):
    with lsmkv.open(db_path) as db:
        db.put(b"k", b"v")
        db.flush()
    os.remove(os.path.join(db_path, tables(db_path)[0]))
    with pytest.raises(CorruptionError, match="recorded in the manifest is missing"):
        lsmkv.open(db_path)
    report = check_db(db_path)
    assert not report.ok and "missing" in report.problems[0]


def test_corrupted_table_block_is_an_error_never_data(db_path):
    with lsmkv.open(db_path, compression=None) as db:
        for i in range(1000):
            db.put(b"key%04d" % i, b"value%04d" % i)
        db.flush()
    table = os.path.join(db_path, tables(db_path)[0])
    with open(table, "r+b") as f:
        f.seek(10)
        f.write(b"\x00\x00\x00")
    with lsmkv.open(db_path) as db:
        with pytest.raises(CorruptionError, match="block checksum mismatch") as info:
            db.get(b"key0000")
        assert info.value.path == table and info.value.offset == 0
        with pytest.raises(CorruptionError):
            list(db.scan())
        assert db.get(b"key0999") == b"value0999"
    report = check_db(db_path)
    assert not report.ok and any("checksum mismatch" in p for p in report.problems)


def test_newer_format_version_is_refused(db_path):
    with lsmkv.open(db_path) as db:
        db.put(b"k", b"v")
    manifest = [n for n in os.listdir(db_path) if n.startswith("MANIFEST-")][0]
    edit = VersionEdit()
    edit.format_version = DB_FORMAT_VERSION + 1
    f = lsmkv.Options().fs.create(os.path.join(db_path, manifest))
    LogWriter(f).add_record(edit.encode())
    f.close()
    with pytest.raises(InvalidDatabaseError, match=f"format version {DB_FORMAT_VERSION + 1} is newer"):
        lsmkv.open(db_path)


def test_logs_are_deleted_once_flushed(db_path):
    with lsmkv.open(db_path, write_buffer_size=4096) as db:
        for i in range(2000):
            db.put(b"%05d" % i, b"x" * 20)
        db.flush()
        assert len(logs(db_path)) == 1
        assert db.stats()["flush_count"] > 5
    report = check_db(db_path)
    assert report.ok, report.problems
