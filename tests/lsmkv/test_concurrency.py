"""One DB shared by threads: writers, readers, scanners and flushes at once."""

from __future__ import annotations

import os
import random
import threading

import pytest

import lsmkv


@pytest.mark.slow
def test_readers_see_whole_batches_while_writers_flush(db_path):
    """Each batch sets every key of a group to the same value; no reader may
    ever see a group half-updated, in gets under a snapshot or in scans."""
    db = lsmkv.open(db_path, write_buffer_size=8 * 1024, block_size=256)
    groups = 20
    width = 5
    with db.write_batch() as b:
        for g in range(groups):
            for i in range(width):
                b.put(b"g%02d-%d" % (g, i), b"0")
    stop = threading.Event()
    errors: list[str] = []

    def writer(seed):
        rng = random.Random(seed)
        n = 0
        while not stop.is_set():
            g = rng.randrange(groups)
            n += 1
            value = b"%d-%d" % (seed, n)
            with db.write_batch() as b:
                for i in range(width):
                    b.put(b"g%02d-%d" % (g, i), value)
            if n % 97 == 0:
                db.flush()

    def scanner():
        while not stop.is_set():
            rows = list(db.scan())
            if len(rows) != groups * width:
                errors.append(f"scan saw {len(rows)} rows")
            for g in range(groups):
                values = {v for k, v in rows if k.startswith(b"g%02d-" % g)}
                if len(values) != 1:
                    errors.append(f"scan saw group {g} half-written: {values}")

    def snapshot_reader():
        rng = random.Random(5)
        while not stop.is_set():
            with db.snapshot() as snap:
                g = rng.randrange(groups)
                values = {snap.get(b"g%02d-%d" % (g, i)) for i in range(width)}
                if len(values) != 1:
                    errors.append(f"snapshot saw group {g} half-written: {values}")

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
    threads += [threading.Thread(target=scanner), threading.Thread(target=snapshot_reader)]
    for t in threads:
        t.start()
    stop_timer = threading.Timer(4.0, stop.set)
    stop_timer.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    stats = db.stats()
    assert stats["flush_count"] > 3 and stats["background_error"] is None
    final = dict(db.scan())
    db.close()
    with lsmkv.open(db_path) as db2:
        assert dict(db2.scan()) == final


def test_writes_from_many_threads_all_land(db_path):
    with lsmkv.open(db_path, write_buffer_size=16 * 1024) as db:
        def work(t):
            for i in range(1000):
                db.put(b"t%d-%04d" % (t, i), b"%d" % i, sync=(i % 250 == 0))
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(list(db.scan())) == 4000
        assert db.stats()["last_sequence"] == 4000
    with lsmkv.open(db_path) as db:
        assert all(db.get(b"t%d-%04d" % (t, 999)) == b"999" for t in range(4))


def test_closing_a_read_only_handle_removes_none_of_a_writers_files(tmp_path):
    """A read-only handle's view is older than the writer's: the tables the
    writer made since look obsolete from it, and closing it must not remove
    them (it once did, and the writer's next compaction failed)."""
    import lsmkv
    with lsmkv.open(tmp_path, disable_auto_compactions=True) as writer:
        writer.put(b"a", b"1")
        writer.flush()
        reader = lsmkv.open(tmp_path, read_only=True)
        for i in range(3):
            writer.put(b"k%d" % i, b"v")
            writer.flush()
        names = set(os.listdir(tmp_path))
        reader.close()
        assert set(os.listdir(tmp_path)) == names
        writer.compact_range()
        assert writer.get(b"k2") == b"v" and writer.get(b"a") == b"1"


def test_a_sweep_while_the_manifest_is_being_replaced_keeps_the_new_one(tmp_path, monkeypatch):
    """A flush or compaction that finds the manifest too large starts a new
    one under the manifest lock; a sweep of obsolete files runs without that
    lock (after another flush). The new manifest, written but not yet named
    by CURRENT, must survive the sweep: CURRENT names it a moment later, and
    a database whose CURRENT names a removed manifest cannot be opened."""
    from lsmkv.base.fault_fs import FaultInjectionFS
    from lsmkv.lsm import version

    fs = FaultInjectionFS()
    path = str(tmp_path / "db")
    db = lsmkv.open(path, fs=fs, compaction_executor="thread", disable_auto_compactions=True)
    for i in range(100):
        db.put(b"k%03d" % i, b"v%d" % i)
    monkeypatch.setattr(version, "MAX_MANIFEST_BYTES", 0)  # the next manifest append starts a new manifest
    stall = fs.stall("sync", path_contains="MANIFEST-")
    flusher = threading.Thread(target=db.flush)
    flusher.start()
    try:
        assert stall.wait_entered(), "the flush never synced a manifest"
        db._delete_obsolete_files()  # the sweep another flush or compaction would run now
    finally:
        stall.release()
        flusher.join()
    db.close()
    monkeypatch.undo()
    with lsmkv.open(path) as again:
        assert dict(again.scan()) == {b"k%03d" % i: b"v%d" % i for i in range(100)}
