"""A snapshot or a cursor lasts until its close(), as docs/api.md
("Snapshots") says, whatever the writer does meanwhile: on btree a writer's
compact_range() and checkpoints, a read-only handle's refresh() and moves to
a writer's newer checkpoint (btree/readers.py keeps what they read); on
lsmkv flushes and compactions."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import btree
import lsmkv
from lsmkv import ClosedError


def _fill(db, n=600, value=b"v"):
    for i in range(n):
        db.put(b"k%04d" % i, value * 20)


def _expected(value=b"v", n=600):
    return [(b"k%04d" % i, value * 20) for i in range(n)]


def test_btree_compact_range_keeps_the_writers_snapshots_and_cursors(tmp_path):
    with btree.open(str(tmp_path / "db"), page_size=512) as db:
        _fill(db)
        db.flush()
        snap = db.snapshot()
        scan = iter(snap.scan())
        assert next(scan)[0] == b"k0000"
        cursor = db.iterator()
        cursor.seek_to_first()
        for round_ in range(3):
            _fill(db, value=b"w%d" % round_)  # every key rewritten, then the file rewritten
            db.compact_range()
        assert snap.get(b"k0001") == b"v" * 20
        assert list(scan) == _expected()[1:]
        cursor.next()
        assert cursor.key() == b"k0001" and cursor.value() == b"v" * 20
        assert [k for k, _ in cursor] == [b"k%04d" % i for i in range(1, 600)]
        assert db.stats()["snapshot_views"] == 1  # the old file, open for them
        snap.close()
        cursor.close()
        assert db.stats()["snapshot_views"] == 0
        with pytest.raises(ClosedError):
            snap.get(b"k0001")
        with db.snapshot() as fresh:  # a new one reads the new file
            assert fresh.get(b"k0001") == b"w2" * 20


def test_btree_a_checkpoint_does_not_end_the_writers_snapshots(tmp_path):
    with btree.open(str(tmp_path / "db"), page_size=512, cache_size=16 * 512) as db:
        _fill(db)
        with db.snapshot() as snap, db.iterator() as cursor:
            cursor.seek_to_first()
            _fill(db, value=b"w")
            db.flush()  # a checkpoint: the pages go to the file
            assert snap.get(b"k0001") == b"v" * 20
            assert len(list(snap.scan())) == 600
            cursor.next()
            assert cursor.key() == b"k0001" and cursor.value() == b"v" * 20


def test_btree_a_read_only_handles_snapshots_outlive_the_writers_checkpoints_and_refresh(tmp_path):
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512) as writer:
        _fill(writer)
        writer.flush()
        with btree.open(path, read_only=True, cache_size=0) as reader:
            snap = reader.snapshot()
            cursor = reader.iterator()
            cursor.seek_to_first()
            for round_ in range(4):
                _fill(writer, value=b"w%d" % round_)  # every leaf changes
                writer.flush()
            assert writer.stats()["readers"] == 1 and writer.stats()["held_slots"] > 0
            assert snap.get(b"k0300") == b"v" * 20
            cursor.next()
            assert cursor.key() == b"k0001" and cursor.value() == b"v" * 20
            reader.refresh()
            assert reader.get(b"k0300") == b"w3" * 20  # the handle itself moves on
            later = reader.snapshot()
            _fill(writer, value=b"x")
            writer.compact_range()
            reader.refresh()
            assert later.get(b"k0300") == b"w3" * 20 and snap.get(b"k0300") == b"v" * 20
            assert list(snap.scan()) == _expected()
            snap.close(), cursor.close(), later.close()
            writer.flush()
            assert writer.stats()["readers"] == 0 and writer.stats()["held_slots"] == 0


def test_lsm_compaction_and_flushes_never_end_a_snapshot_or_cursor(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), write_buffer_size=4096, compaction_executor="thread") as db:
        _fill(db)
        with db.snapshot() as snap, db.iterator() as cursor:
            cursor.seek_to_first()
            _fill(db, value=b"w")
            db.flush()
            db.compact_range()
            assert snap.get(b"k0001") == b"v" * 20
            assert len(list(snap.scan())) == 600
            cursor.next()
            assert cursor.key() == b"k0001" and cursor.value() == b"v" * 20


READER = os.path.join(os.path.dirname(__file__), "snapshot_reader.py")


def _generation(db, gen: int, n: int = 1500) -> None:
    with db.write_batch() as batch:
        for i in range(n):
            key = b"k%05d" % i
            batch.put(key, b"g%d:" % gen + key * 8)


@pytest.mark.subprocess
@pytest.mark.parametrize("engine", ["lsm", "btree"])
def test_a_read_only_processs_snapshot_cursor_and_transaction_outlive_the_writer_compacting_everything_away(
        tmp_path, engine):
    """A read-only process takes a snapshot, a cursor and a transaction;
    the writer then rewrites every key and compacts the store (lsmkv: every
    table it read is deleted; btree: the page file is replaced) again and
    again; the reader still reads exactly what it read at first."""
    path = str(tmp_path / "db")
    if engine == "lsm":
        db = lsmkv.open(path, write_buffer_size=64 << 10, compaction_executor="thread")
    else:
        db = btree.open(path, page_size=512, cache_size=32 * 512)
    _generation(db, 0)
    db.flush()
    db.compact_range()
    before = set(os.listdir(path))
    child = subprocess.Popen([sys.executable, READER, engine, path], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        for gen in range(1, 4):
            _generation(db, gen)
            db.flush()
            db.compact_range()
        if engine == "lsm":
            tables = {name for name in before if name.endswith(".sst")}
            assert tables and not tables & set(os.listdir(path)), "the old tables should be deleted"
        child.stdin.write("check\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "checked 1500 1500 1500 30"
    finally:
        child.stdin.close()
        child.wait(timeout=60)
        child.stdout.close()
    assert db.get(b"k00002") == b"g3:" + b"k00002" * 8
    db.close()
