"""The checksum both engines put on every record, block and page.

CRC-32 (zlib's, hardware-assisted where the platform allows). One function so
that the algorithm is defined in exactly one place; formats document it as
"crc32 (zlib polynomial) of the bytes named".
"""

from __future__ import annotations

from zlib import crc32

__all__ = ["crc32", "checksum"]


def checksum(data: bytes | bytearray | memoryview, start: int = 0) -> int:
    """CRC-32 of ``data``, continuing from ``start`` (0 for a fresh sum)."""
    return crc32(data, start)
