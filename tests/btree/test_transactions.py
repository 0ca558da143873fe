"""Transactions on the B+tree (btree/transactions.py over
lsmkv/base/transaction.py): the core's contract on a real tree -- reads
of a snapshot with the transaction's own writes over it, commit and
discard, write skew and phantoms refused, four threads incrementing one
counter ending exact -- and what is the tree's own: every kind of write
recorded for validation (and metadata and ttl sweeps not), validation in
the log writer before the append, through the write queue and the log
syncer, with group commit on and off, so that a failed commit leaves
nothing in the log or after recovery; sync=True commits surviving SIGKILL;
checkpoints, compact_range() and ingest() while a transaction is open; the
tree's limits; read-only handles."""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import btree
import lsmkv
from btree import ConflictError, run_in_transaction
from lsmkv.base.errors import ClosedError, ReadOnlyError, SizeLimitError, SnapshotEndedError
from lsmkv.base.keys import MAX_KEY_SIZE
from lsmkv.base.retry import run_in_transaction as core_run_in_transaction

from helpers.anomalies import check_a_phantom_in_a_scanned_range_is_refused, check_write_skew_is_refused
from helpers.threads import run_until_done


def wait_until(condition, what: str) -> None:
    """Wait for another thread to get somewhere (a guard against a hang, not a timing check)."""
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.001)


def key(i: int) -> bytes:
    return b"k%05d" % i


@pytest.fixture
def filled(db):
    """512-byte pages, 600 keys: many leaves, scans of several chunks."""
    for i in range(0, 1200, 2):
        db.put(key(i), b"v%d" % i)
    return db


def committer_of_a_reader_of_x(db, **transaction_options):
    """With x = b"0" in ``db``: a transaction that read x and wrote y, and
    a thread (not started) that commits it, leaving "committed" or its
    ConflictError in the list returned beside it."""
    db.put(b"x", b"0")
    txn = db.transaction(**transaction_options)
    assert txn.get(b"x") == b"0"
    txn.put(b"y", b"from the transaction")
    outcome = []

    def commit():
        try:
            txn.commit()
            outcome.append("committed")
        except ConflictError as exc:
            outcome.append(exc)

    return threading.Thread(target=commit), outcome


def log_bytes(path: str) -> bytes:
    with open(os.path.join(path, "btree.log"), "rb") as f:
        return f.read()


# -- the core's contract on the tree -----------------------------------------------------------

def test_run_in_transaction_is_the_one_both_engines_share():
    assert run_in_transaction is core_run_in_transaction


def test_every_read_sees_the_transactions_own_writes_over_the_snapshot(filled):
    db = filled
    model = {key(i): b"v%d" % i for i in range(0, 1200, 2)}
    with db.transaction() as txn:
        rng = random.Random(3)
        for i in rng.sample(range(1200), 300):
            if i % 3 == 0:
                txn.delete(key(i))
                model.pop(key(i), None)
            else:
                txn.put(key(i), b"mine%d" % i)
                model[key(i)] = b"mine%d" % i
        want = sorted(model.items())
        assert list(txn.scan()) == want
        assert list(txn.scan(reverse=True)) == want[::-1]
        assert list(txn.scan(key(100), key(300))) == [kv for kv in want if key(100) <= kv[0] < key(300)]
        assert list(txn.scan(prefix=b"k001")) == [kv for kv in want if kv[0].startswith(b"k001")]
        probe = [key(i) for i in range(0, 1200, 7)] + [b"absent"]
        assert txn.multi_get(probe) == [model.get(k) for k in probe]
        for k in probe[:40]:
            assert txn.get(k) == model.get(k) and (k in txn) == (k in model)
        with txn.iterator() as cursor:
            assert list(cursor) == want
            cursor.seek_to_last()
            backward = []
            while cursor.valid():
                backward.append((cursor.key(), cursor.value()))
                cursor.prev()
            assert backward == want[::-1]
            cursor.seek(key(501))
            assert cursor.key() == min(k for k in model if k >= key(501))
        assert db.get(key(1)) is None  # nothing written before the commit
    assert dict(db.scan()) == model


def test_a_transaction_reads_the_snapshot_taken_when_it_began(filled):
    db = filled
    txn = db.transaction()
    db.put(key(0), b"later")
    db.put(key(1), b"later")
    db.delete(key(2))
    assert txn.get(key(0)) == b"v0" and txn.get(key(1)) is None and txn.get(key(2)) == b"v2"
    assert [k for k, _ in txn.scan(end=key(5))] == [key(0), key(2), key(4)]
    txn.rollback()


def test_an_exception_in_the_block_discards_the_transaction(db):
    with pytest.raises(RuntimeError):
        with db.transaction() as txn:
            txn.put(b"x", b"1")
            raise RuntimeError("boom")
    assert txn.state == "rolled back" and db.get(b"x") is None
    assert db._conflicts.open_transactions == 0 and not db._tree.snaps


def test_commit_and_rollback_outside_a_with_block(db):
    txn = db.transaction(sync=True)
    txn.put(b"x", b"1")
    txn.commit()
    assert txn.state == "committed" and db.get(b"x") == b"1"
    other = db.transaction()
    other.put(b"y", b"1")
    other.rollback()
    assert other.state == "rolled back" and db.get(b"y") is None
    with pytest.raises(ClosedError, match="rolled back"):
        other.get(b"x")
    assert db._conflicts.open_transactions == 0 and not db._conflicts.active and not db._tree.snaps


def test_a_dropped_transaction_releases_its_ticket_and_snapshot(db):
    txn = db.transaction()
    txn.put(b"x", b"1")
    assert db._conflicts.open_transactions == 1 and len(db._tree.snaps) == 1
    del txn
    gc.collect()
    assert db._conflicts.open_transactions == 0 and not db._tree.snaps and db.get(b"x") is None


def test_write_skew_is_refused(db):
    check_write_skew_is_refused(db)


def test_a_phantom_in_a_scanned_range_is_refused(filled):
    db = filled
    check_a_phantom_in_a_scanned_range_is_refused(db)
    assert [k for k, _ in db.scan(prefix=b"team:")] == [b"team:x"]


def test_a_phantom_in_a_range_walked_by_a_cursor_is_refused(filled):
    db = filled

    def walk(txn):
        with txn.iterator() as cursor:
            cursor.seek(key(501))  # lands on key(502): [key(501), key(502)] read
            assert cursor.key() == key(502)
        txn.put(b"z", b"1")

    beyond = db.transaction()
    walk(beyond)
    db.put(key(503), b"beyond what the cursor walked")
    beyond.commit()
    phantom = db.transaction()
    walk(phantom)
    db.put(key(501), b"a phantom in what it walked")
    with pytest.raises(ConflictError) as raised:
        phantom.commit()
    assert raised.value.key == key(501) and raised.value.access == "scanned"
    assert raised.value.range == (key(501), key(502) + b"\x00")


def test_a_transaction_that_only_read_commits_whatever_changed(db):
    db.put(b"a", b"1")
    with db.transaction() as txn:
        assert txn.get(b"a") == b"1"
        db.put(b"a", b"2")
    assert txn.state == "committed"


@pytest.mark.slow
def test_four_threads_incrementing_through_run_in_transaction_end_exact(dbpath):
    db = btree.open(dbpath, page_size=512, checkpoint_log_bytes=1 << 20)
    db.put(b"counter", b"0")
    go = threading.Barrier(4)
    runs = [0] * 4
    errors = []

    def worker(n):
        def increment(txn):
            runs[n] += 1
            txn.put(b"counter", b"%d" % (int(txn.get(b"counter")) + 1))

        try:
            go.wait()
            for _ in range(5000):
                run_in_transaction(db, increment, attempts=100_000, backoff=0.0001, max_backoff=0.002)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert db.get(b"counter") == b"20000"
    assert sum(runs) >= 20000
    assert db._conflicts.open_transactions == 0 and db._conflicts.tracked_keys == 0 and not db._tree.snaps
    db.close()
    with btree.open(dbpath) as db:
        assert db.get(b"counter") == b"20000"


# -- what the log writer validates against: every write, recorded ----------------------------

def _delitem(db, k):
    del db[k]


WRITES = {
    "put (the uncontended fast path)": lambda db, k: db.put(k, b"new"),
    "put, sync": lambda db, k: db.put(k, b"new", sync=True),
    "put with a ttl": lambda db, k: db.put(k, b"new", ttl=100),
    "delete": lambda db, k: db.delete(k),
    "del db[key]": _delitem,
    "pop": lambda db, k: db.pop(k),
    "write batch": lambda db, k: db.update({k: b"new", b"other": b"1"}),
    "clear": lambda db, k: db.clear(),
    "transaction": lambda db, k: run_in_transaction(db, lambda txn: txn.put(k, b"new")),
}


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "no-group-commit"])
def test_every_kind_of_write_to_a_key_read_conflicts(dbpath, write, group_commit):
    db = btree.open(dbpath, page_size=512, group_commit=group_commit)
    db.put(b"k", b"old")
    txn = db.transaction()
    assert txn.get(b"k") == b"old"
    txn.put(b"out", b"1")
    WRITES[write](db, b"k")
    with pytest.raises(ConflictError) as raised:
        txn.commit()
    assert raised.value.key == b"k" and db.get(b"out") is None
    db.close()


def test_writes_to_keys_a_transaction_never_touched_do_not_conflict(filled):
    db = filled
    with db.transaction() as txn:
        assert len(list(txn.scan(key(100), key(200)))) == 50
        txn.put(key(150), b"mine")
        db.put(key(99), b"below the scan")
        db.put(key(200), b"at the scan's exclusive end")
        db.delete(key(1000))
        with db.write_batch() as batch:
            batch.put(b"zzz", b"1")
    assert db.get(key(150)) == b"mine"


def test_metadata_entries_and_ttl_sweeps_are_not_writes_of_keys(dbpath):
    now = [1_700_000_000.0]
    db = btree.open(dbpath, page_size=512, ttl_clock=lambda: now[0], ttl_sweep_interval=86400)
    db.put(b"expiring", b"v", ttl=10)
    txn = db.transaction()
    assert txn.get(b"name") is None and txn.get(b"expiring") == b"v"
    txn.put(b"out", b"1")
    with db.write_batch() as batch:
        batch.set_meta("name", b"a metadata entry named like the key read")
    now[0] += 20
    db._run_sweep()  # what the timing wheel runs: deletes the expired key
    assert db.stats()["ttl_swept"] == 1
    txn.commit()
    assert db.get(b"out") == b"1" and db.get_meta("name") is not None


# -- validation in the log writer, before the append --------------------------------------------

@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "no-group-commit"])
def test_a_commit_queued_behind_a_write_to_what_it_read_fails(dbpath, group_commit):
    """The log writer takes both into one group: with group commit the
    transaction is validated against the batch ahead of it in the group
    (not applied yet), without against that batch once applied."""
    db = btree.open(dbpath, page_size=512, group_commit=group_commit)
    committer, outcome = committer_of_a_reader_of_x(db)
    with db._writes.exclusive():  # hold the log writer's role: both writes queue up
        plain = threading.Thread(target=db.put, args=(b"x", b"1"))
        plain.start()
        wait_until(lambda: len(db._writes) == 1, "the plain put queued")
        committer.start()
        wait_until(lambda: len(db._writes) == 2, "the commit queued behind it")
    plain.join()
    committer.join()
    assert db.stats()["largest_write_group"] == 2
    assert isinstance(outcome[0], ConflictError) and outcome[0].key == b"x"
    assert db.get(b"x") == b"1" and db.get(b"y") is None
    db.close()
    with btree.open(dbpath) as db:
        assert db.get(b"x") == b"1" and db.get(b"y") is None


def test_a_sync_commit_that_fails_validation_is_woken_by_the_log_syncer(dbpath):
    """sync=True with group commit: the log syncer takes the write and the
    commit into one group; the commit fails validation against the write
    ahead of it and the syncer wakes it with its ConflictError."""
    db = btree.open(dbpath, page_size=512)
    committer, outcome = committer_of_a_reader_of_x(db, sync=True)
    syncer_busy = threading.Thread(target=db.put, args=(b"w", b"1"), kwargs={"sync": True})
    with db._log_sync_lock:  # the syncer applies w, then waits here to fsync
        syncer_busy.start()
        wait_until(lambda: db.get(b"w") == b"1", "the syncer applied the first write")
        plain = threading.Thread(target=db.put, args=(b"x", b"1"), kwargs={"sync": True})
        plain.start()
        wait_until(lambda: db._commits.syncer.queued == 1, "the sync put queued")
        committer.start()
        wait_until(lambda: db._commits.syncer.queued == 2, "the sync commit queued behind it")
    for t in (syncer_busy, plain, committer):
        t.join()
    assert db.stats()["largest_write_group"] == 2
    assert isinstance(outcome[0], ConflictError) and outcome[0].key == b"x"
    assert db.get(b"x") == b"1" and db.get(b"y") is None
    db.close()


@pytest.mark.parametrize("sync", [False, True], ids=["no-sync", "sync"])
@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "no-group-commit"])
def test_a_failed_commit_leaves_nothing_in_the_log_or_after_recovery(dbpath, sync, group_commit):
    db = btree.open(dbpath, page_size=512, group_commit=group_commit)
    db.put(b"x", b"0")
    txn = db.transaction(sync=sync)
    txn.get(b"x")
    txn.put(b"only-the-failed-commit", b"MARKER-OF-THE-FAILED-COMMIT")
    txn.put(b"x", b"MARKER-OF-THE-FAILED-COMMIT")
    db.put(b"x", b"1")
    with pytest.raises(ConflictError):
        txn.commit()
    assert b"MARKER-OF-THE-FAILED-COMMIT" not in log_bytes(dbpath)
    db.put(b"after", b"1", sync=True)
    db._simulate_crash()  # no checkpoint: open replays the log
    with btree.open(dbpath) as db:
        assert db.stats()["replayed_batches"] >= 2
        assert db.get(b"only-the-failed-commit") is None and db.get(b"x") == b"1" and db.get(b"after") == b"1"


def test_a_committed_transaction_is_one_log_record_replayed_whole(dbpath):
    db = btree.open(dbpath, page_size=512, checkpoint_log_bytes=1 << 30)
    db.put(b"a", b"0")
    db.flush()
    with db.transaction() as txn:
        for i in range(300):
            txn.put(key(i), b"t" * 30)
        txn.delete(b"a")
    db._simulate_crash()
    with btree.open(dbpath) as db:
        assert db.stats()["replayed_batches"] == 1
        assert db.get(b"a") is None and len(db) == 300


# -- concurrency with plain writes ------------------------------------------------------------

def test_a_plain_put_between_a_read_and_the_commit_is_never_missed(dbpath):
    """A writer thread puts p = 1, 2, 3, ... (acknowledging each); a
    transaction reads p, then copies it. If it commits, p was still what
    it read at the commit, so at least the value acknowledged before the
    commit began."""
    db = btree.open(dbpath, page_size=512)
    db.put(b"p", b"0")
    acked = [0]
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            if i % 4:
                db.put(b"p", b"%d" % i)  # mostly the fast path
            else:
                with db.write_batch() as batch:
                    batch.put(b"p", b"%d" % i)
            acked[0] = i
            time.sleep(0.001 * (i % 3))

    thread = threading.Thread(target=writer)
    thread.start()
    committed = conflicts = 0
    try:
        for _ in range(20000):
            try:
                with db.transaction() as txn:
                    seen = int(txn.get(b"p"))
                    time.sleep(0.0002)
                    before = acked[0]
                    txn.put(b"copy", b"%d" % seen)
                assert seen >= before, f"committed a read of p={seen} after p={before} was acknowledged"
                committed += 1
            except ConflictError as exc:
                assert exc.key == b"p"
                conflicts += 1
            if committed >= 50 and conflicts >= 50:
                break
    finally:
        stop.set()
        thread.join()
    assert committed >= 50 and conflicts >= 50
    db.close()


def test_transactions_beside_plain_writers_of_other_keys_end_exact(dbpath):
    db = btree.open(dbpath, page_size=512, checkpoint_log_bytes=65536)
    db.put(b"counter", b"0")
    stop = threading.Event()
    failures = []
    written = [0, 0]

    def plain(n):
        i = 0
        while not stop.is_set():
            if n:
                with db.write_batch() as batch:
                    batch.put(b"noise:b%06d" % i, b"x" * 20)
                    batch.delete(b"noise:b%06d" % (i - 5))
            else:
                db.put(b"noise:a%06d" % i, b"x" * 20)
            i += 1
            written[n] = i

    def increment(txn):
        txn.put(b"counter", b"%d" % (int(txn.get(b"counter")) + 1))

    def transactions():
        try:
            for _ in range(300):
                while True:
                    try:
                        with db.transaction() as txn:
                            increment(txn)
                        break
                    except ConflictError as exc:
                        assert exc.key == b"counter", exc  # never a key of the plain writers
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    writers = [threading.Thread(target=plain, args=(n,)) for n in range(2)]
    txns = [threading.Thread(target=transactions) for _ in range(2)]
    run_until_done(txns, writers, stop)
    assert failures == []
    assert db.get(b"counter") == b"600"
    assert len(list(db.scan(prefix=b"noise:a"))) == written[0] and written[1] > 0
    db.close()


# -- checkpoints, compact_range, ingest ----------------------------------------------------------

def test_checkpoints_during_an_open_transaction_change_nothing_it_sees(dbpath):
    db = btree.open(dbpath, page_size=512, checkpoint_log_bytes=8192)
    for i in range(300):
        db.put(key(i), b"old")
    txn = db.transaction()
    assert txn.get(key(5)) == b"old"
    stale = db.transaction()
    assert stale.get(key(400)) is None
    checkpoints = db.stats()["checkpoints"]
    for i in range(300, 800):
        db.put(key(i), b"new" * 20)  # the log fills: checkpoints of their own
    assert db.stats()["checkpoints"] > checkpoints
    db.flush()
    assert txn.get(key(7)) == b"old" and stale.get(key(401)) is None
    assert len(list(txn.scan(end=key(300)))) == 300
    txn.put(b"mine", b"1")
    txn.commit()
    stale.put(b"stale", b"1")
    with pytest.raises(ConflictError):
        stale.commit()
    db.close()
    with btree.open(dbpath) as db:
        assert db.get(b"mine") == b"1" and db.get(b"stale") is None and len(db) == 801


def test_an_open_transaction_reads_and_commits_across_compact_range(filled):
    """compact_range() rewrites the page file; an open transaction keeps
    reading its snapshot (through the old file, which stays open for it),
    and commits: a vacuum changes no key, so nothing conflicts."""
    db = filled
    txn = db.transaction()
    assert txn.get(key(0)) == b"v0"
    scan = txn.scan()
    assert next(scan) == (key(0), b"v0")
    txn.put(b"mine", b"1")
    reader = db.transaction()
    assert reader.get(key(2)) == b"v2"
    db.put(key(1100), b"changed")  # nothing either transaction reads
    db.compact_range()
    assert txn.get(key(4)) == b"v4"
    assert next(scan) == (key(2), b"v2")
    txn.commit()
    assert txn.state == "committed" and db.get(b"mine") == b"1"
    reader.commit()
    assert reader.state == "committed"
    assert db._conflicts.open_transactions == 0 and not db._tree.snaps and not db._views


def test_a_transaction_that_read_what_an_ingest_wrote_cannot_commit(tmp_path, db):
    table = str(tmp_path / "in.sst")
    with lsmkv.TableWriter(table) as w:
        for i in range(100, 200):
            w.put(key(i), b"ingested")
    db.put(key(150), b"before")
    txn = db.transaction()
    assert txn.get(key(150)) == b"before"
    txn.put(b"mine", b"1")
    db.ingest([table])
    # The ingested range is recorded as written: a conflict for what read in it.
    conflict = db._conflicts.validate(txn._ticket, {key(150)}, ())
    assert conflict is not None and conflict.by_range == (key(100), key(199) + b"\x00")
    assert txn.get(key(150)) == b"before"  # its snapshot outlives the rewritten page file
    with pytest.raises(ConflictError, match="nothing of the transaction was written"):
        txn.commit()
    assert db.get(b"mine") is None and db.get(key(150)) == b"ingested"


def test_closing_the_database_ends_its_transactions(dbpath):
    db = btree.open(dbpath, page_size=512)
    for i in range(300):
        db.put(key(i), b"v")
    txn = db.transaction()
    scan = txn.scan()
    assert next(scan) == (key(0), b"v")
    txn.put(b"b", b"1")
    db.close()
    for use in (lambda: txn.get(key(0)), lambda: next(scan), txn.commit):
        with pytest.raises(ClosedError, match="the btree database .* is closed"):
            use()
    txn.rollback()
    with pytest.raises(ClosedError):
        db.transaction()
    with btree.open(dbpath) as db:
        assert db.get(b"b") is None


# -- the tree's limits, ttls, read-only handles ---------------------------------------------

def test_the_limits_are_the_trees(db):
    max_key = db.stats()["max_key_size"]
    with db.transaction() as txn:
        with pytest.raises(SizeLimitError, match=f"the limit is {max_key}"):
            txn.put(b"k" * (max_key + 1), b"v")
        with pytest.raises(SizeLimitError, match=f"the limit is {max_key - 8}"):
            txn.put(b"k" * (max_key - 7), b"v", ttl=10)
        txn.put(b"k" * max_key, b"v")
        txn.put(b"t" * (max_key - 8), b"v", ttl=10)
        txn.delete(b"d" * MAX_KEY_SIZE)  # longer than any stored key: nothing to delete
        assert txn._host.limits.max_write_bytes == btree.write_batch.MAX_BATCH_BYTES
    assert db.get(b"k" * max_key) == b"v" and db.get(b"t" * (max_key - 8)) == b"v"
    assert b"d" * 64 not in log_bytes(db.path)


def test_a_ttl_counts_from_the_commit(dbpath):
    now = [1_700_000_000.0]
    db = btree.open(dbpath, page_size=512, ttl_clock=lambda: now[0], ttl_sweep_interval=86400)
    txn = db.transaction()
    txn.put(b"k", b"v", ttl=10)
    assert txn.get(b"k") == b"v"
    now[0] += 5
    txn.commit()
    now[0] += 9.9
    assert db.get(b"k") == b"v"
    now[0] += 0.2
    assert db.get(b"k") is None
    db.close()


def test_a_read_only_handle_reads_in_transactions_and_refuses_their_writes(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        db.put(b"a", b"1")
    with btree.open(dbpath, read_only=True) as ro:
        with ro.transaction() as txn:
            assert txn.get(b"a") == b"1" and list(txn.scan()) == [(b"a", b"1")]
        assert txn.state == "committed"
        with ro.transaction() as txn:
            for write in (lambda: txn.put(b"b", b"2"), lambda: txn.delete(b"a")):
                with pytest.raises(ReadOnlyError, match="read_only=True"):
                    write()
            assert txn.get(b"b") is None


# -- durability: SIGKILL ------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys, threading, btree
    db = btree.open(sys.argv[1], page_size=512, checkpoint_log_bytes=32768)

    def step(txn):
        n = int(txn.get(b"counter", b"0")) + 1
        txn.put(b"counter", b"%d" % n)
        txn.put(b"seen:%08d" % n, b"x" * 40)
        for j in range(8):
            txn.put(b"last:%d" % j, b"%d" % n)
        return n

    lock = threading.Lock()

    def worker():
        while True:
            n = btree.run_in_transaction(db, step, sync=True, attempts=10**6, backoff=0.0001,
                                         max_backoff=0.002)
            with lock:
                print(n, flush=True)  # acknowledged: durable

    for _ in range(2):
        threading.Thread(target=worker, daemon=True).start()
    threading.Event().wait()
""")


@pytest.mark.crash
@pytest.mark.slow
def test_sync_commits_survive_sigkill_whole(tmp_path):
    """Two threads of a child commit sync=True transactions incrementing a
    counter (each writes its number under seen:N and in last:0..7) and are
    SIGKILLed at random moments: after reopening, every acknowledged commit
    is there, the unacknowledged ones are absent or whole, and the counter
    has no gap (the commits were serial)."""
    path = str(tmp_path / "db")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    rng = random.Random(29)
    acked_total = 0
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, str(script), path], stdout=subprocess.PIPE, text=True)
        # Once the child committed (however long its start took on a busy
        # machine), kill it at a random moment of its commits.
        first = proc.stdout.readline()
        assert first.endswith("\n"), "the child died before its first commit"
        time.sleep(rng.uniform(0.0, 0.8))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        acked = [int(line) for line in [first, *out.splitlines(keepends=True)] if line.endswith("\n")]
        acked_total += len(acked)
        with btree.open(path) as db:
            counter = int(db.get(b"counter", b"0"))
            assert counter >= max(acked, default=0)
            assert [k for k, _ in db.scan(prefix=b"seen:")] == [b"seen:%08d" % n for n in range(1, counter + 1)]
            if counter:
                assert [db.get(b"last:%d" % j) for j in range(8)] == [b"%d" % counter] * 8
            assert db.check_invariants() == []
    assert acked_total > 20, "the children acknowledged too few commits to test anything"


def test_run_in_transaction_is_not_interrupted_by_compact_range(filled):
    """A compact_range() between a transaction's read and its commit leaves
    its snapshot readable and its commit valid: it runs once."""
    db = filled
    runs = []

    def copy_first_key(txn):
        runs.append(1)
        value = txn.get(key(0))
        db.compact_range()
        txn.put(b"copy", value + b"!")
        return len(runs)

    assert run_in_transaction(db, copy_first_key, backoff=0) == 1
    assert db.get(b"copy") == b"v0!"
