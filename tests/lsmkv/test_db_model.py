"""Stateful model test: lsmkv against a dict, over random operations.

Puts, deletes, batches, flushes, reopens, snapshots (taken, read, released)
and scans (forward, reverse, bounded, prefixed), with a tiny write buffer and
block size so memtable switches, flushes and many level-0 tables happen all
the time.

Transactions too, several open at once, interleaved with each other and
with the plain writes, checked against a serial model: each reads its
snapshot with its own writes over it; a commit either raises ConflictError
and changes nothing, or its writes appear at once, and then every read it
made (gets, scans, cursor walks) must be what the same read returns at the
commit point -- serializable in commit order: validation never lets a
stale read commit. (A transaction that wrote nothing commits unvalidated:
it reads as of its snapshot, a point of the commit order too.) Those rules
run among all the others in LsmModel and CompactingLsmModel, and in
TransactionModel with only plain writes and flushes beside them, where
stale reads and conflicts are frequent.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

import lsmkv
from lsmkv import ConflictError

from helpers.model_rules import put_and_delete_rules

# Mostly a small set of keys, so overwrites, deletes of live keys and
# versions held by snapshots are common; sometimes any short key.
KEYS = st.one_of(st.sampled_from([b"k%02d" % i for i in range(24)]),
                 st.binary(min_size=0, max_size=3).map(lambda b: b"k" + b))
VALUES = st.binary(max_size=40)
BOUND = st.one_of(st.none(), st.binary(max_size=3).map(lambda b: b"k" + b))
PutAndDelete = put_and_delete_rules(KEYS, VALUES, sync=st.booleans())


def model_scan(model, start, end, prefix, reverse):
    items = sorted(model.items(), reverse=reverse)
    return [(k, v) for k, v in items
            if (start is None or k >= start) and (end is None or k < end)
            and (prefix is None or k.startswith(prefix))]


def overlaid(model, own):
    """``model`` with a transaction's own writes over it (None: a delete)."""
    out = dict(model)
    for key, value in own.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def model_read(model, read):
    """What the recorded transaction read ``read`` returns on ``model``."""
    kind, args = read
    if kind == "get":
        return model.get(args)
    if kind == "scan":
        start, end, reverse = args
        return model_scan(model, start, end, None, reverse)
    seek, steps = args  # a cursor: seek, then next() up to steps times
    return [kv for kv in model_scan(model, seek, None, None, False)][:steps]


class OpenTransaction:
    """A transaction under test and its model: the snapshot it began on, its
    own writes, and each read it made (with its own writes at the time)."""

    def __init__(self, txn, snapshot):
        self.txn = txn
        self.snapshot = snapshot
        self.own: dict[bytes, bytes | None] = {}
        self.reads: list[tuple[tuple, dict, object]] = []

    def read(self, read, got):
        """Check what a read returned against the snapshot, and record it."""
        assert got == model_read(overlaid(self.snapshot, self.own), read)
        self.reads.append((read, dict(self.own), got))


class TransactionRules:
    """The rules of transactions, for a state machine holding ``db``,
    ``model``, ``transactions`` (the open ones) and ``put``/``delete`` rules."""

    @precondition(lambda self: len(self.transactions) < 4)
    @rule(sync=st.booleans())
    def begin_transaction(self, sync):
        self.transactions.append(OpenTransaction(self.db.transaction(sync=sync), dict(self.model)))

    def _pick(self, data) -> OpenTransaction:
        return self.transactions[data.draw(st.integers(0, len(self.transactions) - 1))]

    @precondition(lambda self: self.transactions)
    @rule(data=st.data(), key=KEYS)
    def transaction_get(self, data, key):
        t = self._pick(data)
        t.read(("get", key), t.txn.get(key))

    @precondition(lambda self: self.transactions)
    @rule(data=st.data(), start=BOUND, end=BOUND, reverse=st.booleans())
    def transaction_scan(self, data, start, end, reverse):
        t = self._pick(data)
        t.read(("scan", (start, end, reverse)), list(t.txn.scan(start, end, reverse=reverse)))

    @precondition(lambda self: self.transactions)
    @rule(data=st.data(), seek=KEYS, steps=st.integers(1, 4))
    def transaction_cursor(self, data, seek, steps):
        t = self._pick(data)
        got = []
        with t.txn.iterator() as cursor:
            cursor.seek(seek)
            while cursor.valid() and len(got) < steps:
                got.append((cursor.key(), cursor.value()))
                if len(got) < steps:
                    cursor.next()
        t.read(("cursor", (seek, steps)), got)

    @precondition(lambda self: any(t.reads for t in self.transactions))
    @rule(data=st.data(), value=st.none() | VALUES)
    def write_where_a_transaction_read(self, data, value):
        """A plain write (or delete) of a key an open transaction read, or a
        key inside a range it scanned or walked: what makes a read stale."""
        t = data.draw(st.sampled_from([t for t in self.transactions if t.reads]))
        (kind, args), _, _ = data.draw(st.sampled_from(t.reads))
        if kind == "get":
            key = args
        elif kind == "scan":
            start, end, _ = args
            key = (start or b"") + b"\x00"
            if end is not None and key >= end:
                return
        else:
            key = args[0]
        if value is None:
            self.delete(key)
        else:
            self.put(key, value, sync=False)

    @precondition(lambda self: self.transactions)
    @rule(data=st.data(), key=KEYS, value=VALUES)
    def transaction_read_modify_write(self, data, key, value):
        """A get, then a put of the key (a counter's increment)."""
        t = self._pick(data)
        old = t.txn.get(key)
        t.read(("get", key), old)
        t.txn.put(key, (old or b"") + value)
        t.own[key] = (old or b"") + value

    @precondition(lambda self: self.transactions)
    @rule(data=st.data(), key=KEYS, value=st.none() | VALUES)
    def transaction_write(self, data, key, value):
        t = self._pick(data)
        if value is None:
            t.txn.delete(key)
        else:
            t.txn.put(key, value)
        t.own[key] = value

    @precondition(lambda self: self.transactions)
    @rule(data=st.data())
    def transaction_commit(self, data):
        t = self._pick(data)
        self.transactions.remove(t)
        try:
            t.txn.commit()
        except ConflictError:
            return  # nothing written: the model stays as it is (the other rules check the database)
        if not t.own:
            return  # unvalidated: serializable at its snapshot, as its reads were checked
        for read, own, got in t.reads:  # each read is what it would be at the commit point
            assert got == model_read(overlaid(self.model, own), read), (read, got)
        self.model = overlaid(self.model, t.own)

    @precondition(lambda self: self.transactions)
    @rule(data=st.data())
    def transaction_rollback(self, data):
        t = self._pick(data)
        self.transactions.remove(t)
        t.txn.rollback()


class LsmModel(PutAndDelete, TransactionRules, RuleBasedStateMachine):
    snapshots = Bundle("snapshots")

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lsmkv-model-")
        self.options = dict(write_buffer_size=512, block_size=128, max_immutable_memtables=2)
        self.db = lsmkv.open(self.dir, **self.options)
        self.model: dict[bytes, bytes] = {}
        self.open_snapshots = []
        self.transactions: list[OpenTransaction] = []

    def teardown(self):
        for snap, _ in self.open_snapshots:
            snap.close()
        for t in self.transactions:
            t.txn.rollback()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

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
        for t in self.transactions:
            t.txn.rollback()
        self.transactions.clear()
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

    @rule(some=st.lists(KEYS, max_size=12))
    def multi_get(self, some):
        assert self.db.multi_get(some) == [self.model.get(k) for k in some]

    @rule(entry=snapshots, some=st.lists(KEYS, max_size=12))
    def multi_get_snapshot(self, entry, some):
        snap, frozen = entry
        if not any(e is entry for e in self.open_snapshots):
            return
        assert snap.multi_get(some) == [frozen.get(k) for k in some]

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
        assert self.db.stats()["table_tombstones"] == 0 or self.open_snapshots or self.transactions

    @invariant()
    def levels_do_not_overlap(self):
        version = self.db._state.version
        for files in version.levels[1:]:
            assert all(a.largest < b.smallest for a, b in zip(files, files[1:]))


CompactingLsmModel.TestCase.settings = settings(max_examples=40, stateful_step_count=60, deadline=None)
TestCompactingLsmModel = pytest.mark.slow(CompactingLsmModel.TestCase)


class TransactionModel(PutAndDelete, TransactionRules, RuleBasedStateMachine):
    """Transactions with only plain writes and flushes beside them, so that
    commits with reads and writes, stale reads and conflicts are frequent."""

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lsmkv-txn-model-")
        self.db = lsmkv.open(self.dir, write_buffer_size=512, block_size=128, compaction_executor="thread")
        self.model: dict[bytes, bytes] = {}
        self.transactions: list[OpenTransaction] = []

    def teardown(self):
        for t in self.transactions:
            t.txn.rollback()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule()
    def flush(self):
        self.db.flush()

    @rule(start=BOUND, end=BOUND)
    def scan(self, start, end):
        assert list(self.db.scan(start, end)) == model_scan(self.model, start, end, None, False)


TransactionModel.TestCase.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)
TestTransactionModel = pytest.mark.slow(TransactionModel.TestCase)
