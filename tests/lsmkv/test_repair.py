"""`lsmkv repair` on the LSM engine: damaged tables, manifests, CURRENT and
logs (real files, bytes flipped or cut), with the report checked against
what was damaged and the repaired database checked against a model."""

from __future__ import annotations

import bisect
import os

import pytest

import lsmkv
from lsmkv.base.errors import InvalidDatabaseError
from lsmkv.base.filenames import parse
from lsmkv.cli import EXIT_DATA_LOST, main
from lsmkv.lsm.check import check_db
from lsmkv.lsm.repair import repair_db
from lsmkv.lsm.table.reader import TableReader
from lsmkv.lsm.version import VersionSet

OPTS = dict(write_buffer_size=64 * 1024, disable_auto_compactions=True, block_size=512, target_file_size=8 * 1024)


def build(path: str) -> dict[bytes, bytes | None]:
    """A database with data at the bottom (sequence numbers zeroed by a
    compaction with nothing below), overwrites and tombstones in level-0
    tables above it, and batches only in the log. Returns the model: key ->
    value, or None for a deleted key."""
    model: dict[bytes, bytes | None] = {}
    with lsmkv.open(path, **OPTS) as db:
        for i in range(3000):
            db.put(b"k%05d" % i, b"old-%d" % i)
            model[b"k%05d" % i] = b"old-%d" % i
        db.compact_range()  # everything at the bottom, sequence numbers zeroed
        # Level-0 tables over overlapping parts of the key space.
        for i in range(0, 1000, 3):
            db.put(b"k%05d" % i, b"new-%d" % i)
            model[b"k%05d" % i] = b"new-%d" % i
        db.flush()
        for i in range(500, 1500, 5):
            db.delete(b"k%05d" % i)
            model[b"k%05d" % i] = None
        db.flush()
        for i in range(901, 2000, 7):
            db.put(b"k%05d" % i, b"newest-%d" % i)
            model[b"k%05d" % i] = b"newest-%d" % i
        db.flush()
        for i in range(2, 50, 2):  # only in the log
            db.put(b"k%05d" % i, b"logged-%d" % i)
            model[b"k%05d" % i] = b"logged-%d" % i
        db.delete(b"k00004")
        model[b"k00004"] = None
        levels = db.stats()["files_per_level"]
    assert levels[0] >= 3 and sum(levels[1:]) >= 1, levels
    return model


def tables_by_level(path: str) -> list[list]:
    vs = VersionSet(path, lsmkv.base.fs.DEFAULT_FS)
    vs.recover()
    vs.close()
    return vs.current.levels


def table_path(path: str, meta) -> str:
    return os.path.join(path, "%06d.sst" % meta.number)


def flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x55]))


def assert_repaired(path: str, model: dict, report) -> None:
    """The database opens, passes check, every key outside the reported
    losses has its latest value and no deleted key outside them returns."""
    assert check_db(path).ok, check_db(path).problems
    with lsmkv.open(path) as db:
        contents = dict(db.scan())
        for key, value in model.items():
            if report.may_have_lost(key):
                continue
            assert db.get(key) == value, key
            assert contents.get(key) == value, key
        for key in contents:
            assert key in model, key  # nothing that was never written


@pytest.fixture
def damaged_db(tmp_path):
    path = str(tmp_path / "db")
    return path, build(path)


def test_healthy_database_loses_nothing_and_keeps_every_key(damaged_db):
    path, model = damaged_db
    report = repair_db(path)
    assert not report.data_lost and report.lost == [] and report.set_aside is None
    assert report.details["keys_kept"] == sum(v is not None for v in model.values())
    assert_repaired(path, model, report)
    with lsmkv.open(path) as db:
        assert dict(db.scan()) == {k: v for k, v in model.items() if v is not None}
        assert db.stats()["files_per_level"][0] == 0  # one level of fresh tables
    assert not os.path.exists(os.path.join(path, "lost"))


@pytest.mark.parametrize("where", ["level0-newest", "level0-oldest", "bottom"])
def test_damaged_table_is_reported_with_its_range_and_set_aside(damaged_db, where):
    path, model = damaged_db
    levels = tables_by_level(path)
    if where == "level0-newest":
        victim = levels[0][0]
    elif where == "level0-oldest":
        victim = levels[0][-1]  # the tombstones' table: other keys must stay deleted
    else:
        victim = next(f for files in levels[1:] for f in files)
    victim_path = table_path(path, victim)
    with open(victim_path, "rb") as f:
        original = f.read()
    reader = TableReader(lsmkv.base.fs.DEFAULT_FS, victim_path, victim.number, cache=None)
    block = bisect.bisect_right(reader.index_offsets, len(original) // 3) - 1
    bounds = (reader.index_keys[block - 1] if block else victim.smallest, reader.index_keys[block], block > 0)
    reader.close()
    flip(victim_path, len(original) // 3)  # inside a data block
    report = repair_db(path)
    assert report.data_lost
    assert len(report.lost) == 1
    loss = report.lost[0]
    assert victim_path in loss.what and "checksum" in loss.what and f"data block {block} " in loss.what
    # Only the damaged block is lost: the keys after the block before it, through its own last key.
    assert (loss.first, loss.last, not loss.first_inclusive, loss.last_inclusive) == (*bounds, True)
    assert 0 < loss.entries < victim.entries
    copy = os.path.join(report.set_aside, os.path.basename(victim_path))
    with open(copy, "rb") as f:
        kept = f.read()
    assert len(kept) == len(original) and kept != original  # the damaged bytes, kept as they were
    assert os.path.dirname(report.set_aside) == os.path.join(path, "lost")
    assert_repaired(path, model, report)
    # Keys outside the lost range exist: the check above was not vacuous.
    assert sum(not report.may_have_lost(k) for k in model) > 1000


def test_truncated_and_missing_tables(damaged_db):
    path, model = damaged_db
    levels = tables_by_level(path)
    cut, gone = levels[0][0], levels[0][1]
    with open(table_path(path, cut), "r+b") as f:
        f.truncate(os.path.getsize(table_path(path, cut)) - 10)
    os.remove(table_path(path, gone))
    report = repair_db(path)
    # The cut took only the footer: the index block is found by scanning and
    # every data block with it, so only the missing table is lost.
    assert len(report.lost) == 1
    assert table_path(path, gone) in report.lost[0].what and "missing" in report.lost[0].what
    assert (report.lost[0].first, report.lost[0].last) == (gone.smallest, gone.largest)
    assert any(table_path(path, cut) in note and "footer damaged" in note for note in report.notes)
    assert os.path.exists(os.path.join(report.set_aside, os.path.basename(table_path(path, cut))))
    assert_repaired(path, model, report)


@pytest.mark.parametrize("damage", ["manifest-flipped", "current-garbage", "current-missing"])
def test_damaged_manifest_or_current_rebuilds_from_the_tables(damaged_db, damage):
    path, model = damaged_db
    current = os.path.join(path, "CURRENT")
    with open(current) as f:
        manifest = os.path.join(path, f.read().strip())
    if damage == "manifest-flipped":
        flip(manifest, 12)
    elif damage == "current-garbage":
        with open(current, "wb") as f:
            f.write(b"\x00garbage")
    else:
        os.remove(current)
    with pytest.raises((lsmkv.CorruptionError, InvalidDatabaseError)):
        lsmkv.open(path).close()
    report = repair_db(path)
    assert not report.data_lost  # every table and the log were intact
    assert any("manifest could not be replayed" in note for note in report.notes)
    assert_repaired(path, model, report)
    with lsmkv.open(path) as db:
        assert dict(db.scan()) == {k: v for k, v in model.items() if v is not None}
    if damage != "current-missing":
        assert os.listdir(report.set_aside)  # the damaged manifest files, kept


def test_damaged_log_record_drops_only_that_batch(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, **OPTS) as db:
        db.put(b"flushed", b"1")
        db.flush()
        with db.write_batch() as b:
            b.put(b"first", b"1")
        with db.write_batch() as b:
            b.put(b"second", b"2")
            b.put(b"flushed", b"overwritten-then-lost")
        with db.write_batch() as b:
            b.put(b"third", b"3")
    logs = [n for n in os.listdir(path) if parse(n) and parse(n)[0] == "log"]
    assert len(logs) == 1
    log_path = os.path.join(path, logs[0])
    with open(log_path, "rb") as f:
        data = f.read()
    flip(log_path, data.index(b"overwritten-then-lost"))
    report = repair_db(path)
    assert len(report.lost) == 1 and not report.lost[0].keys_known
    assert log_path in report.lost[0].what and "dropped" in report.lost[0].what
    with lsmkv.open(path) as db:
        # The damaged batch is gone as a whole; the batches around it stay.
        assert dict(db.scan()) == {b"flushed": b"1", b"first": b"1", b"third": b"3"}
    assert check_db(path).ok
    assert os.path.exists(os.path.join(report.set_aside, logs[0]))


@pytest.mark.subprocess
def test_repair_refuses_while_a_writer_process_holds_the_lock(damaged_db, refused_while_held):
    path, _ = damaged_db
    refused_while_held("lsmkv", path, repair_db)


def test_cli_repair_exit_codes_and_report(damaged_db, capsys):
    path, model = damaged_db
    assert main(["repair", path]) == 0
    out = capsys.readouterr().out
    assert "OK:" in out and "nothing lost" in out and "LOST" not in out
    victim = tables_by_level(path)[1][0]
    flip(table_path(path, victim), 100)
    assert main(["repair", path]) == EXIT_DATA_LOST
    out = capsys.readouterr().out
    assert out.count("LOST: ") == 1 and table_path(path, victim) in out and "REPAIRED" in out
    assert "lost/1" in out
    # A path that is not a database: one line, no traceback, exit 1.
    other = os.path.join(os.path.dirname(path), "other")
    os.makedirs(other)
    with open(os.path.join(other, "notes.txt"), "w") as f:
        f.write("x")
    assert main(["repair", other]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lsmkv: error:") and "no lsmkv or btree" in err
    assert os.listdir(other) == ["notes.txt"]


def test_second_repair_keeps_the_first_ones_set_aside_files(damaged_db):
    path, model = damaged_db
    levels = tables_by_level(path)
    flip(table_path(path, levels[0][0]), 200)
    first = repair_db(path)
    flip(table_path(path, tables_by_level(path)[1][0]), 200)
    second = repair_db(path)
    assert first.set_aside != second.set_aside
    assert os.listdir(first.set_aside) and os.listdir(second.set_aside)
    assert second.data_lost
    assert_repaired(path, model, _Both(first, second))


class _Both:
    """The losses of two repairs in a row."""

    def __init__(self, *reports) -> None:
        self.reports = reports

    def may_have_lost(self, key: bytes) -> bool:
        return any(r.may_have_lost(key) for r in self.reports)
