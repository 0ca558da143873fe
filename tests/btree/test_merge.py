"""``db.merge(key, operand)`` on the B+tree (btree/merging.py): operands are
folded at write, under the log writer's lock, onto the key's value as the
writes ahead of them leave it; the log and the tree hold the folded value,
so recovery and later opens need no operator; a fold that fails writes
nothing of its batch; bad operands and a missing operator are refused."""

from __future__ import annotations

import os
import threading

import pytest

import btree
from btree.wal import parse_log
from lsmkv.base.errors import InvalidArgumentError, MergeError, OptionError, ReadOnlyError
from lsmkv.base.merge_operators import Append, Max, UInt64Add

add = UInt64Add.operand
count = UInt64Add.decode


@pytest.fixture
def counters(dbpath):
    db = btree.open(dbpath, page_size=512, merge_operator=UInt64Add())
    yield db
    db.close()


def log_ops(db) -> list:
    with open(os.path.join(db.path, "btree.log"), "rb") as f:
        return [ops for _, _, ops in parse_log(f.read(), "btree.log").records]


def test_merges_fold_onto_the_value_and_the_log_holds_the_folded_value(counters):
    counters.flush()
    counters.merge(b"hits", add(5))           # onto an absent key: 0
    counters.merge(b"hits", add(7), sync=True)
    counters.put(b"base", add(100))
    counters.merge(b"base", add(-1))
    assert count(counters[b"hits"]) == 12 and count(counters[b"base"]) == 99
    assert log_ops(counters) == [[(b"hits", add(5))], [(b"hits", add(12))], [(b"base", add(100))],
                                 [(b"base", add(99))]]
    assert counters.stats()["merges"] == 3


def test_a_store_written_with_merges_reopens_and_recovers_without_an_operator(dbpath):
    db = btree.open(dbpath, merge_operator=UInt64Add())
    for i in range(50):
        db.merge(b"k%d" % (i % 5), add(i))
    db._simulate_crash()  # the log is replayed at the next open
    with btree.open(dbpath) as db:
        assert [count(db[b"k%d" % j]) for j in range(5)] == [sum(range(j, 50, 5)) for j in range(5)]
        with pytest.raises(InvalidArgumentError, match="merge_operator="):
            db.merge(b"k0", add(1))
        assert count(db[b"k0"]) == sum(range(0, 50, 5))


def test_without_an_operator_merge_is_refused_and_nothing_is_written(db):
    log_bytes = db.stats()["log_bytes"]
    with pytest.raises(InvalidArgumentError, match="merge_operator="):
        db.merge(b"k", b"x")
    with pytest.raises(InvalidArgumentError, match="merge_operator="):
        with db.write_batch() as batch:
            batch.put(b"a", b"1")
            batch.merge(b"k", b"x")
    assert db.stats()["log_bytes"] == log_bytes and len(db) == 0


def test_the_option_must_be_callable(dbpath):
    with pytest.raises(OptionError, match="merge_operator must be a callable"):
        btree.open(dbpath, merge_operator="add")


def test_a_bad_operand_is_refused_before_anything_is_written(counters):
    with pytest.raises(InvalidArgumentError, match="8 bytes"):
        counters.merge(b"k", b"abc")
    with pytest.raises(TypeError):
        counters.merge(b"k", 5)
    assert counters.get(b"k") is None and counters.stats()["merges"] == 0


def test_a_fold_that_fails_writes_nothing_of_its_batch(counters):
    counters.put(b"bad", b"abc")  # not a counter: the operator cannot fold onto it
    with pytest.raises(MergeError, match="3 bytes"):
        counters.merge(b"bad", add(1))
    with pytest.raises(MergeError, match="3 bytes"):
        counters.merge(b"bad", add(1), sync=True)  # (through the log syncer)
    with pytest.raises(MergeError):
        with counters.write_batch() as batch:
            batch.put(b"other", b"1")
            batch.merge(b"bad", add(1))
    assert counters.get(b"other") is None and counters[b"bad"] == b"abc"
    counters.merge(b"good", add(2))  # the database goes on writing
    assert count(counters[b"good"]) == 2


def test_in_a_batch_later_operations_see_earlier_ones(counters):
    counters.put(b"a", add(10))
    counters.put(b"b", add(10))
    counters.put(b"r1", add(10))
    with counters.write_batch() as batch:
        batch.put(b"a", add(1))           # the merge folds onto this put, not onto 10
        batch.merge(b"a", add(2))
        batch.merge(b"a", add(3))
        batch.delete(b"b")
        batch.merge(b"b", add(4))         # onto the delete: absent
        batch.delete_range(b"r", b"s")
        batch.merge(b"r1", add(5))        # onto the range delete: absent
        batch.merge(b"new", add(6))
    assert [count(counters[k]) for k in (b"a", b"b", b"r1", b"new")] == [6, 4, 5, 6]


def test_merges_of_concurrent_writers_in_one_group_all_count(dbpath):
    threads, each = 4, 300
    with btree.open(dbpath, merge_operator=UInt64Add(), commit_delay=0.001) as db:
        def work(n: int) -> None:
            for i in range(each):
                if i % 50 == 0:
                    with db.write_batch() as batch:
                        batch.merge(b"total", add(1))
                        batch.merge(b"mine%d" % n, add(1))
                else:
                    db.merge(b"total", add(1), sync=i % 7 == 0)
                    db.merge(b"mine%d" % n, add(1))

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert count(db[b"total"]) == threads * each
        assert [count(db[b"mine%d" % n]) for n in range(threads)] == [each] * threads


def test_a_value_with_a_ttl_keeps_its_deadline_through_merges(dbpath):
    now = [1000.0]
    with btree.open(dbpath, merge_operator=UInt64Add(), ttl_clock=lambda: now[0]) as db:
        db.put(b"window", add(1), ttl=60)
        now[0] += 30
        db.merge(b"window", add(1))
        assert count(db[b"window"]) == 2 and db.stats()["ttl_entries"] == 1
        now[0] += 31  # past the put's deadline
        assert db.get(b"window") is None
        db.merge(b"window", add(1))  # an expired value is absent: folds onto nothing
        assert count(db[b"window"]) == 1
        now[0] += 1000
        assert count(db[b"window"]) == 1  # no ttl on a value made from nothing


def test_large_values_grow_through_overflow_chains(dbpath):
    with btree.open(dbpath, page_size=512, merge_operator=Append(b"|")) as db:
        for i in range(100):
            db.merge(b"log", b"entry-%03d" % i)
        assert db[b"log"] == b"|".join(b"entry-%03d" % i for i in range(100))
        assert db.check_invariants() == []
    with btree.open(dbpath, page_size=512, merge_operator=Max()) as db:
        db.merge(b"m", b"b")
        db.merge(b"m", b"a")
        assert db[b"m"] == b"b"


def test_a_read_only_handle_refuses_merges(dbpath):
    btree.open(dbpath).close()
    with btree.open(dbpath, read_only=True, merge_operator=UInt64Add()) as db:
        with pytest.raises(ReadOnlyError):
            db.merge(b"k", add(1))


def test_the_engine_dispatching_open_passes_the_operator_through(dbpath):
    from lsmkv.stores import open_store
    with open_store(dbpath, engine="btree", merge_operator=UInt64Add()) as db:
        db.merge(b"k", add(3))
    with open_store(dbpath, merge_operator=UInt64Add()) as db:  # the directory says btree
        db.merge(b"k", add(4))
        assert count(db[b"k"]) == 7
