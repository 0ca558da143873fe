"""One writer per database: a second open for writing raises LockError,
whose message says whether the holder is this process or another one, on
both engines."""

from __future__ import annotations

import pytest

import btree
import lsmkv
from lsmkv import LockError

ENGINES = {"lsm": lsmkv, "btree": btree}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_second_open_in_this_process_says_this_process(tmp_path, engine):
    module = ENGINES[engine]
    path = str(tmp_path / "db")
    with module.open(path) as db:
        db.put(b"k", b"v")
        with pytest.raises(LockError, match="already open for writing in this process") as raised:
            module.open(path)
        assert "another process" not in str(raised.value)
        with pytest.raises(LockError, match="already open for writing in this process"):
            module.destroy(path)
        with module.open(path, read_only=True) as reader:  # readers take no lock
            assert reader.get(b"k") == b"v"
        assert db.get(b"k") == b"v"  # the refused open changed nothing
    with module.open(path) as again:  # closing let go of the lock
        assert again.get(b"k") == b"v"


def test_btree_the_lock_follows_the_page_file_a_vacuum_renames(tmp_path):
    """compact_range() renames a new, locked page file over the old one: a
    second open still finds the database held by this process."""
    path = str(tmp_path / "db")
    with btree.open(path) as db:
        db.put(b"k", b"v")
        db.compact_range()
        with pytest.raises(LockError, match="already open for writing in this process"):
            btree.open(path)
    with btree.open(path) as again:
        assert again.get(b"k") == b"v"


@pytest.mark.subprocess
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_open_while_another_process_writes_says_another_process(tmp_path, engine, writer_process):
    module = ENGINES[engine]
    path = str(tmp_path / "db")
    module.open(path).close()
    with writer_process("lsmkv" if engine == "lsm" else "btree", path):
        with pytest.raises(LockError, match="open for writing in another process") as raised:
            module.open(path)
        assert "this process" not in str(raised.value)
