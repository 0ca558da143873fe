"""Key routing: which partition of a topic a key lives in.

Kafka's default partitioner (the Java client's ``BuiltInPartitioner`` for
keyed records, librdkafka's ``murmur2`` / ``murmur2_random``) places a
keyed record on ``toPositive(murmur2(key)) % partitions``, where murmur2
is Kafka's ``Utils.murmur2`` (MurmurHash2, 32-bit, seed 0x9747b28c) and
toPositive masks the sign bit. A store whose shards are a topic's
partitions answers a key from the one shard that partition fills, so a
point read consults one shard.

This is written from the algorithm's definition (32-bit wrap-around
arithmetic, little-endian 4-byte words, the tail mixed in from its
highest byte down); tests/kafka/test_shards.py checks it against the
values Kafka's own tests use and against where librdkafka's partitioner
actually puts produced records. This module is pure: no Kafka, no I/O.
"""

from __future__ import annotations

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


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


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a record keyed ``key``
    in a topic of ``partitions`` partitions."""
    if type(partitions) is not int or partitions < 1:
        raise ValueError(f"partitions must be a positive int, not {partitions!r}")
    return to_positive(murmur2(key)) % partitions
