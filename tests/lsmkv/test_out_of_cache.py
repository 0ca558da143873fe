"""Reading a database larger than its block cache: memory stays bounded by
the cache, and a scan keeps reading tables that compaction replaced."""

from __future__ import annotations

import gc
import os
import random
import tracemalloc

import pytest

import lsmkv


def _fill(path, n, value_size=100, **options):
    rng = random.Random(5)
    keys = [rng.randbytes(16) for _ in range(n)]
    db = lsmkv.open(path, **options)
    for i, k in enumerate(keys):
        db.put(k, rng.randbytes(value_size))
    return db, keys


@pytest.mark.slow
def test_memory_stays_bounded_by_the_cache_on_data_several_times_its_size(tmp_path):
    cache = 1 << 20
    path = str(tmp_path / "db")
    db, keys = _fill(path, 60_000, block_cache_size=cache, write_buffer_size=1 << 20)
    db.compact_range()
    data_bytes = sum(db.stats()["bytes_per_level"])
    db.close()
    assert data_bytes > 4 * cache  # the data is several times the cache
    rng = random.Random(9)
    rounds = [rng.sample(keys, 20_000) for _ in range(3)]
    tracemalloc.start()
    try:
        before_open = tracemalloc.get_traced_memory()[0]
        db = lsmkv.open(path, block_cache_size=cache)
        for k in rounds[0]:  # opens every table, fills the cache
            assert db.get(k) is not None
        warm = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for sample in rounds[1:]:
            for k in sample:
                assert db.get(k) is not None
                assert db._block_cache.usage <= cache
        peak = tracemalloc.get_traced_memory()[1]
        # What the open tables keep outside the cache, as they report it (stats()["table_memory"]).
        resident = sum(sum(r.resident_bytes())
                       for r in (m.reader for level in db._state.version.levels for m in level) if r)
    finally:
        tracemalloc.stop()
    try:
        block_cache = db.stats()["block_cache"]
        assert block_cache["capacity"] == cache and block_cache["evicted"] > 0
        # Open, with the cache full: the cache, the tables' resident index and
        # filter, and a fixed overhead; not the data read through them.
        assert warm - before_open < cache + resident + (256 << 10), (warm - before_open, resident)
        # 40,000 more gets over data four times the cache allocate nothing that stays.
        assert peak - warm < 128 << 10, peak - warm
    finally:
        db.close()


def test_default_cache_size_follows_the_rule_and_says_so(tmp_path):
    from lsmkv.base.cache_size import DEFAULT_MAX, DEFAULT_MIN, DEFAULT_RULE, default_capacity
    assert default_capacity(256 << 20) == DEFAULT_MIN           # a small machine: the floor
    assert default_capacity(8 << 30) == 512 << 20               # 1/16
    assert default_capacity(1 << 40) == DEFAULT_MAX             # the ceiling
    with lsmkv.open(str(tmp_path / "d")) as db:
        info = db.stats()["block_cache"]
        assert info["capacity"] == default_capacity() and info["sizing"] == DEFAULT_RULE
    with lsmkv.open(str(tmp_path / "d"), block_cache_size=123456) as db:
        info = db.stats()["block_cache"]
        assert info["capacity"] == 123456 and info["sizing"] == "block_cache_size option"


@pytest.mark.slow
def test_a_scan_reads_tables_that_compaction_deleted_under_it(tmp_path):
    path = str(tmp_path / "db")
    db, keys = _fill(path, 20_000, write_buffer_size=256 << 10, block_cache_size=64 << 10,
                     disable_auto_compactions=True)
    try:
        db.flush()
        expected = list(db.scan())
        before = {f for f in os.listdir(path) if f.endswith(".sst")}
        assert len(before) > 3
        scan = db.scan()
        head = [next(scan) for _ in range(100)]
        db.compact_range()  # replaces every table the scan reads
        assert head + list(scan) == expected
        # The scan kept its tables (its Version) alive; once it is gone they go too.
        assert before <= {f for f in os.listdir(path) if f.endswith(".sst")}
        del scan
        gc.collect()
        db.put(b"another", b"write")
        db.compact_range()
        assert not before & {f for f in os.listdir(path) if f.endswith(".sst")}
    finally:
        db.close()


def test_stats_say_what_open_tables_keep_outside_the_cache(tmp_path):
    path = str(tmp_path / "db")
    db, keys = _fill(path, 20_000, write_buffer_size=256 << 10)
    try:
        db.compact_range()
        for k in keys[:100]:
            assert db.get(k) is not None
        memory = db.stats()["table_memory"]
        readers = [m.reader for level in db._state.version.levels for m in level if m.reader is not None]
        assert memory["tables"] == len(readers) == db.stats()["open_tables"] > 0
        filter_bytes = sum(r.filter.size_bytes for r in readers)
        # The filters' bit arrays (plus each one's object header), and at least
        # one index key's bytes per data block.
        assert filter_bytes <= memory["filter_bytes"] <= filter_bytes + 200 * len(readers)
        assert memory["index_bytes"] >= sum(len(k) for r in readers for k in r.index_keys)
    finally:
        db.close()
