"""The data blocks' compression back-off (lsmkv/lsm/table/block_compressor.py):
blocks that do not compress make the next ones skip the attempt, for
longer while the failures go on; a block that compresses ends it; what is
stored reads back the same either way."""

import os
import random

import pytest
import zstandard
from hypothesis import given, settings, strategies as st

import lsmkv
from lsmkv.base.errors import CorruptionError
from lsmkv.lsm.table.block_compressor import MAX_SKIPPED, BlockCompressor
from lsmkv.lsm.table.format import (NO_COMPRESSION, TRAILER_SIZE, ZSTD_COMPRESSION, compress_block,
                                    decode_stored_block)

RNG = random.Random(5)
NOISE = [RNG.randbytes(4096) for _ in range(8)]
TEXT = b"the same words again and again " * 132


def _kind(stored: bytes) -> int:
    return stored[-TRAILER_SIZE]


def test_failures_back_off_doubling_up_to_the_limit_and_a_success_ends_it():
    c = BlockCompressor(zstandard.ZstdCompressor(level=3))
    tried = []
    for i in range(400):
        before = c.attempts
        stored = c.store(NOISE[i % len(NOISE)])
        assert _kind(stored) == NO_COMPRESSION
        if c.attempts > before:
            tried.append(i)
    gaps = [b - a - 1 for a, b in zip(tried, tried[1:])]
    assert gaps[:8] == [1, 2, 4, 8, 16, 32, 64, 64] and set(gaps[6:]) == {MAX_SKIPPED}
    assert c.attempts + c.skipped == 400
    # Compressible blocks from here: the first attempt comes once the skip
    # runs out; from then on every block is tried and compressed.
    kinds = [_kind(c.store(TEXT)) for _ in range(MAX_SKIPPED + 10)]
    first = kinds.index(ZSTD_COMPRESSION)
    assert first <= MAX_SKIPPED and set(kinds[first:]) == {ZSTD_COMPRESSION}
    assert c.skip == 0 and c.backoff == 0


def test_compressible_blocks_are_never_skipped_and_no_compressor_never_tries():
    c = BlockCompressor(zstandard.ZstdCompressor(level=3))
    assert {_kind(c.store(TEXT)) for _ in range(100)} == {ZSTD_COMPRESSION}
    assert c.attempts == 100 and c.skipped == 0
    plain = BlockCompressor(None)
    assert {_kind(plain.store(TEXT)) for _ in range(10)} == {NO_COMPRESSION} and plain.attempts == 0


def test_a_skipped_block_is_stored_exactly_as_a_failed_attempt_stores_it():
    tried = BlockCompressor(zstandard.ZstdCompressor(level=3))
    first = tried.store(NOISE[0])
    assert tried.skip == 1
    skipped = tried.store(NOISE[0])
    assert tried.skipped == 1 and skipped == first
    assert decode_stored_block(skipped, "", 0) == NOISE[0]


def test_tables_of_random_values_try_few_blocks_and_read_back(tmp_path):
    rng = random.Random(9)
    keys = sorted({rng.randbytes(16) for _ in range(20_000)})
    noise = {k: rng.randbytes(100) for k in keys}
    text = {k: b"%08d words words words words words " % i * 3 for i, k in enumerate(keys)}
    for name, values in (("noise", noise), ("text", text)):
        path = str(tmp_path / f"{name}.sst")
        w = lsmkv.TableWriter(path)
        w.put_sorted(keys, [values[k] for k in keys])
        blocks = w._builder._data_blocks
        w.finish()
        if name == "noise":
            assert blocks.attempts * 20 < blocks.skipped  # about one block in MAX_SKIPPED + 1 tried
        else:
            assert blocks.skipped == 0
        assert dict(lsmkv.read_table(path)) == values


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3000)), min_size=0, max_size=12), st.integers(-1, 11),
       st.integers(0, 4))
def test_blocks_decoded_together_are_the_blocks_decoded_one_by_one(blocks, damaged, byte):
    """decode_stored_blocks (a scan's read-ahead and a compaction's input:
    the zstd frames decompressed in one call) returns what
    decode_stored_block returns for each block, compressed or stored raw;
    a damaged block among them is the CorruptionError decode_stored_block
    raises for it, naming its offset."""
    from lsmkv.lsm.table.format import decode_stored_block, decode_stored_blocks

    compressor = zstandard.ZstdCompressor(level=3)
    stored, offsets, at = [], [], 0
    for compressible, size in blocks:
        raw = (b"abcd" * size)[:size] if compressible else os.urandom(size)
        stored.append(compress_block(raw, compressor))
        offsets.append(at)
        at += len(stored[-1])
    if 0 <= damaged < len(stored) and len(stored[damaged]) > byte:
        bad = bytearray(stored[damaged])
        bad[byte] ^= 0x40
        stored[damaged] = bytes(bad)
        with pytest.raises(CorruptionError) as expected:
            decode_stored_block(stored[damaged], "t.sst", offsets[damaged])
        with pytest.raises(CorruptionError) as got:
            decode_stored_blocks(stored, "t.sst", offsets)
        assert str(got.value) == str(expected.value)
        return
    want = [decode_stored_block(block, "t.sst", offset) for block, offset in zip(stored, offsets)]
    assert decode_stored_blocks([memoryview(b) for b in stored], "t.sst", offsets) == want


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["text", "noise", "empty", "tiny"]), max_size=90), st.integers(0, 3))
def test_blocks_stored_many_at_a_time_are_the_blocks_stored_one_by_one(kinds, warmup):
    """store_many (a flush's and a compaction's blocks, compressed BATCH at a
    time by one zstd call) stores the bytes store stores, block by block,
    and leaves the back-off and its counters where store leaves them:
    through runs of blocks that compress, that do not, and the turns
    between them, from any back-off state."""
    pick = {"text": lambda i: (b"lsmkv block %d " % i) * 300, "noise": lambda i: NOISE[i % len(NOISE)],
            "empty": lambda i: b"", "tiny": lambda i: b"x"}
    raws = [pick[kind](i) for i, kind in enumerate(kinds)]
    one, many = (BlockCompressor(zstandard.ZstdCompressor(level=3)) for _ in range(2))
    for compressor in (one, many):
        for i in range(warmup):  # (a back-off in progress)
            compressor.store(NOISE[i])
    want = [one.store(raw) for raw in raws]
    assert many.store_many(raws) == want
    assert (many.skip, many.backoff, many.attempts, many.skipped) == (one.skip, one.backoff, one.attempts, one.skipped)
