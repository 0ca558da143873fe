"""OffsetWindow on its own: records complete in any order, progress moves
only over a completed prefix, in offset order, bounded by the capacity."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from lsmkv.kafka.runtime.commit_control import OffsetWindow, complete


def test_progress_is_the_first_offset_not_completed():
    w = OffsetWindow(capacity=10, start_offset=100)
    entries = [w.register(o) for o in (100, 101, 102, 105)]  # 103, 104: compacted away, never fetched
    assert w.pending == 4 and not w.ready()
    complete(entries[2], [(b"c", b"3")])
    complete(entries[3], [(b"d", None)])
    assert not w.ready() and w.take_ready(100, 1 << 20) == ([], 0, 0, 100)
    complete(entries[0], [(b"a", b"1")])
    ops, count, nbytes, progress = w.take_ready(100, 1 << 20)
    assert (ops, count, progress) == ([[(b"a", b"1")]], 1, 101) and nbytes == 2
    complete(entries[1], None)  # a skipped record: completes, stores nothing
    ops, count, _, progress = w.take_ready(100, 1 << 20)
    assert ops == [[(b"c", b"3")], [(b"d", None)]] and count == 3 and progress == 106
    assert w.pending == 0 and w.next_offset == 106


def test_chunks_completed_at_registration_and_the_limits():
    w = OffsetWindow(capacity=5, start_offset=None)
    assert w.next_offset is None
    w.register_done(7, 10, 3, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], 6)
    assert w.next_offset == 7 and w.pending == 3 and not w.full
    e = w.register(10)
    w.register_done(11, 13, 2, [(b"x", b"y" * 100), (b"z", b"1")], 103)
    assert w.full and w.pending == 6  # the window never refuses: the loader pauses a full one
    assert w.take_ready(1, 1 << 20)[1:] == (3, 6, 10)  # at least one whole entry, even past the record limit
    assert w.take_ready(100, 1 << 20)[1:] == (0, 0, 10)  # 10 is not completed: nothing past it
    complete(e, [(b"k", b"v")])
    ops, count, nbytes, progress = w.take_ready(100, 1)  # the byte limit stops after the first entry
    assert (count, nbytes, progress) == (1, 2, 11)
    assert w.take_ready(100, 1 << 20)[1:] == (2, 103, 13)


def test_registration_must_go_forward_and_clear_drops_the_rest():
    w = OffsetWindow(capacity=3, start_offset=50)
    with pytest.raises(ValueError, match="registered after"):
        w.register(49)
    w.register(50)
    with pytest.raises(ValueError, match="registered after"):
        w.register(50)
    with pytest.raises(ValueError, match="registered after"):
        w.register_done(50, 52, 2, [], 0)
    with pytest.raises(ValueError, match="capacity"):
        OffsetWindow(0, 0)
    w.register(51)
    assert w.clear() == 2 and w.pending == 0 and not w.ready()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=60), st.randoms(use_true_random=False),
       st.integers(1, 8))
def test_any_completion_order_takes_a_prefix_in_offset_order(gaps, rnd, limit):
    w = OffsetWindow(capacity=1000, start_offset=0)
    offsets, entries, pos = [], [], 0
    for gap in gaps:
        pos += gap
        offsets.append(pos)
        entries.append(w.register(pos))
    order = list(range(len(entries)))
    rnd.shuffle(order)
    taken: list[int] = []
    completed: set[int] = set()
    for i in order:
        complete(entries[i], [(b"%d" % offsets[i], b"")])
        completed.add(i)
        while True:
            ops, count, _, progress = w.take_ready(limit, 1 << 30)
            if not count:
                break
            taken += [int(op[0][0]) for op in ops]
            # Everything taken so far is a prefix of the fetched offsets, and completed.
            assert taken == offsets[:len(taken)] and all(j in completed for j in range(len(taken)))
            assert progress == offsets[len(taken) - 1] + 1
        # Nothing completed is left behind unless something before it is not completed.
        if len(taken) < len(offsets):
            assert len(taken) not in completed
    assert taken == offsets and w.pending == 0


def test_window_is_cheap_per_record():
    """Not a timing test: the structure holds one entry per chunk, so a
    million records fetched as chunks are a handful of entries."""
    w = OffsetWindow(capacity=10**7, start_offset=0)
    for start in range(0, 1_000_000, 10_000):
        w.register_done(start, start + 10_000, 10_000, [], 0)
    assert len(w._entries) == 100 and w.pending == 1_000_000
    assert w.take_ready(10**7, 1 << 40)[1:] == (1_000_000, 0, 1_000_000)
    random.seed(0)
