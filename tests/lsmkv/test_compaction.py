"""Leveled compaction: picking, merging, garbage collection, stalls."""

from __future__ import annotations

import os
import random
import threading

import pytest

import lsmkv
from lsmkv.lsm.check import check_db, dump_table
from lsmkv.lsm.compaction import CompactionLimits, level_scores, pick_compaction, pick_manual
from lsmkv.lsm.version import NUM_LEVELS, FileMeta, Version

SMALL = dict(write_buffer_size=16 * 1024, block_size=512, level1_max_bytes=64 * 1024, target_file_size=16 * 1024,
             l0_compaction_trigger=2, compaction_executor="thread")


def meta(n, lo, hi, size=1000, seq=1):
    return FileMeta(n, size, lo, hi, seq, seq, 10, 0)


def version(levels):
    full = [list(files) for files in levels] + [[] for _ in range(NUM_LEVELS - len(levels))]
    return Version(full)


LIMITS = CompactionLimits(level1_max_bytes=10_000, level_size_multiplier=10, target_file_size=1000,
                          l0_compaction_trigger=4, max_grandparent_overlap_bytes=10_000)


def test_scores_and_level0_pick_takes_overlapping_tables():
    l0 = [meta(5, b"a", b"c", seq=50), meta(4, b"x", b"z", seq=40), meta(3, b"b", b"d", seq=30),
          meta(2, b"c", b"e", seq=20)]
    l1 = [meta(10, b"a", b"b"), meta(11, b"d", b"f"), meta(12, b"g", b"h")]
    v = version([l0, l1])
    scores = level_scores(v, LIMITS)
    assert scores[0] == 1.0 and scores[1] == pytest.approx(0.3)
    c = pick_compaction(v, LIMITS)
    # The oldest (2: c..e) pulls in 3 (b..d) and 5 (a..c), not 4 (x..z).
    assert [f.number for f in c.inputs] == [5, 3, 2]
    assert [f.number for f in c.next_inputs] == [10, 11]
    assert c.output_level == 1


def test_level1_pick_takes_the_table_overlapping_least_per_byte():
    # Level 1 is over its target (3 x 6000 > 10,000 bytes). Table 10 overlaps
    # 9000 bytes of level 2 (1.5 per byte), 11 overlaps 8000 (1.33 per byte),
    # 12 overlaps 2000 but is small (2.0 per byte).
    l1 = [meta(10, b"a", b"c", 6000), meta(11, b"d", b"f", 6000), meta(12, b"g", b"h", 1000),
          meta(13, b"i", b"j", 6000)]
    l2 = [meta(20, b"a", b"b", 4000), meta(21, b"c", b"d", 5000), meta(22, b"e", b"e", 3000),
          meta(23, b"g", b"g", 2000), meta(24, b"i", b"i", 9000), meta(25, b"j", b"k", 9000)]
    c = pick_compaction(version([[], l1, l2]), LIMITS)
    assert [f.number for f in c.inputs] == [11] and [f.number for f in c.next_inputs] == [21, 22]
    assert not c.is_trivial_move(LIMITS)
    # A table nothing in level 2 overlaps costs nothing to move: a trivial move.
    l1.append(meta(14, b"x", b"z", 3000))
    c = pick_compaction(version([[], l1, l2]), LIMITS)
    assert [f.number for f in c.inputs] == [14] and not c.next_inputs
    assert c.is_trivial_move(LIMITS)
    # Ties go to the first table in key order.
    l1 = [meta(10, b"a", b"b", 6000), meta(11, b"c", b"d", 6000)]
    l2 = [meta(20, b"a", b"a", 3000), meta(21, b"d", b"d", 3000)]
    assert [f.number for f in pick_compaction(version([[], l1, l2]), LIMITS).inputs] == [10]


def test_level1_inputs_grow_to_tables_inside_the_chosen_range_for_free():
    # 11 (c..d) overlaps least; level 2's table 21 (b..g) joins, and 10 and 12
    # lie inside b..g: they come along, since they add no level-2 table.
    l1 = [meta(10, b"b", b"b", 3000), meta(11, b"c", b"d", 6000), meta(12, b"e", b"f", 3000),
          meta(13, b"h", b"i", 3000)]
    l2 = [meta(20, b"a", b"a", 9000), meta(21, b"b", b"g", 9000), meta(22, b"h", b"z", 90000)]
    c = pick_compaction(version([[], l1, l2]), LIMITS)
    assert [f.number for f in c.inputs] == [10, 11, 12] and [f.number for f in c.next_inputs] == [21]
    # Growing that would pull in another level-2 table does not happen.
    l2 = [meta(20, b"a", b"a", 9000), meta(21, b"b", b"e", 9000), meta(22, b"f", b"z", 90000)]
    c = pick_compaction(version([[], l1, l2]), LIMITS)
    assert [f.number for f in c.inputs] == [11] and [f.number for f in c.next_inputs] == [21]
    # Nor growing past 25 target files of bytes.
    limits = CompactionLimits(level1_max_bytes=10_000, level_size_multiplier=10, target_file_size=600,
                              l0_compaction_trigger=4, max_grandparent_overlap_bytes=10_000)
    l2 = [meta(20, b"a", b"a", 9000), meta(21, b"b", b"g", 9000), meta(22, b"h", b"z", 90000)]
    c = pick_compaction(version([[], l1, l2]), limits)
    assert [f.number for f in c.inputs] == [11]


def test_nothing_to_do_below_the_triggers():
    v = version([[meta(1, b"a", b"b")], [meta(2, b"a", b"b")]])
    assert pick_compaction(v, LIMITS) is None


def fill(db, n, seed=0, value_size=100):
    rng = random.Random(seed)
    keys = [b"key%06d" % i for i in range(n)]
    rng.shuffle(keys)
    for k in keys:
        db.put(k, k + b"-" + bytes(value_size))
    return keys


def test_background_compaction_keeps_levels_sorted_and_data_intact(db_path):
    with lsmkv.open(db_path, **SMALL) as db:
        keys = fill(db, 5000)
        db.flush()
        assert db._compactor.wait_idle(timeout=60)
        stats = db.stats()
        assert stats["compactions"] > 0
        assert sum(stats["files_per_level"][1:]) > 0
        # The per-level breakdown adds up to the totals; nothing compacts into level 0.
        levels = stats["levels"]
        assert sum(lv["compactions_into"] for lv in levels) == stats["compactions"]
        assert sum(lv["compaction_bytes_written_into"] for lv in levels) == stats["compaction_bytes_written"]
        assert sum(lv["compaction_bytes_read_into"] for lv in levels) == stats["compaction_bytes_read"]
        assert levels[0]["compactions_into"] == 0 and levels[1]["compaction_bytes_written_into"] > 0
        assert (sum(lv["bytes_moved_into"] for lv in levels) > 0) == (stats["trivial_moves"] > 0)
        assert stats["files_per_level"][0] < SMALL["l0_compaction_trigger"] + 1
        for level in range(1, NUM_LEVELS):
            files = db._state.version.levels[level]
            assert all(a.largest < b.smallest for a, b in zip(files, files[1:]))
        assert [k for k, _ in db.scan()] == sorted(keys)
        assert all(db.get(k) == k + b"-" + bytes(100) for k in keys[:500])
    assert check_db(db_path).ok


@pytest.mark.slow
def test_deleting_half_then_compacting_removes_tombstones_and_dead_values(db_path):
    with lsmkv.open(db_path, **SMALL) as db:
        keys = fill(db, 6000, value_size=200)
        db.compact_range()
        full = db.stats()
        deleted = set(keys[::2])
        for k in deleted:
            db.delete(k)
        db.compact_range()
        stats = db.stats()
        assert stats["table_tombstones"] == 0
        assert stats["table_entries"] == len(keys) - len(deleted)
        assert stats["tombstones_dropped"] >= len(deleted)
        assert stats["entries_dropped"] >= len(deleted)
        assert sum(stats["bytes_per_level"]) < 0.6 * sum(full["bytes_per_level"])
        assert all(db.get(k) is None for k in list(deleted)[:300])
        measured = db.stats(space_amp=True)
        assert measured["live_bytes"] == sum(len(k) + len(k) + 1 + 200 for k in set(keys) - deleted)
        assert 0 < measured["space_amp"] < 1.2
    dumped = set()
    for name in os.listdir(db_path):
        if name.endswith(".sst"):
            info = dump_table(os.path.join(db_path, name))
            assert info["properties"]["tombstones"] == 0
            dumped |= {row["key"] for row in info["entries"]}
    assert dumped == set(keys) - deleted
    with lsmkv.open(db_path) as db:
        assert [k for k, _ in db.scan()] == sorted(set(keys) - deleted)


def test_overwritten_versions_are_dropped_but_snapshots_keep_theirs(db_path):
    with lsmkv.open(db_path, **SMALL) as db:
        for i in range(2000):
            db.put(b"k%04d" % i, b"v1")
        snap = db.snapshot()
        for i in range(2000):
            db.put(b"k%04d" % i, b"v2")
        for i in range(0, 2000, 2):
            db.delete(b"k%04d" % i)
        db.compact_range()
        # The snapshot still sees every v1; the tombstones it cannot see as
        # "older" data are kept because v1 lies below them for the snapshot.
        assert all(snap.get(b"k%04d" % i) == b"v1" for i in range(0, 2000, 7))
        assert len(list(snap.scan())) == 2000
        assert db.get(b"k0001") == b"v2" and db.get(b"k0000") is None
        entries_with_snapshot = db.stats()["table_entries"]
        snap.close()
        db.compact_range()
        stats = db.stats()
        assert stats["table_entries"] == 1000 < entries_with_snapshot
        assert stats["table_tombstones"] == 0


def test_open_scan_keeps_its_files_until_it_is_done(db_path):
    with lsmkv.open(db_path, **SMALL) as db:
        fill(db, 3000)
        db.flush()
        it = db.scan()
        first = next(it)
        before = {n for n in os.listdir(db_path) if n.endswith(".sst")}
        for i in range(3000):
            db.put(b"key%06d" % i, b"new")
        db.compact_range()
        rest = list(it)
        assert len(rest) == 2999 and first[1] != b"new" and all(v != b"new" for _, v in rest)
        del it, rest
        db.compact_range()
        after = {n for n in os.listdir(db_path) if n.endswith(".sst")}
        assert not before & after  # the scan's tables were deleted once it was gone


@pytest.mark.slow
def test_level0_triggers_slow_and_stop_writers(db_path):
    opts = dict(SMALL, write_buffer_size=4096, l0_compaction_trigger=2, l0_slowdown_trigger=3, l0_stop_trigger=4,
                delayed_write_rate=2 * 1024 * 1024, max_immutable_memtables=1)
    with lsmkv.open(db_path, **opts) as db:
        most = 0
        for i in range(20000):
            db.put(b"%08d" % random.randrange(10**8), b"x" * 50)
            if i % 50 == 0:
                most = max(most, len(db._state.version.levels[0]))
        stats = db.stats()
        assert stats["slowdown_count"] > 0 or stats["stall_count"] > 0
        # A stopped writer lets queued immutable memtables finish flushing, no more.
        assert most <= opts["l0_stop_trigger"] + opts["max_immutable_memtables"]


def test_compaction_in_a_worker_process(db_path):
    with lsmkv.open(db_path, **dict(SMALL, compaction_executor="process")) as db:
        keys = fill(db, 4000)
        for k in keys[:1000]:
            db.delete(k)
        db.compact_range()
        stats = db.stats()
        assert stats["compactions"] > 0 and stats["table_tombstones"] == 0
        assert len(list(db.scan())) == 3000
        worker = db._compactor._worker
        assert worker is not None and worker._proc is not None and worker._proc.poll() is None
    assert worker._proc is None  # stopped at close


def _exited(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(b")") + 2:][:1] in (b"Z", b"X")


@pytest.mark.crash
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to watch a process that is not our child")
def test_worker_whose_database_process_died_while_it_started_exits(tmp_path):
    """A DB process killed while its compaction worker is still starting (its
    parent-death signal not yet armed) must not leave the worker behind to run
    the job already in its pipe: the worker sees it has lost its parent and
    exits without reading a job."""
    import subprocess
    import sys
    import time

    read_end, write_end = os.pipe()  # the job pipe: this test keeps it open, so no end of file
    parent = subprocess.run(
        [sys.executable, "-c",
         "import os, subprocess, sys\n"
         "from lsmkv.lsm.compactor import _worker_environment\n"
         f"p = subprocess.Popen([sys.executable, '-m', 'lsmkv.lsm.compaction_worker'], stdin={read_end}, "
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_worker_environment())\n"
         "print(p.pid, flush=True)\n"
         "os._exit(0)\n"],
        pass_fds=(read_end,), capture_output=True, text=True, timeout=60, check=True)
    os.close(read_end)
    worker = int(parent.stdout)
    try:
        deadline = time.monotonic() + 60
        while not _exited(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _exited(worker), "the orphaned compaction worker is still waiting for a job"
    finally:
        os.close(write_end)
        if not _exited(worker):
            os.kill(worker, 9)


def test_tables_above_the_bottom_get_the_upper_compression_level(db_path):
    # Text of random words: zstd level 19 halves it, level -100 stores it raw.
    rng = random.Random(3)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(3, 9)))
             for _ in range(300)]

    def write(db, first):
        values = {}
        for i in range(first, 3000, 2):
            values[b"k%05d" % i] = b" ".join(rng.choice(words) for _ in range(40))
        for k, v in values.items():
            db.put(k, v)
        db.flush()
        return values

    def stored_per_raw_byte(db, level):
        files = db._state.version.levels[level]
        assert files
        raw = 0
        for f in files:
            props = db._tables.reader(f).properties
            raw += props.raw_key_bytes + props.raw_value_bytes
        return sum(f.size for f in files) / raw

    opts = dict(SMALL, block_size=4096, write_buffer_size=1 << 20, disable_auto_compactions=True,
                compression_level=19, upper_compression_level=-100)
    with lsmkv.open(db_path, **opts) as db:
        data = write(db, 0)
        assert stored_per_raw_byte(db, 0) > 0.95  # a flush: upper level
        compactor = db._compactor
        with compactor._lock:
            compactor._run(pick_manual(db._state.version, 0, None, None))  # nothing below: the bottom
            assert stored_per_raw_byte(db, 1) < 0.7
            compactor._run(pick_manual(db._state.version, 1, None, None))  # level 1 -> 2, still the bottom
        data.update(write(db, 1))  # keys between those below
        with compactor._lock:
            # Level 2 lies below this one's output: its tables stay fast to write.
            compactor._run(pick_manual(db._state.version, 0, None, None))
        assert db.stats()["files_per_level"][0] == 0
        assert stored_per_raw_byte(db, 1) > 0.95 and stored_per_raw_byte(db, 2) < 0.7
        assert dict(db.scan()) == data
    with lsmkv.open(db_path) as db:  # tables of either level read back alike
        assert dict(db.scan()) == data
        db.compact_range()  # everything to the bottom, level 2
        assert db.stats()["files_per_level"][:2] == [0, 0] and stored_per_raw_byte(db, 2) < 0.7
        assert dict(db.scan()) == data
    assert check_db(db_path).ok


def test_compact_range_on_a_subrange(db_path):
    with lsmkv.open(db_path, **SMALL) as db:
        fill(db, 3000)
        for i in range(1000, 2000):
            db.delete(b"key%06d" % i)
        db.compact_range(b"key001000", b"key002000")
        assert all(db.get(b"key%06d" % i) is None for i in range(1000, 2000, 37))
        assert db.get(b"key000999") is not None and db.get(b"key002000") is not None
        assert len(list(db.scan())) == 2000
    with pytest.raises(TypeError):
        with lsmkv.open(db_path, **SMALL) as db:
            db.compact_range("a")


@pytest.mark.slow
def test_concurrent_writes_reads_and_compactions(db_path):
    with lsmkv.open(db_path, **dict(SMALL, compaction_executor="process")) as db:
        stop = threading.Event()
        errors = []

        def reader():
            while not stop.is_set():
                rows = list(db.scan(prefix=b"stable"))
                if len(rows) != 200:
                    errors.append(len(rows))

        for i in range(200):
            db.put(b"stable%03d" % i, b"s")
        t = threading.Thread(target=reader)
        t.start()
        fill(db, 8000)
        stop.set()
        t.join()
        assert not errors
        assert db.stats()["compactions"] > 0
