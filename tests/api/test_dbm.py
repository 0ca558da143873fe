"""lsmkv.dbm and btree.dbm: CPython's own dbm contract tests (test.test_dbm's
AnyDBMTestCase, shipped with the interpreter) run against both modules,
shelve on top of them, and what the contract leaves to each module (flags,
modes, paths, errors)."""

from __future__ import annotations

import dbm
import os
import pathlib
import shelve
import tempfile
import unittest

import pytest

import btree.dbm
import lsmkv
import lsmkv.dbm
from test import test_dbm as cpython_dbm_tests

MODULES = [lsmkv.dbm, btree.dbm]


class _Contract(cpython_dbm_tests.AnyDBMTestCase):
    """CPython's test bodies call ``dbm.open`` (which picks the module of an
    existing file by its format, and knows only the standard library's):
    here it is the module under test's open, in a folder of its own."""

    def setUp(self):
        cwd = os.getcwd()
        work = tempfile.mkdtemp(prefix="lsmkv-dbm-contract-")
        os.chdir(work)
        self.addCleanup(os.rmdir, work)
        self.addCleanup(os.chdir, cwd)
        self.addCleanup(setattr, dbm, "open", dbm.open)
        dbm.open = self.module.open
        super().setUp()


TestLsmkvDbmContract = type("TestLsmkvDbmContract", (_Contract, unittest.TestCase), {"module": lsmkv.dbm})
TestBtreeDbmContract = type("TestBtreeDbmContract", (_Contract, unittest.TestCase), {"module": btree.dbm})


def test_the_contract_suite_has_its_tests():
    """The CPython suite really runs here (a renamed or emptied mixin would
    silently test nothing)."""
    names = [n for n in dir(TestLsmkvDbmContract) if n.startswith("test_")]
    assert {"test_anydbm_creation", "test_anydbm_read", "test_anydbm_modification", "test_error",
            "test_open_with_bytes", "test_empty_value", "test_keys"} <= set(names)


@pytest.mark.parametrize("module", MODULES, ids=["lsmkv", "btree"])
def test_shelve_survives_a_reopen(tmp_path, module):
    path = tmp_path / "shelf"
    with shelve.Shelf(module.open(path, "c")) as shelf:
        shelf["user"] = {"name": "alice", "roles": ["admin"]}
        shelf["count"] = 3
    with shelve.Shelf(module.open(path, "r")) as shelf:
        assert shelf["user"] == {"name": "alice", "roles": ["admin"]} and shelf["count"] == 3
        assert sorted(shelf.keys()) == ["count", "user"]
    with shelve.Shelf(module.open(path, "w"), writeback=True) as shelf:
        shelf["user"]["roles"].append("ops")
    with shelve.Shelf(module.open(path, "r")) as shelf:
        assert shelf["user"]["roles"] == ["admin", "ops"]


@pytest.mark.parametrize("module", MODULES, ids=["lsmkv", "btree"])
def test_flags_modes_and_errors(tmp_path, module):
    path = tmp_path / "db"
    for flag in ("r", "w"):
        with pytest.raises(module.error, match="need 'c' or 'n'"):
            module.open(path, flag)
    assert not path.exists()
    with pytest.raises(module.error, match="'u'"):
        module.open(path, "cu")
    with pytest.raises(module.error, match="unknown flag modifier"):
        module.open(path, "cx")
    with pytest.raises(module.error, match="must begin with"):
        module.open(path, "x")
    assert not path.exists()
    with module.open(path, "cs", 0o640) as d:  # synchronized writes
        d["k"] = "välue"
        d[b"b"] = b"\x00"
        assert d[b"k"] == "välue".encode() and d["b"] == b"\x00" and "k" in d and 5 not in d
        assert d.keys() == [b"b", b"k"] and len(d) == 2
        del d["b"]
        with pytest.raises(KeyError):
            del d["b"]
        with pytest.raises(TypeError, match="bytes or str"):
            d[1] = b"x"
    assert path.stat().st_mode & 0o777 == 0o750 & ~_umask()
    with module.open(os.fsencode(path), "r") as d:
        assert dict(d.items()) == {b"k": "välue".encode()}
        with pytest.raises(module.error, match="reading only"):
            d["x"] = "y"
    d.close()  # closing twice is harmless
    with pytest.raises(module.error, match="closed"):
        d["k"]
    with module.open(pathlib.Path(path), "n") as d:  # 'n' empties it
        assert len(d) == 0


@pytest.mark.parametrize("module", MODULES, ids=["lsmkv", "btree"])
def test_n_replaces_a_file_but_not_a_foreign_directory_or_the_other_engine(tmp_path, module):
    plain = tmp_path / "plain"
    plain.write_bytes(b"not a database")
    with module.open(plain, "n") as d:
        d["k"] = "v"
    with module.open(plain, "r") as d:
        assert d["k"] == b"v"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(module.error, match="will not replace"):
        module.open(foreign, "n")
    assert (foreign / "notes.txt").read_text() == "keep me"
    other = btree.dbm if module is lsmkv.dbm else lsmkv.dbm
    with other.open(tmp_path / "other", "c") as d:
        d["k"] = "v"
    with pytest.raises(module.error, match="will not replace"):
        module.open(tmp_path / "other", "n")
    with pytest.raises(module.error):
        module.open(tmp_path / "other", "w")
    with other.open(tmp_path / "other", "r") as d:
        assert d["k"] == b"v"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
