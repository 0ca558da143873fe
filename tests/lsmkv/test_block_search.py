"""Searching a block in its raw bytes (block.search_block) agrees with a
search of the decoded block, and a table's point lookups agree with its
entries, whichever way the block is held (raw, decoded, not cached); so do
range reads of a block in place (block.entries_after) and a table cursor
that reads its blocks in place."""

from __future__ import annotations

import bisect
import struct

import pytest
from hypothesis import given, settings, strategies as st

from lsmkv.base.cursor import visible_entries
from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.lsm.cache import BlockCache
from lsmkv.lsm.cursor import table_source
from lsmkv.lsm.table.block import (CONTINUE, Block, _columns_in_place, _ends_ascending_in_place, _fixed_run,
                                   _unpack_count,
                                   _unpack_entry,
                                   _unpack_pair, check_block, decode_block, encode_block, entries_after,
                                   fixed_widths, search_block)
from lsmkv.lsm.table.builder import TableBuilder
from lsmkv.lsm.table.reader import PROMOTE_AFTER, TableReader

# Keys from a small alphabet and short lengths: many share prefixes, and
# some are prefixes of others ("ab" < "ab\x00" < "abc").
keys_strategy = st.binary(min_size=0, max_size=5).map(lambda b: bytes(x % 3 + 0x61 if x > 2 else x for x in b))


def candidate_keys(keys, probes):
    """Keys to look up in a block of ``keys``: the first and last, every
    key, absent keys before, between and beyond them, and prefixes."""
    candidates = set(keys) | set(probes) | {b"", b"\xff" * 6}
    for k in keys:
        candidates |= {k + b"\x00", k[:-1]}
    return sorted(candidates)


def decoded_search(keys, seq_kinds, values, key, read_seq):
    """The reference: bisect the decoded keys, then walk the key's versions."""
    j = bisect.bisect_left(keys, key)
    while j < len(keys):
        if keys[j] != key:
            return None
        if seq_kinds[j] >> 8 <= read_seq:
            return seq_kinds[j] & 0xFF, values[j]
        j += 1
    return CONTINUE


@st.composite
def blocks(draw):
    """Entries in internal order: keys ascending, each with 1-3 versions, newest first."""
    keys = sorted(set(draw(st.lists(keys_strategy, max_size=40))))
    entries = []
    for key in keys:
        seqs = sorted(draw(st.lists(st.integers(0, 50), min_size=1, max_size=3, unique=True)), reverse=True)
        for seq in seqs:
            # Values often made of the keys' letters: a key may occur in the values.
            value = draw(st.one_of(st.binary(max_size=12), keys_strategy, keys_strategy.map(lambda b: b * 2)))
            entries.append((key, seq << 8 | draw(st.sampled_from([0, 1])), value))
    return entries


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(blocks(), st.lists(keys_strategy, max_size=6), st.integers(0, 60))
def test_raw_search_agrees_with_a_decoded_search(entries, probes, read_seq):
    keys = [k for k, _, _ in entries]
    sks = [s for _, s, _ in entries]
    values = [v for _, _, v in entries]
    raw = encode_block(keys, sks, values)
    check_block(raw)
    block = decode_block(raw)
    assert block.keys == keys and block.values() == values and block.seq_kinds.tolist() == sks
    for key in candidate_keys(keys, probes):
        for seq in (read_seq, 0, 1 << 56):
            assert search_block(raw, key, seq) == decoded_search(keys, sks, values, key, seq), (key, seq)


@st.composite
def fixed_length_blocks(draw):
    """Entries whose keys all have one length, from a two-letter alphabet:
    a key's bytes often occur inside or across other keys, so the search
    of the key column (search_block's path for keys of one length) meets
    matches it must not take."""
    length = draw(st.integers(1, 4))
    two_letters = st.binary(max_size=12).map(lambda b: bytes(0x61 + x % 2 for x in b))
    keys = sorted(set(draw(st.lists(st.binary(min_size=length, max_size=length).map(
        lambda b: bytes(0x61 + x % 2 for x in b)), max_size=40))))
    entries = []
    for key in keys:
        seqs = sorted(draw(st.lists(st.integers(0, 50), min_size=1, max_size=3, unique=True)), reverse=True)
        for seq in seqs:
            # Values of the same two letters too: the substring search runs on into the values.
            value = draw(st.one_of(st.binary(max_size=12), two_letters))
            entries.append((key, seq << 8 | draw(st.sampled_from([0, 1])), value))
    return entries, length


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(fixed_length_blocks(), st.integers(0, 60))
def test_raw_search_of_keys_of_one_length_agrees_with_a_decoded_search(block, read_seq):
    entries, length = block
    keys = [k for k, _, _ in entries]
    sks = [s for _, s, _ in entries]
    values = [v for _, _, v in entries]
    raw = encode_block(keys, sks, values)
    check_block(raw)
    probes = {bytes(0x61 + (i >> b) % 2 for b in range(length)) for i in range(1 << length)}
    for key in candidate_keys(keys, sorted(probes)):
        for seq in (read_seq, 0, 1 << 56):
            assert search_block(raw, key, seq) == decoded_search(keys, sks, values, key, seq), (key, seq)


@st.composite
def nearly_fixed_length_keys(draw):
    """Keys whose lengths add up to n times the first key's length, all of
    that length or some longer and some shorter: decode_block splits keys
    of one length with one unpack, and must take only blocks whose every
    key has it."""
    length = draw(st.integers(1, 5))
    n = draw(st.integers(1, 30))
    lengths = [length] * n
    for _ in range(draw(st.integers(0, 3))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        moved = draw(st.integers(0, lengths[i]))
        lengths[i] -= moved
        lengths[j] += moved
    return [draw(st.binary(min_size=k, max_size=k)) for k in lengths]


@settings(max_examples=300, deadline=None)
@given(nearly_fixed_length_keys(), st.booleans())
def test_decoding_splits_keys_by_their_offsets_whatever_their_lengths(keys, lengths_codec):
    from lsmkv.lsm.table.block import CODEC_LENGTHS, CODEC_OFFSETS
    values = [bytes([i % 251]) * (i % 7) for i in range(len(keys))]
    sks = [(i + 1) << 8 | 1 for i in range(len(keys))]
    if lengths_codec:  # format 1: lengths where format 2 stores end offsets
        raw = (b"".join(keys) + b"".join(values) + b"".join(len(x).to_bytes(4, "little") for x in keys)
               + b"".join(len(x).to_bytes(4, "little") for x in values)
               + b"".join(x.to_bytes(8, "little") for x in sks) + len(keys).to_bytes(4, "little"))
        decoded = [decode_block(raw, codec=CODEC_LENGTHS)]
    else:
        raw = encode_block(keys, sks, values)
        decoded = [decode_block(raw, codec=CODEC_OFFSETS), decode_block(raw, checked=True)]
    for block in decoded:
        assert block.keys == keys and block.values() == values and block.seq_kinds.tolist() == sks


@st.composite
def distinct_blocks(draw):
    """Entries of a block with one version per key (what a cursor reads in place)."""
    keys = sorted(set(draw(st.lists(keys_strategy, max_size=40))))
    return [(key, (i + 1) << 8 | draw(st.sampled_from([0, 1, 2])), draw(st.binary(max_size=12)))
            for i, key in enumerate(keys)]


@st.composite
def fixed_width_blocks(draw):
    """Entries of a block of fixed-size records: keys of one width, values of
    one width (either may be 0), one version per key."""
    width = draw(st.integers(0, 4))
    keys = sorted(set(draw(st.lists(st.binary(min_size=width, max_size=width), max_size=40))))
    value_width = draw(st.integers(0, 12))
    return [(key, (i + 1) << 8 | draw(st.sampled_from([0, 1, 2])),
             draw(st.binary(min_size=value_width, max_size=value_width))) for i, key in enumerate(keys)]


def _one_width(items) -> int | None:
    widths = set(map(len, items))
    return widths.pop() if len(widths) == 1 else None


@settings(max_examples=300, deadline=None)
@given(distinct_blocks() | fixed_width_blocks(), st.lists(keys_strategy, max_size=6),
       st.sampled_from([None, 1, 3, 16]))
def test_in_place_range_read_agrees_with_the_decoded_block(entries, probes, limit):
    """Read in place with the key offsets, and (a block of fixed-size
    records) split at its widths: the decoded block's entries either way."""
    keys = [k for k, _, _ in entries]
    sks = [s for _, s, _ in entries]
    values = [v for _, _, v in entries]
    raw = encode_block(keys, sks, values)
    check_block(raw)
    widths = fixed_widths(raw)
    if not keys or _one_width(keys) is None or _one_width(values) is None:
        assert widths is None
    else:
        assert widths == (len(keys[0]), len(values[0]))
    kinds = [sk & 0xFF for sk in sks]
    for key in [None, *candidate_keys(keys, probes)]:
        for inclusive in (True, False):
            if key is None:
                j = 0
            else:
                j = bisect.bisect_left(keys, key) if inclusive else bisect.bisect_right(keys, key)
            end = len(keys) if limit is None else min(len(keys), j + limit)
            want = (keys[j:end], kinds[j:end], values[j:end])
            got_keys, got_kinds, got_values = entries_after(raw, key, inclusive, limit)
            assert (got_keys, list(got_kinds), got_values) == want, (key, inclusive)
            if widths is not None:
                got_keys, got_kinds, got_values = entries_after(raw, key, inclusive, limit, widths)
                assert (got_keys, list(got_kinds), got_values) == want, (key, inclusive, widths)


def _table(path, entries, block_size):
    f = DEFAULT_FS.create(str(path))
    builder = TableBuilder(f, block_size=block_size, compression=None)
    for key, sk, value in entries:
        builder.add(key, sk >> 8, sk & 0xFF, value)
    builder.finish()
    f.close()


@st.composite
def tables(draw):
    """Entries of a table with small blocks, so that a key's versions often
    run from one block into the next."""
    keys = sorted(set(draw(st.lists(keys_strategy, min_size=1, max_size=60))))
    entries = []
    for key in keys:
        n = draw(st.integers(1, 6))
        seqs = sorted(draw(st.lists(st.integers(1, 200), min_size=n, max_size=n, unique=True)), reverse=True)
        for seq in seqs:
            entries.append((key, seq << 8 | draw(st.sampled_from([0, 1])), draw(st.binary(max_size=8))))
    return entries


@settings(max_examples=60, deadline=None)
@given(tables(), st.lists(keys_strategy, max_size=8), st.integers(0, 210),
       st.sampled_from(["none", "raw", "promoted"]))
def test_table_lookups_agree_with_its_entries_whichever_way_blocks_are_held(tmp_path_factory, entries, probes,
                                                                              read_seq, held):
    path = tmp_path_factory.mktemp("search") / "000007.sst"
    _table(path, entries, block_size=64)
    cache = None if held == "none" else BlockCache(1 << 20)
    reader = TableReader(DEFAULT_FS, str(path), 7, cache)
    reader._bloom_bits = None  # every key goes to the index and its block, as a bloom false positive does
    try:
        keys = sorted({k for k, _, _ in entries} | set(probes))
        rounds = 1 if held != "promoted" else PROMOTE_AFTER + 1
        for _ in range(rounds):
            for key in keys:
                expect = None
                for k, sk, v in entries:
                    if k == key and sk >> 8 <= read_seq:
                        expect = (sk & 0xFF, v)
                        break
                assert reader.get(key, None, read_seq) == expect, key
        if held == "promoted":
            assert cache.promoted > 0 and reader.key_slots
            for key in keys:  # through the key index now, where a key's block is promoted
                expect = next(((sk & 0xFF, v) for k, sk, v in entries if k == key and sk >> 8 <= read_seq), None)
                assert reader.get(key, None, read_seq) == expect
    finally:
        reader.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=6), min_size=2, max_size=20, unique=True), st.data())
def test_a_block_whose_offsets_go_backwards_is_refused_before_it_is_searched(keys, data):
    import pytest

    from lsmkv.base.errors import CorruptionError
    keys = sorted(keys)
    values = [k * 2 for k in keys]
    raw = encode_block(keys, [(i + 1) << 8 | 1 for i in range(len(keys))], values)
    check_block(raw)  # the well-formed block passes
    n = len(keys)
    base = len(raw) - 4 - 16 * n
    ends = [int.from_bytes(raw[base + 4 * i: base + 4 * i + 4], "little") for i in range(2 * n)]
    i = data.draw(st.integers(0, 2 * n - 2))
    if ends[i] == 0:
        return
    # Make end i larger than end i + 1 (the total still ends where the columns start).
    bad_end = ends[i + 1] + 1 if i + 1 < 2 * n - 1 else ends[i]
    if i + 1 == 2 * n - 1:
        return
    broken = raw[:base + 4 * i] + bad_end.to_bytes(4, "little") + raw[base + 4 * i + 4:]
    with pytest.raises(CorruptionError, match="out of order"):
        check_block(broken)


@settings(max_examples=60, deadline=None)
@given(st.lists(keys_strategy, min_size=1, max_size=80, unique=True)
       | st.lists(st.binary(min_size=3, max_size=3), min_size=1, max_size=80, unique=True),
       st.lists(keys_strategy, max_size=8), st.sampled_from(["none", "raw", "promoted"]), st.sampled_from([64, 2048]),
       st.data())
def test_a_table_cursor_reading_in_place_agrees_with_the_entries(tmp_path_factory, keys, probes, held, block_size,
                                                                 data):
    """Keys of any lengths, or all of 3 bytes (fixed-size records: the
    blocks read in place are split at their widths, block.fixed_widths)."""
    keys = sorted(keys)
    entries = [(k, (i + 1) << 8 | data.draw(st.sampled_from([0, 1])), k * 3) for i, k in enumerate(keys)]
    path = tmp_path_factory.mktemp("cursor") / "000007.sst"
    # Small blocks: chunks end at block ends; large ones: a seek's first chunk ends inside a block.
    _table(path, entries, block_size=block_size)
    cache = None if held == "none" else BlockCache(1 << 20)
    reader = TableReader(DEFAULT_FS, str(path), 7, cache)
    try:
        read_seq = len(keys) + 1
        assert reader.reads_in_place(read_seq) and not reader.reads_in_place(read_seq - 2)
        for _ in range(PROMOTE_AFTER + 1 if held == "promoted" else 1 if held == "raw" else 0):
            for key in keys:
                reader.get(key, None, read_seq)
        if held == "promoted":
            assert cache.promoted > 0
        visible = [(k, sk & 0xFF, v) for k, sk, v in entries]
        for start in [None, *sorted(set(keys) | set(probes) | {k + b"\x00" for k in keys})]:
            expect = [e for e in visible if start is None or e[0] >= start]
            assert list(visible_entries(table_source(reader, read_seq), start)) == expect, start
            # A positioned cursor: seek, then step entry by entry.
            source = table_source(reader, read_seq)
            source.seek(start)
            walked = []
            while source.valid:
                walked.append((source.cur, source.kinds[source.pos], source.values[source.pos]))
                source.next()
            assert walked == expect, start
        if len(set(map(len, keys))) == 1:
            # Every block not held decoded was read in place, and knows its records' widths.
            raw = [i for i, block in enumerate(reader.blocks) if type(block) is not Block]
            assert held != "none" or len(raw) == len(reader.blocks)
            assert {reader.block_widths[i] for i in raw} <= {(len(keys[0]), 3 * len(keys[0]))}
    finally:
        reader.close()


def test_a_lookups_unpacks_read_what_struct_reads_and_refuse_what_it_refuses():
    """The unpacks of a lookup (in the compiled build, C reads of a bytes
    block in place) give struct's answer for every offset of bytes whose
    integers have their high bits set, and for the other buffer types; an
    offset past either end is struct's error, not a read outside the block."""
    data = bytes(range(255, 215, -1)) + bytes(range(40))
    for unpack, layout in ((_unpack_count, "<I"), (_unpack_pair, "<II"), (_unpack_entry, "<Q")):
        size = struct.calcsize(layout)
        for at in range(len(data) - size + 1):
            expected = struct.unpack_from(layout, data, at)
            assert tuple(unpack(data, at)) == expected, (layout, at)
            assert tuple(unpack(bytearray(data), at)) == expected
            assert tuple(unpack(memoryview(data), at)) == expected
        for at in (len(data) - size + 1, len(data), -1, -len(data) - 1):
            with pytest.raises(struct.error):
                unpack(data, at)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 300), st.sampled_from([2**31, 2**32 - 1])), min_size=1, max_size=12),
       st.data())
def test_check_blocks_offsets_test_read_in_place_answers_as_the_listed_one(ends, data):
    """check_block's test of a block's offsets read in place (its compiled
    form) answers what the pure form's listed offsets answer: ascending
    offsets ending at the columns' start pass, anything else does not --
    a decrease anywhere, a last offset short of or past ``base``, offsets
    with the high bit set."""
    if data.draw(st.booleans()):
        ends = sorted(ends)
    if len(ends) % 2:
        ends.append(ends[-1])
    n = len(ends) // 2
    last = ends[-1] if ends[-1] <= 300 else 100  # (the block is built: its columns start at base)
    base = data.draw(st.sampled_from([last, last + 1, max(last - 1, 0)]))
    block = bytes(base) + struct.pack(f"<{2 * n}I", *ends) + bytes(8 * n) + struct.pack("<I", n)
    expected = ends[-1] == base and ends == sorted(ends)
    assert _ends_ascending_in_place(block, base, n) == expected
    if expected:
        check_block(block)
    else:
        with pytest.raises(CorruptionError, match="out of order"):
            check_block(block)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=20), st.integers(0, (1 << 64) - 1), st.binary(max_size=40)),
                max_size=40))
def test_a_block_is_encoded_with_its_columns_written_in_place_as_struct_packs_them(entries):
    """encode_block's layout, on both builds (the compiled build writes the
    columns in one C loop, _columns_in_place; the pure build packs arrays):
    keys, values, then the key ends, the value ends (from the keys'
    total), the seq_kinds and the count, little-endian; and it decodes
    back to the entries."""
    keys = [k for k, _, _ in entries]
    seq_kinds = [sk for _, sk, _ in entries]
    values = [v for _, _, v in entries]
    n = len(keys)
    key_ends = [sum(map(len, keys[:i + 1])) for i in range(n)]
    value_ends = [sum(map(len, keys)) + sum(map(len, values[:i + 1])) for i in range(n)]
    columns = struct.pack(f"<{n}I{n}I{n}QI", *key_ends, *value_ends, *seq_kinds, n)
    assert bytes(_columns_in_place(keys, seq_kinds, values)) == columns
    raw = encode_block(keys, seq_kinds, values)
    assert raw == b"".join(keys) + b"".join(values) + columns
    assert type(raw) is bytes
    with pytest.raises(OverflowError):
        encode_block([b"k"], [-1], [b"v"])  # (a seq_kind is a u64)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 20), st.integers(1, 20), st.integers(0, 6), st.binary(max_size=5))
def test_a_short_range_read_ignores_widths_that_are_not_its_blocks(count, other, width, key):
    """entries_after trusts the widths it is handed (a reader's cache of
    fixed_widths, by block number) only if they span the block's keys and
    values: widths that do not (another block's, or the same block's
    before it changed) read what the block's offsets say, never past the
    block (the compiled build's search slices the block in place, without
    bounds checks)."""
    keys = [b"%0*d" % (width, i) if width else b"" for i in range(count)][: 1 if not width else count]
    values = [b"v" * (i % 3) for i in range(len(keys))]
    raw = encode_block(keys, [1 << 8 | 1] * len(keys), values)
    check_block(raw)
    stored = sum(map(len, keys)) + sum(map(len, values))
    for widths in ((width + 1, 1), (width, 7), (64, 64), (1, other)):
        if len(keys) * sum(widths) == stored:
            continue  # (widths that span the block are taken as its own)
        for inclusive in (True, False):
            assert entries_after(raw, key, inclusive, 4, widths) == entries_after(raw, key, inclusive, 4), widths


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.integers(-2, 90), st.integers(0, 9), st.integers(0, 40))
def test_a_run_of_fixed_width_fields_reads_what_struct_reads(data, at, width, count):
    """_fixed_run (in the compiled build, a loop of slices of the bytes in
    place) splits what a struct of ``width``-byte strings splits, and a run
    that ends past the bytes is struct's error, not a read outside them."""
    layout = struct.Struct("<" + f"{width}s" * count)
    try:
        want = list(layout.unpack_from(data, at)) if count else []
    except struct.error:
        with pytest.raises(struct.error):
            _fixed_run(data, at, width, count)
    else:
        assert _fixed_run(data, at, width, count) == want
