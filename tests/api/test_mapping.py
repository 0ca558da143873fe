"""Both engines' DB classes are collections.abc.MutableMappings of bytes to
bytes: random sequences of mapping operations agree with a dict, across
memtable flushes and compactions (lsmkv) and page splits and merges
(btree)."""

from __future__ import annotations

import collections.abc
import shutil
import tempfile

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import btree
import lsmkv
from lsmkv.base.keys import MAX_KEY_SIZE

keys = st.binary(min_size=0, max_size=6).map(lambda b: b[:1] * 3 + b)  # shared prefixes, some empty
values = st.binary(max_size=40)

ENGINES = {
    "lsm": lambda path: lsmkv.open(path, write_buffer_size=2048, block_size=256, l0_compaction_trigger=2,
                                   compaction_executor="thread"),
    "btree": lambda path: btree.open(path, page_size=512, cache_size=16 * 512),
}


def make_machine(engine: str):
    class MappingModel(RuleBasedStateMachine):
        @initialize()
        def open_db(self):
            self.dir = tempfile.mkdtemp(prefix=f"lsmkv-mapping-{engine}-")
            self.db = ENGINES[engine](self.dir + "/db")
            self.model: dict[bytes, bytes] = {}

        def teardown(self):
            if hasattr(self, "db"):
                self.db.close()
                shutil.rmtree(self.dir, ignore_errors=True)

        @rule(k=keys, v=values)
        def setitem(self, k, v):
            self.db[k] = v
            self.model[k] = v

        @rule(k=keys)
        def delitem(self, k):
            if k in self.model:
                del self.db[k]
                del self.model[k]
            else:
                with pytest.raises(KeyError):
                    del self.db[k]

        @rule(k=keys, default=st.none() | values)
        def pop(self, k, default):
            if default is None:
                if k in self.model:
                    assert self.db.pop(k) == self.model.pop(k)
                else:
                    with pytest.raises(KeyError):
                        self.db.pop(k)
            else:
                assert self.db.pop(k, default) == self.model.pop(k, default)

        @rule()
        def popitem(self):
            if self.model:
                k = min(self.model)
                assert self.db.popitem() == (k, self.model.pop(k))
            else:
                with pytest.raises(KeyError):
                    self.db.popitem()

        @rule(k=keys, v=values)
        def setdefault(self, k, v):
            assert self.db.setdefault(k, v) == self.model.setdefault(k, v)

        @rule(pairs=st.dictionaries(keys, values, max_size=8), as_list=st.booleans())
        def update(self, pairs, as_list):
            self.db.update(list(pairs.items()) if as_list else pairs)
            self.model.update(pairs)

        @precondition(lambda self: len(self.model) < 40)
        @rule(pairs=st.dictionaries(keys, values, min_size=20, max_size=60))
        def bulk(self, pairs):
            self.db.update(pairs)
            self.model.update(pairs)

        @rule()
        def flush(self):
            self.db.flush()

        @precondition(lambda self: engine == "lsm")
        @rule()
        def compact(self):
            self.db.compact_range()

        @rule()
        def clear_sometimes(self):
            if len(self.model) > 50:
                self.db.clear()
                self.model.clear()

        @rule(k=keys)
        def lookups(self, k):
            assert (k in self.db) == (k in self.model)
            assert self.db.get(k) == self.model.get(k)
            if k in self.model:
                assert self.db[k] == self.model[k]
            else:
                with pytest.raises(KeyError):
                    self.db[k]

        @invariant()
        def same_contents(self):
            if not hasattr(self, "db"):
                return
            expected = sorted(self.model.items())
            assert len(self.db) == len(expected)
            assert list(self.db) == [k for k, _ in expected]
            assert list(reversed(self.db)) == [k for k, _ in reversed(expected)]
            assert list(self.db.keys()) == [k for k, _ in expected]
            assert list(self.db.values()) == [v for _, v in expected]
            assert list(self.db.items()) == expected
            assert len(self.db.items()) == len(expected)

    MappingModel.__name__ = f"MappingModel_{engine}"
    return MappingModel


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_mapping_protocol_agrees_with_a_dict(engine):
    machine = make_machine(engine)
    machine.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
    machine.TestCase().runTest()


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_db_is_a_mutable_mapping_equal_only_to_itself(tmp_path, engine):
    with ENGINES[engine](str(tmp_path / "a")) as a, ENGINES[engine](str(tmp_path / "b")) as b:
        assert isinstance(a, collections.abc.MutableMapping)
        a[b"k"] = b"v"
        b[b"k"] = b"v"
        assert a == a and a != b and a != {b"k": b"v"}
        assert len({a, b}) == 2  # hashable
        assert b"k" in a.keys() and (b"k", b"v") in a.items() and b"v" in a.values()
        # the mixins a MutableMapping provides, written out by KeyValueMapping
        # (a registered MutableMapping, not a subclass: mapping.py)
        assert a.setdefault(b"k", b"other") == b"v" and a.setdefault(b"n", b"new") == b"new"
        assert a.pop(b"n") == b"new" and a.pop(b"n", None) is None and b"n" not in a
        with pytest.raises(KeyError):
            a.pop(b"n")
        b[b"a"] = b"1"
        assert list(reversed(b)) == [b"k", b"a"]
        with pytest.raises(TypeError, match="keyword"):
            a.update(k=b"v")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_clear_deletes_every_key_up_to_the_largest_the_store_can_hold(tmp_path, engine):
    """clear() is a range delete up to the largest possible key plus a
    delete of that key: the empty key, keys of 0xff bytes and the longest
    key the store accepts all go, and stay gone after a reopen."""
    path = str(tmp_path / "db")
    with ENGINES[engine](path) as db:
        top = b"\xff" * db.stats().get("max_key_size", MAX_KEY_SIZE)
        keys = [b"", b"a", b"\xff", b"\xff" * 40, top[:-1], top, top[:-1] + b"\xfe"]
        for key in keys:
            db[key] = b"v"
        assert len(db) == len(set(keys))
        db.clear()
        assert len(db) == 0 and list(db) == [] and [db.get(key) for key in keys] == [None] * len(keys)
        db[b"after"] = b"1"
    with ENGINES[engine](path) as db:
        assert list(db.items()) == [(b"after", b"1")]
