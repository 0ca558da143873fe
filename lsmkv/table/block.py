"""The block codec: data blocks, index blocks and properties blocks share it.

A block holds n entries of (key, seq_kind, value) in order. Its layout is
columnar so that Python decodes it with a few C calls instead of a loop of
varint parsing::

    key_0 ... key_{n-1} | value_0 ... value_{n-1} |
    key_length[n] (u32 each) | value_length[n] (u32 each) | seq_kind[n] (u64 each) | n (u32)

Keys are concatenated from offset 0, values right after the last key.
seq_kind = sequence << 8 | kind. Lengths rather than offsets, and whole
columns of them, because zstandard then squeezes the columns to almost
nothing when sizes repeat (as they usually do), and the shared prefixes of
sorted keys along with them: the block format needs no prefix compression of
its own.
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import accumulate, pairwise

from ..errors import CorruptionError

_COUNT = struct.Struct("<I")
_LITTLE = sys.byteorder == "little"
#: Bytes charged to the block cache per entry, for the Python objects of a
#: decoded entry (the key's bytes object, list slots, two ints) and its slot
#: in the table's key index (reader.py), on top of the raw block size.
DECODED_ENTRY_OVERHEAD = 150


def _u32(data: bytes) -> array:
    a = array("I", data)
    if not _LITTLE:  # pragma: no cover - big-endian hosts
        a.byteswap()
    return a


def _u64(data: bytes) -> array:
    a = array("Q", data)
    if not _LITTLE:  # pragma: no cover
        a.byteswap()
    return a


assert array("I").itemsize == 4 and array("Q").itemsize == 8


class BlockBuilder:
    """Accumulates sorted entries and encodes them as one block."""

    __slots__ = ("keys", "values", "seq_kinds", "size")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: list[bytes] = []
        self.seq_kinds: list[int] = []
        #: Encoded size so far.
        self.size = 4

    def add(self, key: bytes, seq_kind: int, value: bytes) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.seq_kinds.append(seq_kind)
        self.size += len(key) + len(value) + 16

    def __len__(self) -> int:
        return len(self.keys)

    def finish(self) -> bytes:
        return encode_block(self.keys, self.seq_kinds, self.values)

    def reset(self) -> None:
        self.keys = []
        self.values = []
        self.seq_kinds = []
        self.size = 4


def encode_block(keys: list[bytes], seq_kinds: list[int], values: list[bytes]) -> bytes:
    n = len(keys)
    key_lengths = array("I", map(len, keys))
    value_lengths = array("I", map(len, values))
    sk = array("Q", seq_kinds)
    if not _LITTLE:  # pragma: no cover
        key_lengths.byteswap(); value_lengths.byteswap(); sk.byteswap()
    data = b"".join((b"".join(keys), b"".join(values), key_lengths.tobytes(), value_lengths.tobytes(),
                     sk.tobytes(), _COUNT.pack(n)))
    if len(data) >= 1 << 32:
        raise ValueError("block larger than 4 GiB")
    return data


class Block:
    """A decoded block: ``keys`` (a sorted list, bisect it) and ``seq_kinds``
    as lists; values stay in the block's bytes and are sliced out on access
    (``value(i)``), so loading a block for one lookup builds no value
    objects, and a cached block holds each value once."""

    __slots__ = ("keys", "seq_kinds", "data", "value_ends", "charge")

    def __init__(self, keys: list[bytes], seq_kinds: list[int], data: bytes, value_ends: list[int]) -> None:
        self.keys = keys
        self.seq_kinds = seq_kinds
        #: The raw block; value i is data[value_ends[i]:value_ends[i + 1]].
        self.data = data
        self.value_ends = value_ends
        #: What the block costs in the cache, in bytes (an estimate of its objects).
        self.charge = len(data) + DECODED_ENTRY_OVERHEAD * len(keys)

    def value(self, i: int) -> bytes:
        ends = self.value_ends
        return self.data[ends[i]:ends[i + 1]]

    def values(self) -> list[bytes]:
        data = self.data
        return [data[a:b] for a, b in pairwise(self.value_ends)]

    def __len__(self) -> int:
        return len(self.keys)


def decode_block(data: bytes, path: str = "", offset: int = 0) -> Block:
    """Decode a raw block; CorruptionError if its structure is inconsistent."""
    size = len(data)
    if size < 4:
        raise CorruptionError("block too short", path=path, offset=offset)
    (n,) = _COUNT.unpack_from(data, size - 4)
    base = size - 4 - 16 * n
    if base < 0:
        raise CorruptionError(f"block claims {n} entries in {size} bytes", path=path, offset=offset)
    key_lengths = _u32(data[base: base + 4 * n])
    value_lengths = _u32(data[base + 4 * n: base + 8 * n])
    seq_kinds = _u64(data[base + 8 * n: base + 16 * n]).tolist()
    if n:
        key_ends = list(accumulate(key_lengths, initial=0))
        value_ends = list(accumulate(value_lengths, initial=key_ends[-1]))
        if value_ends[-1] != base:
            raise CorruptionError("block lengths do not add up to its size", path=path, offset=offset)
        keys = [data[s:e] for s, e in pairwise(key_ends)]
    else:
        if base != 0:
            raise CorruptionError("empty block has data", path=path, offset=offset)
        keys = []
        value_ends = [0]
    return Block(keys, seq_kinds, data, value_ends)
