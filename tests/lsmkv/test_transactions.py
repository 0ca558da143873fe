"""The LSM engine's side of transactions (lsmkv/lsm/transactions.py and
the log writer in db.py), where the engine-independent tests
(tests/api/test_transactions.py) cannot reach: a transaction batch
validated against the batches ahead of it in its own write group, a
``sync=True`` commit whose wait times out after the log syncer took it,
a commit whose transaction ended before its validation, the snapshot's
lifetime (released at the end or by the garbage collector, kept across
flushes and compactions, and on a read-only handle across refresh())."""

from __future__ import annotations

import gc
import threading
import time

import pytest

import lsmkv
import lsmkv.base.conflicts
from lsmkv import ClosedError, ConflictError, SyncTimeoutError
from lsmkv.lsm import write_batch as lsm_write_batch
from lsmkv.base.write_set import WriteSet
from lsmkv.lsm.transactions import TransactionBatch


def _wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.001)


class _Thread(threading.Thread):
    """A thread that keeps what its target raised."""

    def __init__(self, target) -> None:
        super().__init__(target=self._run_target, args=(target,))
        self.error: BaseException | None = None

    def _run_target(self, target) -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            self.error = exc


@pytest.mark.parametrize("ahead", ["put", "transaction"])
def test_a_transaction_is_validated_against_the_batches_ahead_of_it_in_its_group(tmp_path, ahead):
    """While the log writer's role is held, a write of key k and then the
    commit of a transaction that read k queue up; they are committed as one
    group, in which the write is not recorded yet: the batch ahead refuses
    the transaction all the same."""
    with lsmkv.open(str(tmp_path / "db"), compaction_executor="thread") as db:
        db.put(b"k", b"0")
        txn = db.transaction()
        assert txn.get(b"k") == b"0"
        txn.put(b"mine", b"1")
        if ahead == "transaction":
            other = db.transaction()
            other.put(b"k", b"1")
            first = _Thread(other.commit)
        else:
            first = _Thread(lambda: db.put(b"k", b"1"))
        second = _Thread(txn.commit)
        with db._writes.exclusive():
            first.start()
            _wait_until(lambda: len(db._writes) == 1, "the first write to queue")
            second.start()
            _wait_until(lambda: len(db._writes) == 2, "the commit to queue")
        first.join()
        second.join()
        assert first.error is None
        assert isinstance(second.error, ConflictError) and second.error.key == b"k"
        assert db.stats()["largest_write_group"] == 2
        assert db.get(b"k") == b"1" and db.get(b"mine") is None


@pytest.mark.parametrize("conflict", [True, False], ids=["conflict", "no_conflict"])
def test_a_sync_commit_timing_out_after_the_syncer_took_it_gives_its_true_outcome(tmp_path, conflict):
    """The log syncer takes the commit into a group and waits for the log
    writer's role (held here); the committing thread's sync_timeout passes.
    A plain write would raise SyncTimeoutError(applied=True) at once; the
    transaction waits until its batch was validated, then raises the
    ConflictError if it was refused, else the SyncTimeoutError (it was
    applied)."""
    with lsmkv.open(str(tmp_path / "db"), sync_timeout=1.0, compaction_executor="thread") as db:
        syncer = db._commits.syncer
        for _attempt in range(5):
            db.put(b"k", b"0")
            txn = db.transaction(sync=True)
            txn.get(b"k")
            txn.put(b"mine", b"1")
            if conflict:
                db.put(b"k", b"changed")
            committer = _Thread(txn.commit)
            timeouts = syncer.timeouts
            with db._writes.exclusive():
                committer.start()
                _wait_until(lambda: syncer.timeouts > timeouts, "the commit's sync_timeout")
            committer.join()
            error = committer.error
            if isinstance(error, SyncTimeoutError) and not error.applied:
                continue  # timed out before the syncer took it (a busy machine): not the case under test
            break
        if conflict:
            assert isinstance(error, ConflictError) and error.key == b"k"
            assert db.get(b"mine") is None
        else:
            assert isinstance(error, SyncTimeoutError) and error.applied
            assert db.get(b"mine") == b"1"
        assert db._conflicts.open_transactions == 0


def test_a_commit_whose_transaction_ended_before_validation_writes_nothing(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), compaction_executor="thread") as db:
        open_one = db.transaction()  # the tracker is active
        ticket = db._conflicts.begin()
        writes = WriteSet()
        writes.put(b"x", b"1")
        db._conflicts.end(ticket)  # as an interrupted commit's transaction ends
        with pytest.raises(ClosedError, match="ended before its commit was validated"):
            db.write(TransactionBatch(ticket, writes, set(), [], time.time))
        assert db.get(b"x") is None
        open_one.rollback()


def test_a_transactions_snapshot_is_released_when_it_ends_or_is_dropped(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), compaction_executor="thread") as db:
        db.put(b"a", b"1")
        txn = db.transaction()
        assert db._live_snapshots() == [db.stats()["last_sequence"]] and db._conflicts.open_transactions == 1
        txn.put(b"b", b"2")
        txn.commit()
        assert db._live_snapshots() == [] and db._conflicts.open_transactions == 0
        dropped = db.transaction()
        dropped.put(b"c", b"3")
        scan = dropped.scan()
        assert next(scan) == (b"a", b"1")
        del dropped, scan
        gc.collect()
        assert db._live_snapshots() == [] and db._conflicts.open_transactions == 0
        assert not db._conflicts.active and db.get(b"c") is None


def test_a_transactions_snapshot_outlives_flushes_and_compactions(tmp_path):
    with lsmkv.open(str(tmp_path / "db"), write_buffer_size=4096, compaction_executor="thread") as db:
        for i in range(500):
            db.put(b"k%04d" % i, b"old")
        txn = db.transaction()
        scan = txn.scan()
        assert next(scan) == (b"k0000", b"old")
        for i in range(500):
            if i % 2:
                db.delete(b"k%04d" % i)
            else:
                db.put(b"k%04d" % i, b"new")
        db.compact_range()
        assert db.get(b"k0002") == b"new" and db.get(b"k0001") is None
        assert txn.get(b"k0001") == b"old" and txn.get(b"k0002") == b"old"
        assert len(list(scan)) == 499
        assert list(txn.scan()) == [(b"k%04d" % i, b"old") for i in range(500)]
        txn.rollback()


def test_a_read_only_handles_transaction_keeps_its_view_across_refresh(tmp_path):
    path = str(tmp_path / "db")
    with lsmkv.open(path, write_buffer_size=4096, compaction_executor="thread") as writer:
        for i in range(300):
            writer.put(b"k%04d" % i, b"old")
        with lsmkv.open(path, read_only=True) as ro:
            txn = ro.transaction()
            for i in range(300):
                writer.put(b"k%04d" % i, b"new")
            writer.compact_range()
            assert ro.refresh() and ro.get(b"k0000") == b"new"
            assert txn.get(b"k0000") == b"old"
            assert list(txn.scan()) == [(b"k%04d" % i, b"old") for i in range(300)]
            txn.commit()


def test_a_transactions_scans_and_cursors_keep_the_tables_they_read(tmp_path):
    """A scan or cursor of a transaction reads the tables of the Version of
    its making, opening a deeper level's tables only as it gets there: a
    compaction that replaces them all meanwhile deletes none of their files
    while it lives."""
    with lsmkv.open(str(tmp_path / "db"), write_buffer_size=4096, target_file_size=2048,
                    compaction_executor="thread") as db:
        for i in range(2000):
            db.put(b"k%05d" % i, b"old")
        db.compact_range()
        assert db.stats()["levels"][1]["files"] > 10
        txn = db.transaction()
        scan = txn.scan()
        assert next(scan) == (b"k00000", b"old")
        cursor = txn.iterator()
        cursor.seek_to_first()
        for i in range(2000):
            db.put(b"k%05d" % i, b"new")
        db.compact_range()
        gc.collect()  # the Version of the scan's making is gone but for the scan
        assert len(list(scan)) == 1999
        cursor.seek(b"k01500")
        assert (cursor.key(), cursor.value()) == (b"k01500", b"old")
        cursor.close()
        txn.rollback()


def test_a_transactions_batch_holds_its_range_deletes_first_then_its_writes_and_merges():
    writes = WriteSet()
    writes.put(b"m", b"gone")
    writes.delete_range(b"k", b"n")
    writes.put(b"l", b"kept")
    writes.merge(b"c", b"1")
    writes.merge(b"c", b"2")
    tracker = lsmkv.base.conflicts.ConflictTracker()
    batch = TransactionBatch(tracker.begin(), writes, set(), [], time.time)
    assert batch.ops == [(5, b"k", b"n"), (4, b"c", b"1"), (4, b"c", b"2"), (lsm_write_batch.VALUE, b"l", b"kept")]
    assert set(batch.wrote) == {b"c", b"l"} and set(batch.validated) == {b"l"} and batch.deleted == [(b"k", b"n")]


@pytest.mark.parametrize("read", ["transaction scan", "transaction cursor", "db scan", "snapshot scan", "db cursor"])
def test_a_read_keeps_the_tables_it_reads_after_its_memtable_source_ends(tmp_path, read):
    """A scan or cursor that outlives the compaction of every table it reads
    still reads them: its view holds the read state (and so the Version
    that keeps the tables) as long as any of its sources lives. Here the
    memtable's source, the first, ends after one key; a transaction's
    streams held the state through that source only, and the next table
    the level opened was gone (FileNotFoundError)."""
    db = lsmkv.open(str(tmp_path / "db"), target_file_size=4096, compaction_executor="thread",
                    disable_auto_compactions=True)
    try:
        for i in range(3000):
            db.put(b"a%05d" % i, b"v" * 50)
        db.flush()
        db.compact_range()
        db.put(b"0", b"first")  # the memtable's one key
        with db.transaction() as txn, db.snapshot() as snap:
            if read == "transaction scan":
                it = txn.scan()
            elif read == "transaction cursor":
                cursor = txn.iterator()
                cursor.seek_to_first()
                it = iter(cursor)
            elif read == "db scan":
                it = db.scan()
            elif read == "snapshot scan":
                it = snap.scan()
            else:
                cursor = db.iterator()
                cursor.seek_to_first()
                it = iter(cursor)
            got = [next(it) for _ in range(10)]
            for i in range(3000):  # every key again: compacting leaves no table the read started on
                db.put(b"a%05d" % i, b"w" * 50)
            db.flush()
            db.compact_range()
            gc.collect()
            got += list(it)
        assert got == [(b"0", b"first")] + [(b"a%05d" % i, b"v" * 50) for i in range(3000)]
    finally:
        db.close()
