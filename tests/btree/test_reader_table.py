"""Snapshots that last across processes (btree/readers.py): a read-only
process's snapshot, cursor and transaction read exactly what they read at
first while the writer rewrites every key, checkpoints, vacuums and
restarts; the writer holds the slots they need back (stats() shows it) and
takes them again once they close or their process dies."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys

import pytest

import btree
from btree.readers import HEADER_SIZE, READERS_FILE, SLOT

N = 1500
CHILD = os.path.join(os.path.dirname(__file__), "..", "api", "snapshot_reader.py")


def _write_generation(db, gen: int) -> None:
    with db.write_batch() as batch:
        for i in range(N):
            key = b"k%05d" % i
            batch.put(key, b"g%d:" % gen + key * 8)


def _start_reader(path: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, CHILD, "btree", path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout.readline().strip() == "ready"
    return child


def _ask(child: subprocess.Popen, what: str) -> str:
    child.stdin.write(what + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()


@pytest.mark.subprocess
def test_a_read_only_process_reads_its_snapshot_while_the_writer_rewrites_checkpoints_restarts_and_vacuums(tmp_path):
    path = str(tmp_path / "db")
    db = btree.open(path, page_size=512, cache_size=32 * 512)
    _write_generation(db, 0)
    db.flush()
    child = _start_reader(path)
    try:
        for gen in range(1, 4):  # every key rewritten, checkpointed: slots freed, none reused
            _write_generation(db, gen)
            db.flush()
        stats = db.stats()
        assert stats["readers"] == 1 and stats["held_slots"] > 0
        assert stats["held_bytes"] == stats["held_slots"] * 512
        db.close()  # a writer that restarts knows nothing of the slots freed before
        db = btree.open(path, page_size=512, cache_size=32 * 512)
        for gen in range(4, 6):
            _write_generation(db, gen)
            db.flush()
        assert _ask(child, "check") == f"checked {N} {N} {N} {N // 50}"
        db.compact_range()  # a new page file; the reader keeps the old one open
        for gen in range(6, 8):
            _write_generation(db, gen)
            db.flush()
        assert _ask(child, "check") == f"checked {N} 0 {N} {N // 50}"  # (the cursor is at its end)
        assert _ask(child, "close") == "closed"
        assert db.stats()["readers"] == 0
    finally:
        child.stdin.close()
        child.wait(timeout=60)
        child.stdout.close()
    assert db.get(b"k00007") == b"g7:" + b"k00007" * 8
    db.close()
    assert btree.check(path).ok


@pytest.mark.subprocess
def test_the_writer_takes_the_held_slots_again_once_the_reader_closes(tmp_path):
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512, cache_size=32 * 512) as db:
        _write_generation(db, 0)
        db.flush()
        child = _start_reader(path)
        try:
            for gen in range(1, 4):
                _write_generation(db, gen)
                db.flush()
            held = db.stats()
            assert held["held_slots"] > 0
            assert _ask(child, "check") == f"checked {N} {N} {N} {N // 50}"
            assert _ask(child, "close") == "closed"
        finally:
            child.stdin.close()
            child.wait(timeout=60)
            child.stdout.close()
        _write_generation(db, 4)
        db.flush()
        after = db.stats()
        assert after["readers"] == 0 and after["held_slots"] == 0
        slots = after["slot_count"]
        for gen in range(5, 8):  # the freed slots are taken again: the file stops growing
            _write_generation(db, gen)
            db.flush()
        assert db.stats()["slot_count"] <= slots < held["slot_count"] + held["held_slots"]


@pytest.mark.crash
def test_a_killed_readers_slots_are_taken_again(tmp_path):
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512, cache_size=32 * 512) as db:
        _write_generation(db, 0)
        db.flush()
        child = _start_reader(path)
        _write_generation(db, 1)
        db.flush()
        assert db.stats()["readers"] == 1
        _write_generation(db, 2)
        db.flush()
        assert db.stats()["held_slots"] > 0
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        child.stdin.close()
        child.stdout.close()
        _write_generation(db, 3)
        db.flush()  # the checkpoint finds the reader gone and frees what it held
        stats = db.stats()
        assert stats["readers"] == 0 and stats["readers_cleared"] == 1 and stats["held_slots"] == 0
        assert db.check_invariants() == []


def test_a_slot_whose_owner_holds_no_lock_is_cleared_even_if_its_pid_lives(tmp_path):
    """A slot left by a dead reader whose pid now belongs to another live
    process (here: this one) is no reader: only the lock a live reader holds
    keeps a slot."""
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512) as db:
        _write_generation(db, 0)
        db.flush()
        epoch = db.stats()["checkpoint_epoch"]
        st = os.stat(os.path.join(path, "btree.pages"))
        with open(os.path.join(path, READERS_FILE), "r+b") as f:
            f.seek(HEADER_SIZE)
            f.write(SLOT.pack(1, os.getpid(), 0, 7, st.st_dev, st.st_ino, epoch, 0))
        assert db.stats()["readers"] == 0 and db.stats()["readers_cleared"] == 1
        with open(os.path.join(path, READERS_FILE), "rb") as f:
            f.seek(HEADER_SIZE)
            assert struct.unpack("<I", f.read(4))[0] == 0


def test_a_read_only_handles_snapshot_in_this_process_holds_the_writers_slots(tmp_path):
    """The same guarantee between two handles of one process (each has its
    own open file description of the table, so its own locks)."""
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512, cache_size=32 * 512) as db:
        _write_generation(db, 0)
        db.flush()
        with btree.open(path, read_only=True, cache_size=0) as ro:
            with ro.snapshot() as snap:
                for gen in range(1, 4):
                    _write_generation(db, gen)
                    db.flush()
                assert db.stats()["readers"] == 1 and db.stats()["held_slots"] > 0
                assert db.check_invariants() == [] and btree.check(path).ok  # held slots are no damage
                assert ro.stats()["snapshot_views"] == 1
                assert all(v == b"g0:" + k * 8 for k, v in snap.scan())
            assert ro.stats()["snapshot_views"] == 0
            ro.refresh()
            assert ro.get(b"k00001") == b"g3:" + b"k00001" * 8  # the handle moves on
        _write_generation(db, 4)
        db.flush()
        assert db.stats()["readers"] == 0 and db.stats()["held_slots"] == 0


def test_a_damaged_reader_table_is_made_afresh_by_the_writer_and_skipped_by_a_reader(tmp_path, caplog):
    """The table holds no durable state: a writer that finds it damaged
    makes it again; a read-only handle that finds it damaged (or cannot
    open it) still takes snapshots, unregistered, and says so in the log."""
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512) as db:
        _write_generation(db, 0)
    table = os.path.join(path, READERS_FILE)
    with open(table, "wb") as f:
        f.write(b"not a reader table")
    with btree.open(path, read_only=True) as ro:
        with ro.snapshot() as snap:
            assert snap.get(b"k00003") == b"g0:" + b"k00003" * 8
    assert "not registered in the reader table" in caplog.text
    with open(table, "rb") as f:
        assert f.read() == b"not a reader table"  # a reader changes nothing
    with btree.open(path, page_size=512) as db:
        assert db.stats()["readers"] == 0
        with btree.open(path, read_only=True) as ro, ro.snapshot():
            assert db.stats()["readers"] == 1
    with open(table, "rb") as f:
        assert f.read(8) == b"BTREADRS"


def test_a_full_table_refuses_one_more_reader_with_a_clear_error(tmp_path):
    from btree.readers import SLOTS, ReaderTable
    from lsmkv.base.errors import LsmkvError
    table = ReaderTable(str(tmp_path), create=True)
    try:
        slots = [table.register(3, (1, 2)) for _ in range(SLOTS)]
        assert sorted(slots) == list(range(SLOTS))
        with pytest.raises(LsmkvError, match=f"all {SLOTS} reader slots hold live readers"):
            table.register(3, (1, 2))
        table.unregister(slots[7])
        assert table.register(4, (1, 2)) == slots[7]
        assert len(table.readers((1, 2))) == SLOTS and table.oldest((1, 2)) == 3
    finally:
        table.close()
    reopened = ReaderTable(str(tmp_path), create=False)
    try:
        assert reopened.readers() == []  # close() cleared every slot it held
    finally:
        reopened.close()


def test_a_register_takes_its_last_slot_again_only_while_no_other_reader_holds_it(tmp_path):
    """Each table description tries the slot it used last first; a slot
    another description took since (or a dead reader's) is never shared."""
    from btree.readers import ReaderTable, _process_start_time
    path = str(tmp_path / "db")
    btree.open(path).close()
    a, b = ReaderTable(path, create=False), ReaderTable(path, create=False)
    try:
        first = a.register(7, (1, 2))
        a.unregister(first)
        assert a.register(7, (1, 2)) == first  # its own last slot, free again
        a.unregister(first)
        taken_by_b = b.register(8, (1, 2))
        assert taken_by_b == first  # the lowest free slot
        again = a.register(9, (1, 2))
        assert again != taken_by_b
        readers = {r.epoch: r for r in a.readers((1, 2))}
        assert set(readers) == {8, 9}  # both registrations stand, neither overwrote the other
        assert readers[9].pid == os.getpid() and readers[9].start_time == _process_start_time(os.getpid())
    finally:
        a.close(), b.close()
