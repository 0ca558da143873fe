"""``db.transaction()`` on the engines (docs/api.md, "Transactions"), each
test written once for every engine in ENGINES, through its public open():
serializable commits (write skew and phantoms refused, whatever wrote the
conflicting key: a plain put, a write batch, another transaction, an
ingest), read-your-writes in every read, commit and discard, the snapshot
it reads, read-only handles, a database closing under it, durability of a
``sync=True`` commit across a SIGKILL, a refused commit leaving nothing on
disk, and four threads incrementing one counter through
``run_in_transaction`` ending exact. The engine's own side (its log
writer's validation) has tests beside the engine (tests/lsmkv/)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

import btree
import lsmkv
from lsmkv import ClosedError, ConflictError, ReadOnlyError, SnapshotEndedError, run_in_transaction
from lsmkv.base.errors import InvalidArgumentError, MergeError
from lsmkv.base.merge_operators import UInt64Add

from helpers.anomalies import check_write_skew_is_refused
from helpers.threads import run_until_done

add = UInt64Add.operand
decode = UInt64Add.decode

#: The engines whose transactions these tests run on.
ENGINES = ["lsm", "btree"]
MODULE = {"lsm": "lsmkv", "btree": "btree"}
#: Small memtables and pages, so flushes and splits happen under the transactions.
SMALL = {"lsm": {"write_buffer_size": 16 * 1024, "compaction_executor": "thread"}, "btree": {"page_size": 512}}


def open_db(engine: str, path, **options):
    opener = lsmkv.open if engine == "lsm" else btree.open
    return opener(str(path), **{**SMALL[engine], **options})


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    return request.param


@pytest.fixture(params=[True, False], ids=["group_commit", "no_group_commit"])
def group_commit(request) -> bool:
    return request.param


@pytest.fixture
def db(engine, tmp_path):
    handle = open_db(engine, tmp_path / "db")
    for key, value in ((b"a", b"1"), (b"c", b"3"), (b"e", b"5"), (b"g", b"7")):
        handle.put(key, value)
    yield handle
    handle.close()


def contents(db) -> dict[bytes, bytes]:
    return dict(db.scan())


# -- reading its own writes ----------------------------------------------------------------------

def test_every_read_sees_the_transactions_writes_over_the_snapshot(engine, tmp_path):
    with open_db(engine, tmp_path / "db") as db:
        for i in range(300):  # tables below the memtable: every kind of source under the writes
            db.put(b"k%03d" % i, b"old" * 10)
        db.flush()
        for i in range(0, 300, 7):
            db.put(b"k%03d" % i, b"mem")
        with db.transaction() as txn:
            txn.put(b"k001", b"mine")
            txn.put(b"k1005", b"new key")
            txn.delete(b"k002")
            txn.delete(b"k007")  # in the memtable
            assert txn.get(b"k001") == b"mine" and txn[b"k1005"] == b"new key"
            assert txn.get(b"k002") is None and b"k007" not in txn and b"k003" in txn
            assert txn.get(b"k014") == b"mem" and txn.get(b"k015") == b"old" * 10
            assert txn.multi_get([b"k001", b"k002", b"k014", b"nope"]) == [b"mine", None, b"mem", None]
            model = dict(db.scan())
            model.update({b"k001": b"mine", b"k1005": b"new key"})
            del model[b"k002"], model[b"k007"]
            want = sorted(model.items())
            assert list(txn.scan()) == want
            assert list(txn.scan(reverse=True)) == want[::-1]
            assert list(txn.scan(b"k000", b"k008")) == [kv for kv in want if b"k000" <= kv[0] < b"k008"]
            assert list(txn.scan(prefix=b"k100")) == [kv for kv in want if kv[0].startswith(b"k100")]
            with txn.iterator(lower_bound=b"k001", upper_bound=b"k010") as cursor:
                cursor.seek(b"k002")
                assert (cursor.key(), cursor.value()) == (b"k003", b"old" * 10)
                cursor.prev()
                assert (cursor.key(), cursor.value()) == (b"k001", b"mine")
                cursor.seek_to_last()
                assert cursor.key() == b"k009"
                cursor.seek_for_prev(b"k1006")
                assert cursor.key() == b"k009"  # bounded
                cursor.seek(b"k100")
                assert [k for k, _ in cursor] == []
            assert db.get(b"k001") == b"old" * 10 and db.get(b"k1005") is None  # nothing written yet
        assert contents(db) == model


def test_a_transaction_reads_the_snapshot_taken_when_it_began(db, engine):
    txn = db.transaction()
    db.put(b"a", b"later")
    db.put(b"b", b"later")
    db.flush()
    assert txn.get(b"a") == b"1" and txn.get(b"b") is None
    assert [k for k, _ in txn.scan()] == [b"a", b"c", b"e", b"g"]
    txn.rollback()


def test_a_put_with_a_ttl_expires_counting_from_the_commit(engine, tmp_path):
    now = [1000.0]
    with open_db(engine, tmp_path / "db", ttl_clock=lambda: now[0]) as db:
        with db.transaction() as txn:
            txn.put(b"k", b"v", ttl=10)
            assert txn.get(b"k") == b"v"
            now[0] = 1005.0  # the commit: the key expires at 1015
        now[0] = 1012.0
        assert db.get(b"k") == b"v"
        now[0] = 1016.0
        assert db.get(b"k") is None


# -- commit, discard ----------------------------------------------------------------------------

def test_an_exception_in_the_block_discards_everything(db):
    with pytest.raises(RuntimeError, match="boom"):
        with db.transaction() as txn:
            txn.put(b"x", b"1")
            txn.delete(b"a")
            raise RuntimeError("boom")
    assert txn.state == "rolled back"
    assert contents(db) == {b"a": b"1", b"c": b"3", b"e": b"5", b"g": b"7"}


def test_commit_and_rollback_outside_a_with_block(db):
    txn = db.transaction()
    txn.put(b"x", b"1")
    assert db.get(b"x") is None
    txn.commit()
    assert txn.state == "committed" and db.get(b"x") == b"1"
    other = db.transaction(sync=True)
    other.put(b"y", b"1")
    other.rollback()
    assert other.state == "rolled back" and db.get(b"y") is None
    with pytest.raises(ClosedError, match="rolled back"):
        other.put(b"y", b"2")
    with pytest.raises(TypeError, match="sync must be True or False"):
        db.transaction(sync="yes")


# -- serializable ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_write_skew_is_refused(engine, tmp_path, group_commit, sync):
    """Two on-call doctors each see the other on call and go off call: under
    snapshot isolation both would commit. With sync=True and group commit
    the refused commit goes through the log syncer, without it through the
    write queue: either way its writer is woken with the ConflictError."""
    with open_db(engine, tmp_path / "db", group_commit=group_commit) as db:
        check_write_skew_is_refused(db, sync=sync)


def _writers(engine, db, tmp_path):
    """Ways to write key ``k`` with value ``v`` outside the transaction under test."""
    def put(k, v):
        db.put(k, v)

    def batch(k, v):
        with db.write_batch() as b:
            b.put(b"unrelated", b"1")
            b.put(k, v)

    def transaction(k, v):
        with db.transaction() as other:
            other.put(k, v)

    def ingest(k, v):
        path = str(tmp_path / f"ingest-{len(os.listdir(tmp_path))}.sst")
        with lsmkv.TableWriter(path) as w:
            w.put(k, v)
        db.ingest([path])

    return {"put": put, "write_batch": batch, "transaction": transaction, "ingest": ingest}


@pytest.mark.parametrize("how", ["put", "write_batch", "transaction", "ingest"])
def test_a_phantom_in_a_scanned_range_is_refused(db, engine, tmp_path, how):
    """Each transaction counts a team's members and adds one while it has
    fewer than two; a member added by anything after the scan conflicts."""
    write = _writers(engine, db, tmp_path)[how]
    db.put(b"team:a", b"1")
    txn = db.transaction()
    if len(list(txn.scan(prefix=b"team:"))) < 2:
        txn.put(b"team:me", b"1")
    write(b"team:b", b"1")
    with pytest.raises(ConflictError) as raised:  # (a btree ingest, which rewrites the page file, too)
        txn.commit()
    assert raised.value.access == "scanned" and raised.value.range == (b"team:", b"team;")
    assert db.get(b"team:me") is None and db.get(b"team:b") == b"1"


@pytest.mark.parametrize("how", ["put", "write_batch", "transaction", "ingest"])
def test_a_phantom_in_a_range_walked_by_a_cursor_is_refused(db, engine, tmp_path, how):
    write = _writers(engine, db, tmp_path)[how]
    txn = db.transaction()
    with txn.iterator() as cursor:
        cursor.seek(b"b")  # lands on c: [b, c] was read
        assert cursor.key() == b"c"
        cursor.next()      # e: [b, e]
    txn.put(b"z", b"1")
    write(b"d", b"phantom")
    with pytest.raises(ConflictError) as raised:
        txn.commit()
    assert raised.value.access == "scanned"
    assert db.get(b"z") is None


@pytest.mark.parametrize("how", ["put", "write_batch", "transaction", "ingest"])
def test_writes_outside_what_a_transaction_read_do_not_conflict(db, engine, tmp_path, how):
    write = _writers(engine, db, tmp_path)[how]
    txn = db.transaction()
    assert txn.get(b"a") == b"1"
    assert list(txn.scan(b"c", b"e")) == [(b"c", b"3")]
    txn.put(b"x", b"mine")
    write(b"zz", b"elsewhere")
    write(b"e", b"at the scan's end, which it excludes")
    txn.commit()
    assert db.get(b"x") == b"mine"


def test_a_read_only_transaction_never_conflicts(db):
    with db.transaction() as txn:
        assert txn.get(b"a") == b"1" and len(list(txn.scan())) == 4
        db.put(b"a", b"changed")
        db.put(b"b", b"inserted")
    assert txn.state == "committed"


@pytest.mark.slow
def test_four_threads_incrementing_one_key_end_exact(engine, tmp_path):
    """The classic lost update: get, then put the value plus one. Run in
    transactions retried on conflict, none is lost."""
    threads, each = 4, 5000
    with open_db(engine, tmp_path / "db") as db:
        errors = []

        def increment(txn):
            txn.put(b"counter", b"%d" % (int(txn.get(b"counter", b"0")) + 1))

        def work():
            try:
                for _ in range(each):
                    run_in_transaction(db, increment, attempts=1000, backoff=0.0001, max_backoff=0.002)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == []
        assert db.get(b"counter") == b"%d" % (threads * each)


@pytest.mark.slow
def test_transfers_keep_their_total_while_other_threads_write(engine, tmp_path, group_commit):
    """Transactions move amounts between accounts while other threads put
    and batch-write unrelated keys and read-only transactions add up the
    accounts: every sum is the total, and the end state is exact."""
    accounts, total = 8, 8000
    with open_db(engine, tmp_path / "db", group_commit=group_commit) as db:
        for i in range(accounts):
            db.put(b"acct:%d" % i, b"%d" % (total // accounts))
        stop = threading.Event()
        errors, sums = [], []

        def transfer(rng_seed):
            import random
            rng = random.Random(rng_seed)

            def move(txn):
                a, b = rng.sample(range(accounts), 2)
                amount = rng.randrange(1, 50)
                balance_a = int(txn[b"acct:%d" % a])
                txn.put(b"acct:%d" % a, b"%d" % (balance_a - amount))
                txn.put(b"acct:%d" % b, b"%d" % (int(txn[b"acct:%d" % b]) + amount))
            try:
                for _ in range(100):
                    run_in_transaction(db, move, attempts=1000, backoff=0.0001, max_backoff=0.002)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        def noise():
            n = 0
            while not stop.is_set():
                db.put(b"noise:%06d" % n, b"x" * 50)
                with db.write_batch() as b:
                    b.put(b"noise:b%06d" % n, b"y")
                    b.delete(b"noise:%06d" % (n - 1))
                n += 1

        def audit():
            try:
                while not stop.is_set():
                    with db.transaction() as txn:
                        sums.append(sum(int(v) for _, v in txn.scan(prefix=b"acct:")))
            except BaseException as exc:  # noqa: BLE001 - reported below (a scan's table deleted under it)
                errors.append(exc)

        movers = [threading.Thread(target=transfer, args=(seed,)) for seed in range(3)]
        others = [threading.Thread(target=noise), threading.Thread(target=audit)]
        run_until_done(movers, others, stop)
        assert errors == []
        assert sums and set(sums) == {total}
        assert sum(int(v) for _, v in db.scan(prefix=b"acct:")) == total


# -- the database's own snapshots, cursors; read-only handles; closing --------------------------------

def test_snapshots_cursors_and_scans_of_the_database_do_not_see_a_commit(db, engine):
    snap = db.snapshot()
    cursor = db.iterator()
    scan = db.scan()
    with db.transaction() as txn:
        txn.put(b"b", b"new")
        txn.delete(b"c")
    assert snap.get(b"b") is None and snap.get(b"c") == b"3"
    assert [k for k, _ in snap.scan()] == [b"a", b"c", b"e", b"g"]
    cursor.seek_to_first()
    assert [k for k, _ in cursor] == [b"a", b"c", b"e", b"g"]
    if engine == "lsm":  # a btree scan() is not point-in-time: it reads the tree as it goes (docs/api.md)
        assert [k for k, _ in scan] == [b"a", b"c", b"e", b"g"]
    else:
        assert [k for k, _ in scan] == [b"a", b"b", b"e", b"g"]
    assert [k for k, _ in db.scan()] == [b"a", b"b", b"e", b"g"]
    cursor.close()
    snap.close()


def test_a_read_only_handle_reads_in_a_transaction_and_refuses_its_writes(engine, tmp_path):
    path = tmp_path / "db"
    with open_db(engine, path) as writer:
        writer.put(b"a", b"1")
    with open_db(engine, path, read_only=True) as ro:
        with ro.transaction() as txn:
            assert txn.get(b"a") == b"1" and list(txn.scan()) == [(b"a", b"1")]
        assert txn.state == "committed"
        txn = ro.transaction()
        for write in (lambda: txn.put(b"b", b"2"), lambda: txn.delete(b"a")):
            with pytest.raises(ReadOnlyError, match="read_only=True"):
                write()
        assert txn.state == "open" and txn.get(b"b") is None and txn.get(b"a") == b"1"
        txn.commit()  # it wrote nothing
    with open_db(engine, path) as db:
        assert contents(db) == {b"a": b"1"}


def test_a_transaction_open_while_the_database_closes_reads_nothing_more(engine, tmp_path):
    db = open_db(engine, tmp_path / "db")
    for i in range(100):
        db.put(b"k%03d" % i, b"v")
    txn = db.transaction()
    scan = txn.scan()
    assert next(scan) == (b"k000", b"v")
    cursor = txn.iterator()
    cursor.seek_to_first()
    txn.put(b"mine", b"1")
    db.close()
    for use in (lambda: txn.get(b"k001"), lambda: txn.multi_get([b"k001"]), lambda: list(scan), lambda: txn.scan(),
                cursor.next, lambda: txn.iterator()):
        with pytest.raises(ClosedError):
            use()
    with pytest.raises(ClosedError):
        txn.commit()
    assert txn.state == "failed"
    cursor.close()
    with open_db(engine, tmp_path / "db") as db:
        assert db.get(b"mine") is None and len(db) == 100


# -- what reaches the disk ----------------------------------------------------------------------

MARKER = b"written-by-a-refused-commit"


def test_a_refused_commit_leaves_nothing_on_disk(engine, tmp_path, group_commit):
    path = tmp_path / "db"
    with open_db(engine, path, group_commit=group_commit) as db:
        db.put(b"k", b"0")
        for sync in (False, True):
            txn = db.transaction(sync=sync)
            txn.get(b"k")
            for i in range(20):
                txn.put(b"refused:%d:%d" % (sync, i), MARKER)
            db.put(b"k", b"changed")
            with pytest.raises(ConflictError):
                txn.commit()
        with db.transaction(sync=True) as txn:  # a commit after it goes on as usual
            txn.put(b"after", b"1")
    for name in os.listdir(path):  # neither in a log nor anywhere else
        with open(path / name, "rb") as f:
            assert MARKER not in f.read(), name
    with open_db(engine, path) as db:  # nor after recovery
        assert db.get(b"after") == b"1" and db.get(b"k") == b"changed"
        assert [k for k, _ in db.scan(prefix=b"refused")] == []


CHILD = """
import sys, threading
import {module}
from lsmkv import ConflictError

db = {module}.open({path!r}, group_commit={group_commit}, **{options!r})
out = threading.Lock()

def say(line):
    with out:
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

def work(t):
    for attempt in range(1_000_000):
        name = b"%d:%d" % (t, attempt)
        try:
            with db.transaction(sync=True) as txn:
                count = int(txn.get(b"counter", b"0"))
                for j in range(5):
                    txn.put(name + b":%d" % j, name * 20)
                txn.put(b"counter", b"%d" % (count + 1))
        except ConflictError:
            say("conflict " + name.decode())
        else:
            say("ok " + name.decode())

for t in range(3):
    threading.Thread(target=work, args=(t,), daemon=True).start()
threading.Event().wait()
"""


@pytest.mark.crash
@pytest.mark.slow
def test_a_sync_commit_is_whole_after_a_sigkill(engine, tmp_path, group_commit):
    """Three threads of a child process commit sync=True transactions (five
    keys and a counter each) until it is killed. After reopening: every
    acknowledged commit is whole, every refused one absent, the one in
    flight whole or absent, and the counter counts the commits found."""
    path = str(tmp_path / "db")
    code = CHILD.format(module=MODULE[engine], path=path, group_commit=group_commit, options=SMALL[engine])
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)
    lines = []
    try:
        while sum(line.startswith("ok") for line in lines) < 300:
            line = child.stdout.readline()
            assert line, "the child ended early"
            lines.append(line.strip())
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate(timeout=60)
    lines.extend(rest.splitlines())
    acknowledged = {line.split()[1].encode() for line in lines if line.startswith("ok ")}
    refused = {line.split()[1].encode() for line in lines if line.startswith("conflict ")}
    with open_db(engine, path) as db:
        found: dict[bytes, int] = {}
        for key, value in db.scan():
            if key != b"counter":
                name = key.rsplit(b":", 1)[0]
                assert value == name * 20
                found[name] = found.get(name, 0) + 1
        assert all(n == 5 for n in found.values()), {k: n for k, n in found.items() if n != 5}
        assert acknowledged <= set(found)
        assert not refused & set(found)
        assert int(db.get(b"counter")) == len(found)


# -- merges and range deletes in a transaction ------------------------------------------------------

@pytest.fixture(params=ENGINES)
def mr_engine(request) -> str:
    """The engines whose transactions take merges and range deletes: both."""
    return request.param


@pytest.fixture
def counters(mr_engine, tmp_path):
    handle = open_db(mr_engine, tmp_path / "db", merge_operator=UInt64Add())
    for i in range(10):
        handle.put(b"c%d" % i, add(100 * i))
    yield handle
    handle.close()


def test_reads_see_the_transactions_merges_folded_onto_the_snapshot(counters):
    with counters.transaction() as txn:
        txn.merge(b"c1", add(5))
        txn.merge(b"c1", add(6))
        txn.merge(b"new", add(1))
        txn.put(b"p", add(10))
        txn.merge(b"p", add(1))                 # onto its own put
        txn.delete(b"c2")
        txn.merge(b"c2", add(2))                # onto its own delete: absent
        assert decode(txn.get(b"c1")) == 111 and decode(txn[b"new"]) == 1
        assert [decode(v) for v in txn.multi_get([b"c1", b"p", b"c2", b"c3"])] == [111, 11, 2, 300]
        scanned = {k: decode(v) for k, v in txn.scan()}
        assert scanned[b"c1"] == 111 and scanned[b"p"] == 11 and scanned[b"new"] == 1
        with txn.iterator(b"c1", b"c3") as cursor:
            cursor.seek_to_first()
            assert (cursor.key(), decode(cursor.value())) == (b"c1", 111)
            cursor.next()
            assert (cursor.key(), decode(cursor.value())) == (b"c2", 2)
    assert decode(counters[b"c1"]) == 111 and decode(counters[b"p"]) == 11 and decode(counters[b"c2"]) == 2


def test_a_key_asked_twice_in_one_multi_get_folds_the_transactions_merges_once(counters):
    """multi_get answers each key as get does, however often it is asked:
    the transaction's operands are folded onto its snapshot value once."""
    with counters.transaction() as txn:
        txn.merge(b"c1", add(5))
        txn.merge(b"new", add(1))
        got = txn.multi_get([b"c1", b"new", b"c1", b"new", b"c1"])
        assert [decode(v) for v in got] == [105, 1, 105, 1, 105]
        assert [decode(txn.get(k)) for k in (b"c1", b"new")] == [105, 1]


def test_a_merge_read_back_conflicts_with_a_write_to_its_key(counters):
    txn = counters.transaction()
    txn.merge(b"c1", add(5))
    assert decode(txn.get(b"c1")) == 105  # read: validated as usual
    counters.put(b"c1", add(1000))
    with pytest.raises(ConflictError, match="c1"):
        txn.commit()
    assert decode(counters[b"c1"]) == 1000


def test_two_transactions_merging_one_counter_both_commit(counters):
    first, second = counters.transaction(), counters.transaction()
    first.merge(b"c1", add(1))
    second.merge(b"c1", add(2))
    counters.merge(b"c1", add(4))  # a plain merge between them: no conflict either
    first.commit()
    second.commit()
    assert decode(counters[b"c1"]) == 100 + 1 + 2 + 4


def test_a_blind_merge_folds_onto_the_value_at_the_commit(counters):
    txn = counters.transaction()
    txn.merge(b"c3", add(1))
    counters.put(b"c3", add(7))
    txn.commit()
    assert decode(counters[b"c3"]) == 8


def test_a_transaction_that_read_a_key_another_merged_conflicts(counters):
    reader, merger = counters.transaction(), counters.transaction()
    assert decode(reader[b"c1"]) == 100
    reader.merge(b"c9", add(1))  # something to commit
    merger.merge(b"c1", add(1))
    merger.commit()
    with pytest.raises(ConflictError, match="c1"):
        reader.commit()
    assert decode(counters[b"c9"]) == 900


def test_a_transactions_range_delete_hides_keys_and_a_later_put_stays(counters):
    with counters.transaction() as txn:
        txn.put(b"c5", add(55))            # before the range delete: deleted with the range
        txn.merge(b"c6", add(1))           # likewise
        txn.delete_range(b"c2", b"c8")
        txn.put(b"c4", add(44))            # after it: kept
        txn.merge(b"c7", add(7))           # after it: onto nothing
        assert txn.get(b"c3") is None and txn.get(b"c5") is None and decode(txn[b"c4"]) == 44
        assert [k for k, _ in txn.scan()] == [b"c0", b"c1", b"c4", b"c7", b"c8", b"c9"]
        assert [k for k, _ in txn.scan(reverse=True)] == [b"c9", b"c8", b"c7", b"c4", b"c1", b"c0"]
        assert txn.multi_get([b"c2", b"c4", b"c8"])[0] is None
        with txn.iterator() as cursor:
            cursor.seek(b"c2")
            assert cursor.key() == b"c4"
            cursor.prev()
            assert cursor.key() == b"c1"
    assert {k: decode(v) for k, v in counters.scan()} == {b"c0": 0, b"c1": 100, b"c4": 44, b"c7": 7, b"c8": 800,
                                                         b"c9": 900}


def test_a_range_delete_by_another_commit_conflicts_with_what_was_read_inside_it(counters):
    txn = counters.transaction()
    assert txn.get(b"c5") is not None
    txn.put(b"x", b"1")
    counters.delete_range(b"c4", b"c6")
    with pytest.raises(ConflictError, match="deleted the range"):
        txn.commit()
    assert counters.get(b"x") is None


def test_a_transactions_range_delete_conflicts_with_a_write_inside_it(counters):
    txn = counters.transaction()
    txn.delete_range(b"c4", b"c6")
    counters.put(b"c41", b"phantom")
    with pytest.raises(ConflictError, match="c41"):
        txn.commit()
    assert counters.get(b"c4") is not None and counters.get(b"c41") == b"phantom"


def test_two_transactions_deleting_overlapping_ranges_conflict(counters):
    first, second = counters.transaction(), counters.transaction()
    first.delete_range(b"c1", b"c5")
    second.delete_range(b"c4", b"c8")
    first.commit()
    with pytest.raises(ConflictError):
        second.commit()
    assert [k for k, _ in counters.scan()] == [b"c0", b"c5", b"c6", b"c7", b"c8", b"c9"]


def test_bad_merges_and_ranges_in_a_transaction_raise_and_change_nothing(mr_engine, tmp_path):
    with open_db(mr_engine, tmp_path / "plain") as db:
        with db.transaction() as txn:
            with pytest.raises(InvalidArgumentError, match="merge_operator="):
                txn.merge(b"k", b"x")
            with pytest.raises(InvalidArgumentError, match="above end"):
                txn.delete_range(b"b", b"a")
            txn.delete_range(b"a", b"a")  # empty: nothing
            assert not txn._writes
    with open_db(mr_engine, tmp_path / "counters", merge_operator=UInt64Add()) as db:
        db.put(b"k", b"abc")
        with db.transaction() as txn:
            with pytest.raises(InvalidArgumentError, match="8 bytes"):
                txn.merge(b"k", b"x")
        txn = db.transaction()
        txn.merge(b"k", add(1))  # blind, onto a value the operator cannot fold
        txn.put(b"other", b"1")
        if mr_engine == "btree":  # btree folds at the commit: it fails whole
            with pytest.raises(MergeError):
                txn.commit()
            assert db[b"k"] == b"abc" and db.get(b"other") is None
        else:  # lsm keeps the operand and folds on reads: the read fails, nothing is lost
            txn.commit()
            with pytest.raises(MergeError, match="8 bytes of a uint64add counter"):
                db.get(b"k")
            assert db.get(b"other") == b"1"
    with open_db(mr_engine, tmp_path / "counters", read_only=True, merge_operator=UInt64Add()) as db:
        with db.transaction() as txn:
            with pytest.raises(ReadOnlyError):
                txn.merge(b"k", add(1))
            with pytest.raises(ReadOnlyError):
                txn.delete_range(b"a", b"b")


def test_a_merge_onto_the_transactions_own_put_keeps_its_ttl(mr_engine, tmp_path):
    now = [1000.0]
    with open_db(mr_engine, tmp_path / "db", merge_operator=UInt64Add(), ttl_clock=lambda: now[0]) as db:
        with db.transaction() as txn:
            txn.put(b"window", add(1), ttl=60)
            txn.merge(b"window", add(1))
            assert decode(txn[b"window"]) == 2
        assert decode(db[b"window"]) == 2
        now[0] += 61
        assert db.get(b"window") is None
