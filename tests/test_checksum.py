"""The checksum of every record, block and page is zlib's CRC-32, whichever
library computes it (lsmkv.base.checksum): files written before and after a change
of library must verify alike."""

from __future__ import annotations

import zlib

from hypothesis import given, settings, strategies as st

from lsmkv.base.checksum import STORED_CRC, checksum, crc32, single_bit_error


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=9000), st.integers(0, 0xFFFFFFFF))
def test_the_checksum_is_zlibs_crc32_for_any_bytes_and_start(data, start):
    assert crc32(data) == zlib.crc32(data)
    assert crc32(data, start) == zlib.crc32(data, start)
    assert checksum(memoryview(data)[3:], start) == zlib.crc32(data[3:], start)
    assert crc32(bytearray(data)) == zlib.crc32(data)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=600), st.data())
def test_a_single_flipped_bit_is_located(data, draw):
    bit = draw.draw(st.integers(0, len(data) * 8 - 1))
    stored = crc32(data)
    damaged = bytearray(data)
    damaged[bit // 8] ^= 1 << (bit % 8)
    assert single_bit_error(damaged, stored) == bit
    assert single_bit_error(data, stored ^ 1) == STORED_CRC
