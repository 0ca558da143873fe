"""Transaction (lsmkv/base/transaction.py) and run_in_transaction
(lsmkv/base/retry.py) over InMemoryEngine, a test double of an engine's
side of the transaction interface: a versioned dict, a sequence number and
a lock standing in for the log writer's role, wired to a ConflictTracker
exactly as the engines wire theirs (begin before the snapshot, validate
then apply then record under the log writer's lock, record plain writes
only while transactions are open). Read-your-writes through every read,
snapshot reads, commit and discard, the ended transaction, bad input,
write skew and phantoms refused, what a partly walked range records, and
four threads incrementing through run_in_transaction ending exact."""

from __future__ import annotations

import gc
import threading

import pytest

from lsmkv.base.conflicts import ConflictTracker
from lsmkv.base.cursor import VALUE
from lsmkv.base.errors import ClosedError, ConflictError, InvalidArgumentError, ReadOnlyError, SizeLimitError
from lsmkv.base.merge_operators import Append
from lsmkv.base.retry import backoff_delay, run_in_transaction
from lsmkv.base.transaction import Transaction, TransactionLimits

from helpers.anomalies import check_a_phantom_in_a_scanned_range_is_refused, check_write_skew_is_refused
from helpers.finders import value_finders

# -- the engine's side, as a test double -------------------------------------------------------------


class InMemoryReader:
    """A snapshot of InMemoryEngine at a sequence (the SnapshotReader protocol)."""

    def __init__(self, engine: "InMemoryEngine", seq: int) -> None:
        self.engine = engine
        self.seq = seq
        self.alive = engine.alive
        self.closed = False

    def get(self, key):
        return self.engine.value_at(key, self.seq)

    def multi_get(self, keys):
        assert keys == sorted(set(keys)), "multi_get takes ascending, distinct keys"
        return [self.engine.value_at(key, self.seq) for key in keys]

    def finders(self, lower, upper):
        items = self.engine.items_at(self.seq, lower, upper)
        return [value_finders(items, chunk=2)] if items else []

    def check(self):
        if self.closed:
            raise ClosedError("snapshot used after close()")
        if not self.alive[0]:
            raise ClosedError("database is closed")

    def close(self):
        self.closed = True


class InMemoryEngine:
    """A versioned dict behind a lock: the engine side of transactions
    (the TransactionHost protocol and ``transaction()``), wired to a
    ConflictTracker as an engine's log writer is."""

    def __init__(self, limits: TransactionLimits = TransactionLimits()) -> None:
        self.lock = threading.Lock()  # the log writer's role
        self.seq = 0
        self.versions: dict[bytes, list[tuple[int, bytes | None]]] = {}
        self.conflicts = ConflictTracker()
        self.limits = limits
        self.alive = [True]
        #: (keys -> (value, ttl), sync) of each transaction committed.
        self.committed: list[tuple[dict, bool]] = []

    # reads
    def value_at(self, key, seq):
        for s, value in reversed(self.versions.get(key, ())):
            if s <= seq:
                return value
        return None

    def items_at(self, seq, lower, upper):
        out = []
        for key in sorted(self.versions):
            if (lower is None or key >= lower) and (upper is None or key < upper):
                value = self.value_at(key, seq)
                if value is not None:
                    out.append((key, value))
        return out

    def get(self, key):
        return self.value_at(key, self.seq)

    def contents(self):
        return dict(self.items_at(self.seq, None, None))

    # plain writes: apply, then record while transactions are open
    def write(self, changes: dict):
        with self.lock:
            self._apply(changes)

    def put(self, key, value):
        self.write({key: value})

    def delete(self, key):
        self.write({key: None})

    def _apply(self, changes: dict):
        self.seq += 1
        for key, value in changes.items():
            self.versions.setdefault(key, []).append((self.seq, value))
        if self.conflicts.active:
            self.conflicts.record(changes)

    # transactions
    def transaction(self, sync=False) -> Transaction:
        return Transaction.begin(self, self.conflicts, lambda: InMemoryReader(self, self.seq), sync=sync)

    def commit_transaction(self, ticket, writes, reads, scanned_ranges, sync):
        with self.lock:
            conflict = self.conflicts.validate(ticket, reads, writes.keys(), scanned_ranges,
                                               written_ranges=writes.range_deletes)
            if conflict is not None:
                raise conflict.error()
            self._apply({key: value if kind == VALUE else None for key, kind, value, _ in writes.entries()})
            self.committed.append(({key: (value, ttl) for key, _, value, ttl in writes.entries()}, sync))

    def release_transaction(self, ticket):
        self.conflicts.end(ticket)


@pytest.fixture
def engine():
    db = InMemoryEngine()
    for key, value in ((b"a", b"1"), (b"c", b"3"), (b"e", b"5"), (b"g", b"7")):
        db.put(key, value)
    return db


# -- reading its own writes over the snapshot -------------------------------------------------------

def test_every_read_sees_the_transactions_own_writes_over_the_snapshot(engine):
    with engine.transaction() as txn:
        txn.put(b"b", b"mine")
        txn.put(b"c", b"changed")
        txn.delete(b"e")
        assert txn.get(b"b") == b"mine" and txn.get(b"c") == b"changed"
        assert txn.get(b"e") is None and txn.get(b"e", b"dflt") == b"dflt"
        assert txn[b"a"] == b"1" and b"b" in txn and b"e" not in txn
        with pytest.raises(KeyError):
            txn[b"e"]
        assert txn.multi_get([b"a", b"b", b"e", b"zz"]) == [b"1", b"mine", None, None]
        want = [(b"a", b"1"), (b"b", b"mine"), (b"c", b"changed"), (b"g", b"7")]
        assert list(txn.scan()) == want
        assert list(txn.scan(reverse=True)) == want[::-1]
        assert list(txn.scan(b"b", b"g")) == want[1:3]
        assert list(txn.scan(prefix=b"c")) == [(b"c", b"changed")]
        with txn.iterator(lower_bound=b"b") as cursor:
            cursor.seek_to_last()
            assert cursor.key() == b"g"
            cursor.prev()
            assert (cursor.key(), cursor.value()) == (b"c", b"changed")
            cursor.seek(b"d")
            assert cursor.key() == b"g"
            assert list(cursor) == [(b"g", b"7")]
        assert engine.get(b"b") is None  # nothing written before the commit
    assert engine.contents() == {b"a": b"1", b"b": b"mine", b"c": b"changed", b"g": b"7"}


def test_reads_come_from_the_snapshot_taken_at_begin(engine):
    txn = engine.transaction()
    engine.put(b"a", b"later")
    engine.put(b"new", b"later")
    assert txn.get(b"a") == b"1" and txn.get(b"new") is None
    assert [k for k, _ in txn.scan()] == [b"a", b"c", b"e", b"g"]
    txn.rollback()


def test_a_scan_or_cursor_reads_the_writes_as_they_were_when_it_was_made(engine):
    with engine.transaction() as txn:
        txn.put(b"a", b"x")
        seen = []
        for key, value in txn.scan():  # update what it walks, add keys ahead of it
            seen.append((key, value))
            txn.put(key, value + b"!")
            txn.put(key + b"2", b"ahead")
        assert seen == [(b"a", b"x"), (b"c", b"3"), (b"e", b"5"), (b"g", b"7")]
        assert txn.get(b"c") == b"3!" and txn.get(b"c2") == b"ahead"
    assert engine.get(b"g2") == b"ahead"


# -- commit, discard, the end ----------------------------------------------------------------------

def test_an_exception_in_the_block_discards_the_transaction(engine):
    with pytest.raises(RuntimeError):
        with engine.transaction() as txn:
            txn.put(b"x", b"1")
            raise RuntimeError("boom")
    assert txn.state == "rolled back" and engine.get(b"x") is None
    assert engine.conflicts.open_transactions == 0


def test_commit_and_rollback_outside_a_with_block(engine):
    txn = engine.transaction(sync=True)
    txn.put(b"x", b"1")
    txn.put(b"y", b"2", ttl=30)
    txn.commit()
    assert txn.state == "committed" and engine.get(b"x") == b"1"
    assert engine.committed[-1] == ({b"x": (b"1", None), b"y": (b"2", 30.0)}, True)
    other = engine.transaction()
    other.put(b"z", b"1")
    other.rollback()
    assert other.state == "rolled back" and engine.get(b"z") is None
    assert engine.conflicts.open_transactions == 0 and not engine.conflicts.active


def test_an_ended_transaction_refuses_use_and_its_open_reads_stop(engine):
    txn = engine.transaction()
    scan = txn.scan()
    assert next(scan) == (b"a", b"1")
    cursor = txn.iterator()
    cursor.seek_to_first()
    txn.put(b"x", b"1")
    txn.commit()
    for use in (lambda: txn.get(b"a"), lambda: txn.put(b"a", b"1"), lambda: txn.delete(b"a"), txn.commit,
                lambda: txn.scan(), lambda: txn.iterator(), lambda: txn.multi_get([b"a"]), lambda: next(scan),
                cursor.next, cursor.valid):
        with pytest.raises(ClosedError, match="the transaction was committed"):
            use()
    txn.rollback()  # nothing left to roll back: harmless
    assert txn.state == "committed"
    with pytest.raises(ClosedError):
        with txn:
            pass


def test_a_dropped_transaction_is_rolled_back(engine):
    txn = engine.transaction()
    txn.put(b"x", b"1")
    assert engine.conflicts.open_transactions == 1
    del txn
    gc.collect()
    assert engine.conflicts.open_transactions == 0 and engine.get(b"x") is None


def test_a_transaction_whose_snapshot_fails_leaves_nothing_registered(engine):
    def no_snapshot():
        raise ClosedError("database is closed")

    with pytest.raises(ClosedError):
        Transaction.begin(engine, engine.conflicts, no_snapshot)
    assert engine.conflicts.open_transactions == 0 and not engine.conflicts.active


def test_a_read_only_transaction_commits_whatever_changed_since(engine):
    with engine.transaction() as txn:
        assert txn.get(b"a") == b"1"
        engine.put(b"a", b"changed")
    assert txn.state == "committed"


# -- bad input ------------------------------------------------------------------------------------

def test_bad_input_raises_one_clear_error_and_changes_nothing():
    engine = InMemoryEngine(TransactionLimits(max_key_size=8, max_ttl_key_size=4, max_value_size=16,
                                              max_write_bytes=40, entry_overhead=2))
    with pytest.raises(TypeError, match="sync must be True or False"):
        engine.transaction(sync="yes")
    assert engine.conflicts.open_transactions == 0
    with engine.transaction() as txn:
        txn.put(b"ok", b"v")
        with pytest.raises(TypeError, match="key must be bytes"):
            txn.put("text", b"v")
        with pytest.raises(TypeError, match="value must be bytes"):
            txn.put(b"k", 5)
        with pytest.raises(SizeLimitError, match="key is 9 bytes; the limit is 8"):
            txn.put(b"123456789", b"v")
        with pytest.raises(SizeLimitError, match="the limit is 4"):
            txn.put(b"12345", b"v", ttl=10)
        with pytest.raises(SizeLimitError, match="value is 17 bytes"):
            txn.put(b"k", b"x" * 17)
        with pytest.raises(InvalidArgumentError, match="ttl"):
            txn.put(b"k", b"v", ttl=-1)
        with pytest.raises(TypeError, match="ttl"):
            txn.put(b"k", b"v", ttl="1")
        txn.put(b"k2", b"x" * 16)  # 2+1+2 + 2+16+2 = 25 bytes
        with pytest.raises(SizeLimitError, match="the transaction's writes would take 44 bytes; the limit is 40"):
            txn.put(b"k3", b"x" * 15)
        txn.put(b"k2", b"")  # replacing a value gives its bytes back
        txn.put(b"k3", b"x" * 15)
        with pytest.raises(TypeError, match="key must be bytes"):
            txn.multi_get([b"a", "b"])
        with pytest.raises(TypeError, match="lower_bound"):
            txn.iterator(lower_bound="a")
        with pytest.raises(TypeError, match="start"):
            txn.scan(start=1)
        assert [k for k, _ in txn.scan()] == [b"k2", b"k3", b"ok"]
    assert engine.contents() == {b"ok": b"v", b"k2": b"", b"k3": b"x" * 15}


def test_merges_and_range_deletes_count_towards_the_limit_and_bad_ones_change_nothing():
    engine = InMemoryEngine(TransactionLimits(max_key_size=8, max_value_size=16, max_write_bytes=40,
                                              entry_overhead=2))
    engine.put(b"a", b"1")
    txn = engine.transaction()
    with pytest.raises(InvalidArgumentError, match="merge_operator="):
        txn.merge(b"k", b"x")  # this engine has no merge operator yet
    engine.merge_operator = Append(b"")
    txn.merge(b"k", b"x" * 16)  # 1 + 16 bytes, 2 of overhead: 19
    txn.merge(b"k", b"y" * 16)  # 16 more: 35
    with pytest.raises(SizeLimitError, match="would take 41 bytes; the limit is 40"):
        txn.merge(b"k", b"z" * 6)
    with pytest.raises(SizeLimitError, match="value is 17 bytes"):
        txn.merge(b"k", b"z" * 17)
    with pytest.raises(SizeLimitError, match="would take 41 bytes"):
        txn.delete_range(b"aa", b"bb")  # its two ends and its overhead
    txn.delete_range(b"a", b"b")  # 39
    with pytest.raises(SizeLimitError, match="would take 43 bytes"):
        txn.delete_range(b"c", b"d")
    with pytest.raises(InvalidArgumentError, match=r"start b'd' is above end b'c'"):
        txn.delete_range(b"d", b"c")
    with pytest.raises(TypeError, match="key must be bytes"):
        txn.delete_range("a", b"c")
    assert txn.get(b"k") == b"x" * 16 + b"y" * 16 and txn.get(b"a") is None
    assert txn._writes.range_deletes == [(b"a", b"b")]
    txn.rollback()
    assert engine.contents() == {b"a": b"1"}


def test_a_handle_that_refuses_writes_lets_a_transaction_read_and_refuses_each_write(engine):
    engine.limits = TransactionLimits(writes_refused="opened with read_only=True")
    with engine.transaction() as txn:
        for write in (lambda: txn.put(b"x", b"1"), lambda: txn.delete(b"a")):
            with pytest.raises(ReadOnlyError, match="opened with read_only=True"):
                write()
        assert txn.state == "open" and txn.get(b"a") == b"1" and txn.get(b"x") is None
    assert txn.state == "committed" and engine.committed == []


# -- serializable: conflicts ----------------------------------------------------------------------

def test_write_skew_is_refused(engine):
    refused = check_write_skew_is_refused(engine)
    with pytest.raises(ClosedError, match="ended by a failed commit"):
        refused.get(b"alice")


def test_a_phantom_in_a_scanned_range_is_refused(engine):
    check_a_phantom_in_a_scanned_range_is_refused(engine)
    assert sorted(k for k in engine.contents() if k.startswith(b"team:")) == [b"team:x"]


def test_a_phantom_in_a_range_walked_by_a_cursor_is_refused(engine):
    t1 = engine.transaction()
    with t1.iterator() as cursor:
        cursor.seek(b"b")  # lands on b"c": [b"b", b"c"] read
        assert cursor.key() == b"c"
    t1.put(b"z", b"1")
    engine.put(b"bb", b"phantom")
    with pytest.raises(ConflictError) as raised:
        t1.commit()
    assert raised.value.key == b"bb" and raised.value.access == "scanned"


def test_a_range_read_records_only_what_it_walked(engine):
    """Keys written beyond where a scan or a cursor stopped do not conflict;
    keys inside what they walked do (the choice of lsmkv/base/read_set.py)."""
    t1 = engine.transaction()
    scan = t1.scan(b"a")
    assert next(scan) == (b"a", b"1")   # read [a, a]
    with t1.iterator() as cursor:
        cursor.seek_for_prev(b"f")      # lands on e: read [e, f]
        cursor.prev()                   # c: read [c, f]
    t1.put(b"out", b"1")
    engine.put(b"b", b"beyond the scan, before the cursor's range")
    engine.put(b"ff", b"above the cursor's range")
    t1.commit()
    t2 = engine.transaction()
    with t2.iterator() as cursor:
        cursor.seek_for_prev(b"f")
        cursor.prev()
    t2.put(b"out", b"2")
    engine.put(b"d", b"inside [c, f]")
    with pytest.raises(ConflictError) as raised:
        t2.commit()
    assert raised.value.key == b"d"


def test_a_scan_that_ran_to_its_end_read_its_whole_range(engine):
    t1 = engine.transaction()
    assert list(t1.scan(b"b", b"f", reverse=True)) == [(b"e", b"5"), (b"c", b"3")]
    t1.put(b"x", b"1")
    engine.put(b"b", b"at the low end")
    with pytest.raises(ConflictError):
        t1.commit()


def test_iterating_a_cursor_to_its_end_read_its_whole_range(engine):
    t1 = engine.transaction()
    with t1.iterator(upper_bound=b"f") as cursor:
        assert [k for k, _ in cursor] == [b"a", b"c", b"e"]
    t1.put(b"x", b"1")
    engine.put(b"", b"the first key there is")
    with pytest.raises(ConflictError) as raised:
        t1.commit()
    assert raised.value.key == b"" and raised.value.range == (None, b"f")


def test_a_scan_stops_when_the_database_closes(engine):
    with engine.transaction() as txn:
        txn.put(b"b", b"mine")  # two sources: the merged stream
        merged, single = txn.scan(), engine.transaction().scan()
        assert next(merged) == (b"a", b"1") and next(single) == (b"a", b"1")
        engine.alive[0] = False
        for scan in (merged, single):
            with pytest.raises(ClosedError, match="database is closed"):
                next(scan)
        txn.rollback()


def test_blind_writes_to_the_same_key_conflict(engine):
    t1, t2 = engine.transaction(), engine.transaction()
    t1.put(b"k", b"1")
    t2.put(b"k", b"2")
    t1.commit()
    with pytest.raises(ConflictError, match="also wrote"):
        t2.commit()
    assert engine.get(b"k") == b"1"


def test_keys_written_before_the_transaction_began_do_not_conflict(engine):
    engine.put(b"a", b"before")
    with engine.transaction() as txn:
        txn.put(b"a", b"%s+" % txn.get(b"a"))
        assert list(txn.scan()) is not None
    assert engine.get(b"a") == b"before+"


# -- run_in_transaction --------------------------------------------------------------------------

def test_four_threads_incrementing_through_run_in_transaction_end_exact():
    engine = InMemoryEngine()
    engine.put(b"counter", b"0")
    go = threading.Barrier(4)
    runs = []

    def increment(txn):
        runs.append(1)
        value = int(txn.get(b"counter"))
        txn.put(b"counter", b"%d" % (value + 1))
        return value

    def worker():
        go.wait()
        for _ in range(200):
            run_in_transaction(engine, increment, attempts=1000, backoff=0.0001, max_backoff=0.002)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert engine.get(b"counter") == b"800"
    assert len(runs) >= 800
    assert engine.conflicts.open_transactions == 0 and engine.conflicts.tracked_keys == 0


def test_run_in_transaction_returns_what_fn_returned_and_passes_sync(engine):
    assert run_in_transaction(engine, lambda txn: txn.put(b"k", b"v") or "done", sync=True) == "done"
    assert engine.committed[-1][1] is True and engine.get(b"k") == b"v"


def test_run_in_transaction_runs_again_on_a_fresh_snapshot_after_a_conflict(engine):
    seen = []

    def conflicts_once(txn):
        value = txn.get(b"a")
        seen.append(value)
        if len(seen) == 1:
            engine.put(b"a", b"changed meanwhile")
        txn.put(b"a", value + b"+")
        return len(seen)

    assert run_in_transaction(engine, conflicts_once, backoff=0) == 2
    assert seen == [b"1", b"changed meanwhile"] and engine.get(b"a") == b"changed meanwhile+"


def test_run_in_transaction_gives_up_after_its_attempts(engine):
    calls = []

    def always_conflicts(txn):
        calls.append(1)
        txn.put(b"a", txn.get(b"a") + b"+")
        engine.put(b"a", b"meanwhile")

    with pytest.raises(ConflictError):
        run_in_transaction(engine, always_conflicts, attempts=3, backoff=0)
    assert len(calls) == 3 and engine.get(b"a") == b"meanwhile"


def test_run_in_transaction_lets_other_errors_through_at_once(engine):
    calls = []

    def fails(txn):
        calls.append(1)
        txn.put(b"x", b"1")
        raise KeyError("missing")

    with pytest.raises(KeyError):
        run_in_transaction(engine, fails)
    assert len(calls) == 1 and engine.get(b"x") is None and engine.conflicts.open_transactions == 0


@pytest.mark.parametrize("kwargs, error", [
    ({"attempts": 0}, InvalidArgumentError), ({"attempts": 1.5}, TypeError), ({"attempts": True}, TypeError),
    ({"backoff": -1}, InvalidArgumentError), ({"backoff": float("nan")}, InvalidArgumentError),
    ({"max_backoff": "1"}, TypeError),
])
def test_run_in_transaction_refuses_bad_arguments(engine, kwargs, error):
    calls = []
    with pytest.raises(error):
        run_in_transaction(engine, lambda txn: calls.append(1), **kwargs)
    assert not calls


def test_backoff_is_jittered_under_a_cap_that_doubles_up_to_the_maximum():
    assert [backoff_delay(n, 0.01, 0.05, rng=lambda: 1.0) for n in range(1, 6)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert backoff_delay(3, 0.01, 1.0, rng=lambda: 0.5) == 0.02
    assert backoff_delay(10_000, 0.01, 1.0, rng=lambda: 1.0) == 1.0
