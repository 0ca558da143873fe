"""The checksum both engines put on every record, block and page.

CRC-32 of the zlib polynomial, computed by ISA-L (the ``isal`` package:
carry-less multiply instructions, about ten times zlib's speed on a 4 KiB
block or page) and by zlib's ``crc32`` where ``isal`` is not installed; the
two give the same value for the same bytes and start. One function so that
the algorithm is defined in exactly one place; formats document it as
"crc32 (zlib polynomial) of the bytes named".

It also owns telling a flipped bit from other damage (``single_bit_error``):
a CRC-32 locates any single-bit error, which lets the log readers tell a
record damaged in place (corruption, to be reported) from one a crash cut
short (a torn tail, to be dropped).
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

try:
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib gives the same values
    from zlib import crc32

__all__ = ["crc32", "checksum", "crc32_past_stored", "start_skipping", "start_before", "single_bit_error",
           "STORED_CRC"]

#: The CRC-32 polynomial, bit-reversed (as zlib computes it); the
#: register's top bit and its 32 bits. (Names, not literals, in
#: _back_over: the compiled build declares them C integers in
#: checksum.pxd, where a literal above 2**31 would be a Python int.)
_POLY = 0xEDB88320
_TOP_BIT = 0x80000000
_LOW32 = 0xFFFFFFFF
#: single_bit_error's answer when the flipped bit is in the stored checksum itself.
STORED_CRC = -1
#: Longest data single_bit_error searches (8 steps per byte, in Python).
_SEARCH_LIMIT = 1 << 20


def checksum(data: bytes | bytearray | memoryview, start: int = 0) -> int:
    """CRC-32 of ``data``, continuing from ``start`` (0 for a fresh sum)."""
    return crc32(data, start)


def crc32_past_stored(data: bytes) -> int:
    """CRC-32 of ``data`` after its first four bytes, where a page stores
    the sum of the rest. The compiled build sums the whole of ``data`` in
    place from :func:`start_skipping`'s start, with no slice or memoryview
    (timed from Python on a 4 KiB page: 0.62 us, against 0.88 us for the
    sum of a memoryview slice); the pure build sums the memoryview slice,
    which is faster as Python. Both give the same value (the tests compare
    them)."""
    if cython.compiled and len(data) >= 4:
        head = data[3]  # (its top byte first: compiled, a C unsigned long)
        head = head << 24 | data[2] << 16 | data[1] << 8 | data[0]
        return crc32(data, start_skipping(head))
    return crc32(memoryview(data)[4:])


def start_skipping(head: int) -> int:
    """The start ``s`` for which ``crc32(data, s) == crc32(data[4:])``
    whatever follows, where ``head`` is ``data``'s first four bytes as a
    little-endian u32.

    CRC-32's register update is invertible: a bit shifted out can be told
    from the polynomial's top bit, so the update runs backwards. Run back
    over the four bytes from the register a fresh sum starts with (all
    ones), it gives the register, and so the start, that reaches that
    register after them: the sum then goes on over the rest as if it
    began there."""
    register = _LOW32
    for shift in range(24, -8, -8):  # the last byte first
        register = _back_over(register, head >> shift & 0xFF)
    return register ^ _LOW32


def start_before(prefix: bytes, start: int) -> int:
    """The start ``s`` for which ``crc32(prefix + rest, s) == crc32(rest,
    start)`` whatever ``rest`` is: :func:`start_skipping`'s backward run,
    over any bytes and to any start. A log record framed in place sums its
    payload with the header's zeroed bytes in front of it, from the start
    this gives for them (lsmkv/lsm/wal.py add_framed), with no view of the
    payload alone. Computed once, at import, as Python."""
    register = start ^ _LOW32
    for byte in reversed(prefix):
        register = _back_over(register, byte)
    return register ^ _LOW32


def _back_over(register: int, byte: int) -> int:
    """The CRC-32 register before ``byte`` was summed, from the register
    after it: the eight steps of the update run backwards, each telling
    from the top bit whether the forward step folded the polynomial in."""
    for step in range(8):  # (C integers, compiled: checksum.pxd)
        if register & _TOP_BIT:
            register = ((register ^ _POLY) << 1 | 1) & _LOW32
        else:
            register = register << 1 & _LOW32
    return register ^ byte


def single_bit_error(data: bytes | bytearray | memoryview, stored: int, start: int = 0) -> int | None:
    """Whether one flipped bit explains why ``crc32(data, start)`` is not
    ``stored``: the bit's position in ``data`` (byte ``i // 8``, bit
    ``i % 8``), STORED_CRC if the flipped bit is in ``stored`` itself, or
    None (no single bit explains it, or ``data`` is longer than 1 MiB).

    CRC-32 is linear: flipping message bit ``i`` changes the sum by a value
    that depends only on how many bits follow ``i``, and those values are
    distinct for messages up to 2^32 bits, so the difference between the sum
    and ``stored`` names the bit (or none)."""
    syndrome = crc32(data, start) ^ stored
    if not syndrome:
        return None
    if not syndrome & (syndrome - 1):
        return STORED_CRC
    bits = 8 * len(data)
    if bits > 8 * _SEARCH_LIMIT:
        return None
    # The change a flip of the last bit makes, then of each bit before it.
    diff = _POLY
    for k in range(bits):
        if diff == syndrome:
            return bits - 1 - k
        diff = (diff >> 1) ^ (_POLY if diff & 1 else 0)
    return None
