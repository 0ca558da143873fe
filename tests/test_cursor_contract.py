"""One cursor contract for both engines (db.iterator(), snapshot.iterator()):
random writes spread over memtable, level 0 and deeper levels (lsmkv) or
many pages (btree), then random sequences of every cursor move, with and
without bounds and snapshots, checked against a sorted-list model -- where
the cursor stands and what iterating it yields after each move; writes
made after a cursor was created are never seen by it."""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import btree
import lsmkv

from helpers.cursor_model import CursorModel, check_moves

ENGINES = {
    "lsm": lambda path: lsmkv.open(path, write_buffer_size=1024, block_size=128, l0_compaction_trigger=3,
                                   compaction_executor="thread", level1_max_bytes=8192, target_file_size=2048),
    "btree": lambda path: btree.open(path, page_size=512, cache_size=8 * 512),
}

keys = st.integers(0, 400).map(lambda i: b"k%03d" % i) | st.binary(max_size=3)
writes = st.lists(st.tuples(st.sampled_from(["put", "delete", "flush", "compact"]), keys,
                            st.binary(max_size=30)), min_size=1, max_size=300)
moves = st.lists(st.tuples(st.sampled_from(["seek", "seek_for_prev", "first", "last", "next", "prev",
                                            "next", "prev", "next", "prev"]), keys), min_size=1, max_size=60)
bounds = st.tuples(st.none() | keys, st.none() | keys)


def apply_writes(db, engine, ops, model):
    for op, key, value in ops:
        if op == "put":
            db.put(key, value)
            model[key] = value
        elif op == "delete":
            db.delete(key)
            model.pop(key, None)
        elif op == "flush":
            db.flush()
        elif op == "compact" and engine == "lsm":
            db.compact_range()


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cursor_moves_agree_with_a_sorted_list(engine, data):
    path = tempfile.mkdtemp(prefix=f"lsmkv-cursor-{engine}-")
    try:
        db = ENGINES[engine](path + "/db")
        try:
            contents: dict[bytes, bytes] = {}
            apply_writes(db, engine, data.draw(writes), contents)
            lower, upper = data.draw(bounds)
            use_snapshot = data.draw(st.booleans())
            snap = db.snapshot() if use_snapshot else None
            frozen = dict(contents)
            if use_snapshot:  # writes between the snapshot and the cursor: the cursor sees the snapshot
                apply_writes(db, engine, data.draw(writes), contents)
            source = snap if snap is not None else db
            with source.iterator(lower_bound=lower, upper_bound=upper) as cursor:
                # Writes after the cursor was made: never seen by it.
                apply_writes(db, engine, data.draw(writes), contents)
                model = CursorModel(frozen.items(), lower, upper)
                assert not cursor.valid()
                assert list(cursor) == model.iterated()  # never positioned: the whole range
                check_moves(cursor, model, data.draw(moves))
                # Iterating from where it stands, then whole.
                cursor.seek_to_first()
                assert list(cursor) == model.items
            if snap is not None:
                snap.close()
            with db.iterator() as fresh:  # a new cursor sees everything written
                assert list(fresh) == sorted(contents.items())
        finally:
            db.close()
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_closed_cursor_or_database_is_an_error(tmp_path, engine):
    db = ENGINES[engine](str(tmp_path / "db"))
    db.put(b"a", b"1")
    cursor = db.iterator()
    cursor.seek_to_first()
    assert cursor.key() == b"a"
    cursor.close()
    with pytest.raises(lsmkv.ClosedError):
        cursor.valid()
    cursor = db.iterator()
    cursor.seek_to_first()
    db.close()
    with pytest.raises(lsmkv.ClosedError):
        cursor.key()
    with pytest.raises(TypeError, match="lower_bound"):
        ENGINES[engine](str(tmp_path / "db2")).iterator(lower_bound="text")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_deleted_keys_are_never_seen_in_either_direction(tmp_path, engine):
    db = ENGINES[engine](str(tmp_path / "db"))
    try:
        for i in range(300):
            db.put(b"k%03d" % i, b"v")
        db.flush()
        if engine == "lsm":
            db.compact_range()
        for i in range(0, 300, 2):
            db.delete(b"k%03d" % i)  # tombstones above the data (lsmkv: in the memtable)
        expected = [b"k%03d" % i for i in range(1, 300, 2)]
        with db.iterator() as cursor:
            assert [k for k, _ in cursor] == expected
            cursor.seek_to_last()
            backward = []
            while cursor.valid():
                backward.append(cursor.key())
                cursor.prev()
            assert backward == expected[::-1]
            cursor.seek(b"k100")
            assert cursor.key() == b"k101"
            cursor.seek_for_prev(b"k100")
            assert cursor.key() == b"k099"
            cursor.next()  # a direction change
            assert cursor.key() == b"k101"
    finally:
        db.close()


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_cursor_off_its_entries_iterates_nothing(tmp_path, engine):
    """Iterating yields from the current entry to the end: nothing after a
    seek past the last key, a next() off the end or a prev() off the start;
    a cursor never positioned yields its whole range; a seek makes the
    cursor iterate again. The cursor stays where it is."""
    db = ENGINES[engine](str(tmp_path / "db"))
    try:
        for key in (b"b", b"d", b"f"):
            db.put(key, key.upper())
        everything = [(b"b", b"B"), (b"d", b"D"), (b"f", b"F")]
        with db.iterator() as cursor:
            assert list(cursor) == everything and not cursor.valid()
            cursor.seek(b"g")  # past the last key
            assert not cursor.valid() and list(cursor) == []
            cursor.seek(b"f")
            assert list(cursor) == [(b"f", b"F")] and cursor.key() == b"f"
            cursor.next()  # off the end
            assert not cursor.valid() and list(cursor) == []
            cursor.seek_to_first()
            cursor.prev()  # off the start
            assert not cursor.valid() and list(cursor) == []
            cursor.seek_for_prev(b"a")  # before the first key
            assert not cursor.valid() and list(cursor) == []
            cursor.seek(b"c")
            assert list(cursor) == everything[1:] and cursor.key() == b"d"
        with db.iterator(lower_bound=b"c", upper_bound=b"f") as bounded:
            assert list(bounded) == [(b"d", b"D")]  # never positioned: the whole range
            bounded.seek_to_last()
            bounded.next()
            assert list(bounded) == []
        with db.snapshot() as snap, snap.iterator() as cursor:
            cursor.seek(b"z")
            assert list(cursor) == []
    finally:
        db.close()
