"""Bad input, for both engines: every case raises exactly one clear error
that names the problem, and changes nothing on disk (the directory's file
names and bytes are compared before and after). The table of cases is
docs/reliability.md's "Bad input" section."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap

import pytest

import btree
import lsmkv
from btree.node import HEADER_SIZE
from btree.pager import FORMAT_VERSION as BTREE_FORMAT_VERSION
from btree.pager import META_BODY, PAGES_FILE
from btree.repair import repair_db as btree_repair
from lsmkv.base.checksum import crc32
from lsmkv.base.errors import (ClosedError, InvalidArgumentError, InvalidDatabaseError, LockError, OptionError,
                               ReadOnlyError, SizeLimitError)
from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE
from lsmkv.cli import main
from lsmkv.lsm.repair import repair_db as lsm_repair
from lsmkv.lsm.version import DB_FORMAT_VERSION
from lsmkv.lsm.wal import LogReader, LogWriter
from lsmkv.lsm.write_batch import MAX_BATCH_BYTES as LSM_MAX_BATCH

ENGINES = {"lsm": lsmkv.open, "btree": btree.open}
#: The largest key each engine accepts (btree: depends on the page size, 4096 here).
MAX_KEY = {"lsm": MAX_KEY_SIZE, "btree": 1003}
MAX_BATCH = {"lsm": LSM_MAX_BATCH, "btree": 512 * 1024 * 1024}


def files(path: str) -> dict[str, bytes]:
    """Every file under ``path`` (relative name -> bytes)."""
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = f.read()
    return out


def populated(engine: str, path: str) -> None:
    with ENGINES[engine](path) as db:
        for i in range(100):
            db.put(b"key%03d" % i, b"value%03d" % i)
        db.flush()
        db.put(b"logged", b"1", sync=True)


@pytest.fixture(params=sorted(ENGINES))
def engine(request) -> str:
    return request.param


@pytest.fixture
def dbpath(tmp_path, engine) -> str:
    path = str(tmp_path / "db")
    populated(engine, path)
    return path


def raises_once(exc_type, pattern: str, call) -> BaseException:
    """``call()`` raises ``exc_type`` matching ``pattern`` (one error: no
    other exception chained as its context, which would mean a failure
    while handling the first)."""
    with pytest.raises(exc_type, match=pattern) as info:
        call()
    assert info.value.__context__ is None or info.value.__suppress_context__, repr(info.value.__context__)
    return info.value


# ---------------------------------------------------------------------------
# Cases on an open database
# ---------------------------------------------------------------------------

def _batch(db, ops):
    def run():
        with db.write_batch() as b:
            for op in ops:
                op(b)
    return run


def _oversized_batch(engine: str):
    big = b"x" * (60 * 1024 * 1024)  # one object, referenced again and again
    n = MAX_BATCH[engine] // len(big) + 1
    return [lambda b, i=i: b.put(b"k%d" % i, big) for i in range(n)]


OPEN_CASES = [
    # id, action(db, engine), exception, message pattern
    ("key-str", lambda db, e: db.put("key", b"v"), TypeError, "key must be bytes.*not str"),
    ("value-int", lambda db, e: db.put(b"key", 5), TypeError, "value must be bytes.*not int"),
    ("get-none", lambda db, e: db.get(None), TypeError, "key must be bytes.*not NoneType"),
    ("delete-float", lambda db, e: db.delete(1.5), TypeError, "key must be bytes.*not float"),
    ("scan-start-int", lambda db, e: db.scan(start=1), TypeError, "start must be bytes.*not int"),
    ("scan-prefix-str", lambda db, e: db.scan(prefix="a"), TypeError, "prefix must be bytes.*not str"),
    ("batch-key-list", lambda db, e: _batch(db, [lambda b: b.put(b"ok", b"1"), lambda b: b.put([1], b"2")])(),
     TypeError, "key must be bytes.*not list"),
    ("key-too-long", lambda db, e: db.put(b"k" * (MAX_KEY[e] + 1), b"v"), SizeLimitError,
     r"key is \d+ bytes; the limit is \d+"),
    ("value-too-long", lambda db, e: db.put(b"k", b"v" * (MAX_VALUE_SIZE + 1)), SizeLimitError,
     f"the limit is {MAX_VALUE_SIZE}"),
    ("batch-too-big", lambda db, e: _batch(db, _oversized_batch(e))(), SizeLimitError,
     r"write batch would (hold \d+ bytes; the limit is|exceed) \d+"),
    ("ttl-zero", lambda db, e: db.put(b"ok", b"v", ttl=0), InvalidArgumentError,
     "ttl must be a positive number of seconds"),
    ("ttl-nan", lambda db, e: db.put(b"ok", b"v", ttl=float("nan")), InvalidArgumentError,
     "ttl must be a positive number of seconds"),
    ("ttl-str", lambda db, e: db.put(b"ok", b"v", ttl="60"), TypeError, "ttl must be a number of seconds, not str"),
    ("put-sync-str", lambda db, e: db.put(b"ok", b"v", sync="yes"), TypeError, "sync must be True or False, not str"),
    ("delete-sync-int", lambda db, e: db.delete(b"key001", sync=1), TypeError,
     "sync must be True or False, not int"),
    ("batch-sync-str", lambda db, e: db.write_batch(sync="x"), TypeError, "sync must be True or False, not str"),
    ("batch-ttl-negative", lambda db, e: _batch(db, [lambda b: b.put(b"ok", b"1"),
                                                    lambda b: b.put(b"ok2", b"2", ttl=-1)])(),
     InvalidArgumentError, "ttl must be a positive number"),
]


@pytest.mark.parametrize("case", OPEN_CASES, ids=[c[0] for c in OPEN_CASES])
def test_bad_arguments_on_an_open_database(engine, dbpath, case):
    _, action, exc_type, pattern = case
    with ENGINES[engine](dbpath) as db:
        before = files(dbpath)
        entries = db.stats()["entries"]
        raises_once(exc_type, pattern, lambda: action(db, engine))
        assert files(dbpath) == before
        assert db.stats()["entries"] == entries
        assert db.get(b"ok") is None and db.get(b"key001") == b"value001"


READ_ONLY_CASES = [
    ("put", lambda db: db.put(b"k", b"v")),
    ("delete", lambda db: db.delete(b"key001")),
    ("setitem", lambda db: db.__setitem__(b"k", b"v")),
    ("batch", lambda db: _batch(db, [lambda b: b.put(b"k", b"v")])()),
    ("batch-opened", lambda db: db.write_batch()),  # refused when asked for, not at the end of the block
    ("flush", lambda db: db.flush()),
]


@pytest.mark.parametrize("case", READ_ONLY_CASES, ids=[c[0] for c in READ_ONLY_CASES])
def test_read_only_handle_refuses_writes(engine, dbpath, case):
    _, action = case
    before = files(dbpath)
    with ENGINES[engine](dbpath, read_only=True) as db:
        raises_once(ReadOnlyError, "read_only=True", lambda: action(db))
        assert db.get(b"k") is None and db.get(b"key001") == b"value001"
    assert files(dbpath) == before


def _closed(db):
    db.close()
    return db


def _closed_snapshot(db):
    snap = db.snapshot()
    snap.close()
    return snap


def _snapshot_of_closed_db(db):
    snap = db.snapshot()
    db.close()
    return snap


def _iterator_of_closed_db(db):
    it = db.scan()
    next(it)
    db.close()
    return it


def _iterator_of_closed_snapshot(db):
    snap = db.snapshot()
    it = snap.scan()
    next(it)
    snap.close()
    return it


def _batch_of_closed_db(db):
    batch = db.write_batch()
    batch.put(b"k2", b"v")
    db.close()
    return batch


def _committed_batch(db):
    with db.write_batch() as batch:
        batch.put(b"k", b"v")
    return batch


#: id, set-up (returns the thing used after its close), the use.
CLOSED_CASES = [
    ("db-get", _closed, lambda db: db.get(b"key001")),
    ("db-put", _closed, lambda db: db.put(b"k2", b"v")),
    ("db-delete", _closed, lambda db: db.delete(b"key001")),
    ("db-scan", _closed, lambda db: db.scan()),
    ("db-snapshot", _closed, lambda db: db.snapshot()),
    ("db-write-batch", _closed, lambda db: db.write_batch()),
    ("db-flush", _closed, lambda db: db.flush()),
    ("db-stats", _closed, lambda db: db.stats()),
    ("snapshot-get", _closed_snapshot, lambda snap: snap.get(b"key001")),
    ("snapshot-scan", _closed_snapshot, lambda snap: snap.scan()),
    ("snapshot-of-closed-db", _snapshot_of_closed_db, lambda snap: snap.get(b"key001")),
    ("iterator-of-closed-db", _iterator_of_closed_db, next),
    ("iterator-of-closed-snapshot", _iterator_of_closed_snapshot, next),
    ("batch-of-closed-db", _batch_of_closed_db, lambda batch: batch.__exit__(None, None, None)),
    ("batch-reused-after-commit", _committed_batch, lambda batch: batch.put(b"k2", b"v2")),
]


@pytest.mark.parametrize("case", CLOSED_CASES, ids=[c[0] for c in CLOSED_CASES])
def test_use_after_close(engine, dbpath, case):
    _, setup, use = case
    db = ENGINES[engine](dbpath)
    try:
        thing = setup(db)
        before = files(dbpath)
        raises_once(ClosedError, "closed|after close|already (written|committed)", lambda: use(thing))
        assert files(dbpath) == before
    finally:
        db.close()
    with ENGINES[engine](dbpath) as db:
        assert db.get(b"k2") is None and db.get(b"key001") == b"value001"


# ---------------------------------------------------------------------------
# Cases on the path
# ---------------------------------------------------------------------------

def test_path_that_is_a_regular_file(engine, tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"not a database")
    raises_once(InvalidDatabaseError, "is a file, not a database directory", lambda: ENGINES[engine](str(path)))
    assert path.read_bytes() == b"not a database"


def test_directory_of_the_other_engine(engine, tmp_path):
    other = "btree" if engine == "lsm" else "lsm"
    path = str(tmp_path / "other")
    populated(other, path)
    before = files(path)
    raises_once(InvalidDatabaseError, f"is an? {other} database, not an? {engine} database",
                lambda: ENGINES[engine](path))
    raises_once(InvalidDatabaseError, f"is an? {other} database",
                lambda: ENGINES[engine](path, read_only=True))
    assert files(path) == before


def test_unrelated_non_empty_directory(engine, tmp_path):
    path = tmp_path / "photos"
    path.mkdir()
    (path / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    raises_once(InvalidDatabaseError, "not an lsmkv or btree database.*cat.jpg", lambda: ENGINES[engine](str(path)))
    assert files(str(path)) == {"cat.jpg": b"\xff\xd8\xff"}


def test_missing_database_read_only_is_not_created(engine, tmp_path):
    path = tmp_path / "missing"
    raises_once(InvalidDatabaseError, "does not exist|holds no btree database", 
                lambda: ENGINES[engine](str(path), read_only=True))
    assert not path.exists()


def test_unknown_or_bad_option_is_refused_before_anything_is_created(engine, tmp_path):
    path = tmp_path / "new"
    raises_once(OptionError, "unknown .*option 'colour'", lambda: ENGINES[engine](str(path), colour=1))
    raises_once(OptionError, "read_only", lambda: ENGINES[engine](str(path), read_only="yes"))
    assert not path.exists()


#: A format version newer than either engine writes (both write 2: values with a ttl).
#: A format version newer than each engine writes.
NEWER_VERSION = {"lsm": DB_FORMAT_VERSION + 1, "btree": BTREE_FORMAT_VERSION + 1}


def _bump_lsm_format_version(path: str) -> None:
    """Rewrite the manifest's first record with a newer format version (valid framing and checksums)."""
    with open(os.path.join(path, "CURRENT")) as f:
        manifest = os.path.join(path, f.read().strip())
    with open(manifest, "rb") as f:
        records = [payload for _, payload in LogReader(f.read(), manifest).records()]
    first = bytearray(records[0])
    assert first[0] == 7  # the format-version tag leads the first record
    struct.pack_into("<I", first, 1, NEWER_VERSION["lsm"])
    records[0] = bytes(first)
    writer = LogWriter(lsmkv.base.fs.DEFAULT_FS.create(manifest))
    for payload in records:
        writer.add_record(payload)
    writer.close()


def _bump_btree_format_version(path: str) -> None:
    """Set a newer format version in both meta pages (checksums recomputed)."""
    with open(os.path.join(path, PAGES_FILE), "r+b") as f:
        data = bytearray(f.read())
        ps = struct.unpack_from("<I", data, HEADER_SIZE + 12)[0]
        for slot in (0, 1):
            page = memoryview(data)[slot * ps:(slot + 1) * ps]
            struct.pack_into("<I", page, HEADER_SIZE + 8, NEWER_VERSION["btree"])
            struct.pack_into("<I", page, 0, crc32(bytes(page[4:])))
        assert META_BODY.unpack_from(data, HEADER_SIZE)[1] == NEWER_VERSION["btree"]
        f.seek(0)
        f.write(data)


def test_newer_format_version(engine, dbpath):
    (_bump_lsm_format_version if engine == "lsm" else _bump_btree_format_version)(dbpath)
    before = files(dbpath)
    pattern = f"version {NEWER_VERSION[engine]}.*(newer|understands up to)"
    for read_only in (False, True):
        raises_once(InvalidDatabaseError, pattern, lambda: ENGINES[engine](dbpath, read_only=read_only))
    repair = lsm_repair if engine == "lsm" else btree_repair
    raises_once(InvalidDatabaseError, pattern, lambda: repair(dbpath))
    assert files(dbpath) == before


@pytest.mark.subprocess
def test_second_writer_process(engine, dbpath):
    opener = "lsmkv.open" if engine == "lsm" else "btree.open"
    code = textwrap.dedent(f"""
        import sys, lsmkv, btree
        try:
            {opener}({dbpath!r})
        except lsmkv.LockError as exc:
            print("LockError:", exc)
            sys.exit(0)
        sys.exit(3)
    """)
    with ENGINES[engine](dbpath) as db:
        db.put(b"held", b"1", sync=True)
        before = files(dbpath)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.count("\n") == 1 and "open for writing in another process" in proc.stdout
        assert files(dbpath) == before
    with pytest.raises(LockError):  # in-process too
        with ENGINES[engine](dbpath):
            ENGINES[engine](dbpath)


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------

def _cli_cases(tmp_path, engine, dbpath):
    plain = tmp_path / "plain-file"
    plain.write_text("x")
    other = tmp_path / "photos"
    other.mkdir(exist_ok=True)
    (other / "cat.jpg").write_bytes(b"\xff")
    return [
        (["get", str(plain), "k"], "is a file"),
        (["put", str(other), "k", "v"], "not an lsmkv or btree database"),
        (["scan", str(tmp_path / "missing")], "no database here"),
        (["check", str(plain)], "is a file"),
        (["repair", str(other)], "no lsmkv or btree database"),
        (["stats", str(tmp_path / "missing")], "no database here"),
        (["get", dbpath, "--hex", "zz"], "not hexadecimal"),
        (["put", dbpath, "--hex", "00", "xyz"], "not hexadecimal"),
        (["sst-dump", str(plain)], "too short to be a table"),
        (["scan", dbpath, "--limit", "many"], "invalid int value"),
        (["frobnicate", dbpath], "invalid choice"),
        (["get", dbpath], "required"),
    ]


def test_cli_bad_input_is_one_line_without_traceback(engine, dbpath, tmp_path, capsys):
    for argv, message in _cli_cases(tmp_path, engine, dbpath):
        before = files(str(tmp_path))
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
        out, err = capsys.readouterr()
        assert code not in (0, None), argv
        assert err.count("\n") == 1 and message in err, (argv, err)
        assert "Traceback" not in err and out == "", (argv, out)
        assert files(str(tmp_path)) == before, argv
