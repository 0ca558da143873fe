"""Stateful model test: lsmkv against a dict, over random operations.

Puts, deletes, batches, flushes, reopens, snapshots (taken, read, released)
and scans (forward, reverse, bounded, prefixed), with a tiny write buffer and
block size so memtable switches, flushes and many level-0 tables happen all
the time.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

import lsmkv

# Mostly a small set of keys, so overwrites, deletes of live keys and
# versions held by snapshots are common; sometimes any short key.
KEYS = st.one_of(st.sampled_from([b"k%02d" % i for i in range(24)]),
                 st.binary(min_size=0, max_size=3).map(lambda b: b"k" + b))
VALUES = st.binary(max_size=40)
BOUND = st.one_of(st.none(), st.binary(max_size=3).map(lambda b: b"k" + b))


def model_scan(model, start, end, prefix, reverse):
    items = sorted(model.items(), reverse=reverse)
    return [(k, v) for k, v in items
            if (start is None or k >= start) and (end is None or k < end)
            and (prefix is None or k.startswith(prefix))]


class LsmModel(RuleBasedStateMachine):
    snapshots = Bundle("snapshots")

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lsmkv-model-")
        self.options = dict(write_buffer_size=512, block_size=128, max_immutable_memtables=2)
        self.db = lsmkv.open(self.dir, **self.options)
        self.model: dict[bytes, bytes] = {}
        self.open_snapshots = []

    def teardown(self):
        for snap, _ in self.open_snapshots:
            snap.close()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(key=KEYS, value=VALUES, sync=st.booleans())
    def put(self, key, value, sync):
        self.db.put(key, value, sync=sync)
        self.model[key] = value

    @rule(key=KEYS)
    def delete(self, key):
        self.db.delete(key)
        self.model.pop(key, None)

    @rule(ops=st.lists(st.tuples(st.booleans(), KEYS, VALUES), max_size=8))
    def batch(self, ops):
        with self.db.write_batch() as batch:
            for is_put, key, value in ops:
                if is_put:
                    batch.put(key, value)
                else:
                    batch.delete(key)
        for is_put, key, value in ops:
            if is_put:
                self.model[key] = value
            else:
                self.model.pop(key, None)

    @rule()
    def flush(self):
        self.db.flush()

    @rule()
    def reopen(self):
        for snap, _ in self.open_snapshots:
            snap.close()
        self.open_snapshots.clear()
        self.db.close()
        self.db = lsmkv.open(self.dir, **self.options)

    @rule(target=snapshots)
    def take_snapshot(self):
        snap = self.db.snapshot()
        entry = (snap, dict(self.model))
        self.open_snapshots.append(entry)
        return entry

    @rule(entry=snapshots, start=BOUND, end=BOUND, reverse=st.booleans())
    def read_snapshot(self, entry, start, end, reverse):
        snap, frozen = entry
        if not any(e is entry for e in self.open_snapshots):
            return
        assert list(snap.scan(start=start, end=end, reverse=reverse)) == model_scan(frozen, start, end, None, reverse)
        for key in list(frozen)[:5]:
            assert snap.get(key) == frozen[key]

    @precondition(lambda self: self.open_snapshots)
    @rule(data=st.data())
    def release_snapshot(self, data):
        i = data.draw(st.integers(0, len(self.open_snapshots) - 1))
        snap, _ = self.open_snapshots.pop(i)
        snap.close()

    @rule(key=KEYS)
    def get(self, key):
        assert self.db.get(key) == self.model.get(key)

    @rule(start=BOUND, end=BOUND, prefix=st.one_of(st.none(), st.binary(max_size=2).map(lambda b: b"k" + b)),
          reverse=st.booleans())
    def scan(self, start, end, prefix, reverse):
        got = list(self.db.scan(start=start, end=end, prefix=prefix, reverse=reverse))
        assert got == model_scan(self.model, start, end, prefix, reverse)

    @invariant()
    def present_keys_read_back(self):
        for key, value in list(self.model.items())[:10]:
            assert self.db.get(key) == value


LsmModel.TestCase.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)
TestLsmModel = pytest.mark.slow(LsmModel.TestCase)


class CompactingLsmModel(LsmModel):
    """The same model with sizes so small that compaction runs all the time,
    plus compact_range, and snapshots held across compactions."""

    def __init__(self):
        super().__init__()
        self.db.close()
        self.options = dict(write_buffer_size=256, block_size=128, max_immutable_memtables=2,
                            level1_max_bytes=1024, level_size_multiplier=2, target_file_size=512,
                            l0_compaction_trigger=2, l0_slowdown_trigger=3, l0_stop_trigger=5,
                            compaction_executor="thread")
        self.db = lsmkv.open(self.dir, **self.options)

    @rule(start=BOUND, end=BOUND)
    def compact_range(self, start, end):
        self.db.compact_range(start, end)

    @rule()
    def compact_all(self):
        self.db.compact_range()
        assert self.db.stats()["table_tombstones"] == 0 or self.open_snapshots

    @invariant()
    def levels_do_not_overlap(self):
        version = self.db._state.version
        for files in version.levels[1:]:
            assert all(a.largest < b.smallest for a, b in zip(files, files[1:]))


CompactingLsmModel.TestCase.settings = settings(max_examples=40, stateful_step_count=60, deadline=None)
TestCompactingLsmModel = pytest.mark.slow(CompactingLsmModel.TestCase)
