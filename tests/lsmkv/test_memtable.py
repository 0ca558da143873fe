"""The memtable and its unrolled skiplist."""

from __future__ import annotations

import threading

from hypothesis import given, settings, strategies as st

from lsmkv.base.cursor import visible_entries
from lsmkv.lsm import skiplist
from lsmkv.lsm.cursor import memtable_source
from lsmkv.lsm.memtable import MemTable, one_version_run
from lsmkv.lsm.skiplist import UnrolledSkipList
from lsmkv.lsm.write_batch import TOMBSTONE, VALUE


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=6), unique=True, max_size=400), st.binary(max_size=6), st.binary(max_size=6))
def test_skiplist_orders_like_sorted(keys, a, b):
    # Tiny nodes, so that searches and iteration cross many node boundaries.
    saved = skiplist.NODE_LOAD
    skiplist.NODE_LOAD = 3
    try:
        s = UnrolledSkipList()
        for k in keys:
            s.insert(k)
    finally:
        skiplist.NODE_LOAD = saved
    assert all(1 <= len(n) <= 6 for n in s._nodes)
    expected = sorted(keys)
    assert list(s) == expected
    assert len(s) == len(keys)
    lo, hi = min(a, b), max(a, b)
    assert list(s.iter_from(lo, hi)) == [k for k in expected if lo <= k < hi]
    assert list(s.iter_reverse(lo, hi)) == [k for k in reversed(expected) if lo <= k < hi]
    assert list(s.iter_reverse()) == expected[::-1]


def test_skiplist_splits_nodes_and_stays_ordered():
    s = UnrolledSkipList()
    keys = [i.to_bytes(4, "big") for i in range(0, 20000, 2)]
    import random
    random.Random(3).shuffle(keys)
    for k in keys:
        s.insert(k)
    assert len(s._nodes) > 5
    assert all(len(n) <= 2 * skiplist.NODE_LOAD for n in s._nodes)
    assert list(s) == sorted(keys)
    assert s._maxes == [n[-1] for n in s._nodes]


def test_iteration_survives_concurrent_inserts():
    s = UnrolledSkipList()
    base = [b"%08d" % i for i in range(0, 40000, 4)]
    for k in base:
        s.insert(k)
    stop = threading.Event()

    def writer():
        i = 1
        while not stop.is_set() and i < 40000:
            s.insert(b"%08d" % i)
            i += 4

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(5):
            seen = list(s)
            assert seen == sorted(seen)
            assert set(base) <= set(seen)
    finally:
        stop.set()
        t.join()


def test_memtable_versions_and_read_sequence():
    m = MemTable()
    m.add(1, VALUE, b"a", b"1")
    m.add(2, VALUE, b"b", b"2")
    m.add(3, TOMBSTONE, b"a", b"")
    m.add(4, VALUE, b"a", b"4")
    assert m.get(b"a", 4)[1:3] == (VALUE, b"4")
    assert m.get(b"a", 3)[1] == TOMBSTONE
    assert m.get(b"a", 2)[1:3] == (VALUE, b"1")
    assert m.get(b"a", 0) is None
    assert m.get(b"zz", 10) is None
    assert list(visible_entries(memtable_source(m, 2))) == [(b"a", VALUE, b"1"), (b"b", VALUE, b"2")]
    assert list(visible_entries(memtable_source(m, 3))) == [(b"a", TOMBSTONE, b""), (b"b", VALUE, b"2")]
    assert list(visible_entries(memtable_source(m, 4), reverse=True)) == [(b"b", VALUE, b"2"), (b"a", VALUE, b"4")]
    # Flushing keeps only what a reader can see: the newest version, plus
    # older ones that a snapshot still needs.
    assert list(m.sorted_runs([])) == [([b"a", b"b"], [4 << 8 | VALUE, 2 << 8 | VALUE], [b"4", b"2"])]
    assert list(m.sorted_runs([3])) == [([b"a", b"a", b"b"], [4 << 8 | VALUE, 3 << 8 | TOMBSTONE, 2 << 8 | VALUE],
                                         [b"4", b"", b"2"])]
    assert list(m.sorted_runs([1, 3])) == [([b"a", b"a", b"a", b"b"],
                                            [4 << 8 | VALUE, 3 << 8 | TOMBSTONE, 1 << 8 | VALUE, 2 << 8 | VALUE],
                                            [b"4", b"", b"1", b"2"])]
    assert len(m) == 2
    assert m.size > 0


def test_add_batch_assigns_consecutive_sequences():
    m = MemTable()
    m.add_batch(10, [(VALUE, b"x", b"1"), (VALUE, b"y", b"2"), (TOMBSTONE, b"x", b"")])
    assert list(m.sorted_runs([10])) == [([b"x", b"x", b"y"], [12 << 8 | TOMBSTONE, 10 << 8 | VALUE, 11 << 8 | VALUE],
                                          [b"", b"1", b"2"])]




@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=4), st.booleans()), max_size=60))
def test_a_flush_runs_are_the_memtables_versions_whichever_form_makes_them(writes):
    """sorted_runs (a flush's input): the compiled build makes a node whose
    keys have one version each with one_version_run; either way, with no
    snapshot the runs hold each key's newest version in key order, and
    one_version_run answers None exactly when some key of the node has an
    older version."""
    mem = MemTable()
    for seq, (key, delete) in enumerate(writes, 1):
        mem.add(seq, TOMBSTONE if delete else VALUE, key, b"" if delete else b"v%d" % seq)
    expected = []
    for key in sorted({k for k, _ in writes}):
        versions = [(seq, d) for seq, (k, d) in enumerate(writes, 1) if k == key]
        for seq, delete in versions[-1:]:
            expected.append((key, seq << 8 | (TOMBSTONE if delete else VALUE), b"" if delete else b"v%d" % seq))
    got = [entry for keys, seq_kinds, values in mem.sorted_runs([]) for entry in zip(keys, seq_kinds, values)]
    assert got == expected
    for node in mem._index._nodes:
        run = one_version_run(mem._latest, node)
        many = any(mem._latest[k][3] is not None for k in node)
        assert (run is None) == many
        if run is not None:
            assert list(zip(*run)) == [e for e in expected if e[0] in set(node)]
        else:
            assert len(node) < len([e for e in writes if e[0] in set(node)])
