"""A transaction's write set (lsmkv/base/write_set.py) as the newest cursor
source over snapshot sources: random write sets over random snapshots
(two sorted lists standing in for an engine's sources, the newer with
tombstones hiding the older's keys), every cursor move and every scan
checked against a dict model; its own values shadow the snapshot's, its
tombstones hide them, and writes made after a cursor or scan was made are
never seen by it."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from lsmkv.base.cursor import TOMBSTONE, VALUE, Cursor, SourceCursor, stream_view
from lsmkv.base.write_set import MERGE, WriteSet, hiding_ranges

from helpers.cursor_model import CursorModel, check_moves
from helpers.finders import list_finders

# -- stand-ins for an engine's snapshot sources ------------------------------------------------


def snapshot_finders(older: dict, newer: dict):
    """Two sources, newest first: ``newer`` maps keys to a value or None (a tombstone)."""
    new = sorted((k, TOMBSTONE if v is None else VALUE, b"" if v is None else v) for k, v in newer.items())
    old = sorted((k, VALUE, v) for k, v in older.items())
    return [list_finders(new, chunk=3), list_finders(old, chunk=4)]


def snapshot_model(older: dict, newer: dict) -> dict:
    model = dict(older)
    for k, v in newer.items():
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    return model


def apply(write_set: WriteSet, model: dict, ops) -> None:
    for op, key, value in ops:
        if op == "put":
            write_set.put(key, value)
            model[key] = value
        else:
            write_set.delete(key)
            model.pop(key, None)


keys = st.integers(0, 60).map(lambda i: b"k%02d" % i) | st.binary(max_size=2)
values = st.binary(max_size=6)
contents = st.dictionaries(keys, values, max_size=40)
tombstoned = st.dictionaries(keys, st.none() | values, max_size=30)
write_ops = st.lists(st.tuples(st.sampled_from(["put", "put", "delete"]), keys, values), max_size=40)
moves = st.lists(st.tuples(st.sampled_from(["seek", "seek_for_prev", "first", "last", "next", "prev", "next",
                                            "prev"]), keys), min_size=1, max_size=40)
bounds = st.tuples(st.none() | keys, st.none() | keys)


@settings(max_examples=100, deadline=None)
@given(older=contents, newer=tombstoned, ops=write_ops, later_ops=write_ops, move_list=moves, bound=bounds)
def test_cursor_over_write_set_and_snapshot_agrees_with_a_dict(older, newer, ops, later_ops, move_list, bound):
    lower, upper = bound
    write_set = WriteSet()
    expected = snapshot_model(older, newer)
    apply(write_set, expected, ops)
    cursor = Cursor([write_set.source(), *(SourceCursor(a, b) for a, b in snapshot_finders(older, newer))],
                    lower, upper)
    apply(write_set, {}, later_ops)  # made after the cursor: never seen by it
    model = CursorModel(expected.items(), lower, upper)
    assert list(cursor) == model.items
    check_moves(cursor, model, move_list)


@settings(max_examples=100, deadline=None)
@given(older=contents, newer=tombstoned, ops=write_ops, later_ops=write_ops, bound=bounds,
       start=st.none() | keys, reverse=st.booleans())
def test_scan_over_write_set_and_snapshot_agrees_with_a_dict(older, newer, ops, later_ops, bound, start, reverse):
    lower, upper = bound
    write_set = WriteSet()
    expected = snapshot_model(older, newer)
    apply(write_set, expected, ops)
    scan = stream_view([write_set.finders(), *snapshot_finders(older, newer)], lower, upper, start, reverse,
                       lambda: None, [True], None)
    apply(write_set, {}, later_ops)  # after the scan was made (not started): not seen
    items = CursorModel(expected.items(), lower, upper).items
    if reverse:
        want = [kv for kv in reversed(items) if start is None or kv[0] <= start]
    else:
        want = [kv for kv in items if start is None or kv[0] >= start]
    assert list(scan) == want


def test_own_values_shadow_and_tombstones_hide_the_snapshot():
    write_set = WriteSet()
    write_set.put(b"b", b"mine")
    write_set.delete(b"c")
    write_set.put(b"x", b"new")
    snapshot = [list_finders([(b"a", VALUE, b"1"), (b"b", VALUE, b"2"), (b"c", VALUE, b"3"), (b"d", VALUE, b"4")],
                             chunk=3)]
    forward = list(stream_view([write_set.finders(), *snapshot], None, None, None, False, lambda: None, [True], None))
    assert forward == [(b"a", b"1"), (b"b", b"mine"), (b"d", b"4"), (b"x", b"new")]
    with Cursor([write_set.source(), *(SourceCursor(a, b) for a, b in snapshot)], b"b", b"x") as cursor:
        cursor.seek_to_last()
        walked = []
        while cursor.valid():
            walked.append(cursor.key())
            cursor.prev()
        assert walked == [b"d", b"b"]


def test_get_tells_written_deleted_and_not_written_apart():
    write_set = WriteSet()
    write_set.put(b"a", b"1")
    write_set.delete(b"b")
    assert write_set.get(b"a") == (VALUE, b"1")
    assert write_set.get(b"b") == (TOMBSTONE, b"")
    assert write_set.get(b"c") is None
    write_set.delete(b"a")
    write_set.put(b"b", b"2")
    assert write_set.get(b"a") == (TOMBSTONE, b"")
    assert write_set.get(b"b") == (VALUE, b"2")
    assert len(write_set) == 2 and b"a" in write_set.keys() and b"c" not in write_set.keys()


def test_entries_carry_the_last_write_and_its_ttl_in_key_order():
    write_set = WriteSet()
    write_set.put(b"b", b"2", ttl=5.0)
    write_set.put(b"a", b"1", ttl=3.0)
    write_set.put(b"a", b"1b")  # a later put without ttl drops the ttl
    write_set.put(b"c", b"3", ttl=7.0)
    write_set.delete(b"c")
    assert list(write_set.entries()) == [(b"a", VALUE, b"1b", None), (b"b", VALUE, b"2", 5.0),
                                         (b"c", TOMBSTONE, b"", None)]
    assert write_set.range_deletes == [] and MERGE not in (VALUE, TOMBSTONE)


def test_byte_size_counts_each_key_once_with_its_last_value():
    write_set = WriteSet()
    write_set.put(b"key", b"12345")
    write_set.put(b"key", b"12")
    write_set.put(b"other", b"")
    write_set.delete(b"gone")
    assert write_set.byte_size == len(b"key") + 2 + len(b"other") + len(b"gone")


def test_writes_while_sources_are_open_leave_them_as_they_were():
    write_set = WriteSet()
    for i in range(300):  # several chunks
        write_set.put(b"k%03d" % i, b"old")
    first = write_set.finders()
    scan = stream_view([first], None, None, None, False, lambda: None, [True], None)
    seen = []
    for key, value in scan:  # update each key the scan walks, and add keys ahead of it
        seen.append((key, value))
        write_set.put(key, b"new")
        write_set.put(key + b"+", b"added")
    assert seen == [(b"k%03d" % i, b"old") for i in range(300)]
    second = list(stream_view([write_set.finders()], None, None, None, False, lambda: None, [True], None))
    assert len(second) == 600
    assert all(v == (b"added" if k.endswith(b"+") else b"new") for k, v in second)
    # The first source, still held, reads what it read at its making.
    assert list(stream_view([first], None, None, None, True, lambda: None, [True], None))[0] == (b"k299", b"old")


def test_a_descending_stream_from_above_the_upper_bound_shows_nothing_outside_the_bounds():
    """Cursor.stream(start, reverse=True) with ``start`` at or above the
    upper bound starts below the bound (keys at or above it are outside
    the cursor's range, whatever its sources hold)."""
    source = list_finders([(b"a", VALUE, b"1"), (b"m", VALUE, b"2"), (b"z", VALUE, b"3")], chunk=3)
    with Cursor([SourceCursor(*source)], None, b"n") as cursor:
        assert list(cursor.stream(b"zz", reverse=True)) == [(b"m", b"2"), (b"a", b"1")]
        assert list(cursor.stream(b"n", reverse=True)) == [(b"m", b"2"), (b"a", b"1")]
        assert list(cursor.stream(b"m", reverse=True)) == [(b"m", b"2"), (b"a", b"1")]


# -- merges and range deletes ---------------------------------------------------------------------

def append(existing: bytes | None, operands) -> bytes:
    """The merge operator of these tests (Append with b"," between pieces)."""
    return b",".join(operands if existing is None else [existing, *operands])


def apply_with_merges(write_set: WriteSet, model: dict, ops) -> None:
    """``ops`` on ``write_set`` as a transaction makes them (a merge of a key
    the transaction put, deleted or range-deleted is folded into a put) and
    on ``model``, the dict the reads must show."""
    for op, key, value in ops:
        if op == "put":
            write_set.put(key, value)
            model[key] = value
        elif op == "delete":
            write_set.delete(key)
            model.pop(key, None)
        elif op == "merge":
            own = write_set.get(key)
            if (own is None and not write_set.range_deleted(key)) or (own is not None and own[0] == MERGE):
                write_set.merge(key, value)
            else:
                write_set.put(key, append(own[1] if own is not None and own[0] == VALUE else None, [value]))
            model[key] = append(model.get(key), [value])
        else:  # a range delete from key to value (in order)
            low, high = min(key, value), max(key, value)
            if low < high:
                write_set.delete_range(low, high)
                for k in [k for k in model if low <= k < high]:
                    del model[k]


def sources_with_merges(write_set: WriteSet, older: dict, newer: dict):
    """The transaction's finders: its write set (merges folded onto the
    snapshot's value) over the snapshot's, hiding its range deletes."""
    snapshot = snapshot_model(older, newer)
    finders = snapshot_finders(older, newer)
    if write_set.range_deletes:
        finders = [hiding_ranges(f, write_set.deleted_ranges()) for f in finders]
    return [write_set.finders(lambda key, operands: append(snapshot.get(key), operands)), *finders]


mr_ops = st.lists(st.tuples(st.sampled_from(["put", "delete", "merge", "merge", "range"]), keys, keys | values),
                  max_size=40)


@settings(max_examples=150, deadline=None)
@given(older=contents, newer=tombstoned, ops=mr_ops, later_ops=mr_ops, move_list=moves, bound=bounds)
def test_a_cursor_shows_merges_folded_and_hides_range_deleted_keys(older, newer, ops, later_ops, move_list, bound):
    lower, upper = bound
    write_set = WriteSet()
    expected = snapshot_model(older, newer)
    apply_with_merges(write_set, expected, ops)
    cursor = Cursor([SourceCursor(a, b) for a, b in sources_with_merges(write_set, older, newer)], lower, upper)
    apply_with_merges(write_set, dict(expected), later_ops)  # made after the cursor: never seen by it
    model = CursorModel(expected.items(), lower, upper)
    assert list(cursor) == model.items
    check_moves(cursor, model, move_list)


@settings(max_examples=150, deadline=None)
@given(older=contents, newer=tombstoned, ops=mr_ops, bound=bounds, reverse=st.booleans())
def test_a_scan_shows_merges_folded_and_hides_range_deleted_keys(older, newer, ops, bound, reverse):
    lower, upper = bound
    write_set = WriteSet()
    expected = snapshot_model(older, newer)
    apply_with_merges(write_set, expected, ops)
    scan = stream_view(sources_with_merges(write_set, older, newer), lower, upper, None, reverse,
                       lambda: None, [True], None)
    items = CursorModel(expected.items(), lower, upper).items
    assert list(scan) == (list(reversed(items)) if reverse else items)


def test_a_range_delete_drops_the_earlier_writes_inside_it_and_a_later_write_stays():
    write_set = WriteSet()
    write_set.put(b"a", b"1")
    write_set.put(b"c", b"3", ttl=9.0)
    write_set.merge(b"d", b"x")
    write_set.put(b"z", b"26")
    write_set.delete_range(b"b", b"y")
    write_set.put(b"m", b"after")
    assert write_set.range_deletes == [(b"b", b"y")]
    assert list(write_set.entries()) == [(b"a", VALUE, b"1", None), (b"m", VALUE, b"after", None),
                                         (b"z", VALUE, b"26", None)]
    assert write_set.range_deleted(b"c") and not write_set.range_deleted(b"y")
    assert write_set.byte_size == 2 + 3 + 6 + 2  # a, z, m with their values, and the range's two ends
    assert bool(WriteSet()) is False
    only_range = WriteSet()
    only_range.delete_range(b"a", b"b")
    assert only_range and len(only_range) == 0


def test_merged_keys_are_written_but_not_validated():
    write_set = WriteSet()
    write_set.merge(b"counter", b"1")
    write_set.merge(b"counter", b"2")
    write_set.put(b"plain", b"v")
    assert write_set.get(b"counter") == (MERGE, (b"1", b"2"))
    assert set(write_set.keys()) == {b"counter", b"plain"}
    assert set(write_set.validated_keys()) == {b"plain"}
    write_set.put(b"counter", b"3")  # a put over the merges: validated again
    assert set(write_set.validated_keys()) == {b"counter", b"plain"}
    assert write_set.byte_size == len(b"counter") + 1 + len(b"plain") + 1
