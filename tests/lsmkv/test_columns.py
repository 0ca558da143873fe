"""Columns (table/columns.py) and the bulk bloom hash: the vectorized
compaction path must agree byte for byte with the per-entry code."""

from __future__ import annotations

import random

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsmkv.base.errors import CorruptionError
from lsmkv.lsm.table.block import decode_block, encode_block
from lsmkv.lsm.table.bloom import bloom_hash, bloom_hash_list, bloom_hashes, murmur3_first_word
from lsmkv.lsm.table.columns import Columns

entry = st.tuples(st.binary(max_size=40), st.integers(0, (1 << 56) - 1), st.integers(0, 1), st.binary(max_size=60))


def blocks_of(rows_per_block):
    return [encode_block([k for k, _, _, _ in rows], [s << 8 | kind for _, s, kind, _ in rows],
                         [v for _, _, _, v in rows]) for rows in rows_per_block]


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(entry, max_size=12), max_size=8))
def test_from_blocks_decodes_what_the_block_codec_decodes(rows_per_block):
    raws = blocks_of(rows_per_block)
    cols = Columns.from_blocks(raws)
    expected = []
    for raw in raws:
        block = decode_block(raw)
        expected.extend(zip(block.keys, block.seq_kinds, block.values()))
    assert len(cols) == len(expected)
    got = list(zip(cols.keys(), cols.seq_kinds.tolist(),
                   [cols.data[o:o + n] for o, n in zip(cols.voff.tolist(), cols.vlen.tolist())]))
    assert got == expected


def test_from_blocks_reports_damage_with_the_block_offset():
    good = encode_block([b"a", b"b"], [1 << 8 | 1, 2 << 8 | 1], [b"x", b"yy"])
    with pytest.raises(CorruptionError, match="too short") as exc:
        Columns.from_blocks([good, b"\x01"], "t.sst", [100, 200])
    assert exc.value.offset == 200
    claims = good[:-4] + (1000).to_bytes(4, "little")
    with pytest.raises(CorruptionError, match="claims 1000 entries") as exc:
        Columns.from_blocks([good, claims], "t.sst", [100, 200])
    assert exc.value.offset == 200
    # Keys "ab", values "xyy", then key ends [1, 2] at byte 5, value ends [3, 5] at 13.
    assert good[5:21] == b"".join(x.to_bytes(4, "little") for x in (1, 2, 3, 5))
    # Last value end 5 -> 4: the values no longer end where the columns start.
    uneven = good[:17] + (4).to_bytes(4, "little") + good[21:]
    with pytest.raises(CorruptionError, match="do not add up") as exc:
        Columns.from_blocks([uneven, good], "t.sst", [100, 200])
    assert exc.value.offset == 100
    # First key end 1 -> 3: past the second key's end.
    backwards = good[:5] + (3).to_bytes(4, "little") + good[9:]
    with pytest.raises(CorruptionError, match="out of order") as exc:
        Columns.from_blocks([good, backwards], "t.sst", [100, 200])
    assert exc.value.offset == 200


def test_from_blocks_reads_format_1_blocks_stored_with_lengths():
    from lsmkv.lsm.table.block import CODEC_LENGTHS
    rng = random.Random(7)
    keys = sorted({rng.randbytes(rng.randrange(1, 9)) for _ in range(40)})
    values = [rng.randbytes(rng.randrange(0, 30)) for _ in keys]
    sks = [(i + 1) << 8 | 1 for i in range(len(keys))]
    v1 = []
    for a, b in ((0, 15), (15, len(keys))):
        k, v = keys[a:b], values[a:b]
        v1.append(b"".join(k) + b"".join(v) + b"".join(len(x).to_bytes(4, "little") for x in k)
                  + b"".join(len(x).to_bytes(4, "little") for x in v)
                  + b"".join(x.to_bytes(8, "little") for x in sks[a:b]) + (b - a).to_bytes(4, "little"))
    cols = Columns.from_blocks(v1, codec=CODEC_LENGTHS)
    assert cols.keys() == keys
    assert [cols.data[o:o + n] for o, n in zip(cols.voff.tolist(), cols.vlen.tolist())] == values
    assert cols.seq_kinds.tolist() == sks
    assert decode_block(v1[0], codec=CODEC_LENGTHS).keys == keys[:15]


@pytest.mark.parametrize("lengths", ["same", "few", "many", "contiguous"])
def test_gather_copies_the_named_pieces_in_order(lengths):
    rng = random.Random(lengths)
    data = rng.randbytes(20_000)
    n = 2000
    if lengths == "same":
        sizes = [37] * n
    elif lengths == "few":
        sizes = [rng.choice((0, 5, 16, 100)) for _ in range(n)]
    else:
        sizes = [rng.randrange(0, 60) for _ in range(n)]
    if lengths == "contiguous":
        offsets = [int(x) for x in np.cumsum([0] + sizes[:-1])]
        data = rng.randbytes(sum(sizes))
    else:
        offsets = [rng.randrange(0, len(data) - s + 1) for s in sizes]
    cols = Columns(data, *(np.zeros(0, dtype=np.int64),) * 4, np.zeros(0, dtype=np.uint64))
    got = cols.gather(np.array(offsets, dtype=np.int64), np.array(sizes, dtype=np.int64))
    assert got == b"".join(data[o:o + s] for o, s in zip(offsets, sizes))


def test_bulk_bloom_hashes_are_mmh3():
    rng = random.Random(5)
    keys = [rng.randbytes(n) for n in [0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 48, 100] for _ in range(20)]
    keys += [rng.randbytes(16) for _ in range(500)] + [b"\x00" * 16, b"\xff" * 16]
    data = b"".join(keys)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    expected = [mmh3.hash64(k, 0, signed=False)[0] for k in keys]
    assert expected == [bloom_hash(k) for k in keys]
    assert bloom_hashes(data, offsets, lengths).tolist() == expected
    same = np.array(range(20 * 5, 20 * 6))  # the 16-byte keys alone: one length
    assert bloom_hashes(data, offsets[same], lengths[same]).tolist() == [expected[i] for i in same]
    # the C form (the compiled build's bloom_hash), on either build
    assert [murmur3_first_word(k) for k in keys] == expected
    flags = [i % 3 != 0 for i in range(len(keys))]
    assert bloom_hash_list(keys, flags) == [h for h, f in zip(expected, flags) if f]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_the_bloom_hash_of_any_key_is_mmh3s(key):
    """The compiled build hashes keys with its own MurmurHash3
    (murmur3_first_word, C integers); every length's tail and block
    handling must give mmh3's first word, as both builds' bloom_hash do."""
    expected = mmh3.mmh3_x64_128_utupledigest(key, 0)[0]
    assert murmur3_first_word(key) == bloom_hash(key) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=6), max_size=60))
def test_sort_order_is_byte_order_even_with_trailing_zero_bytes(keys):
    raws = blocks_of([[(k, i, 1, b"") for i, k in enumerate(keys)]]) if keys else []
    cols = Columns.from_blocks(raws)
    order = cols.stable_order().tolist()
    assert [keys[i] for i in order] == sorted(keys)
    run = cols.take(np.array(order, dtype=np.int64))
    assert run.is_sorted()
    s = sorted(keys)
    assert run.same_as_previous().tolist() == [i > 0 and s[i] == s[i - 1] for i in range(len(s))]


def test_a_run_whose_keys_and_values_are_all_empty_compares_without_any_bytes():
    # Columns over no bytes at all (TableWriter.put_columns of empty keys and
    # values): the padded keys are all zero-length, never read from the buffer.
    z = np.zeros(3, dtype=np.int64)
    cols = Columns(b"", z, z, z, z, np.ones(3, dtype=np.uint64))
    assert cols.is_sorted() and not cols.is_strictly_ascending()
    assert cols.same_as_previous().tolist() == [False, True, True]
    assert Columns(b"", z[:1], z[:1], z[:1], z[:1], np.ones(1, dtype=np.uint64)).is_strictly_ascending()
