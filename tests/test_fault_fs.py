"""The fault-injecting file system, and the LSM engine under it."""

from __future__ import annotations

import errno
import os

import pytest

import lsmkv
from lsmkv.base.fault_fs import FaultInjectionFS


def synced_then_appended(fs: FaultInjectionFS, d: str, name: str, synced: bytes, unsynced: bytes) -> None:
    """File ``name`` made in directory ``d`` through ``fs`` with ``synced``
    written and synced (the directory too), then ``unsynced`` appended and
    the file closed without a sync."""
    f = fs.create(os.path.join(d, name))
    f.append(synced)
    f.sync()
    fs.sync_dir(d)
    f.append(unsynced)
    f.close()


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
    synced_then_appended(fs, d, "synced", b"kept", b"-lost")
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
    db._simulate_crash()
    fs.power_loss()
    with lsmkv.open(path, fs=fs) as db2:
        for i in range(0, last_synced + 1):
            assert db2.get(b"k%05d" % i) == b"v%d" % i, i
        present = [i for i in range(3050) if db2.get(b"k%05d" % i) is not None]
        # Whatever survived beyond the last sync is a prefix of the writes.
        assert present == list(range(len(present)))


def test_cut_power_fails_that_call_and_every_later_one(tmp_path):
    fs = FaultInjectionFS()
    f = fs.create(str(tmp_path / "a"))  # call 1 (open)
    fs.cut_power(2, torn_prefix=3)
    f.append(b"first")  # call 1 from now
    with pytest.raises(OSError):
        f.append(b"second")  # call 2: torn, power off
    assert not fs.powered
    with pytest.raises(OSError, match="power is off"):
        f.sync()
    with pytest.raises(OSError, match="power is off"):
        fs.listdir(str(tmp_path))
    f.close()  # releases without I/O
    fs.power_on()  # a process crash: everything handed to the OS stays
    assert (tmp_path / "a").read_bytes() == b"firstsec"
    assert fs.counters.power_cuts == 1


def test_mapped_log_keeps_its_length_and_loses_unsynced_bytes_as_zeros(tmp_path):
    from lsmkv.base.fs import MappedAppendFile
    fs = FaultInjectionFS()
    log = fs.create_log(str(tmp_path / "1.log"), 8192)
    assert isinstance(log._inner, MappedAppendFile)  # the real mapped path, wrapped
    log.append(b"synced")
    log.sync()
    fs.sync_dir(str(tmp_path))
    log.append(b"-lost")
    log.abandon()
    fs.power_loss()
    data = (tmp_path / "1.log").read_bytes()
    assert data.startswith(b"synced") and data[6:] == bytes(len(data) - 6) and len(data) >= 8192


def test_fallocate_faults_on_creation_and_on_growth(tmp_path):
    fs = FaultInjectionFS()
    fs.fail("fallocate", error=errno.ENOSPC, nth=1)
    with pytest.raises(OSError) as info:
        fs.create_log(str(tmp_path / "1.log"), 4096)
    assert info.value.errno == errno.ENOSPC
    assert (tmp_path / "1.log").read_bytes() == b""  # created, empty, as posix_fallocate leaves it
    log = fs.create_log(str(tmp_path / "2.log"), 4096)  # the rule fired once
    fs.fail("fallocate", error=errno.ENOSPC, nth=1, sticky=True)
    log.append(b"x" * 4000)  # fits the preallocated space: no fallocate
    with pytest.raises(OSError):
        log.append(b"y" * 200)  # needs more space
    fs.clear()
    log.append(b"y" * 200)
    log.close()
    assert (tmp_path / "2.log").read_bytes() == b"x" * 4000 + b"y" * 200


def test_full_disk_fails_creations_not_opens_of_existing_files(tmp_path):
    fs = FaultInjectionFS()
    (tmp_path / "old").write_bytes(b"data")
    fs.fail("open", error=errno.ENOSPC, nth=1, sticky=True)
    assert fs.read_file(str(tmp_path / "old")) == b"data"
    with pytest.raises(OSError):
        fs.create(str(tmp_path / "new"))


def test_a_removal_undone_by_power_loss_brings_back_only_synced_bytes(tmp_path):
    fs = FaultInjectionFS()
    d = str(tmp_path)
    synced_then_appended(fs, d, "f", b"synced", b"-unsynced")
    fs.remove(os.path.join(d, "f"))
    fs.power_loss()
    assert (tmp_path / "f").read_bytes() == b"synced"


def test_partial_power_loss_keeps_a_prefix_of_unsynced_appends(tmp_path):
    kept = set()
    for seed in range(30):
        fs = FaultInjectionFS(seed=seed)
        path = tmp_path / f"f{seed}"
        f = fs.create(str(path))
        f.append(b"base")
        f.sync()
        fs.sync_dir(str(tmp_path))
        f.append(b"0123456789")
        f.close()
        fs.power_loss(partial=True)
        data = path.read_bytes()
        assert (b"base" + b"0123456789").startswith(data) and data.startswith(b"base")
        kept.add(len(data))
    assert len(kept) > 3  # different prefixes survive


def test_flips_are_recorded_and_can_be_aimed(tmp_path):
    fs = FaultInjectionFS(seed=1)
    (tmp_path / "f").write_bytes(bytes(1000))
    fs.flip_bits(nth=2, path_contains="f", within=(100, 110))
    f = fs.open_readable(str(tmp_path / "f"))
    assert f.read_at(0, 50) == bytes(50)  # outside the range: not counted
    assert f.read_at(0, 1000) == bytes(1000)  # read 1 of the range
    data = f.read_at(0, 1000)  # read 2: flipped
    flip = fs.flips[0]
    assert 100 <= flip.offset < 110 and data[flip.offset] == 1 << flip.bit
    assert fs.matching_reads == 2 and fs.counters.bit_flips == 1
