"""How the LSM stores an expiring value: its deadline in front of it.

A value written with a ttl (lsmkv/base/ttl.py: the deadline, in
milliseconds since the Unix epoch) is kind 2 (``VALUE_TTL``,
write_batch.py) with the stored value ``deadline (u64, little-endian) |
value`` in the logs and tables (see docs/formats.md). This module owns
that encoding and the reading of a stored value at a given time; it never
reads a clock.
"""

from __future__ import annotations

import struct

#: The deadline in front of an expiring value, milliseconds since the epoch.
DEADLINE = struct.Struct("<Q")
DEADLINE_SIZE = DEADLINE.size  # 8
_pack = DEADLINE.pack
_unpack_from = DEADLINE.unpack_from


def with_deadline(deadline: int, value: bytes) -> bytes:
    """The stored form of an expiring value (kind 2)."""
    return _pack(deadline) + value


def deadline_of(stored: bytes) -> int:
    return _unpack_from(stored, 0)[0]


def live_value(stored: bytes, now: int) -> bytes | None:
    """The value of a stored expiring value, or None if it expired at ``now`` (ms)."""
    if _unpack_from(stored, 0)[0] <= now:
        return None
    return stored[DEADLINE_SIZE:]
