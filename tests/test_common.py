"""The pieces both engines share: argument validation, the fs layer, directory detection."""

from __future__ import annotations

import os
import random

import pytest

from lsmkv import InvalidDatabaseError, LockError, SizeLimitError
from lsmkv.base.dbdir import detect_engine, prepare_directory
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.base.keys import as_key, as_value, prefix_upper_bound, scan_bounds


def test_keys_accept_bytes_like_and_reject_others():
    assert as_key(b"a") == b"a"
    assert as_key(bytearray(b"ab")) == b"ab"
    assert as_key(memoryview(b"abc")) == b"abc"
    assert type(as_key(bytearray(b"x"))) is bytes
    with pytest.raises(TypeError, match="key must be bytes.*not str"):
        as_key("text")
    with pytest.raises(TypeError, match="value must be bytes.*not int"):
        as_value(3)


def test_size_limits_raise_value_error():
    with pytest.raises(ValueError, match="key is 11 bytes; the limit is 10"):
        as_key(b"x" * 11, max_size=10)
    with pytest.raises(SizeLimitError):
        as_value(b"x" * 5, max_size=4)
    assert as_value(b"") == b""


def test_prefix_bounds():
    assert prefix_upper_bound(b"user:") == b"user;"
    assert prefix_upper_bound(b"a\xff\xff") == b"b"
    assert prefix_upper_bound(b"\xff") is None
    assert scan_bounds(None, None, b"ab") == (b"ab", b"ac")
    assert scan_bounds(b"abc", b"z", b"ab") == (b"abc", b"ac")
    assert scan_bounds(b"a", b"b", None) == (b"a", b"b")


def test_detect_engine(tmp_path):
    fs = DEFAULT_FS
    assert detect_engine(str(tmp_path / "missing"), fs) is None
    assert detect_engine(str(tmp_path), fs) is None
    (tmp_path / "CURRENT").write_text("x")
    assert detect_engine(str(tmp_path), fs) == "lsm"
    with pytest.raises(InvalidDatabaseError, match="lsm database, not a btree"):
        prepare_directory(str(tmp_path), "btree", fs, create=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("hello")
    with pytest.raises(InvalidDatabaseError, match="not an lsmkv or btree database"):
        detect_engine(str(other), fs)
    with pytest.raises(InvalidDatabaseError, match="is a file"):
        detect_engine(str(other / "notes.txt"), fs)


def test_fs_append_read_and_atomic_write(tmp_path):
    fs = DEFAULT_FS
    path = str(tmp_path / "f")
    f = fs.create(path)
    f.append(b"hello ")
    f.append(memoryview(b"world"))
    f.sync()
    assert f.size == 11
    f.close()
    r = fs.open_readable(path)
    assert r.read_at(6, 5) == b"world"
    assert r.read_at(8, 100) == b"rld"
    r.close()
    fs.write_file_atomically(path, b"new")
    assert fs.read_file(path) == b"new"
    assert not os.path.exists(path + ".tmp")


def test_lock_is_exclusive(tmp_path):
    fs = DEFAULT_FS
    lock = fs.lock(str(tmp_path / "LOCK"))
    with pytest.raises(LockError, match="already open for writing in this process"):
        fs.lock(str(tmp_path / "LOCK"))
    lock.release()
    fs.lock(str(tmp_path / "LOCK")).release()


def test_log_file_mapping_grows_and_is_trimmed_at_close(tmp_path):
    from lsmkv.base.fs import MappedAppendFile
    fs = DEFAULT_FS
    path = str(tmp_path / "x.log")
    f = fs.create_log(path, 4096)
    assert isinstance(f, MappedAppendFile)
    chunks = [bytes([i % 251]) * 1000 for i in range(50)]  # 50,000 bytes: several growths
    for c in chunks:
        f.append(c)
    f.sync()
    assert f.size == 50000
    assert os.path.getsize(path) >= 50000  # preallocated space
    f.close()
    assert os.path.getsize(path) == 50000
    assert fs.read_file(path) == b"".join(chunks)


def test_mapped_append_with_a_commit_byte_writes_every_byte_across_growths(tmp_path):
    """An append with ``commit_at`` (a log record's: that byte goes in last)
    lands whole, from bytes (the compiled build's C copy into the mapping)
    and from a bytearray or memoryview (slices), while the mapping grows
    under it; after close the file holds exactly what was appended, and
    appending to a closed file is an error, not a write."""
    from lsmkv.base.fs import MappedAppendFile
    path = str(tmp_path / "x.log")
    f = DEFAULT_FS.create_log(path, 4096)
    assert isinstance(f, MappedAppendFile)
    rng = random.Random(7)
    written = []
    for i in range(300):
        data = rng.randbytes(rng.choice([1, 7, 8, 150, 1000, 5000]))
        commit = rng.randrange(len(data))
        piece = (data, bytearray(data), memoryview(data))[i % 3]
        f.append(piece, commit)
        written.append(data)
    assert f.capacity >= f.size == sum(map(len, written))
    f.close()
    assert DEFAULT_FS.read_file(path) == b"".join(written)
    with pytest.raises(ValueError):
        f.append(b"after close", 0)
    assert DEFAULT_FS.read_file(path) == b"".join(written)


def test_big_batch_grows_the_log_and_replays(tmp_path):
    import lsmkv
    path = str(tmp_path / "db")
    big = os.urandom(3 * 1024 * 1024)
    with lsmkv.open(path, write_buffer_size=4096) as db:
        db.put(b"big", big, sync=True)
        db.put(b"small", b"s")
    with lsmkv.open(path) as db:
        assert db.get(b"big") == big and db.get(b"small") == b"s"
