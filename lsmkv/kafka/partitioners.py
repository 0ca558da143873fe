"""Kafka's key partitioners: which partition a producer puts a keyed record on.

Producers place a keyed record by hashing its key; which hash depends on
the client:

* ``murmur2``: Kafka's Java client (its default ``BuiltInPartitioner``
  for keyed records) and librdkafka's ``murmur2`` / ``murmur2_random``:
  ``toPositive(murmur2(key)) % partitions``, murmur2 being Kafka's
  ``Utils.murmur2`` (MurmurHash2, 32-bit, seed 0x9747b28c) and toPositive
  masking the sign bit (not abs());
* ``consistent``: librdkafka's ``consistent`` / ``consistent_random``,
  the default of librdkafka and of every client built on it
  (confluent-kafka, kcat, ...): ``crc32(key) % partitions`` with zlib's
  CRC-32. ``consistent_random`` puts an *empty* key (length 0) on a
  random partition, so under this family the empty key has no one
  partition;
* ``fnv1a``: librdkafka's ``fnv1a`` / ``fnv1a_random`` (Sarama's default
  hash partitioner): FNV-1a 32-bit of the key, taken as a signed int and
  made positive by abs() (the most negative value stays 2**31), ``%
  partitions``.

librdkafka's ``*_random`` variants differ from their base only for a
null key (a random partition), which the loader never stores, so a
*family* -- ``murmur2``, ``consistent``, ``fnv1a`` -- is what placing keys
depends on; :data:`NAMES` maps librdkafka's ``partitioner`` names to it
(``random``: no family, a key may be anywhere).

:func:`partition_of` places one key; :func:`partitions_of` places many at
once (numpy over keys of one length: the loader checks every record it
applies against each family still in question, placement.py). Written
from the algorithms' definitions; tests/kafka/test_partitioners.py checks
them against Kafka's and librdkafka's published test values and
tests/kafka/test_routing.py against where a real librdkafka producer puts
records. Pure: no Kafka, no I/O.
"""

from __future__ import annotations

import zlib

import numpy as np

#: Partitioner families, in the order a router prefers among several that
#: all fit (librdkafka's default first, then Kafka's Java default).
FAMILIES = ("consistent", "murmur2", "fnv1a")

#: librdkafka's ``partitioner`` names -> the family placing keyed records
#: (None: ``random``, no key has a fixed partition).
NAMES = {
    "murmur2": "murmur2", "murmur2_random": "murmur2",
    "consistent": "consistent", "consistent_random": "consistent",
    "fnv1a": "fnv1a", "fnv1a_random": "fnv1a",
    "random": None,
}

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)``: a signed 32-bit int, as Java returns it."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"murmur2 hashes bytes, not {type(data).__name__}")
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    full = length & ~3
    for i in range(0, full, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[full + 2] << 16
    if rest >= 2:
        h ^= data[full + 1] << 8
    if rest >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Kafka's ``Utils.toPositive``: the sign bit masked off (not abs())."""
    return value & 0x7FFFFFFF


def fnv1a(data: bytes) -> int:
    """librdkafka's ``rd_fnv1a(data)``: FNV-1a 32-bit, made positive as a
    signed int by abs() (0x80000000 stays itself)."""
    h = _FNV_OFFSET
    for byte in bytes(data):
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return (1 << 32) - h if h > 0x80000000 else h


def family_of(name: str) -> str | None:
    """The family of librdkafka partitioner ``name`` (None for ``random``);
    ValueError naming the known names."""
    if name not in NAMES:
        raise ValueError(f"unknown partitioner {name!r}; librdkafka's are {', '.join(NAMES)}")
    return NAMES[name]


def partition_of(family: str, key: bytes, partitions: int) -> int | None:
    """The partition ``family`` puts ``key`` on in a topic of ``partitions``
    partitions (None: it has no one partition for this key -- the empty key
    under ``consistent``)."""
    if type(partitions) is not int or partitions < 1:
        raise ValueError(f"partitions must be a positive int, not {partitions!r}")
    if family == "murmur2":
        return to_positive(murmur2(key)) % partitions
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise TypeError(f"a key is bytes, not {type(key).__name__}")
    if family == "consistent":
        return zlib.crc32(key) % partitions if len(key) else None
    if family == "fnv1a":
        return fnv1a(key) % partitions
    raise ValueError(f"unknown partitioner family {family!r} (one of {', '.join(FAMILIES)})")


# -- many keys at once ----------------------------------------------------------------------------

def _block(keys: list[bytes], length: int) -> np.ndarray:
    return np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), length)


def _murmur2_block(block: np.ndarray) -> np.ndarray:
    """Kafka's murmur2 (as uint32) of each row of ``block`` (keys of one length)."""
    count, length = block.shape
    m = np.uint32(_M)
    h = np.full(count, (_SEED ^ length) & _MASK, dtype=np.uint32)
    full = length & ~3
    if full:
        words = np.ascontiguousarray(block[:, :full]).view("<u4")
        for j in range(full // 4):
            k = words[:, j] * m
            k ^= k >> np.uint32(24)
            k *= m
            h *= m
            h ^= k
    rest = length & 3
    if rest == 3:
        h ^= block[:, full + 2].astype(np.uint32) << np.uint32(16)
    if rest >= 2:
        h ^= block[:, full + 1].astype(np.uint32) << np.uint32(8)
    if rest >= 1:
        h ^= block[:, full].astype(np.uint32)
        h *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h & np.uint32(0x7FFFFFFF)


def _fnv1a_block(block: np.ndarray) -> np.ndarray:
    count, length = block.shape
    prime = np.uint32(_FNV_PRIME)
    h = np.full(count, _FNV_OFFSET, dtype=np.uint32)
    for j in range(length):
        h ^= block[:, j].astype(np.uint32)
        h *= prime
    signed = h.view(np.int32)
    return np.where(signed < 0, -signed.astype(np.int64), signed.astype(np.int64)).astype(np.uint32)


def partitions_of(family: str, keys: list[bytes], partitions: int) -> np.ndarray:
    """The partition ``family`` puts each of ``keys`` on (an int64 array in
    the keys' order; -1 where it has no one partition for the key)."""
    if type(partitions) is not int or partitions < 1:
        raise ValueError(f"partitions must be a positive int, not {partitions!r}")
    if family not in FAMILIES:
        raise ValueError(f"unknown partitioner family {family!r} (one of {', '.join(FAMILIES)})")
    count = len(keys)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=count)
    if family == "consistent":
        out = np.fromiter(map(zlib.crc32, keys), dtype=np.int64, count=count) % partitions
        out[lengths == 0] = -1
        return out
    hash_block = _murmur2_block if family == "murmur2" else _fnv1a_block
    flat = np.frombuffer(b"".join(keys), dtype=np.uint8)
    if count and (lengths == lengths[0]).all():
        return (hash_block(flat.reshape(count, int(lengths[0]))) % np.uint32(partitions)).astype(np.int64)
    # Keys of several lengths: hashed a length at a time, each group's
    # bytes gathered from the joined keys.
    starts = np.cumsum(lengths) - lengths
    out = np.empty(count, dtype=np.int64)
    for length in np.unique(lengths):
        where = np.flatnonzero(lengths == length)
        block = flat[starts[where][:, None] + np.arange(length)] if length else np.empty((len(where), 0), np.uint8)
        out[where] = hash_block(block) % np.uint32(partitions)
    return out
