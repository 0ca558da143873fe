"""Hypothesis stateful model test: the btree against a dict.

Small pages (512 bytes), a tiny cache and a small checkpoint threshold make
splits, merges, evictions, overflow chains and checkpoints happen all the
time; the invariant checker runs as the machine goes, and the machine also
checkpoints, reopens cleanly and "crashes" (drops the handle without a
checkpoint, so that open must replay the log).

Merges (an Append operator) and range deletes run beside the other
writes, plain, and in transactions.

Transactions interleave with all of it, checked against a serial model:
each one reads the dict as it was when it began with its own writes over
it (gets, scans stopped anywhere, cursors; its merges folded, its range
deletes hiding keys), and its commit must succeed, applying all of its
writes, exactly when no commit since it began wrote a key it read or
wrote (but for keys it only merged, blind) or a key inside a range it
walked or deleted, or deleted a range holding any of those (so a stale
read never commits), and otherwise raise ConflictError having written
nothing. compact_range() leaves the open snapshots and transactions
reading what they read before (the old page file stays open for them).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from itertools import islice

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import btree
from lsmkv.base.errors import ClosedError, ConflictError
from lsmkv.base.keys import scan_bounds
from lsmkv.base.merge_operators import Append

OPTIONS = dict(page_size=512, checkpoint_log_bytes=8192, merge_operator=Append(b"|"))


def fold(existing: bytes | None, operands) -> bytes:
    """What the Append(b"|") operator makes of a value and operands."""
    return b"|".join(operands if existing is None else [existing, *operands])


class Merged:
    """A transaction's merges of a key it did not otherwise write (blind)."""

    def __init__(self, operands: list[bytes]) -> None:
        self.operands = operands
#: A tiny pool (evictions and checkpoints all the time) or a large one (the
#: hash index and dirty pages live long).
cache_sizes = st.sampled_from([16 * 512, 1 << 22])

key_pool = [bytes([97 + i // 5]) * (1 + i % 5) for i in range(30)]
keys = st.one_of(st.sampled_from(key_pool), st.binary(min_size=0, max_size=14))
small_values = st.binary(max_size=60)
values = st.one_of(small_values, small_values, small_values,
                   st.binary(min_size=100, max_size=1500))  # the last ones go to overflow chains
bounds = st.one_of(st.none(), keys)


@dataclass
class TxnModel:
    """An open transaction and what the serial model expects of it."""

    txn: object
    #: How many commits the model had seen when it began.
    start: int
    #: The model when it began.
    snapshot: dict
    #: key -> value, None for a delete, or Merged (blind merges).
    writes: dict = field(default_factory=dict)
    #: (low, high) ranges its delete_range calls deleted.
    deleted: list = field(default_factory=list)
    reads: set = field(default_factory=set)
    #: (low, high) ranges walked: low inclusive, high exclusive, None open.
    ranges: list = field(default_factory=list)

    def view(self) -> dict:
        out = dict(self.snapshot)
        for low, high in self.deleted:
            for key in [k for k in out if low <= k < high]:
                del out[key]
        for key, value in self.writes.items():
            if value is None:
                out.pop(key, None)
            elif type(value) is Merged:
                out[key] = fold(self.snapshot.get(key), value.operands)
            else:
                out[key] = value
        return out

    def wrote_anything(self) -> bool:
        return bool(self.writes) or bool(self.deleted)


#: What a transaction_run does between its beginning and its commit (a
#: compact_range() now and then: its snapshot outlives it).
RUN_STEPS = (["write"] * 3 + ["get", "scan", "cursor", "put"] * 2
             + ["delete", "checkpoint", "compact", "merge", "range", "txn_merge", "txn_range"])


def in_range(key: bytes, low: bytes | None, high: bytes | None) -> bool:
    return (low is None or key >= low) and (high is None or key < high)


class ModelBase(RuleBasedStateMachine):
    """The database against the model: writes, checkpoints, reopening,
    crashes, compact_range() and transactions (the rules both machines run)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="btree-model-")
        self.path = self.dir + "/db"
        self.db = None
        self.cache_size = 16 * 512
        self.model: dict[bytes, bytes] = {}
        self.steps = 0
        self.snaps: list = []  # (snapshot, the model when it was taken)
        #: The keys each commit wrote, in commit order (what validation sees).
        self.commits: list[frozenset] = []
        #: (commit number, low, high) of the ranges commits deleted.
        self.range_commits: list[tuple[int, bytes, bytes]] = []
        self.txns: list[TxnModel] = []

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
        self.commits.append(frozenset([key]))

    @rule(key=keys)
    def delete(self, key):
        self.db.delete(key)
        self.model.pop(key, None)
        self.commits.append(frozenset([key]))

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
        if ops:
            self.commits.append(frozenset(key for key, _ in ops))
        for key, value in ops:
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

    @rule(key=keys, operand=small_values)
    def merge(self, key, operand):
        self.db.merge(key, operand)
        self.model[key] = fold(self.model.get(key), [operand])
        self.commits.append(frozenset([key]))

    @rule(start=keys, end=keys)
    def range_delete(self, start, end):
        low, high = min(start, end), max(start, end)
        self.db.delete_range(low, high)
        if low == high:
            return  # nothing written
        for key in [k for k in self.model if low <= k < high]:
            del self.model[key]
        self.range_commits.append((len(self.commits), low, high))
        self.commits.append(frozenset())

    @rule(ops=st.lists(st.tuples(st.sampled_from(["put", "delete", "merge", "range"]), keys, keys), max_size=12))
    def mixed_batch(self, ops):
        """A write batch of puts, deletes, merges and range deletes: later
        operations see earlier ones."""
        with self.db.write_batch() as batch:
            written, ranges = set(), []
            for op, key, other in ops:
                if op == "put":
                    batch.put(key, other)
                    self.model[key] = other
                elif op == "delete":
                    batch.delete(key)
                    self.model.pop(key, None)
                elif op == "merge":
                    batch.merge(key, other)
                    self.model[key] = fold(self.model.get(key), [other])
                else:
                    low, high = min(key, other), max(key, other)
                    batch.delete_range(low, high)
                    for k in [k for k in self.model if low <= k < high]:
                        del self.model[k]
                    if low < high:
                        ranges.append((low, high))
                    continue
                written.add(key)
        if written or ranges:
            for low, high in ranges:
                self.range_commits.append((len(self.commits), low, high))
            self.commits.append(frozenset(written))

    @rule()
    def checkpoint(self):
        self.db.flush()

    def disruption_allowed(self) -> bool:
        """Whether a step may reopen, crash or compact (each ends the open transactions)."""
        return True

    @precondition(lambda self: self.disruption_allowed())
    @rule(cache_size=cache_sizes)
    def reopen(self, cache_size):
        self.snaps.clear()  # closing the DB ends its snapshots
        self.db.close()
        for t in self.txns:  # ... and its transactions
            if t.wrote_anything():
                with pytest.raises(ClosedError):
                    t.txn.commit()
            t.txn.rollback()
        self.txns.clear()
        self.cache_size = cache_size
        self.db = btree.open(self.path, cache_size=cache_size, **OPTIONS)

    @precondition(lambda self: self.disruption_allowed())
    @rule()
    def crash(self):
        self.snaps.clear()
        for t in self.txns:
            t.txn.rollback()
        self.txns.clear()
        # Drop the handle as a killed process would: no checkpoint, files closed.
        self.db._simulate_crash()
        self.db = btree.open(self.path, cache_size=self.cache_size, **OPTIONS)

    @precondition(lambda self: self.disruption_allowed())
    @rule()
    def compact(self):
        self.db.compact_range()
        for snap, model in self.snaps:  # they read on, through the old file
            assert dict(snap.scan()) == model

    # -- transactions, against the serial model ---------------------------------------------

    @precondition(lambda self: len(self.txns) < 3)
    @rule(sync=st.booleans())
    def begin_transaction(self, sync):
        self.txns.append(self._begin(sync))

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), key=keys, value=st.one_of(st.none(), values))
    def txn_write(self, data, key, value):
        self._write(data.draw(st.sampled_from(self.txns)), key, value)

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), key=keys, operand=small_values)
    def txn_merge(self, data, key, operand):
        self._merge(data.draw(st.sampled_from(self.txns)), key, operand)

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), start=keys, end=keys)
    def txn_delete_range(self, data, start, end):
        self._delete_range(data.draw(st.sampled_from(self.txns)), start, end)

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), some=st.lists(keys, min_size=1, max_size=4), multi=st.booleans())
    def txn_get(self, data, some, multi):
        self._get(data.draw(st.sampled_from(self.txns)), some, multi)

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), start=bounds, end=bounds, reverse=st.booleans(), prefix=st.one_of(st.none(), keys),
          limit=st.one_of(st.none(), st.integers(0, 12)))
    def txn_scan(self, data, start, end, reverse, prefix, limit):
        self._scan(data.draw(st.sampled_from(self.txns)), start, end, reverse, prefix, limit)

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), lower=bounds, upper=bounds, sought=keys, moves=st.integers(0, 6))
    def txn_cursor(self, data, lower, upper, sought, moves):
        self._cursor(data.draw(st.sampled_from(self.txns)), lower, upper, sought, moves)

    @precondition(lambda self: self.txns)
    @rule(data=st.data())
    def txn_commit(self, data):
        self._commit(data.draw(st.sampled_from(self.txns)))

    @precondition(lambda self: self.txns)
    @rule(data=st.data())
    def txn_rollback(self, data):
        t = data.draw(st.sampled_from(self.txns))
        self.txns.remove(t)
        t.txn.rollback()

    @rule(data=st.data(), sync=st.booleans(),
          steps=st.lists(st.sampled_from(RUN_STEPS), min_size=1, max_size=10))
    def transaction_run(self, data, sync, steps):
        """A transaction from its beginning to its commit, other writes,
        checkpoints and compact_range() landing between its steps."""
        t = self._begin(sync)
        self.txns.append(t)
        for step in steps:
            if step == "write":
                self._write(t, data.draw(keys), data.draw(st.one_of(st.none(), small_values)))
            elif step == "get":
                self._get(t, data.draw(st.lists(keys, min_size=1, max_size=4)), data.draw(st.booleans()))
            elif step == "scan":
                self._scan(t, data.draw(bounds), data.draw(bounds), data.draw(st.booleans()),
                           data.draw(st.one_of(st.none(), keys)), data.draw(st.one_of(st.none(), st.integers(0, 8))))
            elif step == "cursor":
                self._cursor(t, data.draw(bounds), data.draw(bounds), data.draw(keys), data.draw(st.integers(0, 4)))
            elif step == "put":
                self.put(data.draw(keys), data.draw(small_values), False)
            elif step == "delete":
                self.delete(data.draw(keys))
            elif step == "merge":
                self.merge(data.draw(keys), data.draw(small_values))
            elif step == "range":
                self.range_delete(data.draw(keys), data.draw(keys))
            elif step == "txn_merge":
                self._merge(t, data.draw(keys), data.draw(small_values))
            elif step == "txn_range":
                self._delete_range(t, data.draw(keys), data.draw(keys))
            elif step == "checkpoint":
                self.checkpoint()
            else:
                self.compact()
        self._commit(t)

    def _begin(self, sync: bool) -> TxnModel:
        return TxnModel(self.db.transaction(sync=sync), len(self.commits), dict(self.model))

    def _write(self, t: TxnModel, key: bytes, value: bytes | None) -> None:
        if value is None:
            t.txn.delete(key)
        else:
            t.txn.put(key, value)
        t.writes[key] = value

    def _merge(self, t: TxnModel, key: bytes, operand: bytes) -> None:
        t.txn.merge(key, operand)
        own = t.writes.get(key, ())
        if type(own) is Merged:
            own.operands.append(operand)
        elif own != () or any(low <= key < high for low, high in t.deleted):
            # Its own put, delete or range delete: folded into a put at once.
            t.writes[key] = fold(None if own == () else own, [operand])
        else:
            t.writes[key] = Merged([operand])

    def _delete_range(self, t: TxnModel, start: bytes, end: bytes) -> None:
        low, high = min(start, end), max(start, end)
        t.txn.delete_range(low, high)
        if low == high:
            return
        for key in [k for k in t.writes if low <= k < high]:
            del t.writes[key]
        t.deleted.append((low, high))

    def _get(self, t: TxnModel, some: list, multi: bool) -> None:
        view = t.view()
        if multi:
            assert t.txn.multi_get(some) == [view.get(k) for k in some]
        else:
            for k in some:
                assert t.txn.get(k) == view.get(k)
        t.reads.update(some)

    def _scan(self, t: TxnModel, start, end, reverse: bool, prefix, limit: int | None) -> None:
        low, high = scan_bounds(start, end, prefix)
        scan = t.txn.scan(start, end, reverse, prefix)
        got = list(scan) if limit is None else list(islice(scan, limit))
        want = sorted((k, v) for k, v in t.view().items() if in_range(k, low, high))
        if reverse:
            want.reverse()
        assert got == (want if limit is None else want[:limit])
        # What it walked: all of [low, high) once it ended, else up to the last key it yielded.
        if limit is None or len(got) < limit:
            t.ranges.append((low, high))
        elif got:
            t.ranges.append((got[-1][0], high) if reverse else (low, got[-1][0] + b"\x00"))

    def _cursor(self, t: TxnModel, lower, upper, sought: bytes, moves: int) -> None:
        entries = sorted((k, v) for k, v in t.view().items() if in_range(k, lower, upper))
        low = sought if lower is None or sought >= lower else lower
        landed = [kv for kv in entries if kv[0] >= low]
        with t.txn.iterator(lower, upper) as cursor:
            cursor.seek(sought)
            seen = []
            for _ in range(moves + 1):
                if not cursor.valid():
                    break
                seen.append((cursor.key(), cursor.value()))
                if len(seen) <= moves:
                    cursor.next()
            assert seen == landed[:moves + 1]
            # What it walked: from where it sought to past the key it is on (the bound if none).
            t.ranges.append((low, cursor.key() + b"\x00" if cursor.valid() else upper))

    def _commit(self, t: TxnModel) -> None:
        self.txns.remove(t)
        if not t.wrote_anything():  # nothing to validate: it commits whatever changed
            t.txn.commit()
            return
        since = frozenset().union(*self.commits[t.start:])
        # Blind merges are not validated; everything else it wrote is.
        validated = {k for k, v in t.writes.items() if type(v) is not Merged}
        walked = t.ranges + t.deleted
        stale = [k for k in since
                 if k in t.reads or k in validated or any(in_range(k, lo, hi) for lo, hi in walked)]
        for commit, low, high in self.range_commits:
            if commit < t.start:
                continue
            if any(low <= k < high for k in t.reads | validated):
                stale.append(low)
            if any((lo is None or lo < high) and (hi is None or low < hi) and not (lo is not None and hi is not None
                                                                                 and lo >= hi) for lo, hi in walked):
                stale.append(low)
        if stale:
            with pytest.raises(ConflictError):
                t.txn.commit()
            return
        t.txn.commit()
        for low, high in t.deleted:
            for key in [k for k in self.model if low <= k < high]:
                del self.model[key]
        for key, value in t.writes.items():
            if value is None:
                self.model.pop(key, None)
            elif type(value) is Merged:
                self.model[key] = fold(self.model.get(key), value.operands)
            else:
                self.model[key] = value
        for low, high in t.deleted:
            self.range_commits.append((len(self.commits), low, high))
        self.commits.append(frozenset(t.writes))

    @invariant()
    def structure_holds(self):
        self.steps += 1
        assert self.db.stats()["entries"] == len(self.model)
        if self.steps % 3 == 0:
            assert self.db.check_invariants() == []


class BTreeModel(ModelBase):
    """Everything: the rules above with more kinds of writes, reads, snapshots
    and read-only views."""
    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete_existing(self, data):
        key = data.draw(st.sampled_from(sorted(self.model)))
        del self.db[key]
        del self.model[key]
        self.commits.append(frozenset([key]))

    @rule(n=st.integers(min_value=20, max_value=200), prefix=keys, size=st.integers(0, 90))
    def many_puts(self, n, prefix, size):
        for i in range(n):
            k = prefix[:4] + b"%05d" % i
            v = bytes([i % 251]) * size
            self.db.put(k, v)
            self.model[k] = v
            self.commits.append(frozenset([k]))

    @rule(prefix=keys)
    def delete_range(self, prefix):
        for k in [k for k in self.model if k.startswith(prefix[:2])][:150]:
            self.db.delete(k)
            del self.model[k]
            self.commits.append(frozenset([k]))

    @rule(key=keys)
    def get(self, key):
        assert self.db.get(key) == self.model.get(key)
        assert (key in self.db) == (key in self.model)

    @rule(some=st.lists(keys, max_size=12))
    def multi_get(self, some):
        assert self.db.multi_get(some) == [self.model.get(k) for k in some]

    @precondition(lambda self: self.snaps)
    @rule(data=st.data(), some=st.lists(keys, max_size=12))
    def multi_get_snapshot(self, data, some):
        snap, model = data.draw(st.sampled_from(self.snaps))
        assert snap.multi_get(some) == [model.get(k) for k in some]

    @rule()
    def get_all(self):
        # Fills the hash index with every resident key (a leaf's keys are
        # indexed once it has served more gets than it holds keys: the
        # second pass), so later splits, merges and evictions have entries
        # to keep exact.
        for _ in range(2):
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
    def read_only_view(self):
        with btree.open(self.path, read_only=True, cache_size=0) as ro:
            assert dict(ro.scan()) == self.model


class TransactionModel(ModelBase):
    """The same rules and a look at the whole contents, with reopening,
    crashes and compact_range() one step in eight: transactions take a
    larger share of the steps and live longer."""

    def disruption_allowed(self) -> bool:
        return self.steps % 8 == 7

    @rule()
    def contents(self):
        assert dict(self.db.scan()) == self.model


BTreeModel.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestBTreeModel = pytest.mark.slow(BTreeModel.TestCase)
TransactionModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
TestTransactionModel = pytest.mark.slow(TransactionModel.TestCase)
