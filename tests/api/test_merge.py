"""``db.merge`` and ``batch.merge`` through the engines' public open(), as
the shared API specifies them: the operator folds operands on every read,
bad operands and merges without an operator are refused and change
nothing, a read-only handle refuses merges, and the operator's name is
checked at open. Parametrized by engine; btree joins ENGINES once its
engine supports merges."""

from __future__ import annotations

import pytest

import btree
import lsmkv
from lsmkv import InvalidArgumentError, OptionError, ReadOnlyError
from lsmkv.base.merge_operators import Append, Max, UInt64Add
from lsmkv.stores import open_store

ENGINES = ["lsm"]
SMALL = {"lsm": {"write_buffer_size": 8 * 1024, "compaction_executor": "thread"}, "btree": {"page_size": 512}}


def open_db(engine: str, path, **options):
    opener = lsmkv.open if engine == "lsm" else btree.open
    return opener(str(path), **{**SMALL[engine], **options})


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


def test_every_read_folds_the_operands(engine, tmp_path):
    with open_db(engine, tmp_path / "db", merge_operator=Append(b"-")) as db:
        for i in range(300):
            db.merge(b"k%03d" % (i % 30), b"%d" % i)
        db.flush()
        with db.write_batch() as batch:
            batch.merge(b"k000", b"last")
            batch.put(b"plain", b"p")
        expected = {b"k%03d" % k: b"-".join(b"%d" % i for i in range(k, 300, 30)) for k in range(30)}
        expected[b"k000"] += b"-last"
        expected[b"plain"] = b"p"
        assert db.get(b"k000") == expected[b"k000"]
        assert db.multi_get([b"k001", b"nope"]) == [expected[b"k001"], None]
        assert dict(db.scan()) == expected
        assert list(db.scan(reverse=True)) == sorted(expected.items(), reverse=True)
        assert len(db) == 31 and dict(db.items()) == expected
        with db.snapshot() as snap:
            db.merge(b"k001", b"after")
            assert snap.get(b"k001") == expected[b"k001"]
            assert db.get(b"k001") == expected[b"k001"] + b"-after"


def test_refused_merges_change_nothing(engine, tmp_path):
    with open_db(engine, tmp_path / "db", merge_operator=UInt64Add()) as db:
        db.merge(b"c", UInt64Add.operand(1))
        with pytest.raises(InvalidArgumentError):
            db.merge(b"c", b"short")
        with pytest.raises(InvalidArgumentError):
            with db.write_batch() as batch:
                batch.put(b"x", b"y")
                batch.merge(b"c", b"short")
        assert db.get(b"x") is None and UInt64Add.decode(db.get(b"c")) == 1
    with open_db(engine, tmp_path / "plain") as db:
        with pytest.raises(InvalidArgumentError, match="merge_operator="):
            db.merge(b"c", b"v")
        assert db.get(b"c") is None


def test_the_operator_name_is_checked_at_open(engine, tmp_path):
    path = tmp_path / "db"
    with open_db(engine, path, merge_operator=Max()) as db:
        db.merge(b"m", b"b")
        db.merge(b"m", b"a")
    with pytest.raises(OptionError, match="lsmkv.max"):
        open_db(engine, path)
    with pytest.raises(OptionError, match="lsmkv.max"):
        open_db(engine, path, merge_operator=UInt64Add())
    with pytest.raises(OptionError, match="lsmkv.max"):
        open_store(str(path), read_only=True)
    with open_store(str(path), read_only=True, merge_operator=Max()) as ro:
        assert ro.get(b"m") == b"b"
        with pytest.raises(ReadOnlyError):
            ro.merge(b"m", b"z")
    with open_store(str(path), merge_operator=Max()) as db:
        assert db.get(b"m") == b"b"
