"""SSTables: block codec, bloom filter, builder/reader round trips, corruption."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from lsmkv.base.cursor import visible_entries
from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.lsm.cache import BlockCache
from lsmkv.lsm.cursor import table_source
from lsmkv.lsm.table.block import RAW_BLOCK_OVERHEAD, Block, decode_block, encode_block
from lsmkv.lsm.table.bloom import (VECTOR_MIN, BloomFilter, bloom_hash, build_filter, expected_false_positive_rate,
                                   filter_bits)
from lsmkv.lsm.table.builder import TableBuilder, run_counts
from lsmkv.lsm.table.format import FOOTER_SIZE
from lsmkv.lsm.table.reader import PROMOTE_AFTER, PROMOTION_SPACING, TableReader
from lsmkv.lsm.write_batch import TOMBSTONE, VALUE


def build(path, entries, **kw):
    f = DEFAULT_FS.create(str(path))
    b = TableBuilder(f, **kw)
    for e in entries:
        b.add(*e)
    props = b.finish()
    f.sync()
    f.close()
    return props


def internal_entries(draw_keys, rng):
    """(key, seq, kind, value) in internal order with several versions per key."""
    seq = 10_000
    out = []
    for k in sorted(set(draw_keys)):
        for _ in range(rng.randint(1, 3)):
            seq -= 1
            kind = rng.choice([VALUE, VALUE, TOMBSTONE])
            out.append((k, seq, kind, rng.randbytes(rng.randint(0, 30)) if kind else b""))
    return out


@given(st.lists(st.tuples(st.binary(max_size=12), st.integers(0, 2**56 - 1), st.integers(0, 1),
                          st.binary(max_size=40)), max_size=50))
def test_block_round_trip(rows):
    block = decode_block(encode_block([r[0] for r in rows], [r[1] << 8 | r[2] for r in rows], [r[3] for r in rows]))
    assert block.keys == [r[0] for r in rows]
    assert [block.value(i) for i in range(len(rows))] == [r[3] for r in rows]
    assert [sk >> 8 for sk in block.seq_kinds] == [r[1] for r in rows]


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_block_decoder_rejects_garbage_cleanly(data):
    try:
        block = decode_block(data)
    except CorruptionError:
        return
    for i in range(len(block)):
        block.value(i)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=10), max_size=300), st.integers(0, 2**32), st.sampled_from([64, 512, 4096]),
       st.sampled_from(["zstd", None]))
def test_table_round_trip(tmp_path_factory, keys, seed, block_size, compression):
    rng = random.Random(seed)
    entries = internal_entries(keys, rng)
    path = tmp_path_factory.mktemp("t") / "000001.sst"
    props = build(path, entries, block_size=block_size, compression=compression)
    assert props.entries == len(entries)
    reader = TableReader(DEFAULT_FS, str(path), 1, BlockCache(1 << 20))
    assert [(k, sk >> 8, sk & 0xFF, v) for k, sk, v in reader.entries()] == entries
    newest = {}
    for k, seq, kind, v in entries:
        newest.setdefault(k, (kind, v))
    for k, (kind, v) in newest.items():
        assert reader.get(k, bloom_hash(k), 2**56) == (kind, v)
        assert reader.filter.may_contain(bloom_hash(k))
    visible = [(k, kind, v) for k, (kind, v) in sorted(newest.items())]
    assert list(visible_entries(table_source(reader, 2**56))) == visible
    assert list(visible_entries(table_source(reader, 2**56), reverse=True)) == visible[::-1]
    if len(visible) > 2:
        lo, hi = visible[1][0], visible[-1][0]
        assert list(visible_entries(table_source(reader, 2**56), lo, hi)) == [x for x in visible if lo <= x[0] < hi]
        assert list(visible_entries(table_source(reader, 2**56), lo, hi, reverse=True)) == [x for x in visible if lo <= x[0] < hi][::-1]
    # Reading at an older sequence sees older versions.
    mid = 10_000 - len(entries) // 2
    expected_mid = {}
    for k, seq, kind, v in entries:
        if seq <= mid:
            expected_mid.setdefault(k, (kind, v))
    for k in newest:
        assert reader.get(k, bloom_hash(k), mid) == expected_mid.get(k)
    assert list(visible_entries(table_source(reader, mid))) == [(k, kind, v) for k, (kind, v) in sorted(expected_mid.items())]
    reader.close()


def test_builder_rejects_out_of_order(tmp_path):
    f = DEFAULT_FS.create(str(tmp_path / "x.sst"))
    b = TableBuilder(f)
    b.add(b"b", 5, VALUE, b"")
    with pytest.raises(ValueError, match="out of order"):
        b.add(b"a", 4, VALUE, b"")
    with pytest.raises(ValueError, match="out of order"):
        b.add(b"b", 6, VALUE, b"")
    f.close()


def test_bloom_false_positive_rate_matches_formula():
    rng = random.Random(11)
    keys = {rng.randbytes(16) for _ in range(20000)}
    probes = [rng.randbytes(17) for _ in range(50000)]
    for bits_per_key in (5, 10, 15):
        bloom = BloomFilter(build_filter([bloom_hash(k) for k in keys], bits_per_key))
        assert all(bloom.may_contain(bloom_hash(k)) for k in keys)
        measured = sum(bloom.may_contain(bloom_hash(p)) for p in probes) / len(probes)
        expected = expected_false_positive_rate(bits_per_key)
        # Within 40% of the formula (and the formula at 10 bits is ~0.8%).
        assert expected * 0.6 <= measured <= expected * 1.4, (bits_per_key, measured, expected)


@pytest.mark.parametrize("bits_per_key", [1, 10, 40])
def test_bloom_batch_answers_as_each_key_alone(bits_per_key):
    """may_contain_many (numpy from VECTOR_MIN hashes on, Python below)
    answers exactly what may_contain answers for each hash, for filters of
    few and many probes (k = 1, 7, 28), members and non-members alike."""
    rng = random.Random(bits_per_key)
    keys = [rng.randbytes(rng.randint(0, 40)) for _ in range(3000)]
    bloom = BloomFilter(build_filter([bloom_hash(k) for k in keys[:1500]], bits_per_key))
    hashes = [bloom_hash(k) for k in keys] + [0, 2**64 - 1, 2**32 - 1, 2**32]
    expected = [bloom.may_contain(h) for h in hashes]
    assert True in expected and False in expected
    assert bloom.may_contain_many(hashes) == expected
    for n in (1, VECTOR_MIN - 1, VECTOR_MIN):
        assert bloom.may_contain_many(hashes[-n:]) == expected[-n:]
    assert bloom.may_contain_many([]) == []
    assert BloomFilter(b"").may_contain_many(hashes[:3]) == [True] * 3


@pytest.mark.parametrize("bloom_bits_per_key", [10, 0])
def test_get_many_answers_as_get_in_every_block_state(tmp_path, bloom_bits_per_key):
    """TableReader.get_many gives each key what get gives it (with a bloom
    filter and without one) -- over keys
    with several versions (some running across blocks), tombstones, absent
    keys, read sequences that hide the newest versions -- with blocks
    uncached, cached raw, promoted into the key index, and in a cache too
    small to keep them (evictions during the batch); the keys it has
    nothing for come back in order."""
    rng = random.Random(5)
    entries = []
    seq = 100_000
    older = []  # read sequences that see only the oldest versions of a key spanning blocks
    for i in range(0, 3000, 2):
        versions = 40 if i % 500 == 0 else rng.randint(1, 3)  # a few keys span blocks
        for _ in range(versions):
            seq -= 1
            kind = VALUE if i % 500 == 0 or rng.random() < 0.8 else TOMBSTONE
            entries.append((b"k%05d" % i, seq, kind, b"v%d" % seq if kind == VALUE else b""))
        if versions == 40:
            older.append(seq + 2)
    path = tmp_path / "000007.sst"
    build(path, entries, block_size=512, bloom_bits_per_key=bloom_bits_per_key)
    probes = sorted({b"k%05d" % rng.randrange(3100) for _ in range(700)} | {b"k00000", b"k00500", b"k02000"})
    assert len(probes[::20]) < VECTOR_MIN <= len(probes)
    for capacity in (1 << 22, 4096):
        reader = TableReader(DEFAULT_FS, str(path), 7, BlockCache(capacity))
        for read_seq in (2**56, seq + 2500, seq + 40, 0, *older) * (PROMOTE_AFTER + 1):
            expected = {k: reader.get(k, None, read_seq) for k in probes}
            for subset in (probes, probes[::20]):  # the filter asked with numpy, and key by key
                found = {}
                still = reader.get_many(subset, read_seq, found)
                assert found == {k: expected[k] for k in subset if expected[k] is not None}
                assert still == [k for k in subset if expected[k] is None]
        assert (reader.filter.bits is None) == (bloom_bits_per_key == 0)
        if capacity == 1 << 22:
            assert reader.key_slots  # the keys of promoted blocks answered too


@pytest.mark.parametrize("bits_per_key", [1, 4, 10])
def test_a_table_lookup_past_its_filter_happens_exactly_when_the_filter_may_contain_the_key(tmp_path, bits_per_key):
    """TableReader.get's inlined filter probes (C integers and the filter's
    bytes in the compiled build, the bitarray in the pure one) answer what
    BloomFilter.may_contain answers: a get of an absent key searches the
    table (io.searches) exactly when the filter lets it through, and never
    when it does not; with 1, 3 and 7 probes."""
    rng = random.Random(bits_per_key)
    entries = [(b"key%06d" % i, 1000 + i, VALUE, b"v") for i in range(0, 6000, 3)]
    path = tmp_path / "000009.sst"
    build(path, entries, block_size=1024, bloom_bits_per_key=bits_per_key)
    reader = TableReader(DEFAULT_FS, str(path), 9, None)
    absent = [b"key%06d" % i for i in range(1, 6000, 3)] + [rng.randbytes(rng.randint(0, 30)) for _ in range(3000)]
    passed = [k for k in absent if reader.filter.may_contain(bloom_hash(k))]
    assert 0 < len(passed) < len(absent)
    for k in absent:
        searches = reader._io.searches
        assert reader.get(k, None, 2**56) is None
        assert reader._io.searches - searches == (k in passed), k
    for key, _, _, _ in entries[::50]:  # present keys always get through
        assert reader.get(key, None, 2**56) == (VALUE, b"v")


def test_empty_filter_admits_everything():
    assert BloomFilter(b"").may_contain(bloom_hash(b"anything"))
    assert build_filter([1, 2, 3], 0) == b""


def test_corrupted_data_block_is_detected_never_returned(tmp_path):
    path = tmp_path / "000002.sst"
    entries = [(b"key%05d" % i, 100000 - i, VALUE, b"value%05d" % i) for i in range(2000)]
    build(path, entries, compression=None)
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0x10  # inside the first data block
    path.write_bytes(bytes(raw))
    reader = TableReader(DEFAULT_FS, str(path), 2, None)
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        reader.get(b"key00000", bloom_hash(b"key00000"), 2**56)
    assert info.value.path == str(path) and info.value.offset == 0
    # A cursor, which reads this table's blocks in place (one version per
    # key), reads the block through the same checks.
    assert reader.reads_in_place(2**56)
    with pytest.raises(CorruptionError, match="checksum mismatch"):
        next(visible_entries(table_source(reader, 2**56), b"key00001"))
    # Other blocks still read fine.
    assert reader.get(b"key01999", bloom_hash(b"key01999"), 2**56) == (VALUE, b"value01999")
    assert next(visible_entries(table_source(reader, 2**56), b"key01999")) == (b"key01999", VALUE, b"value01999")


def test_corrupted_footer_and_truncation(tmp_path):
    path = tmp_path / "000003.sst"
    build(path, [(b"a", 1, VALUE, b"1")])
    raw = path.read_bytes()
    path.write_bytes(raw[:-3])
    with pytest.raises(CorruptionError):
        TableReader(DEFAULT_FS, str(path), 3, None)
    bad = bytearray(raw)
    bad[-FOOTER_SIZE + 2] ^= 1
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptionError, match="footer checksum"):
        TableReader(DEFAULT_FS, str(path), 3, None)
    path.write_bytes(b"")
    with pytest.raises(CorruptionError, match="too short"):
        TableReader(DEFAULT_FS, str(path), 3, None)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_single_bit_flip_is_detected(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("flip") / "000004.sst"
    entries = [(b"k%03d" % i, 1000 - i, VALUE, b"v" * (i % 7)) for i in range(200)]
    build(path, entries, block_size=256)
    raw = bytearray(path.read_bytes())
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= 1 << data.draw(st.integers(0, 7))
    path.write_bytes(bytes(raw))
    # Every byte of a table is covered by a checksum (blocks, their trailers,
    # the footer), so opening and reading all of it must notice the flip.
    with pytest.raises(CorruptionError):
        reader = TableReader(DEFAULT_FS, str(path), 4, None)
        list(reader.entries())


def reader_of_blocks(tmp_path, n):
    """A table of ``n`` one-entry blocks, open without a cache of its own:
    the cache tests admit into it what they like."""
    path = tmp_path / "000009.sst"
    build(path, [(b"k%06d" % i, 10 + i, VALUE, b"v") for i in range(n)], block_size=1, compression=None)
    reader = TableReader(DEFAULT_FS, str(path), 9, None)
    assert len(reader.blocks) == n
    return reader


def test_block_cache_evicts_by_charge_with_second_chance(tmp_path):
    cache = BlockCache(100)
    r = reader_of_blocks(tmp_path, 5)
    cache.admit(r, 0, b"block 0", 40)
    cache.admit(r, 1, b"block 1", 40)
    r.refs[0] = 1  # block 0 was read since it was admitted
    cache.admit(r, 2, b"block 2", 40)  # evicts 1 (0 gets a second chance)
    assert r.blocks[0] is not None and r.blocks[1] is None and r.blocks[2] is not None
    assert cache.usage == 80 and cache.evicted == 1
    cache.admit(r, 3, b"huge", 1000)  # larger than the cache: not kept
    assert r.blocks[3] is None
    cache.drop_reader(r)
    assert cache.usage == 0 and r.blocks == [None] * 5
    cache.admit(r, 4, b"small", 10)
    assert cache.usage == 10


def test_a_cached_raw_block_adds_no_object_the_garbage_collector_walks(tmp_path):
    """The cache's queue holds a block's reader and index side by side: a
    (reader, index) pair per block would be one more tracked object, walked
    by every full collection, for each of the tens of thousands a store's
    cache holds."""
    import gc
    cache = BlockCache(1 << 30)
    r = reader_of_blocks(tmp_path, 20_000)
    blocks = [b"raw block %d" % i for i in range(20_000)]
    gc.collect()
    before = len(gc.get_objects())
    for i, raw in enumerate(blocks):
        cache.admit(r, i, raw, 100)
    gc.collect()
    assert len(cache) == 20_000
    assert len(gc.get_objects()) - before < 100


def test_reader_serves_blocks_from_the_cache(tmp_path):
    path = tmp_path / "000005.sst"
    build(path, [(b"k%04d" % i, 10_000 - i, VALUE, b"v" * 50) for i in range(2000)])
    cache = BlockCache(1 << 20)
    reader = TableReader(DEFAULT_FS, str(path), 5, cache)
    reads = reader._io.block_reads
    assert reader.get(b"k0100", bloom_hash(b"k0100"), 2**56) == (VALUE, b"v" * 50)
    assert reader._io.block_reads == reads + 1
    assert reader.get(b"k0101", bloom_hash(b"k0101"), 2**56) == (VALUE, b"v" * 50)
    assert reader._io.block_reads == reads + 1  # same block, from the cache
    assert cache.usage > 0


def test_promotions_are_spaced_by_searches_and_every_block_in_use_gets_its_turn(tmp_path):
    """Many blocks reaching PROMOTE_AFTER uses at once are promoted one per
    PROMOTION_SPACING searches (a get's work bounds the decoding it pays
    for), and the ones passed over are promoted on later uses."""
    path = tmp_path / "000007.sst"
    build(path, [(b"k%04d" % i, 10_000 - i, VALUE, b"v%04d" % i) for i in range(4000)])
    cache = BlockCache(1 << 24)
    reader = TableReader(DEFAULT_FS, str(path), 7, cache)
    firsts = [reader.block(b).keys[0] for b in range(len(reader.index_keys))]
    assert len(firsts) >= 8
    # Every block's first key, round after round: all blocks reach
    # PROMOTE_AFTER uses in the same round.
    for _ in range(PROMOTE_AFTER):
        for key in firsts:
            assert reader.get(key, None, 2**56) == (VALUE, b"v" + key[1:])
    searches = reader._io.searches
    assert 1 <= cache.promoted <= 1 + searches // PROMOTION_SPACING < len(firsts)
    # A promoted block's keys are answered by the key index, which is not a
    # search: the blocks left are promoted at the pace of their own searches.
    for _ in range(len(firsts) * PROMOTION_SPACING):
        if cache.promoted == len(firsts):
            break
        for key in firsts:
            assert reader.get(key, None, 2**56) == (VALUE, b"v" + key[1:])
        assert cache.promoted <= 1 + reader._io.searches // PROMOTION_SPACING
    assert all(reader.indexed) and cache.promoted == len(firsts)


def test_a_cached_block_is_searched_raw_until_it_keeps_being_used(tmp_path):
    path = tmp_path / "000006.sst"
    build(path, [(b"k%04d" % i, 10_000 - i, VALUE, b"v%04d" % i) for i in range(2000)])
    cache = BlockCache(1 << 20)
    reader = TableReader(DEFAULT_FS, str(path), 6, cache)
    assert reader.get(b"k0100", bloom_hash(b"k0100"), 2**56) == (VALUE, b"v0100")
    i = next(n for n, b in enumerate(reader.blocks) if b is not None)
    assert type(reader.blocks[i]) is bytes and reader.key_slots == {}  # held raw, not indexed
    raw_charge = cache.usage
    for n in range(PROMOTE_AFTER - 1):
        assert reader.get(b"k0101", None, 2**56) == (VALUE, b"v0101")
        assert type(reader.blocks[i]) is bytes
    assert reader.get(b"k0102", None, 2**56) == (VALUE, b"v0102")  # its PROMOTE_AFTER-th use
    assert type(reader.blocks[i]) is Block and reader.indexed[i]
    assert b"k0100" in reader.key_slots and b"k0101" in reader.key_slots and cache.promoted == 1
    assert cache.usage == reader.blocks[i].charge > raw_charge
    assert reader.get(b"k0103", None, 2**56) == (VALUE, b"v0103")  # from the key index
    # A cache with room for one decoded block: loading others evicts it, keys and all.
    small = BlockCache(reader.blocks[i].charge + 1)
    reader = TableReader(DEFAULT_FS, str(path), 6, small)
    for _ in range(PROMOTE_AFTER + 1):
        assert reader.get(b"k0100", None, 2**56) == (VALUE, b"v0100")
    assert reader.key_slots and small.promoted == 1
    for key in (b"k1900", b"k0500", b"k1000", b"k0100"):
        assert reader.get(key, None, 2**56) == (VALUE, b"v" + key[1:])
    held = [n for n, b in enumerate(reader.blocks) if b is not None]
    assert small.usage == sum(reader.charges[n] for n in held) <= small.capacity
    assert small.evicted >= 1 and b"k0100" not in reader.key_slots
    assert all(reader.blocks[slot >> 32] is not None for slot in reader.key_slots.values())
    # A block whose decoded form cannot fit is not promoted: it is let go.
    tiny = BlockCache(len(reader.block(0).data) + RAW_BLOCK_OVERHEAD + 1)
    reader = TableReader(DEFAULT_FS, str(path), 6, tiny)
    for _ in range(PROMOTE_AFTER + 1):
        assert reader.get(b"k0000", None, 2**56) == (VALUE, b"v0000")
    assert tiny.promoted == 0 and reader.key_slots == {} and tiny.usage <= tiny.capacity
    # Indexing a block the cache has let go meanwhile does nothing.
    block = reader.block(0)
    tiny.drop_reader(reader)
    reader.index_block(0, block)
    assert reader.key_slots == {} and not any(reader.indexed) and tiny.usage == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, (1 << 56) - 1), st.integers(0, 5)), min_size=1, max_size=50))
def test_a_sorted_runs_counts_are_its_kinds_and_sequences(entries):
    """run_counts (a flush's properties of a run; compiled: one C loop)
    counts the tombstones (kind 0), merge operands (4) and values with a
    ttl (2), and finds the smallest and largest sequence, on both builds."""
    seq_kinds = [seq << 8 | kind for seq, kind in entries]
    kinds = [kind for _, kind in entries]
    seqs = [seq for seq, _ in entries]
    assert run_counts(seq_kinds) == (kinds.count(0), kinds.count(4), kinds.count(2), min(seqs), max(seqs))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=300), st.integers(1, 20))
def test_a_filter_built_from_a_list_is_the_filter_numpy_builds(hashes, bits_per_key):
    """build_filter from a list (a flush's hashes; compiled: filter_bits,
    one C loop) and from an array (numpy's probes) give the same bytes, on
    both builds."""
    import numpy as np
    from_array = build_filter(np.array(hashes, dtype=np.uint64), bits_per_key)
    assert build_filter(list(hashes), bits_per_key) == from_array
    k = from_array[4]
    m = int.from_bytes(from_array[:4], "little")
    assert bytes(filter_bits(list(hashes), m, k)) == from_array[5:]
