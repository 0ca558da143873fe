"""Hypothesis stateful model test: the btree against a dict.

Small pages (512 bytes), a tiny cache and a small checkpoint threshold make
splits, merges, evictions, overflow chains and checkpoints happen all the
time; the invariant checker runs as the machine goes, and the machine also
checkpoints, reopens cleanly and "crashes" (drops the handle without a
checkpoint, so that open must replay the log).
"""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import btree

OPTIONS = dict(page_size=512, checkpoint_log_bytes=8192)
#: A tiny pool (evictions and checkpoints all the time) or a large one (the
#: hash index and dirty pages live long).
cache_sizes = st.sampled_from([16 * 512, 1 << 22])

key_pool = [bytes([97 + i // 5]) * (1 + i % 5) for i in range(30)]
keys = st.one_of(st.sampled_from(key_pool), st.binary(min_size=0, max_size=14))
small_values = st.binary(max_size=60)
values = st.one_of(small_values, small_values, small_values,
                   st.binary(min_size=100, max_size=1500))  # the last ones go to overflow chains
bounds = st.one_of(st.none(), keys)


class BTreeModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="btree-model-")
        self.path = self.dir + "/db"
        self.db = None
        self.cache_size = 16 * 512
        self.model: dict[bytes, bytes] = {}
        self.steps = 0
        self.snaps: list = []  # (snapshot, the model when it was taken)

    @initialize(cache_size=cache_sizes)
    def open_db(self, cache_size):
        self.cache_size = cache_size
        self.db = btree.open(self.path, cache_size=cache_size, **OPTIONS)

    def teardown(self) -> None:
        try:
            if self.db is not None:
                self.db.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(key=keys, value=values, sync=st.booleans())
    def put(self, key, value, sync):
        self.db.put(key, value, sync=sync)
        self.model[key] = value

    @rule(key=keys)
    def delete(self, key):
        self.db.delete(key)
        self.model.pop(key, None)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete_existing(self, data):
        key = data.draw(st.sampled_from(sorted(self.model)))
        del self.db[key]
        del self.model[key]

    @rule(ops=st.lists(st.tuples(keys, st.one_of(st.none(), values)), max_size=30), fail=st.booleans())
    def batch(self, ops, fail):
        try:
            with self.db.write_batch() as b:
                for key, value in ops:
                    if value is None:
                        b.delete(key)
                    else:
                        b.put(key, value)
                if fail:
                    raise ValueError("abandon the batch")
        except ValueError:
            return
        for key, value in ops:
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

    @rule(n=st.integers(min_value=20, max_value=200), prefix=keys, size=st.integers(0, 90))
    def many_puts(self, n, prefix, size):
        for i in range(n):
            k = prefix[:4] + b"%05d" % i
            v = bytes([i % 251]) * size
            self.db.put(k, v)
            self.model[k] = v

    @rule(prefix=keys)
    def delete_range(self, prefix):
        for k in [k for k in self.model if k.startswith(prefix[:2])][:150]:
            self.db.delete(k)
            del self.model[k]

    @rule(key=keys)
    def get(self, key):
        assert self.db.get(key) == self.model.get(key)
        assert (key in self.db) == (key in self.model)

    @rule()
    def get_all(self):
        # Fills the hash index with every resident key, so later splits,
        # merges and evictions have entries to keep exact.
        for key, value in self.model.items():
            assert self.db.get(key) == value

    @rule(start=bounds, end=bounds, reverse=st.booleans(), prefix=st.one_of(st.none(), keys))
    def scan(self, start, end, reverse, prefix):
        got = list(self.db.scan(start=start, end=end, reverse=reverse, prefix=prefix))
        want = sorted((k, v) for k, v in self.model.items()
                      if (start is None or k >= start) and (end is None or k < end)
                      and (prefix is None or k.startswith(prefix)))
        if reverse:
            want.reverse()
        assert got == want

    @precondition(lambda self: len(self.snaps) < 3)
    @rule()
    def take_snapshot(self):
        self.snaps.append((self.db.snapshot(), dict(self.model)))

    @precondition(lambda self: self.snaps)
    @rule(data=st.data(), start=bounds, reverse=st.booleans(), key=keys)
    def read_snapshot(self, data, start, reverse, key):
        snap, model = data.draw(st.sampled_from(self.snaps))
        assert snap.get(key) == model.get(key)
        want = sorted((k, v) for k, v in model.items() if start is None or k >= start)
        if reverse:
            want.reverse()
        assert list(snap.scan(start=start, reverse=reverse)) == want

    @precondition(lambda self: self.snaps)
    @rule(data=st.data())
    def close_snapshot(self, data):
        i = data.draw(st.integers(0, len(self.snaps) - 1))
        snap, _ = self.snaps.pop(i)
        snap.close()

    @rule()
    def checkpoint(self):
        self.db.flush()

    @rule(cache_size=cache_sizes)
    def reopen(self, cache_size):
        self.snaps.clear()  # closing the DB ends its snapshots
        self.db.close()
        self.cache_size = cache_size
        self.db = btree.open(self.path, cache_size=cache_size, **OPTIONS)

    @rule()
    def crash(self):
        self.snaps.clear()
        # Drop the handle as a killed process would: no checkpoint, files closed.
        self.db._simulate_crash()
        self.db = btree.open(self.path, cache_size=self.cache_size, **OPTIONS)

    @rule()
    def read_only_view(self):
        with btree.open(self.path, read_only=True, cache_size=0) as ro:
            assert dict(ro.scan()) == self.model

    @invariant()
    def structure_holds(self):
        self.steps += 1
        assert self.db.stats()["entries"] == len(self.model)
        if self.steps % 3 == 0:
            assert self.db.check_invariants() == []


BTreeModel.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestBTreeModel = pytest.mark.slow(BTreeModel.TestCase)
