"""What scans and cursors record as read (lsmkv/base/read_set.py) is sound:
for random snapshots, random cursor moves, partial iterations and scans
stopped early, any single change to the snapshot -- a key inserted,
deleted, or given another value -- that would have changed anything the
reads returned lies inside the ranges recorded (so validation catches it,
phantoms included). And the recorded ranges are no wider than what was
walked in the plain cases."""

from __future__ import annotations

from itertools import islice

from hypothesis import given, settings, strategies as st

from lsmkv.base.cursor import SourceCursor, stream_view
from lsmkv.base.key_ranges import KeyRanges
from lsmkv.base.read_set import ReadSet, RecordingCursor, recorded_stream

from helpers.finders import value_finders


def run_cursor(contents, lower, upper, moves, reads):
    """What the moves observe, as a list (an error counts as an observation)."""
    cursor = RecordingCursor([SourceCursor(*value_finders(contents.items(), chunk=2))], lower, upper,
                             reads=reads)
    seen = []
    for op, key, n in moves:
        try:
            if op == "iter":
                seen.append(list(islice(iter(cursor), n)))
            elif op == "stream_back":
                seen.append(list(islice(cursor.stream(key, reverse=True), n)))
            else:
                {"seek": lambda: cursor.seek(key), "seek_for_prev": lambda: cursor.seek_for_prev(key),
                 "first": cursor.seek_to_first, "last": cursor.seek_to_last, "next": cursor.next,
                 "prev": cursor.prev}[op]()
                seen.append((cursor.key(), cursor.value()) if cursor.valid() else None)
        except ValueError:
            seen.append("not on an entry")
    return seen


def run_scan(contents, lower, upper, reverse, n, reads):
    span = reads.span(None, upper, read=False) if reverse else reads.span(lower, None, read=False)
    items = stream_view([value_finders(contents.items(), chunk=2)], lower, upper, None, reverse, lambda: None,
                        [True], None)
    return list(islice(recorded_stream(items, span, reverse, lower, upper), n))


keys = st.sampled_from([b"", b"a", b"b", b"b\x00", b"c", b"d", b"e", b"f", b"g"])
contents = st.dictionaries(keys, st.sampled_from([b"1", b"2"]), max_size=7)
bounds = st.tuples(st.none() | keys, st.none() | keys)
moves = st.lists(st.tuples(st.sampled_from(["seek", "seek_for_prev", "first", "last", "next", "prev", "iter",
                                            "stream_back"]), keys, st.integers(0, 4)), min_size=1, max_size=8)


def changes(snapshot: dict):
    """Every one-key change: each key inserted, deleted or given another value."""
    for key in [b"", b"a", b"a\x00", b"b", b"b\x00", b"b\x00\x00", b"c", b"d", b"e", b"f", b"g", b"h"]:
        changed = dict(snapshot)
        if key in snapshot:
            del changed[key]
            yield key, changed
            yield key, {**snapshot, key: b"other"}
        else:
            changed[key] = b"new"
            yield key, changed


@settings(max_examples=150, deadline=None)
@given(snapshot=contents, bound=bounds, move_list=moves)
def test_a_change_a_cursor_could_have_seen_is_inside_what_it_recorded(snapshot, bound, move_list):
    lower, upper = bound
    reads = ReadSet()
    seen = run_cursor(snapshot, lower, upper, move_list, reads)
    recorded = KeyRanges(reads.ranges())
    for key, changed in changes(snapshot):
        if run_cursor(changed, lower, upper, move_list, ReadSet()) != seen:
            assert recorded.containing(key) is not None, (key, reads.spans)


@settings(max_examples=150, deadline=None)
@given(snapshot=contents, bound=bounds, reverse=st.booleans(), n=st.integers(0, 8))
def test_a_change_a_scan_could_have_seen_is_inside_what_it_recorded(snapshot, bound, reverse, n):
    lower, upper = bound
    reads = ReadSet()
    seen = run_scan(snapshot, lower, upper, reverse, n, reads)
    recorded = KeyRanges(reads.ranges())
    for key, changed in changes(snapshot):
        if run_scan(changed, lower, upper, reverse, n, ReadSet()) != seen:
            assert recorded.containing(key) is not None, (key, reads.spans)


def test_scans_record_what_they_walked_and_their_whole_range_once_done():
    snapshot = {b"a": b"1", b"c": b"3", b"e": b"5"}
    reads = ReadSet()
    assert run_scan(snapshot, b"b", b"z", False, 0, reads) == []
    assert reads.ranges() == []  # nothing yielded yet: nothing read
    reads = ReadSet()
    assert run_scan(snapshot, b"b", b"z", False, 1, reads) == [(b"c", b"3")]
    assert reads.ranges() == [(b"b", b"c\x00")]
    reads = ReadSet()
    assert run_scan(snapshot, None, b"e", True, 1, reads) == [(b"c", b"3")]
    assert reads.ranges() == [(b"c", b"e")]
    reads = ReadSet()
    assert len(run_scan(snapshot, b"b", None, False, 10, reads)) == 2
    assert reads.ranges() == [(b"b", None)]


def test_cursors_record_from_the_key_sought_to_where_they_landed():
    snapshot = {b"a": b"1", b"c": b"3", b"e": b"5"}
    reads = ReadSet()
    run_cursor(snapshot, None, None, [("seek", b"b", 0), ("next", b"", 0), ("seek_for_prev", b"b", 0)], reads)
    assert reads.ranges() == [(b"b", b"e\x00"), (b"a", b"b\x00")]
    reads = ReadSet()
    run_cursor(snapshot, b"b", b"d", [("seek", b"a", 0), ("next", b"", 0), ("last", b"", 0)], reads)
    assert reads.ranges() == [(b"b", b"d"), (b"c", b"d")]
