"""Database paths as str, bytes (including names that are not UTF-8) and
os.PathLike, for both engines and for the command line."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import btree
import lsmkv

ENGINES = {"lsm": lsmkv, "btree": btree}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_open_takes_str_bytes_and_pathlike(tmp_path, engine):
    module = ENGINES[engine]
    raw = os.fsencode(tmp_path) + b"/db-\xff\xfe"  # not valid UTF-8
    with module.open(raw) as db:
        db[b"k"] = b"v"
        assert isinstance(db.path, str) and os.fsencode(db.path) == raw
    with module.open(os.fsdecode(raw), read_only=True) as db:
        assert db[b"k"] == b"v"
    with module.open(pathlib.Path(os.fsdecode(raw))) as db:
        assert db[b"k"] == b"v"


@pytest.mark.subprocess
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_command_line_takes_paths_that_are_not_utf8(tmp_path, engine):
    raw = os.fsencode(tmp_path) + b"/cli-\xff"
    lsmkv_cli = os.path.join(os.path.dirname(sys.executable), "lsmkv")
    put = subprocess.run([lsmkv_cli, "put", "--engine", engine, raw, b"key", b"value"], capture_output=True)
    assert put.returncode == 0, put.stderr
    get = subprocess.run([lsmkv_cli, "get", raw, b"key"], capture_output=True)
    assert get.returncode == 0 and get.stdout.strip() == b"value", get.stderr
    with ENGINES[engine].open(raw, read_only=True) as db:
        assert db[b"key"] == b"value"
