"""Range deletes in the LSM engine: ``db.delete_range(start, end)`` and
``batch.delete_range``, written as fragmented range tombstones
(lsmkv/lsm/range_tombstones.py) and honoured by every read, every
compaction, reopen, the tools; checked against a dict model too."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import lsmkv
from lsmkv.base.merge_operators import Append, UInt64Add
from lsmkv.base.errors import CorruptionError, InvalidArgumentError, ReadOnlyError
from lsmkv.base.filenames import table_name
from lsmkv.lsm.check import check_db
from lsmkv.lsm.range_del_compaction import drop_covered, surviving_range_dels
from lsmkv.lsm.table.columns import Columns
from lsmkv.lsm.range_tombstones import FragmentedTombstones
from lsmkv.lsm.table.range_del_block import decode_range_dels, encode_range_dels
from lsmkv.lsm.table.reader import TableReader
from lsmkv.lsm.wal import LogReader
from lsmkv.lsm.write_batch import RANGE_DELETE, log_batches
from lsmkv.base.fs import DEFAULT_FS

from helpers.model_rules import put_and_delete_rules

KEYS = [b"k%03d" % i for i in range(200)]


def fill(db, keys=KEYS, value=b"v"):
    with db.write_batch() as b:
        for k in keys:
            b.put(k, value + k)


def expected(deleted_ranges, keys=KEYS, value=b"v"):
    return [(k, value + k) for k in keys if not any(a <= k < b for a, b in deleted_ranges)]


def tables(db):
    return [f for files in db._state.version.levels for f in files]


def open_two_levels_with_a_tombstone_above(db_path, start: bytes, end: bytes):
    """A database (open, automatic compactions off) with KEYS compacted
    below level 0 and a table in level 0 holding only the range tombstone
    [start, end)."""
    db = lsmkv.open(db_path, write_buffer_size=1 << 20, disable_auto_compactions=True)
    fill(db)
    db.flush()
    db.compact_range()
    db.delete_range(start, end)
    db.flush()
    return db


# -- the fragmented list ------------------------------------------------------------------------

def test_fragments_of_overlapping_and_nested_ranges():
    f = FragmentedTombstones.build([(b"c", b"g", 5), (b"a", b"e", 3), (b"d", b"f", 9)])
    assert list(zip(f.starts, f.ends, f.seqs)) == [
        (b"a", b"c", (3,)), (b"c", b"d", (5, 3)), (b"d", b"e", (9, 5, 3)), (b"e", b"f", (9, 5)), (b"f", b"g", (5,))]
    assert f.covering_seq(b"d", 100) == 9
    assert f.covering_seq(b"d", 8) == 5
    assert f.covering_seq(b"d", 4) == 3
    assert f.covering_seq(b"d", 2) == 0
    assert f.covering_seq(b"g", 100) == 0  # the end is exclusive
    assert f.visible_spans(100) == ([b"a"], [b"g"])
    assert f.visible_spans(4) == ([b"a"], [b"e"])
    assert f.clipped(b"b", b"d\x00").starts == [b"b", b"c", b"d"]
    # Any order of the same tombstones gives the same fragments.
    assert FragmentedTombstones.build([(b"d", b"f", 9), (b"c", b"g", 5), (b"a", b"e", 3)]) == f


def test_range_tombstone_block_round_trip_and_rejects_malformed():
    f = FragmentedTombstones.build([(b"c", b"g", 5), (b"a", b"e", 3)])
    assert decode_range_dels(encode_range_dels(f)) == f
    overlapping = FragmentedTombstones([b"a", b"b"], [b"c", b"d"], [(1,), (2,)])
    with pytest.raises(CorruptionError, match="overlaps"):
        decode_range_dels(encode_range_dels(overlapping))
    unordered = FragmentedTombstones([b"a"], [b"c"], [(1, 2)])
    with pytest.raises(CorruptionError, match="in order"):
        decode_range_dels(encode_range_dels(unordered))


# -- the API ------------------------------------------------------------------------------------

def test_bad_arguments_change_nothing(db):
    fill(db)
    with pytest.raises(InvalidArgumentError, match="b'k2'.*b'k1'"):
        db.delete_range(b"k2", b"k1")
    with pytest.raises(TypeError):
        db.delete_range("k0", b"k1")
    with pytest.raises(InvalidArgumentError):
        with db.write_batch() as b:
            b.put(b"x", b"y")
            b.delete_range(b"z", b"a")
    seq = db.stats()["last_sequence"]
    db.delete_range(b"k010", b"k010")  # empty: nothing written
    assert db.stats()["last_sequence"] == seq
    assert list(db.scan()) == expected([]) and db.get(b"x") is None


def test_read_only_handle_refuses(db_path):
    lsmkv.open(db_path).close()
    with lsmkv.open(db_path, read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.delete_range(b"a", b"b")
        with pytest.raises(ReadOnlyError):
            ro.write_batch()


@pytest.mark.parametrize("where", ["memtable", "flushed", "level1", "both_compacted", "reopened"])
def test_covered_keys_are_gone_everywhere(db_path, where):
    db = lsmkv.open(db_path, write_buffer_size=1 << 20, disable_auto_compactions=True)
    fill(db)
    if where in ("level1", "both_compacted"):
        db.flush()
        db.compact_range()
    elif where == "flushed":
        db.flush()
    db.delete_range(b"k050", b"k150")
    if where in ("flushed", "level1"):
        db.flush()
    if where == "both_compacted":
        db.compact_range()
    if where == "reopened":
        db.close()
        db = lsmkv.open(db_path)
    want = expected([(b"k050", b"k150")])
    try:
        assert db.get(b"k049") == b"vk049" and db.get(b"k050") is None and db.get(b"k149") is None
        assert db.get(b"k150") == b"vk150"
        assert db.multi_get([b"k100", b"k150", b"k000"]) == [None, b"vk150", b"vk000"]
        assert list(db.scan()) == want
        assert list(db.scan(reverse=True)) == want[::-1]
        assert list(db.scan(b"k040", b"k160")) == [kv for kv in want if b"k040" <= kv[0] < b"k160"]
        assert len(db) == len(want)
        with db.iterator() as c:
            c.seek(b"k060")
            assert c.key() == b"k150"
            c.prev()
            assert c.key() == b"k049"
            c.seek_for_prev(b"k120")
            assert c.key() == b"k049"
            c.next()
            assert c.key() == b"k150"
    finally:
        db.close()


def test_compaction_at_every_level_and_reopen(db_path):
    db = lsmkv.open(db_path, write_buffer_size=1 << 20, disable_auto_compactions=True)
    fill(db)
    db.flush()
    db.compact_range()  # the data in level 1
    db.delete_range(b"k020", b"k040")
    db.flush()
    db.compact_range()  # the tombstone meets the data it covers in level 1 and both go
    fill(db, KEYS[100:120], b"w")
    db.delete_range(b"k110", b"k115")
    db.delete_range(b"k180", b"k190")
    db.flush()
    want = dict(expected([(b"k020", b"k040"), (b"k180", b"k190")]))
    want.update((k, b"w" + k) for k in KEYS[100:120])
    for k in KEYS[110:115]:
        del want[k]
    want = sorted(want.items())
    assert list(db.scan()) == want
    db.compact_range()
    assert list(db.scan()) == want
    db.close()
    with lsmkv.open(db_path) as db:
        assert list(db.scan()) == want and list(db.scan(reverse=True)) == want[::-1]


def test_overlapping_nested_ranges_in_any_order(db):
    fill(db)
    db.delete_range(b"k100", b"k120")
    db.flush()
    db.delete_range(b"k010", b"k150")  # holds the first
    db.delete_range(b"k140", b"k160")  # overlaps the second
    db.delete_range(b"k012", b"k013")  # nested
    ranges = [(b"k010", b"k160")]
    assert list(db.scan()) == expected(ranges)
    db.flush()
    assert list(db.scan(reverse=True)) == expected(ranges)[::-1]
    db.compact_range()
    assert list(db.scan()) == expected(ranges)


def test_puts_after_a_range_delete_are_visible(db):
    fill(db)
    db.delete_range(b"k000", b"k200")
    db.put(b"k050", b"again")
    assert list(db.scan()) == [(b"k050", b"again")]
    db.flush()
    db.put(b"k060", b"later")
    assert db.get(b"k050") == b"again" and db.get(b"k060") == b"later" and db.get(b"k070") is None
    db.compact_range()
    assert list(db.scan()) == [(b"k050", b"again"), (b"k060", b"later")]


def test_a_batch_applies_its_range_delete_in_order(db):
    fill(db)
    with db.write_batch() as b:
        b.put(b"k010", b"before")  # deleted by the range after it
        b.delete_range(b"k000", b"k020")
        b.put(b"k015", b"after")
    assert list(db.scan(None, b"k021")) == [(b"k015", b"after"), (b"k020", b"vk020")]


def test_snapshots_before_the_delete_still_see_the_keys(db):
    fill(db)
    db.flush()
    snap = db.snapshot()
    db.delete_range(b"k000", b"k100")
    db.flush()
    db.compact_range()
    assert snap.get(b"k050") == b"vk050" and db.get(b"k050") is None
    assert list(snap.scan()) == expected([])
    assert snap.multi_get([b"k001", b"k150"]) == [b"vk001", b"vk150"]
    with snap.iterator() as c:
        c.seek_to_last()
        c.seek(b"k010")
        assert c.key() == b"k010"
    snap.close()
    db.compact_range()
    stats = db.stats()
    assert stats["table_range_tombstones"] == 0 and stats["range_tombstones_dropped"] >= 1
    assert list(db.scan()) == expected([(b"k000", b"k100")])


def test_bottommost_compaction_drops_range_tombstones(db):
    fill(db)
    db.delete_range(b"k010", b"k190")
    db.flush()
    assert db.stats()["table_range_tombstones"] == 1
    db.compact_range()
    stats = db.stats()
    assert stats["table_range_tombstones"] == 0
    assert stats["range_tombstones_dropped"] == 1
    assert stats["range_covered_dropped"] == 180
    assert stats["table_entries"] == 20
    assert list(db.scan()) == expected([(b"k010", b"k190")])


def test_compaction_keeps_tombstones_something_below_or_a_snapshot_needs():
    """surviving_range_dels: a tombstone goes only where no table below meets
    its range and no snapshot predates it."""
    f = FragmentedTombstones.build([(b"a", b"c", 10), (b"m", b"p", 20)])
    kept, dropped = surviving_range_dels(f, [], [[(b"b", b"b")]])
    assert list(kept.tombstones()) == [(b"a", b"c", 10)] and dropped == 1
    kept, dropped = surviving_range_dels(f, [15], [])
    assert list(kept.tombstones()) == [(b"m", b"p", 20)] and dropped == 1
    kept, dropped = surviving_range_dels(f, [25], [[(b"x", b"z")]])
    assert not kept and dropped == 2


def test_compaction_drops_covered_versions_no_snapshot_sees():
    """drop_covered: a version under a newer tombstone goes unless a snapshot
    taken between the two sees it."""
    keys = [b"b", b"b", b"n", b"z"]
    seq_kinds = [30 << 8 | 1, 5 << 8 | 1, 15 << 8 | 1, 1 << 8 | 1]
    data = b"".join(keys)
    koff = np.cumsum([0] + [len(k) for k in keys[:-1]]).astype(np.int64)
    run = Columns(data, koff, np.array([len(k) for k in keys], dtype=np.int64), koff,
                  np.zeros(len(keys), dtype=np.int64), np.array(seq_kinds, dtype=np.uint64))
    f = FragmentedTombstones.build([(b"a", b"c", 10), (b"m", b"p", 20)])
    kept, dropped = drop_covered(run, f, [])
    assert [(kept.key(i), int(kept.seq_kinds[i]) >> 8) for i in range(len(kept))] == [(b"b", 30), (b"z", 1)]
    assert dropped == 2
    kept, dropped = drop_covered(run, f, [7])  # the snapshot at 7 sees b@5; no reader sees n@15
    assert [(kept.key(i), int(kept.seq_kinds[i]) >> 8) for i in range(len(kept))] == [(b"b", 30), (b"b", 5),
                                                                                       (b"z", 1)]
    assert dropped == 1
    kept, dropped = drop_covered(run, f, [17])  # the snapshot at 17 sees n@15, not b@5 (deleted at 10 <= 17)
    assert [(kept.key(i), int(kept.seq_kinds[i]) >> 8) for i in range(len(kept))] == [(b"b", 30), (b"n", 15),
                                                                                       (b"z", 1)]
    assert dropped == 1


def test_writing_a_range_delete_over_100000_keys_is_one_log_record(db_path):
    db = lsmkv.open(db_path, write_buffer_size=64 << 20)
    with db.write_batch() as b:
        for i in range(100_000):
            b.put(b"key%08d" % i, b"")
    db.flush()
    log_number = db._state.mem.log_number
    db.delete_range(b"key", b"kez", sync=True)
    log_path = os.path.join(db_path, "%06d.log" % log_number)
    with open(log_path, "rb") as f:
        records = list(log_batches(LogReader(f.read(), log_path)))
    assert records == [(100_001, [(RANGE_DELETE, b"key", b"kez")])]
    assert db.get(b"key00050000") is None and list(db.scan()) == []
    assert len(db._state.mem) == 1 and db._state.mem.size < 100
    db.close()


def test_get_stops_at_a_covering_tombstone(db_path):
    """A covering tombstone in level 0 answers the get: the level below is not searched."""
    db = open_two_levels_with_a_tombstone_above(db_path, b"k000", b"k200")
    searches = db._io.searches
    for k in KEYS:
        assert db.get(k) is None
    assert db._io.searches == searches
    db.close()


def test_a_transaction_batch_writes_its_range_deletes_before_its_keys():
    """The engine's side of txn.delete_range: the write set's ranges become
    range tombstones, older than the transaction's own writes."""
    from lsmkv.base.write_set import WriteSet
    from lsmkv.lsm.transactions import TransactionBatch
    writes = WriteSet()
    writes.put(b"k050", b"in-txn")
    writes.range_deletes.append((b"k000", b"k100"))
    batch = TransactionBatch(None, writes, (), [], clock=lambda: 0.0)
    assert batch.ops == [(RANGE_DELETE, b"k000", b"k100"), (1, b"k050", b"in-txn")]


def test_a_range_delete_conflicts_with_a_transaction_that_read_in_its_range(db):
    fill(db)
    txn = db.transaction()
    assert txn.get(b"k050") == b"vk050"
    txn.put(b"elsewhere", b"x")
    db.delete_range(b"k040", b"k060")
    with pytest.raises(lsmkv.ConflictError):
        txn.commit()
    assert db.get(b"elsewhere") is None


# -- the tools ----------------------------------------------------------------------------------

def _damage_range_del_block(db_path, number):
    path = os.path.join(db_path, table_name(number))
    reader = TableReader(DEFAULT_FS, path, number, cache=None)
    offset = reader.properties.range_del_offset
    reader.close()
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def _two_levels_with_a_tombstone_above(db_path):
    db = open_two_levels_with_a_tombstone_above(db_path, b"k050", b"k150")
    number = db._state.version.levels[0][0].number
    db.close()
    return number


def test_repair_applies_range_tombstones(db_path):
    _two_levels_with_a_tombstone_above(db_path)
    report = lsmkv.repair(db_path)
    assert not report.lost
    with lsmkv.open(db_path) as db:
        assert list(db.scan()) == expected([(b"k050", b"k150")])


def test_repair_reports_a_damaged_range_tombstone_block(db_path):
    number = _two_levels_with_a_tombstone_above(db_path)
    _damage_range_del_block(db_path, number)
    report = lsmkv.repair(db_path)
    assert any("range tombstones lost" in loss.what for loss in report.lost)
    with lsmkv.open(db_path) as db:  # the keys they deleted came back, as reported; nothing damaged is read
        assert list(db.scan()) == expected([])


def test_sst_dump_shows_range_tombstones(db_path, capsys):
    from lsmkv.cli import main
    number = _two_levels_with_a_tombstone_above(db_path)
    assert main(["sst-dump", os.path.join(db_path, table_name(number))]) == 0
    out = capsys.readouterr().out
    assert "range tombstones: 1" in out and "[k050, k150) @" in out and "delete range" in out
    assert main(["check", db_path]) == 0


# -- corruption ---------------------------------------------------------------------------------

def test_corrupt_range_tombstone_block_is_detected_by_check_and_reads(db_path):
    db = lsmkv.open(db_path, write_buffer_size=1 << 20, disable_auto_compactions=True)
    fill(db)
    db.delete_range(b"k050", b"k150")
    db.flush()
    meta = db._state.version.levels[0][0]
    db.close()
    _damage_range_del_block(db_path, meta.number)
    report = check_db(db_path)
    assert not report.ok and any("checksum" in problem for problem in report.problems)
    with lsmkv.open(db_path) as db:
        with pytest.raises(CorruptionError):
            db.get(b"k100")
        with pytest.raises(CorruptionError):
            list(db.scan())


# -- a crash ------------------------------------------------------------------------------------

@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_keeps_acknowledged_synced_range_deletes(tmp_path):
    path = str(tmp_path / "db")
    code = textwrap.dedent(f"""
        import lsmkv
        db = lsmkv.open({path!r}, write_buffer_size=8192)
        with db.write_batch() as b:
            for i in range(2000):
                b.put(b"k%05d" % i, b"v" * 20)
        db.flush()
        print("ready", flush=True)
        i = 0
        while True:
            db.delete_range(b"k%05d" % (2 * i), b"k%05d" % (2 * i + 1), sync=True)
            print(i, flush=True)
            db.put(b"p%05d" % i, b"x", sync=True)
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        acked = -1
        while acked < 300:
            line = proc.stdout.readline()
            assert line, "the child died before it was killed"
            acked = int(line)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with lsmkv.open(path) as db:
        for i in range(acked + 1):
            assert db.get(b"k%05d" % (2 * i)) is None, i
            assert db.get(b"k%05d" % (2 * i + 1)) == b"v" * 20
        assert db.get(b"k%05d" % (2 * acked + 3)) == b"v" * 20



@pytest.mark.parametrize("where", ["memtable", "tables"])
def test_get_folds_a_merged_key_while_a_range_tombstone_lies_elsewhere(tmp_path, where):
    """A range tombstone anywhere sends gets down the path that weighs
    every key against the ranges; a merged key must still read folded
    there, as scan reads it (get, multi_get, a snapshot's and a
    transaction's get alike)."""
    db = lsmkv.open(str(tmp_path / "db"), merge_operator=UInt64Add())
    db.put(b"c1", UInt64Add.operand(5))
    db.merge(b"c1", UInt64Add.operand(2))
    db.merge(b"c2", UInt64Add.operand(9))  # operands only
    db.delete_range(b"x", b"y")
    if where == "tables":
        db.flush()
    want = {b"c1": UInt64Add.operand(7), b"c2": UInt64Add.operand(9)}
    assert dict(db.scan()) == want
    assert {k: db.get(k) for k in want} == want
    assert db.multi_get(list(want)) == list(want.values())
    with db.snapshot() as snap:
        assert {k: snap.get(k) for k in want} == want
    with db.transaction() as txn:
        assert {k: txn.get(k) for k in want} == want
    db.close()


# -- the model ----------------------------------------------------------------------------------

MODEL_KEYS = st.sampled_from([b"k%02d" % i for i in range(30)])


class RangeDeleteModel(put_and_delete_rules(MODEL_KEYS, st.binary(max_size=12)), RuleBasedStateMachine):
    """put/delete/merge/delete_range/flush/compact/reopen/snapshot against a
    dict: range tombstones and merge operands together (a merge after a range
    delete starts from nothing; one before it is deleted with its key)."""

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lsmkv-range-")
        self.options = dict(write_buffer_size=400, block_size=96, max_immutable_memtables=2,
                            merge_operator=Append(b"+"))
        self.db = lsmkv.open(self.dir, **self.options)
        self.model: dict[bytes, bytes] = {}
        self.snapshots: list[tuple[object, dict]] = []

    def teardown(self):
        for snap, _ in self.snapshots:
            snap.close()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(key=MODEL_KEYS, operand=st.binary(min_size=1, max_size=4), batch=st.booleans())
    def merge(self, key, operand, batch):
        if batch:
            with self.db.write_batch() as w:
                w.merge(key, operand)
        else:
            self.db.merge(key, operand)
        self.model[key] = self.model[key] + b"+" + operand if key in self.model else operand

    @rule(a=MODEL_KEYS, b=MODEL_KEYS, batch=st.booleans())
    def delete_range(self, a, b, batch):
        start, end = min(a, b), max(a, b)
        if batch:
            with self.db.write_batch() as w:
                w.delete_range(start, end)
        else:
            self.db.delete_range(start, end)
        for k in [k for k in self.model if start <= k < end]:
            del self.model[k]

    @rule()
    def flush(self):
        self.db.flush()

    @rule(a=st.none() | MODEL_KEYS, b=st.none() | MODEL_KEYS)
    def compact(self, a, b):
        self.db.compact_range(a, b)

    @precondition(lambda self: not self.snapshots)
    @rule()
    def reopen(self):
        self.db.close()
        report = check_db(self.dir)
        assert report.ok, report.problems
        self.db = lsmkv.open(self.dir, **self.options)

    @precondition(lambda self: len(self.snapshots) < 3)
    @rule()
    def take_snapshot(self):
        self.snapshots.append((self.db.snapshot(), dict(self.model)))

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def check_and_release_snapshot(self, data):
        i = data.draw(st.integers(0, len(self.snapshots) - 1))
        snap, model = self.snapshots.pop(i)
        assert list(snap.scan()) == sorted(model.items())
        assert list(snap.scan(reverse=True)) == sorted(model.items(), reverse=True)
        snap.close()

    @rule(key=MODEL_KEYS)
    def get(self, key):
        assert self.db.get(key) == self.model.get(key)

    @rule(start=st.none() | MODEL_KEYS, end=st.none() | MODEL_KEYS, reverse=st.booleans())
    def scan(self, start, end, reverse):
        want = sorted(((k, v) for k, v in self.model.items()
                       if (start is None or k >= start) and (end is None or k < end)), reverse=reverse)
        assert list(self.db.scan(start, end, reverse=reverse)) == want

    @rule(key=MODEL_KEYS, steps=st.integers(1, 5))
    def cursor_both_ways(self, key, steps):
        keys = sorted(self.model)
        with self.db.iterator() as c:
            c.seek(key)
            after = [k for k in keys if k >= key][:steps]
            got = []
            while c.valid() and len(got) < steps:
                got.append(c.key())
                c.next()
            assert got == after
            c.seek_for_prev(key)
            before = [k for k in keys if k <= key][::-1][:steps]
            got = []
            while c.valid() and len(got) < steps:
                got.append(c.key())
                c.prev()
            assert got == before

    @invariant()
    def multi_get_agrees(self):
        keys = [b"k%02d" % i for i in range(0, 30, 7)]
        assert self.db.multi_get(keys) == [self.model.get(k) for k in keys]


RangeDeleteModel.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
TestRangeDeleteModel = pytest.mark.slow(RangeDeleteModel.TestCase)


def test_ingest_after_a_range_delete_in_the_memtable_is_visible(db, tmp_path):
    """The ingested table is newer than the memtable's range tombstone: it
    must not read as deleted (the memtable is flushed first)."""
    fill(db)
    db.flush()
    db.delete_range(b"k000", b"k100")  # the memtable holds only the tombstone
    path = str(tmp_path / "in.sst")
    with lsmkv.TableWriter(path) as w:
        w.put(b"k050", b"ingested")
    db.ingest([path])
    assert db.get(b"k050") == b"ingested" and db.get(b"k051") is None
    assert list(db.scan(b"k049", b"k052")) == [(b"k050", b"ingested")]
    db.compact_range()
    assert list(db.scan(b"k049", b"k052")) == [(b"k050", b"ingested")]


def test_ingest_refuses_a_table_holding_range_tombstones(db_path, tmp_path):
    number = _two_levels_with_a_tombstone_above(db_path)
    with lsmkv.open(str(tmp_path / "other")) as other:
        with pytest.raises(ValueError, match="range tombstones"):
            other.ingest([os.path.join(db_path, table_name(number))])
        assert list(other.scan()) == []


def test_a_scan_skips_a_deleted_stretch_without_reading_its_blocks(db_path):
    """A newer source's tombstone makes an older source jump to its end:
    the blocks in between are never read (in either direction)."""
    db = lsmkv.open(db_path, write_buffer_size=8 << 20, block_cache_size=0, disable_auto_compactions=True)
    keys = [b"key%06d" % i for i in range(20_000)]
    fill(db, keys)
    db.flush()
    db.compact_range()
    blocks = sum(db._tables.reader(f).num_blocks for f in db._state.version.levels[1])
    db.delete_range(b"key001000", b"key019000")
    want = expected([(b"key001000", b"key019000")], keys)
    for reverse in (False, True):
        before = db._io.block_reads
        assert list(db.scan(reverse=reverse)) == (want[::-1] if reverse else want)
        read = db._io.block_reads - before
        assert read < blocks // 5, (read, blocks)
    db.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(1, 50)), max_size=12))
def test_adding_tombstones_one_by_one_covers_what_fragmenting_them_all_does(tombstones):
    """The memtable's incremental fragmenting (with_tombstone) answers every
    question as fragmenting all the tombstones at once does."""
    key = lambda i: b"%02d" % i
    whole = FragmentedTombstones.build((key(a), key(b), s) for a, b, s in tombstones)
    one_by_one = FragmentedTombstones([], [], [])
    for a, b, s in tombstones:
        one_by_one = one_by_one.with_tombstone(key(a), key(b), s)
    for i in range(22):
        for read_seq in (0, 10, 25, 60):
            assert one_by_one.covering_seq(key(i), read_seq) == whole.covering_seq(key(i), read_seq)
    assert decode_range_dels(encode_range_dels(one_by_one)) == one_by_one


def test_a_memtable_takes_a_bounded_number_of_range_tombstones(db_path, monkeypatch):
    from lsmkv.lsm import memtable
    monkeypatch.setattr(memtable, "MAX_RANGE_DELETES", 8)
    with lsmkv.open(db_path, write_buffer_size=64 << 20) as db:
        for i in range(20):
            db.delete_range(b"p%03d" % i, b"p%03d\x00" % i)
        assert len(db._state.mem) <= 8
        db.put(b"p005", b"back")
        db.flush()
        assert [f.range_tombstones for f in db._state.version.levels[0]] == [4, 8, 8]
        assert list(db.scan()) == [(b"p005", b"back")]


def test_background_compactions_carry_tombstones_over_deeper_data(db_path):
    """With several levels of data, tombstones go down level by level
    (clipped to each output), kept while data lies below them; reads are
    right all along, and once compacted to the bottom nothing is left of them."""
    options = dict(write_buffer_size=16 * 1024, level1_max_bytes=64 * 1024, target_file_size=16 * 1024,
                   l0_compaction_trigger=2, block_size=1024)
    keys = [b"key%05d" % i for i in range(6000)]
    with lsmkv.open(db_path, **options) as db:
        for i in range(0, len(keys), 500):
            fill(db, keys[i:i + 500], b"v" * 40)
        db.flush()
        assert db._compactor.wait_idle(timeout=120)
        assert sum(1 for n in db.stats()["files_per_level"][2:] if n) >= 1, "data below level 1 expected"
        ranges = [(b"key00100", b"key02500"), (b"key02000", b"key02100"), (b"key04000", b"key05999")]
        for start, end in ranges:
            db.delete_range(start, end)
            fill(db, [b"key%05d" % i for i in range(7000, 7050)], b"w")  # more data on top, more compactions
        want = dict(expected(ranges, keys, b"v" * 40))
        want.update((b"key%05d" % i, b"wkey%05d" % i) for i in range(7000, 7050))
        want = sorted(want.items())
        db.flush()
        assert db._compactor.wait_idle(timeout=120)
        assert list(db.scan()) == want and list(db.scan(reverse=True)) == want[::-1]
        assert db.get(b"key03000") is not None and db.get(b"key04500") is None
    assert check_db(db_path).ok
    with lsmkv.open(db_path, **options) as db:
        assert list(db.scan()) == want
        db.compact_range()
        assert list(db.scan()) == want
        assert db.stats()["table_range_tombstones"] == 0
    assert check_db(db_path).ok


@pytest.mark.parametrize("damage", ["footer", "index"])
def test_salvage_keeps_the_range_tombstones_of_a_table_whose_footer_or_index_is_damaged(db_path, damage):
    from lsmkv.lsm.table.salvage import salvage_table
    db = lsmkv.open(db_path, write_buffer_size=1 << 20, disable_auto_compactions=True)
    fill(db)
    db.delete_range(b"k050", b"k150")
    db.delete_range(b"k100", b"k160")
    db.flush()
    meta = db._state.version.levels[0][0]
    db.close()
    path = os.path.join(db_path, table_name(meta.number))
    reader = TableReader(DEFAULT_FS, path, meta.number, cache=None)
    fragments = reader.range_dels
    data = bytearray(open(path, "rb").read())
    if damage == "footer":
        data[-10] ^= 0xFF
    else:
        from lsmkv.lsm.table.format import FOOTER_SIZE, Footer
        footer = Footer.decode(bytes(data[-FOOTER_SIZE:]), path, len(data))
        data[footer.index[0]] ^= 0xFF
    reader.close()
    salvaged = salvage_table(bytes(data), path)
    assert salvaged.range_dels == fragments and salvaged.range_dels_lost is None
    assert not salvaged.lost and salvaged.entries_kept == len(KEYS)


def test_read_only_handles_and_checkpoints_see_range_deletes_of_the_logs(db_path, tmp_path):
    writer = lsmkv.open(db_path, write_buffer_size=1 << 20, disable_auto_compactions=True)
    fill(writer)
    writer.flush()
    writer.delete_range(b"k010", b"k190")  # only in the writer's log and memtable
    want = expected([(b"k010", b"k190")])
    with lsmkv.open(db_path, read_only=True) as reader:
        assert list(reader.scan()) == want and reader.get(b"k100") is None
        writer.delete_range(b"k000", b"k005")
        writer.flush()
        assert reader.refresh()
        assert list(reader.scan()) == expected([(b"k010", b"k190"), (b"k000", b"k005")])
    lsmkv.checkpoint(db_path, str(tmp_path / "copy"))  # a read-only handle's checkpoint: memtables merged
    writer.close()
    with lsmkv.open(str(tmp_path / "copy")) as copy:
        assert list(copy.scan()) == expected([(b"k010", b"k190"), (b"k000", b"k005")])
