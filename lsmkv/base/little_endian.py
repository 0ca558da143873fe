"""Little-endian integers written into a buffer in place, for the compiled
build's encoders (a table block's columns, lsmkv/lsm/table/block.py; a put's
log record, lsmkv/lsm/write_batch.py).

Compiled (little_endian.pxd), ``put_le`` is a C function that other compiled
modules cimport and call with a byte pointer into a bytearray they have just
made; run as Python it takes the bytearray itself, so that the tests can
hold each encoder's compiled form to its pure form on either build. The
pure build's encoders pack with ``struct`` and never call it.
"""

from __future__ import annotations


def put_le(p, at: int, value: int, width: int) -> None:
    """Write ``value`` at ``p[at:at + width]``, little-endian (the caller
    made the buffer large enough and the value fit in ``width`` bytes)."""
    for j in range(width):
        p[at + j] = value & 0xFF
        value >>= 8
