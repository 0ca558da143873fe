"""Merge operators in the LSM engine: ``db.merge`` and ``batch.merge``
write operands (kind 4) that reads fold (get, multi_get, scans, cursors,
snapshots, len) and compactions fold where they meet their base; the
operator's name is recorded in the manifest and checked at open."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import lsmkv
from lsmkv.base.errors import InvalidArgumentError, MergeError, OptionError, ReadOnlyError
from lsmkv.base.merge_operators import Append, Max, UInt64Add, builtin_operator, fold, operator_name
from lsmkv.cli import main as cli_main
from lsmkv.lsm.check import check_db, dump_table

from helpers.model_rules import put_and_delete_rules

SMALL = dict(write_buffer_size=16 * 1024, block_size=512, level1_max_bytes=64 * 1024, target_file_size=16 * 1024,
             l0_compaction_trigger=2, compaction_executor="thread")
ADD = UInt64Add.operand


def count(value: bytes | None) -> int | None:
    return None if value is None else UInt64Add.decode(value)


def table_entries(path: str) -> list[tuple[bytes, int, bytes]]:
    """(key, kind, value) of every entry of every table of the database."""
    out = []
    for name in sorted(os.listdir(path)):
        if name.endswith(".sst"):
            for row in dump_table(os.path.join(path, name))["entries"]:
                out.append((row["key"], row["kind"], row["value"]))
    return out


def levels_with_tables(db) -> int:
    return sum(1 for n in db.stats()["files_per_level"] if n)


# -- counters, order, flushes, compactions, reopen --------------------------------------------

@pytest.mark.parametrize("executor", ["thread", "process"])
def test_counters_add_up_through_flushes_compactions_at_several_levels_and_reopen(tmp_path, executor):
    path = str(tmp_path / "db")
    options = dict(SMALL, compaction_executor=executor, merge_operator=UInt64Add())
    expected: dict[bytes, int] = {}
    with lsmkv.open(path, **options) as db:
        for round_ in range(30):
            for i in range(40):
                key = b"counter%03d" % ((i * 7 + round_) % 50)
                db.merge(key, ADD(i + 1))
                expected[key] = expected.get(key, 0) + i + 1
            for j in range(8):
                db.put(b"pad%04d" % (round_ * 8 + j), os.urandom(600))
            if round_ % 3 == 0:
                db.flush()
            if round_ % 10 == 9:
                db.compact_range(b"counter000", b"counter025")
        assert levels_with_tables(db) >= 2
        assert {k: count(db.get(k)) for k in expected} == expected
        db.compact_range()
        assert {k: count(db.get(k)) for k in expected} == expected
        assert db.stats()["merge_operands_folded"] >= 1200 - len(expected)
        assert db.stats()["merge_failures"] == 0
    # The bottommost compaction folded every operand: no kind-4 entry is left.
    assert not [e for e in table_entries(path) if e[1] == "merge"]
    with lsmkv.open(path, **options) as db:
        assert {k: count(v) for k, v in db.scan(b"counter", b"countes")} == expected
        db.merge(b"counter000", ADD(5))
        assert count(db.get(b"counter000")) == expected[b"counter000"] + 5


def test_append_keeps_the_order_of_the_operands_across_sources(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append(b"|"), **SMALL) as db:
        db.put(b"k", b"base")
        db.flush()
        db.merge(b"k", b"a")
        db.flush()
        db.merge(b"k", b"b")
        with db.write_batch() as batch:
            batch.merge(b"k", b"c")
            batch.merge(b"k", b"d")
        assert db.get(b"k") == b"base|a|b|c|d"
        db.compact_range()
        db.merge(b"k", b"e")
        assert db.get(b"k") == b"base|a|b|c|d|e"
        db.merge(b"new", b"x")
        db.merge(b"new", b"y")
        assert db.get(b"new") == b"x|y"
    with lsmkv.open(path, merge_operator=Append(b"|")) as db:
        assert dict(db.scan()) == {b"k": b"base|a|b|c|d|e", b"new": b"x|y"}


def test_a_memtable_flush_keeps_every_operand_and_their_base(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append(), disable_auto_compactions=True) as db:
        db.put(b"k", b"v")
        db.put(b"k", b"base")
        db.merge(b"k", b"1")
        db.merge(b"k", b"2")
        db.flush()
        assert db.get(b"k") == b"base,1,2"
        kinds = [kind for key, kind, _ in table_entries(path) if key == b"k"]
        assert kinds == ["merge", "merge", "put"]  # the older put is dropped, the base kept


def test_merge_after_delete_folds_onto_nothing(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), merge_operator=UInt64Add(), **SMALL) as db:
        db.put(b"k", ADD(100))
        db.merge(b"k", ADD(1))
        db.delete(b"k")
        db.merge(b"k", ADD(2))
        assert count(db.get(b"k")) == 2
        db.flush()
        db.merge(b"k", ADD(3))
        assert count(db.get(b"k")) == 5
        db.compact_range()
        assert count(db.get(b"k")) == 5
        db.delete(b"k")
        assert db.get(b"k") is None and b"k" not in db and len(db) == 0


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("flush_before_expiry", [False, True])
def test_merge_onto_an_expired_value_folds_onto_nothing(tmp_path, flush_before_expiry):
    clock = Clock()
    with lsmkv.open(str(tmp_path / "db"), merge_operator=UInt64Add(), ttl_clock=clock, **SMALL) as db:
        db.put(b"k", ADD(100), ttl=10)
        db.merge(b"k", ADD(1))
        if flush_before_expiry:
            db.flush()
        assert count(db.get(b"k")) == 101
        clock.now += 11
        assert count(db.get(b"k")) == 1
        assert [count(v) for v in db.multi_get([b"k"])] == [1]
        assert [(k, count(v)) for k, v in db.scan()] == [(b"k", 1)]
        db.compact_range()
        assert count(db.get(b"k")) == 1


def test_compaction_does_not_fold_onto_a_live_value_with_a_ttl(tmp_path):
    """The fold would outlive the value's deadline: the operands stay, and
    the key reads as their fold onto nothing once the value expires."""
    clock = Clock()
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=UInt64Add(), ttl_clock=clock, **SMALL) as db:
        db.put(b"k", ADD(100), ttl=10)
        db.merge(b"k", ADD(1))
        db.compact_range()
        assert count(db.get(b"k")) == 101
        clock.now += 11
        assert count(db.get(b"k")) == 1


# -- snapshots --------------------------------------------------------------------------------

def test_snapshots_taken_between_merges_keep_their_values_through_flush_and_compaction(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), merge_operator=UInt64Add(), **SMALL) as db:
        snaps = []
        for i in range(1, 8):
            db.merge(b"c", ADD(i))
            snaps.append((db.snapshot(), i * (i + 1) // 2))
            if i % 3 == 0:
                db.flush()
        db.compact_range()
        for snap, total in snaps:
            assert count(snap.get(b"c")) == total
            assert [(k, count(v)) for k, v in snap.scan()] == [(b"c", total)]
            assert [count(v) for v in snap.multi_get([b"c"])] == [total]
        assert count(db.get(b"c")) == 28
        for snap, _ in snaps:
            snap.close()
        db.compact_range()
        assert count(db.get(b"c")) == 28
    # With the snapshots gone, the last compaction folded all into one value.


def test_a_snapshot_before_the_first_merge_sees_the_old_value(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), merge_operator=Append(), **SMALL) as db:
        db.put(b"k", b"a")
        with db.snapshot() as snap:
            db.merge(b"k", b"b")
            db.flush()
            db.compact_range()
            assert snap.get(b"k") == b"a"
            assert db.get(b"k") == b"a,b"


# -- scans and cursors ------------------------------------------------------------------------

def test_scan_and_cursors_in_both_directions_match_a_model(tmp_path):
    model: dict[bytes, bytes] = {}
    op = Append(b"+")
    with lsmkv.open(str(tmp_path / "db"), merge_operator=op, **SMALL) as db:
        for i in range(600):
            key = b"k%03d" % ((i * 37) % 150)
            action = i % 7
            if action == 0:
                db.put(key, b"p%d" % i)
                model[key] = b"p%d" % i
            elif action == 1:
                db.delete(key)
                model.pop(key, None)
            else:
                db.merge(key, b"m%d" % i)
                model[key] = fold(op, key, model.get(key), [b"m%d" % i])
            if i % 97 == 0:
                db.flush()
        expected = sorted(model.items())
        assert list(db.scan()) == expected
        assert list(db.scan(reverse=True)) == expected[::-1]
        assert list(db.scan(b"k050", b"k100")) == [kv for kv in expected if b"k050" <= kv[0] < b"k100"]
        assert len(db) == len(model)
        with db.iterator() as cursor:
            cursor.seek_to_last()
            backward = []
            while cursor.valid():
                backward.append((cursor.key(), cursor.value()))
                cursor.prev()
            assert backward == expected[::-1]
            cursor.seek(b"k075")
            forward = []
            while cursor.valid():
                forward.append((cursor.key(), cursor.value()))
                cursor.next()
            assert forward == [kv for kv in expected if kv[0] >= b"k075"]


# -- the operator failing ---------------------------------------------------------------------

class Fussy:
    """Appends, but raises on an operand b"bad"."""

    name = "test.fussy"

    def __call__(self, key, existing, operands):
        if b"bad" in operands:
            raise ValueError("cannot fold bad")
        return b"".join(([existing] if existing is not None else []) + list(operands))


def test_an_operator_that_raises_is_a_merge_error_on_read_and_compaction_keeps_the_operands(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Fussy(), **SMALL) as db:
        db.put(b"a", b"1")
        db.merge(b"a", b"2")
        db.put(b"b", b"1")
        db.merge(b"b", b"bad")
        db.merge(b"b", b"3")
        with pytest.raises(MergeError, match="test.fussy"):
            db.get(b"b")
        with pytest.raises(MergeError):
            list(db.scan())
        db.flush()
        db.compact_range()
        assert db.get(b"a") == b"12"
        with pytest.raises(MergeError):
            db.get(b"b")
        assert db.stats()["merge_failures"] >= 1
        db.put(b"c", b"x")  # writes go on: the compaction did not fail
        assert db.get(b"c") == b"x"
    entries = table_entries(path)
    assert [(k, kind, v) for k, kind, v in entries if k == b"b"] == [
        (b"b", "merge", b"3"), (b"b", "merge", b"bad"), (b"b", "put", b"1")]
    assert [(k, kind) for k, kind, _ in entries if k == b"a"] == [(b"a", "put")]
    with lsmkv.open(path, merge_operator=Fussy()) as db:
        db.put(b"b", b"fresh")  # a put hides the operands the operator cannot fold
        assert db.get(b"b") == b"fresh"


def test_an_operator_that_does_not_pickle_folds_in_the_process(tmp_path):
    path = str(tmp_path / "db")
    operator = lambda key, existing, operands: b"".join([existing or b"", *operands])  # noqa: E731
    with lsmkv.open(path, merge_operator=operator, **dict(SMALL, compaction_executor="process")) as db:
        for i in range(20):
            db.merge(b"k", b"%d" % (i % 10))
        db.compact_range()
        assert db.get(b"k") == b"01234567890123456789"
    assert [kind for _, kind, _ in table_entries(path)] == ["put"]


# -- the operator's name ----------------------------------------------------------------------

def test_opening_a_store_with_operands_without_an_operator_or_with_another_is_an_error(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=UInt64Add()) as db:
        db.merge(b"k", ADD(1))
    listing = sorted(os.listdir(path))
    with pytest.raises(OptionError, match="lsmkv.uint64add.*merge_operator="):
        lsmkv.open(path)
    with pytest.raises(OptionError, match="'lsmkv.uint64add', not 'lsmkv.max'"):
        lsmkv.open(path, merge_operator=Max())
    with pytest.raises(OptionError, match="lsmkv.uint64add"):
        lsmkv.open(path, read_only=True)
    assert sorted(os.listdir(path)) == listing  # the refused opens changed nothing
    with lsmkv.open(path, read_only=True, merge_operator=UInt64Add()) as ro:
        assert count(ro.get(b"k")) == 1
        with pytest.raises(ReadOnlyError):
            ro.merge(b"k", ADD(1))
    with lsmkv.open(path, merge_operator=UInt64Add()) as db:
        assert count(db.get(b"k")) == 1


def test_the_name_is_recorded_before_the_first_operand_and_survives_a_new_manifest(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append()) as db:
        db.merge(b"k", b"a")
        db._simulate_crash()  # the operand is in the log only
    with pytest.raises(OptionError):
        lsmkv.open(path)
    with lsmkv.open(path, merge_operator=Append()) as db:  # recovery writes a fresh manifest
        assert db.get(b"k") == b"a"
    with pytest.raises(OptionError):
        lsmkv.open(path)


def test_a_store_without_merges_opens_with_or_without_an_operator(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=UInt64Add()) as db:
        db.put(b"k", b"v")
    with lsmkv.open(path) as db:
        assert db.get(b"k") == b"v"
    with lsmkv.open(path, merge_operator=Max()) as db:
        db.merge(b"k", b"w")
        assert db.get(b"k") == b"w"
    with pytest.raises(OptionError, match="lsmkv.max"):
        lsmkv.open(path, merge_operator=UInt64Add())


def test_merge_operator_must_be_callable(tmp_path):
    with pytest.raises(OptionError, match="merge_operator"):
        lsmkv.open(str(tmp_path / "db"), merge_operator="uint64add")
    assert not os.path.exists(tmp_path / "db")


# -- bad input --------------------------------------------------------------------------------

def test_bad_operands_and_merges_without_an_operator_write_nothing(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=UInt64Add()) as db:
        db.merge(b"k", ADD(1))
        before = db.stats()["last_sequence"]
        with pytest.raises(InvalidArgumentError, match="8 bytes"):
            db.merge(b"k", b"abc")
        with pytest.raises(InvalidArgumentError):
            with db.write_batch() as batch:
                batch.put(b"other", b"x")
                batch.merge(b"k", b"toolong123")
        standalone = lsmkv.lsm.write_batch.WriteBatch()
        standalone.put(b"other", b"x")
        standalone.merge(b"k", b"abc")
        with pytest.raises(InvalidArgumentError):
            db.write(standalone)
        with pytest.raises(TypeError):
            db.merge(b"k", 5)
        assert db.stats()["last_sequence"] == before
        assert count(db.get(b"k")) == 1 and db.get(b"other") is None
    with lsmkv.open(str(tmp_path / "sync"), merge_operator=UInt64Add()) as db:
        with pytest.raises(TypeError, match="sync"):
            db.merge(b"k", ADD(1), sync="yes")
    with lsmkv.open(str(tmp_path / "sync")) as db:  # the refused merge recorded no operator name
        assert db.get(b"k") is None
    with lsmkv.open(str(tmp_path / "plain")) as db:
        with pytest.raises(InvalidArgumentError, match="merge_operator="):
            db.merge(b"k", b"v")
        with pytest.raises(InvalidArgumentError, match="merge_operator="):
            with db.write_batch() as batch:
                batch.merge(b"k", b"v")
        assert db.get(b"k") is None and db.stats()["last_sequence"] == 0
    with lsmkv.open(str(tmp_path / "plain")) as db:  # nothing recorded a name
        assert db.get(b"k") is None


# -- tools ------------------------------------------------------------------------------------

def test_check_accepts_operands_in_logs_and_tables_and_sst_dump_shows_them(tmp_path, capsys):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append()) as db:
        db.put(b"k", b"v")
        db.merge(b"k", b"m1")
        db.flush()
        db.merge(b"k", b"m2")  # in the log
        db._simulate_crash()
    report = check_db(path)
    assert report.ok, report.problems
    table = [n for n in os.listdir(path) if n.endswith(".sst")][0]
    assert cli_main(["sst-dump", os.path.join(path, table)]) == 0
    out = capsys.readouterr().out
    assert "k @2 merge m1" in out and "k @1 put v" in out


# -- a model ----------------------------------------------------------------------------------

KEYS = st.sampled_from([b"k%d" % i for i in range(8)])


class MergeModel(put_and_delete_rules(KEYS, st.binary(max_size=6)), RuleBasedStateMachine):
    """The database against a dict folded with the same operator, over
    puts, deletes, merges, batches, flushes, compactions, snapshots and
    reopening, with a tiny write buffer."""

    OPTIONS = dict(write_buffer_size=2048, block_size=128, level1_max_bytes=8 * 1024, target_file_size=2048,
                   l0_compaction_trigger=2, compaction_executor="thread")

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "db")
        self.op = Append(b".")
        self.db = lsmkv.open(self.path, merge_operator=self.op, **self.OPTIONS)
        self.model: dict[bytes, bytes] = {}
        self.snapshots: list[tuple[object, dict]] = []

    def teardown(self):
        for snap, _ in self.snapshots:
            snap.close()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _merge_model(self, key, operand):
        self.model[key] = fold(self.op, key, self.model.get(key), [operand])

    @rule(key=KEYS, operand=st.binary(min_size=1, max_size=4))
    def merge(self, key, operand):
        self.db.merge(key, operand)
        self._merge_model(key, operand)

    @rule(ops=st.lists(st.tuples(st.sampled_from(["put", "merge", "delete"]), KEYS, st.binary(max_size=4)),
                       max_size=6))
    def batch(self, ops):
        with self.db.write_batch() as batch:
            for kind, key, value in ops:
                if kind == "put":
                    batch.put(key, value)
                    self.model[key] = value
                elif kind == "delete":
                    batch.delete(key)
                    self.model.pop(key, None)
                else:
                    batch.merge(key, value)
                    self._merge_model(key, value)

    @rule()
    def flush(self):
        self.db.flush()

    @rule()
    def compact(self):
        self.db.compact_range()

    @rule()
    def take_snapshot(self):
        if len(self.snapshots) < 3:
            self.snapshots.append((self.db.snapshot(), dict(self.model)))

    @rule()
    def release_snapshot(self):
        if self.snapshots:
            snap, _ = self.snapshots.pop(0)
            snap.close()

    @rule()
    def reopen(self):
        for snap, _ in self.snapshots:
            snap.close()
        self.snapshots = []
        self.db.close()
        self.db = lsmkv.open(self.path, merge_operator=self.op, **self.OPTIONS)

    @invariant()
    def reads_match(self):
        expected = sorted(self.model.items())
        assert list(self.db.scan()) == expected
        assert list(self.db.scan(reverse=True)) == expected[::-1]
        keys = [b"k%d" % i for i in range(8)]
        assert [self.db.get(k) for k in keys] == [self.model.get(k) for k in keys]
        assert self.db.multi_get(keys) == [self.model.get(k) for k in keys]
        for snap, seen in self.snapshots:
            assert list(snap.scan()) == sorted(seen.items())
            assert [snap.get(k) for k in keys] == [seen.get(k) for k in keys]


TestMergeModel = MergeModel.TestCase
TestMergeModel.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
TestMergeModel = pytest.mark.slow(TestMergeModel)


# -- crash ------------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys
    import lsmkv
    from lsmkv.base.merge_operators import Append
    db = lsmkv.open(sys.argv[1], merge_operator=Append(b","), write_buffer_size=8192, block_size=512,
                    l0_compaction_trigger=2, level1_max_bytes=32768, target_file_size=8192)
    i = int(sys.argv[2])
    while True:
        db.merge(b"log", b"%d" % i, sync=True)
        db.merge(b"n%03d" % (i % 200), b"%d" % i, sync=True)
        print(i, flush=True)
        i += 1
""")


@pytest.mark.crash
@pytest.mark.slow
def test_every_acknowledged_merge_survives_sigkill(tmp_path):
    path = str(tmp_path / "db")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    start = 0
    for cycle in range(4):
        child = subprocess.Popen([sys.executable, str(script), path, str(start)], stdout=subprocess.PIPE, env=env)
        acked = None
        for line in child.stdout:
            acked = int(line)
            if acked >= start + 150 + 40 * cycle:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        # What the child acknowledged after the last line read, before the kill.
        for line in child.stdout.read().splitlines(keepends=True):
            if line.endswith(b"\n"):
                acked = int(line)
        child.stdout.close()
        assert acked is not None, "the child acknowledged nothing"
        with lsmkv.open(path, merge_operator=Append(b",")) as db:
            numbers = [int(n) for n in db.get(b"log").split(b",")]
            # Every acknowledged merge, in order, and at most the one in flight after them.
            assert numbers[:acked + 1] == list(range(acked + 1))
            assert len(numbers) <= acked + 2
            start = len(numbers)
            for j in range(max(0, acked - 199), acked + 1):
                assert b"%d" % j in db.get(b"n%03d" % (j % 200)).split(b",")
            # The in-flight pair may be half there: complete it so the next child's numbers follow on.
            # (Its key may not exist yet: the first merge of a key in flight.)
            last = db.get(b"n%03d" % ((start - 1) % 200)) or b""
            if last.split(b",")[-1] != b"%d" % (start - 1):
                db.merge(b"n%03d" % ((start - 1) % 200), b"%d" % (start - 1))
        assert check_db(path).ok


# -- checkpoints, repair, read-only handles ---------------------------------------------------

def _write_operands_everywhere(db) -> None:
    """Operands over a value in a deeper level, in level 0 and in the memtable."""
    db.put(b"k", b"base")
    db.merge(b"j", b"j1")
    db.flush()
    db.compact_range()
    db.merge(b"k", b"a")
    db.merge(b"j", b"j2")
    db.flush()
    db.merge(b"k", b"b")
    db.merge(b"k", b"c")


EVERYWHERE = {b"j": b"j1,j2", b"k": b"base,a,b,c"}


def test_checkpoints_keep_the_operands_and_the_operator_name(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append(), disable_auto_compactions=True) as db:
        _write_operands_everywhere(db)
        # (first: the handle's own checkpoint flushes the memtable, whose operands
        # a read-only handle reads from the log)
        lsmkv.checkpoint(path, str(tmp_path / "copy2"), merge_operator=Append())
        with pytest.raises(OptionError):
            lsmkv.checkpoint(path, str(tmp_path / "copy3"))
        db.checkpoint(str(tmp_path / "copy"))
    for copy in ("copy", "copy2"):
        with pytest.raises(OptionError):
            lsmkv.open(str(tmp_path / copy))
        with lsmkv.open(str(tmp_path / copy), merge_operator=Append()) as db:
            assert dict(db.scan()) == EVERYWHERE


@pytest.mark.parametrize("manifest", ["kept", "lost"])
def test_repair_keeps_every_operand_a_read_folds(tmp_path, manifest):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append(), disable_auto_compactions=True) as db:
        _write_operands_everywhere(db)
        db._simulate_crash()  # the last operands are in the log only
    if manifest == "lost":
        for name in os.listdir(path):
            if name.startswith("MANIFEST-"):
                os.remove(os.path.join(path, name))
    lsmkv.repair(path)
    if manifest == "kept":
        with pytest.raises(OptionError):
            lsmkv.open(path)
    with lsmkv.open(path, merge_operator=Append()) as db:
        assert dict(db.scan()) == EVERYWHERE
        assert db.get(b"k") == EVERYWHERE[b"k"]


def test_a_read_only_handle_follows_the_writers_merges(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=UInt64Add(), disable_auto_compactions=True) as db:
        db.merge(b"c", ADD(1))
        with lsmkv.open(path, read_only=True, merge_operator=UInt64Add()) as ro:
            assert count(ro.get(b"c")) == 1
            db.flush()
            db.merge(b"c", ADD(2))
            assert ro.refresh()
            assert count(ro.get(b"c")) == 3
            assert [(k, count(v)) for k, v in ro.scan()] == [(b"c", 3)]


def test_a_transaction_reads_keys_with_operands_folded(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), merge_operator=UInt64Add(), **SMALL) as db:
        db.put(b"c", ADD(10))
        db.flush()
        db.merge(b"c", ADD(5))
        with db.transaction() as txn:
            assert count(txn.get(b"c")) == 15
            assert [(k, count(v)) for k, v in txn.scan()] == [(b"c", 15)]
            txn.put(b"c", ADD(count(txn.get(b"c")) * 2))
        assert count(db.get(b"c")) == 30


def test_the_command_line_reads_a_store_of_built_in_operands_and_names_any_other_operator(tmp_path, capsys):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append(b";")) as db:
        db.merge(b"k", b"a")
        db.merge(b"k", b"b")
    assert cli_main(["get", path, "k"]) == 0
    assert capsys.readouterr().out == "a;b\n"
    assert cli_main(["put", path, "j", "v"]) == 0
    assert cli_main(["scan", path]) == 0
    assert capsys.readouterr().out == "j\tv\nk\ta;b\n"
    custom = str(tmp_path / "custom")
    with lsmkv.open(custom, merge_operator=Fussy()) as db:
        db.merge(b"k", b"a")
    assert cli_main(["get", custom, "k"]) != 0
    assert "test.fussy" in capsys.readouterr().err


@pytest.mark.parametrize("operator", [UInt64Add(), Max(), Append(), Append(b"\n\x00")])
def test_each_built_in_operator_is_found_by_its_recorded_name(operator):
    found = builtin_operator(operator_name(operator))
    assert type(found) is type(operator) and operator_name(found) == operator_name(operator)
    assert found(b"k", None, [b"\x01" * 8, b"\x02" * 8]) == operator(b"k", None, [b"\x01" * 8, b"\x02" * 8])


def test_other_names_are_no_built_in_operator():
    assert builtin_operator("test.fussy") is None
    assert builtin_operator("lsmkv.append:zz") is None


@pytest.mark.parametrize("with_ttl", [False, True])
def test_a_table_of_operands_is_never_read_as_values_nor_ingested(tmp_path, with_ttl):
    path = str(tmp_path / "db")
    with lsmkv.open(path, merge_operator=Append(), disable_auto_compactions=True) as db:
        if with_ttl:
            db.put(b"a", b"v", ttl=3600)
        db.merge(b"k", b"operand")
        db.flush()
    table = os.path.join(path, [n for n in os.listdir(path) if n.endswith(".sst")][0])
    with pytest.raises(ValueError, match="merge operand"):
        list(lsmkv.read_table(table))
    with lsmkv.open(str(tmp_path / "other"), merge_operator=Append()) as other:
        with pytest.raises(ValueError, match="merge operands"):
            other.ingest([table])
        assert list(other.scan()) == []
