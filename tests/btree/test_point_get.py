"""A get's state and counters (btree/point_get.py): the PointGet a DB's
get reads is bound to every tree the handle loads, its ``usable`` flag is
the handle's, and gets on every path (get, multi_get, a read-only handle)
are counted once, with the pages they read and their hash index hits."""

from __future__ import annotations

import pytest

import btree
import lsmkv
from lsmkv.base.errors import ClosedError

KEYS = 3000


def _value(key: bytes) -> bytes:
    return key + b"-" * 100


def _fill(path: str) -> list[bytes]:
    keys = [b"k%06d" % i for i in range(KEYS)]
    with btree.open(path) as db:
        with db.write_batch() as batch:
            for k in keys:
                batch.put(k, _value(k))
    return keys


@pytest.mark.parametrize("reload", ["compact_range", "ingest"])
def test_a_get_reads_the_tree_a_reload_made(tmp_path, reload):
    """compact_range() and ingest() load a new tree: a get afterwards must
    read it (a write after the reload lands in it), not the one before."""
    path = str(tmp_path / "db")
    keys = _fill(path)
    with btree.open(path) as db:
        assert [db.get(k) for k in keys[:50]] == [_value(k) for k in keys[:50]]
        for k in keys[::2]:
            db.delete(k)
        if reload == "compact_range":
            db.compact_range()
        else:
            table = str(tmp_path / "t.sst")
            with lsmkv.TableWriter(table) as writer:
                writer.put(b"z-ingested", b"in")
            db.ingest([table])
        db.put(keys[1], b"after the reload")
        assert db.get(keys[1]) == b"after the reload"
        assert db.get(keys[0]) is None
        assert db.get(keys[3]) == _value(keys[3])
        if reload == "ingest":
            assert db.get(b"z-ingested") == b"in"
        assert db.check_invariants() == []


def test_gets_on_every_path_are_counted_with_the_pages_they_read(tmp_path):
    path = str(tmp_path / "db")
    keys = _fill(path)
    with btree.open(path, cache_size=1 << 20) as db:
        for k in keys[:1000]:
            assert db.get(k) == _value(k)
        assert db.get(b"absent", b"d") == b"d"
        assert db.multi_get([keys[1], keys[1], keys[2000]]) == [_value(keys[1])] * 2 + [_value(keys[2000])]
        s = db.stats()
        assert s["gets"] == 1000 + 1 + 2  # multi_get counts each distinct key once
        # Reopened: the first gets read their leaves from the page file.
        assert 0 < s["read_amp"] <= 3
    with btree.open(path, read_only=True) as ro:
        assert [ro.get(k) for k in keys[:10]] == [_value(k) for k in keys[:10]]
        assert ro.get(b"absent") is None
        assert ro.stats()["gets"] == 11
        assert ro.stats()["read_amp"] > 0


@pytest.mark.parametrize("read", ["get", "multi_get"])
def test_a_leaf_is_marked_used_once_per_16_hash_index_hits(tmp_path, read):
    """A hash index hit does not touch its leaf; one in 16 marks it as
    recently used and credits it the 16 gets it served, so a leaf whose
    keys are all served from the index stays in the pool."""
    path = str(tmp_path / "db")
    keys = _fill(path)
    with btree.open(path) as db:
        key = keys[0]
        while db.stats()["hash_index_entries"] == 0:  # its leaf turns hot, then its keys enter the index
            db.get(key)
        point = db._point
        leaf = db._pool.pages[point.ahi_page[key]]
        hits_before, leaf_hits = db.stats()["hash_index_hits"], leaf.hits
        for _ in range(64):
            if read == "get":
                assert db.get(key) == _value(key)
            else:
                assert db.multi_get([key]) == [_value(key)]
        assert db.stats()["hash_index_hits"] - hits_before == 64
        assert leaf.hits - leaf_hits == 64  # four marks of 16


def test_the_handles_usable_flag_is_what_a_get_tests(tmp_path):
    path = str(tmp_path / "db")
    keys = _fill(path)
    db = btree.open(path)
    assert db._usable and db._point.usable
    assert db.get(keys[0]) == _value(keys[0])
    db.close()
    assert not db._usable and not db._point.usable
    with pytest.raises(ClosedError, match="closed"):
        db.get(keys[0])
    with pytest.raises(ClosedError, match="closed"):
        db.multi_get([keys[0]])
