"""lsmkv.destroy / btree.destroy and lsmkv.repair / btree.repair: the public
functions, what they refuse (deleting nothing) and what they return."""

from __future__ import annotations

import os

import pytest

import btree
import lsmkv
from lsmkv.cli import main as cli_main

ENGINES = {"lsm": lsmkv, "btree": btree}
MODULE_NAMES = {"lsm": "lsmkv", "btree": "btree"}


def _make(module, path):
    with module.open(path) as db:
        for i in range(500):
            db[b"k%04d" % i] = b"v" * 50
        db.flush()
        db[b"after-flush"] = b"in the log"


def _listing(path):
    return sorted(os.path.join(root, f) for root, _, files in os.walk(path) for f in files)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_destroy_removes_the_database_and_its_directory(tmp_path, engine):
    module = ENGINES[engine]
    path = tmp_path / "db"
    _make(module, str(path))
    module.destroy(os.fsencode(path))  # bytes paths too
    assert not path.exists()


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_destroy_leaves_files_that_are_not_the_databases(tmp_path, engine):
    module = ENGINES[engine]
    path = tmp_path / "db"
    _make(module, str(path))
    module.repair(str(path))
    os.makedirs(path / "lost" / "1")  # what a repair that gave something up leaves (destroy removes it)
    (path / "lost" / "1" / "btree.pages").write_bytes(b"given up")
    os.makedirs(path / "mine")
    (path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(lsmkv.InvalidDatabaseError):
        module.open(str(path / "mine"))  # (a foreign directory)
    module.destroy(str(path))
    assert _listing(path) == [str(path / "mine" / "notes.txt")]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_destroy_refuses_what_is_not_its_database_and_deletes_nothing(tmp_path, engine):
    module = ENGINES[engine]
    other = btree if module is lsmkv else lsmkv
    with pytest.raises(lsmkv.InvalidDatabaseError, match="not a database"):
        module.destroy(str(tmp_path / "missing"))
    plain = tmp_path / "file"
    plain.write_bytes(b"data")
    with pytest.raises(lsmkv.InvalidDatabaseError, match="is a file"):
        module.destroy(str(plain))
    assert plain.read_bytes() == b"data"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "a.txt").write_text("x")
    with pytest.raises(lsmkv.InvalidDatabaseError, match="not an lsmkv or btree database"):
        module.destroy(str(foreign))
    other_db = tmp_path / "other"
    _make(other, str(other_db))
    before = _listing(other_db)
    with pytest.raises(lsmkv.InvalidDatabaseError, match="nothing was deleted"):
        module.destroy(str(other_db))
    assert _listing(other_db) == before
    with other.open(str(other_db)) as db:
        assert db[b"after-flush"] == b"in the log"


@pytest.mark.subprocess
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_destroy_refuses_a_database_open_for_writing(tmp_path, engine, writer_process):
    module = ENGINES[engine]
    path = str(tmp_path / "db")
    _make(module, path)
    with writer_process(MODULE_NAMES[engine], path):
        before = _listing(path)  # as the writer's open left it
        with pytest.raises(lsmkv.LockError):
            module.destroy(path)
        assert _listing(path) == before
    db = module.open(path)  # and in this process
    try:
        with pytest.raises(lsmkv.LockError):
            module.destroy(path)
    finally:
        db.close()
    with module.open(path, read_only=True) as db:
        assert db[b"after-flush"] == b"in the log" and len(db) == 501


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_repair_returns_the_report_the_cli_prints(tmp_path, engine, capsys):
    module = ENGINES[engine]
    path = str(tmp_path / "db")
    _make(module, path)
    report = module.repair(path)
    assert report.engine == engine and report.lost == [] and not report.data_lost
    capsys.readouterr()
    assert cli_main(["repair", path]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() and path in printed
    with module.open(path) as db:
        assert db[b"after-flush"] == b"in the log" and len(db) == 501
