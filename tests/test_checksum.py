"""The checksum of every record, block and page is zlib's CRC-32, whichever
library computes it (lsmkv.base.checksum): files written before and after a change
of library must verify alike."""

from __future__ import annotations

import zlib

from hypothesis import given, settings, strategies as st

from lsmkv.base.checksum import STORED_CRC, checksum, crc32, crc32_past_stored, single_bit_error, start_skipping


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=9000), st.integers(0, 0xFFFFFFFF))
def test_the_checksum_is_zlibs_crc32_for_any_bytes_and_start(data, start):
    assert crc32(data) == zlib.crc32(data)
    assert crc32(data, start) == zlib.crc32(data, start)
    assert checksum(memoryview(data)[3:], start) == zlib.crc32(data[3:], start)
    assert crc32(bytearray(data)) == zlib.crc32(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=9000))
def test_a_page_sum_past_its_stored_checksum_is_the_sum_of_the_rest(data):
    """crc32_past_stored (what the page checks call: summed in place from
    start_skipping's start when compiled) against zlib over the slice."""
    assert crc32_past_stored(data) == zlib.crc32(data[4:])
    if len(data) >= 4:
        head = int.from_bytes(data[:4], "little")
        assert crc32(data, start_skipping(head)) == zlib.crc32(data[4:])
        assert zlib.crc32(data[:4], start_skipping(head)) == 0


def test_the_start_that_skips_four_bytes_undoes_each_bit_of_them():
    # Every single-bit head, and the heads whose top bits meet the polynomial.
    for head in [0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF] + [1 << b for b in range(32)]:
        data = head.to_bytes(4, "little") + b"page body"
        assert crc32(data, start_skipping(head)) == zlib.crc32(b"page body"), hex(head)
    assert len({start_skipping(1 << b) for b in range(32)}) == 32


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=600), st.data())
def test_a_single_flipped_bit_is_located(data, draw):
    bit = draw.draw(st.integers(0, len(data) * 8 - 1))
    stored = crc32(data)
    damaged = bytearray(data)
    damaged[bit // 8] ^= 1 << (bit % 8)
    assert single_bit_error(damaged, stored) == bit
    assert single_bit_error(data, stored ^ 1) == STORED_CRC


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=12), st.binary(max_size=64), st.integers(0, 0xFFFFFFFF))
def test_a_start_before_a_prefix_sums_the_rest_as_if_alone(prefix, rest, start):
    """start_before (a framed log record's start, lsmkv/lsm/wal.py): summed
    from it, the prefix and the rest give the rest's sum from ``start``;
    start_skipping is its four-byte case from a fresh sum."""
    from lsmkv.base.checksum import start_before, start_skipping
    assert crc32(prefix + rest, start_before(prefix, start)) == crc32(rest, start)
    head = (prefix + bytes(4))[:4]
    assert start_before(head, 0) == start_skipping(int.from_bytes(head, "little"))
