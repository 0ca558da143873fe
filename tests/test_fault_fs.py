"""The fault-injecting file system, and the LSM engine under it."""

from __future__ import annotations

import errno
import os

import pytest

import lsmkv
from lsmkv.fault_fs import FaultInjectionFS


def test_nth_call_failures_and_counters(tmp_path):
    fs = FaultInjectionFS()
    fs.fail("write", nth=2, error=errno.ENOSPC)
    f = fs.create(str(tmp_path / "a"))
    f.append(b"one")
    with pytest.raises(OSError) as info:
        f.append(b"two")
    assert info.value.errno == errno.ENOSPC
    f.append(b"three")
    f.close()
    assert (tmp_path / "a").read_bytes() == b"onethree"
    assert fs.counters.calls["write"] == 3 and fs.counters.injected == {"write:ENOSPC": 1}


def test_torn_write_lands_a_prefix(tmp_path):
    fs = FaultInjectionFS()
    fs.fail("write", nth=1, torn_prefix=2)
    f = fs.create(str(tmp_path / "t"))
    with pytest.raises(OSError):
        f.append(b"abcdef")
    f.close()
    assert (tmp_path / "t").read_bytes() == b"ab"


def test_power_loss_drops_unsynced_data_and_directory_changes(tmp_path):
    fs = FaultInjectionFS()
    d = str(tmp_path)
    f = fs.create(os.path.join(d, "synced"))
    f.append(b"kept")
    f.sync()
    fs.sync_dir(d)
    f.append(b"-lost")
    f.close()
    g = fs.create(os.path.join(d, "new-unsynced-dir"))
    g.append(b"data")
    g.sync()
    g.close()
    fs.rename(os.path.join(d, "synced"), os.path.join(d, "renamed"))
    fs.power_loss()
    assert sorted(os.listdir(d)) == ["synced"]
    assert (tmp_path / "synced").read_bytes() == b"kept"


def test_paged_writes_since_sync_are_undone(tmp_path):
    fs = FaultInjectionFS()
    p = fs.open_paged(str(tmp_path / "pages"), create=True)
    p.write_at(0, b"A" * 8)
    p.sync()
    fs.sync_dir(str(tmp_path))
    p.write_at(0, b"B" * 4)
    p.write_at(8, b"C" * 8)
    fs.power_loss()
    assert (tmp_path / "pages").read_bytes() == b"A" * 8


def test_bit_flips_are_caught_by_lsmkv(tmp_path):
    fs = FaultInjectionFS(seed=3)
    path = str(tmp_path / "db")
    with lsmkv.open(path, fs=fs, compression=None) as db:
        for i in range(2000):
            db.put(b"k%05d" % i, b"v" * 40)
        db.flush()
    fs.flip_bits(probability=1.0)
    with pytest.raises(lsmkv.CorruptionError):
        with lsmkv.open(path, fs=fs) as db:
            for i in range(0, 2000, 50):
                db.get(b"k%05d" % i)
    fs.clear()
    assert fs.counters.bit_flips > 0


def test_lsmkv_power_loss_keeps_synced_writes(tmp_path):
    fs = FaultInjectionFS()
    path = str(tmp_path / "db")
    db = lsmkv.open(path, fs=fs, write_buffer_size=8192, compaction_executor="thread")
    for i in range(3050):
        db.put(b"k%05d" % i, b"v%d" % i, sync=(i % 100 == 99))
    last_synced = 2999  # writes after it were not synced
    # Crash: abandon the DB without closing it, then lose power.
    db._shutting_down = True
    with db._bg_cond:
        db._bg_cond.notify_all()
    db._bg_thread.join()
    db._compactor.stop()
    db._log = None
    db._lock_file.release()
    fs.power_loss()
    with lsmkv.open(path, fs=fs) as db2:
        for i in range(0, last_synced + 1):
            assert db2.get(b"k%05d" % i) == b"v%d" % i, i
        present = [i for i in range(3050) if db2.get(b"k%05d" % i) is not None]
        # Whatever survived beyond the last sync is a prefix of the writes.
        assert present == list(range(len(present)))
