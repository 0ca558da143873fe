"""The adaptive hash index (btree/tree.py, docs/btree.md "Adaptive hash
index") takes a leaf's keys once the leaf is hot -- it has served more
gets than it holds keys -- and then answers gets of them without a
descent; get and multi_get follow the same rule."""

from __future__ import annotations

import random

import pytest

import btree

KEYS = 3000


def _filled(path):
    """A store of KEYS keys, reopened (its leaves have served no get yet),
    and its keys in a random order."""
    keys = [b"k%06d" % i for i in range(KEYS)]
    with btree.open(path) as db:
        with db.write_batch() as batch:
            for k in keys:
                batch.put(k, k + b"-" * 100)
    random.Random(7).shuffle(keys)
    return btree.open(path), keys


@pytest.mark.parametrize("read", ["get", "multi_get"])
def test_a_leafs_keys_enter_the_hash_index_once_it_has_served_more_gets_than_it_holds_keys(tmp_path, read):
    db, keys = _filled(str(tmp_path / "db"))
    with db:
        def read_all():
            if read == "get":
                assert [db.get(k) for k in keys] == [k + b"-" * 100 for k in keys]
            else:
                for i in range(0, KEYS, 7):  # (a few keys of a leaf per call)
                    some = keys[i:i + 7]
                    assert db.multi_get(some) == [k + b"-" * 100 for k in some]

        # Each leaf has served at most as many gets as it holds keys (its
        # first reads searched its page image, before the pool kept it).
        read_all()
        assert db.stats()["hash_index_entries"] == 0
        read_all()  # the leaves turn hot within their first gets of this pass
        assert 0.9 * KEYS < db.stats()["hash_index_entries"] < KEYS
        read_all()  # every key read in a hot leaf is indexed
        assert db.stats()["hash_index_entries"] == KEYS
        hits = db.stats()["hash_index_hits"]
        read_all()
        assert db.stats()["hash_index_hits"] - hits == KEYS  # and answered from the index
        assert db.check_invariants() == []


def test_without_the_hash_index_no_key_is_indexed_however_hot(tmp_path):
    path = str(tmp_path / "db")
    _filled(path)[0].close()
    keys = [b"k%06d" % i for i in range(KEYS)]
    with btree.open(path, hash_index=False) as db:
        for _ in range(3):
            for k in keys:
                assert db.get(k) == k + b"-" * 100
        assert db.stats()["hash_index_entries"] == 0
