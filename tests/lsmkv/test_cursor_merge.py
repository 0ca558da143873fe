"""The merge of several sources' chunks (cursor._live_merged) agrees with
a reference built from dicts: for a key in several sources the newest
source's version, tombstones dropped, keys below the bound, ascending and
descending, whatever the chunk boundaries. And whole views (a memtable,
level-0 tables, a level of many tables) read through scans and cursors
agree with a dict, bounded or not, whatever the seek chunk sizes."""

from __future__ import annotations

import random
import shutil
import tempfile
from bisect import bisect_left
from itertools import islice

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lsmkv
from lsmkv.base.cursor import EMPTY, _live_merged, filtered
from lsmkv.lsm.cursor import SEEK_CHUNK, seek_chunk
from lsmkv.lsm.write_batch import TOMBSTONE, VALUE

keys_strategy = st.binary(min_size=0, max_size=3)


@st.composite
def sources(draw):
    """Sources, newest first: each a sorted set of keys with a kind and a
    value, cut into chunks at random places."""
    out = []
    for n in range(draw(st.integers(1, 5))):
        keys = sorted(set(draw(st.lists(keys_strategy, max_size=30))))
        entries = [(k, draw(st.sampled_from([VALUE, VALUE, TOMBSTONE])), b"%d:" % n + k) for k in keys]
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(entries))), max_size=5))))
        chunks, at = [], 0  # never an empty chunk: a source's stream ends instead
        for cut in [c for c in cuts if c < len(entries)] + [len(entries)]:
            if cut > at:
                part = entries[at:cut]
                chunks.append(([k for k, _, _ in part], [kind for _, kind, _ in part],
                               [v for _, _, v in part]))
                at = cut
        out.append(chunks)
    return out


def reference(srcs, bound, reverse):
    newest: dict[bytes, tuple[int, bytes]] = {}
    for chunks in reversed(srcs):  # oldest first: newer sources overwrite
        for keys, kinds, values in chunks:
            for k, kind, v in zip(keys, kinds, values):
                newest[k] = (kind, v)
    live = [(k, v) for k, (kind, v) in sorted(newest.items()) if kind != TOMBSTONE]
    if bound is not None:
        live = [(k, v) for k, v in live if (k >= bound if reverse else k < bound)]
    return live[::-1] if reverse else live


def chunk_finders(chunks):
    """(after, before) finders that hand out a source's ``chunks``
    (ascending, disjoint) as they were cut, so the merge meets the chunk
    boundaries the strategy drew."""
    def after(key, inclusive):
        for chunk in chunks:
            if key is None or chunk[0][-1] > key or (inclusive and chunk[0][-1] == key):
                return filtered(chunk, key, inclusive, True)
        return EMPTY

    def before(key, inclusive):
        for chunk in reversed(chunks):
            if key is None or chunk[0][0] < key or (inclusive and chunk[0][0] == key):
                return filtered(chunk, key, inclusive, False)
        return EMPTY

    return after, before


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(sources(), st.none() | keys_strategy, st.booleans())
def test_merged_sources_agree_with_a_dict_merge(srcs, bound, reverse):
    finders = [chunk_finders(chunks)[1 if reverse else 0] for chunks in srcs]
    got = list(_live_merged(finders, None, True, bound, reverse, lambda: None, [True], None))
    assert got == reference(srcs, bound, reverse)


# -- whole views: level sources handed a whole level with bounds, seek chunks sized by density -----------


def test_seek_chunk_is_proportional_to_density_within_limits():
    assert seek_chunk(100_000, 100_000) == SEEK_CHUNK
    assert seek_chunk(25_000, 100_000) == 4
    assert seek_chunk(50_000, 100_000) == 8
    assert seek_chunk(1, 100_000) == 4  # never below the minimum
    assert seek_chunk(0, 0) == SEEK_CHUNK


@pytest.fixture(scope="module")
def layered():
    """A database whose view has a memtable, level-0 tables and a level of
    many small tables, with overwrites and deletes in every layer, and the
    dict it should read as."""
    path = tempfile.mkdtemp(prefix="lsmkv-view-")
    db = lsmkv.open(path, write_buffer_size=1 << 20, block_size=256, target_file_size=2048,
                     disable_auto_compactions=True)
    model: dict[bytes, bytes] = {}
    rng = random.Random(7)
    for n in range(0, 600, 2):  # the level: every even key
        key, value = b"k%04d" % n, b"base%d-" % n + b"v" * 40
        db.put(key, value)
        model[key] = value
    db.flush()
    db.compact_range()
    for layer in range(3):  # level-0 tables, then the memtable: sparse overwrites, deletes, new keys
        for _ in range(60):
            key = b"k%04d" % rng.randrange(620)
            if rng.random() < 0.3:
                db.delete(key)
                model.pop(key, None)
            else:
                value = b"L%d-%d" % (layer, rng.randrange(1000))
                db.put(key, value)
                model[key] = value
        if layer < 2:
            db.flush()
    levels = db.stats()["files_per_level"]
    assert levels[0] == 2 and sum(levels[1:]) > 5, levels
    yield db, model
    db.close()
    shutil.rmtree(path, ignore_errors=True)


VIEW_KEYS = st.integers(0, 640).map(lambda n: b"k%04d" % n) | st.sampled_from([b"", b"k", b"z"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(VIEW_KEYS | st.none(), VIEW_KEYS | st.none(), st.booleans(), st.integers(1, 40))
def test_bounded_scans_of_a_layered_view_agree_with_the_model(layered, start, end, reverse, limit):
    db, model = layered
    want = sorted((k, v) for k, v in model.items() if (start is None or k >= start) and (end is None or k < end))
    if reverse:
        want.reverse()
    assert list(islice(db.scan(start=start, end=end, reverse=reverse), limit)) == want[:limit]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(VIEW_KEYS | st.none(), VIEW_KEYS | st.none(), VIEW_KEYS, st.lists(st.booleans(), max_size=30))
def test_cursor_moves_in_a_layered_view_agree_with_the_model(layered, lower, upper, target, moves):
    """seek, then next() (True) or prev() (False) steps, within bounds."""
    db, model = layered
    keys = sorted(k for k in model if (lower is None or k >= lower) and (upper is None or k < upper))
    with db.iterator(lower_bound=lower, upper_bound=upper) as it:
        it.seek(target)
        at = bisect_left(keys, max(target, lower) if lower is not None else target)
        for forward in moves:
            if at < 0 or at >= len(keys):
                assert not it.valid()
                break
            assert it.valid() and it.key() == keys[at] and it.value() == model[keys[at]]
            if forward:
                it.next()
                at += 1
            else:
                it.prev()
                at -= 1


def test_each_source_of_a_view_is_one_object_whose_methods_are_its_finders(layered):
    """A view makes one object per source (memtable, level-0 tables, the
    level), newest first, whose after and before methods are the source's
    two finders: a scan's making costs an allocation per source, and the
    two directions share what the source remembers."""
    db, _ = layered
    st = db._state
    assert not st.range_dels and st.mem.range_dels is None  # (no wrapper around the sources)
    pairs = db._views.finders(st, db._last_seq, None, None)
    assert [type(after.__self__).__name__ for after, _ in pairs] == \
        ["MemTableSource", "TableSource", "TableSource", "LevelSource"]
    assert all(after.__self__ is before.__self__ for after, before in pairs)


def test_a_views_memtable_source_reads_a_first_chunk_sized_by_its_density(layered):
    """The memtable holds a few dozen keys beside a level of 300: its first
    chunk after a seek is the minimum (seek_chunk), not a skiplist node's
    worth, and going on from it reads four times as many."""
    db, model = layered
    st = db._state
    mem_keys = len(st.mem)
    assert 0 < mem_keys < 100, mem_keys
    densest = max(mem_keys, max(st.version.level_entries))
    size = seek_chunk(mem_keys, densest)
    assert size < 32
    after = db._views.finders(st, db._last_seq, None, None)[0][0]  # newest first: the memtable's
    keys = after(None, True)[0]
    assert len(keys) == size
    assert len(after(keys[-1], False)[0]) == min(4 * size, mem_keys - size)
