"""What ends a snapshot or a cursor before its close(), as docs/api.md
("Snapshots") says: on btree a reload of the handle's view -- a writer's
compact_range() (or ingest, or failed write), a read-only handle moving to
a writer's newer checkpoint -- with SnapshotEndedError naming the reason,
on every later use; nothing on lsmkv."""

from __future__ import annotations

import pytest

import btree
import lsmkv
from lsmkv import ClosedError, SnapshotEndedError


def _fill(db, n=600, value=b"v"):
    for i in range(n):
        db.put(b"k%04d" % i, value * 20)


def test_btree_compact_range_ends_the_writers_snapshots_and_cursors(tmp_path):
    with btree.open(str(tmp_path / "db"), page_size=512) as db:
        _fill(db)
        db.flush()
        snap = db.snapshot()
        scan = iter(snap.scan())
        assert next(scan)[0] == b"k0000"
        cursor = db.iterator()
        cursor.seek_to_first()
        db.compact_range()
        for use in (lambda: snap.get(b"k0001"), lambda: list(scan), cursor.next, lambda: list(cursor),
                    lambda: snap.get(b"k0001")):  # every use says so, not only the first
            with pytest.raises(SnapshotEndedError, match=r"snapshot ended.*a compact_range\(\) rewrote"):
                use()
        snap.close()  # harmless, and from then on it is closed
        cursor.close()
        with pytest.raises(ClosedError):
            snap.get(b"k0001")
        with db.snapshot() as fresh:  # a new one reads
            assert fresh.get(b"k0001") == b"v" * 20


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


def test_btree_a_read_only_handle_ends_its_snapshots_when_it_moves_to_a_newer_checkpoint(tmp_path):
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512) as writer:
        _fill(writer)
        writer.flush()
        with btree.open(path, read_only=True, cache_size=0) as reader:
            snap = reader.snapshot()
            cursor = reader.iterator()
            cursor.seek_to_first()
            _fill(writer, value=b"w")  # every leaf changes
            writer.flush()
            with pytest.raises(SnapshotEndedError, match="snapshot ended.*a writer checkpointed"):
                snap.get(b"k0300")
            with pytest.raises(SnapshotEndedError):
                cursor.next()
            assert reader.get(b"k0300") == b"w" * 20  # the handle itself reads on
            later = reader.snapshot()
            reader.refresh()
            with pytest.raises(SnapshotEndedError, match=r"refresh\(\)"):
                later.get(b"k0300")
            snap.close(), cursor.close(), later.close()


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
