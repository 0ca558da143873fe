"""The per-table bloom filter: skip a table that cannot hold a key.

Hashing is double hashing (Kirsch-Mitzenmacher) over the first 64-bit word of
MurmurHash3 x64-128 (``mmh3.hash64(key, seed=0, signed=False)[0]``) of the
user key, split into two 32-bit halves: ``h1 = h & 0xffffffff``,
``h2 = h >> 32``; probe ``i`` tests bit ``(h1 + i * h2) mod num_bits`` for i in
0..k-1 (exact integer arithmetic, no wrap-around).
``k = round(bits_per_key * ln 2)`` clamped to 1..30. The expected
false-positive rate is ``(1 - e^(-k n / m))^k``; tests/lsmkv/test_table.py
measures it against that formula.

Payload of the filter block: ``num_bits (u32) | k (u8) | bits``, the bits in
little-endian bit order (bit j is bit j % 8 of byte j // 8). A table written
with bloom_bits_per_key=0 has an empty filter block: every key "may" be there.

The hash of a key is computed once per lookup and tested against every table.
"""

from __future__ import annotations

import math
import struct

from itertools import compress

import mmh3
import numpy as np
from bitarray import bitarray

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from lsmkv.base.compile_hints import cython

from lsmkv.base.errors import CorruptionError

from .columns import pieces

_HEADER = struct.Struct("<IB")
#: mmh3.hash64(key, seed=0, x64arch=True, signed=False) without keyword
#: parsing (the same two words, unsigned).
_hash64 = mmh3.mmh3_x64_128_utupledigest
#: A word's low 32 bits (a C integer, compiled: bloom.pxd; a literal above
#: 2**31 would be a Python int there).
_MASK32 = 0xFFFFFFFF
#: Hashes from which BloomFilter.may_contain_many probes with numpy.
VECTOR_MIN = 64


def bloom_hash(key: bytes) -> int:
    """The 64-bit hash a filter is built from and probed with (compiled:
    :func:`murmur3_first_word`, a C function; as Python: mmh3's)."""
    if cython.compiled:
        return murmur3_first_word(key)
    return _hash64(key, 0)[0]


def bloom_hash_list(keys: list[bytes], new_key: list[bool]) -> list[int]:
    """bloom_hash of each key of ``keys`` whose ``new_key`` flag is true (a
    table builder's sorted run: a key's older versions are not hashed
    again). Compiled: one C loop; as Python: a call of mmh3's per key."""
    if cython.compiled:
        out = []
        for i in range(len(keys)):
            if new_key[i]:
                out.append(murmur3_first_word(keys[i]))
        return out
    hash64 = _hash64
    return [hash64(k, 0)[0] for k in compress(keys, new_key)]


#: MurmurHash3 x64-128's constants, and the 64-bit mask that keeps Python's
#: integers to the C arithmetic's width (C integers in the compiled build:
#: bloom.pxd).
_M64 = 0xFFFFFFFFFFFFFFFF
_K1 = 0x87C37B91114253D5
_K2 = 0x4CF5AD432745937F
_F1 = 0xFF51AFD7ED558CCD
_F2 = 0xC4CEB9FE1A85EC53


def murmur3_first_word(key: bytes) -> int:
    """MurmurHash3 x64-128 of ``key`` with seed 0, its first 64-bit word:
    what ``mmh3.mmh3_x64_128_utupledigest(key, 0)[0]`` answers (the tests
    hold it to mmh3). The compiled build's bloom_hash: a loop of C integer
    steps over the key's bytes, with no call and no tuple; as Python it is
    slower than mmh3, and the pure build never calls it."""
    p = key
    n = len(key)
    mask = _M64
    c1 = _K1
    c2 = _K2
    h1 = 0
    h2 = 0
    at = 0
    while at + 16 <= n:
        k1 = _le_word(p, at, 8)
        k2 = _le_word(p, at + 8, 8)
        k1 = (k1 * c1) & mask
        k1 = ((k1 << 31) | (k1 >> 33)) & mask
        h1 ^= (k1 * c2) & mask
        h1 = ((h1 << 27) | (h1 >> 37)) & mask
        h1 = (((h1 + h2) & mask) * 5 + 0x52DCE729) & mask
        k2 = (k2 * c2) & mask
        k2 = ((k2 << 33) | (k2 >> 31)) & mask
        h2 ^= (k2 * c1) & mask
        h2 = ((h2 << 31) | (h2 >> 33)) & mask
        h2 = (((h2 + h1) & mask) * 5 + 0x38495AB5) & mask
        at += 16
    tail = n - at
    if tail > 8:
        k2 = (_le_word(p, at + 8, tail - 8) * c2) & mask
        k2 = ((k2 << 33) | (k2 >> 31)) & mask
        h2 ^= (k2 * c1) & mask
    if tail > 0:
        k1 = (_le_word(p, at, tail if tail < 8 else 8) * c1) & mask
        k1 = ((k1 << 31) | (k1 >> 33)) & mask
        h1 ^= (k1 * c2) & mask
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    return (h1 + h2) & mask


def _le_word(p: bytes, at: int, width: int) -> int:
    """The ``width`` (1-8) bytes of ``p`` from ``at`` as a little-endian integer."""
    word = 0
    j = at + width - 1
    while j >= at:
        word = (word << 8) | p[j]
        j -= 1
    return word


def _fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finalizer."""
    k ^= k >> 33
    k = (k * _F1) & _M64
    k ^= k >> 33
    k = (k * _F2) & _M64
    return k ^ (k >> 33)


_C1 = np.uint64(_K1)
_C2 = np.uint64(_K2)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(_F1)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(_F2)
    return k ^ (k >> np.uint64(33))


def bloom_hashes(data: bytes, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """bloom_hash of many keys at once: the keys are data[offsets[i]:
    offsets[i] + lengths[i]]. MurmurHash3 x64-128 (seed 0, first word)
    computed with numpy, bit for bit what mmh3 computes, for every key of
    the same length at once (tests check it against mmh3)."""
    out = np.zeros(len(lengths), dtype=np.uint64)
    if not len(lengths):
        return out
    uniform = int(lengths.min()) == int(lengths.max())
    with np.errstate(over="ignore"):
        for length in ([int(lengths[0])] if uniform else np.unique(lengths).tolist()):
            picked = slice(None) if uniform else np.flatnonzero(lengths == length)
            count = len(lengths) if uniform else len(picked)
            blocks, tail = divmod(length, 16)
            if tail:
                # The tail zero-padded to a whole 16 bytes; a zero word mixes
                # in as nothing, exactly like the switch in the C code.
                keys = np.zeros(count, dtype=f"V{16 * blocks + 16}")
                pieces(keys.view(np.uint8), length)[::16 * blocks + 16] = pieces(data, length)[offsets[picked]]
            else:
                keys = pieces(data, length)[offsets[picked]] if length else np.zeros(count, dtype="V16")
            words = keys.view("<u8").reshape(count, -1)  # 2 words per 16-byte block, 2 for the tail
            count = len(words)
            h1 = np.zeros(count, dtype=np.uint64)
            h2 = np.zeros(count, dtype=np.uint64)
            for b in range(blocks):
                k1 = _rotl(words[:, 2 * b] * _C1, 31) * _C2
                h1 = h1 ^ k1
                h1 = (_rotl(h1, 27) + h2) * np.uint64(5) + np.uint64(0x52DCE729)
                k2 = _rotl(words[:, 2 * b + 1] * _C2, 33) * _C1
                h2 = h2 ^ k2
                h2 = (_rotl(h2, 31) + h1) * np.uint64(5) + np.uint64(0x38495AB5)
            if tail:
                h2 = h2 ^ (_rotl(words[:, 2 * blocks + 1] * _C2, 33) * _C1)
                h1 = h1 ^ (_rotl(words[:, 2 * blocks] * _C1, 31) * _C2)
            n = np.uint64(length)
            h1 = h1 ^ n
            h2 = h2 ^ n
            h1 = h1 + h2
            h2 = h2 + h1
            h1 = _fmix(h1)
            h2 = _fmix(h2)
            out[picked] = h1 + h2
    return out


def hash_count(bits_per_key: int) -> int:
    return max(1, min(30, round(bits_per_key * math.log(2))))


def expected_false_positive_rate(bits_per_key: float, k: int | None = None) -> float:
    if k is None:
        k = hash_count(round(bits_per_key))
    return (1.0 - math.exp(-k / bits_per_key)) ** k


def build_filter(hashes: "list[int] | np.ndarray", bits_per_key: int) -> bytes:
    """The filter block payload for keys with these bloom_hash values.

    The bit positions are computed for all keys at once with numpy (a loop
    over keys and probes in Python would cost about a microsecond per key);
    compiled, from a list, by one C loop (:func:`filter_bits`).
    """
    if bits_per_key <= 0 or not len(hashes):
        return b""
    k = hash_count(bits_per_key)
    m = max(64, len(hashes) * bits_per_key)
    if cython.compiled and type(hashes) is list:
        return _HEADER.pack(m, k) + filter_bits(hashes, m, k)
    h = hashes if isinstance(hashes, np.ndarray) else np.fromiter(hashes, dtype=np.uint64, count=len(hashes))
    h1 = h & np.uint64(_MASK32)
    h2 = h >> np.uint64(32)
    # h1 + i*h2 < 2**32 * 31 for i < 30: no overflow in 64 bits.
    positions = np.concatenate([(h1 + np.uint64(i) * h2) % np.uint64(m) for i in range(k)])
    flags = np.zeros(m, dtype=bool)
    flags[positions] = True
    return _HEADER.pack(m, k) + np.packbits(flags, bitorder="little").tobytes()


def filter_bits(hashes: list[int], m: int, k: int) -> bytearray:
    """build_filter's bits, the compiled build's form: for each hash, its
    ``k`` probes' bits set among ``m`` (little-endian bit order), one C loop
    (the numpy form makes arrays of every probe; the tests hold the two
    to the same bytes)."""
    out = bytearray((m + 7) // 8)
    p = out
    for i in range(len(hashes)):
        h = hashes[i]
        h1 = h & _MASK32
        h2 = h >> 32
        for j in range(k):
            bit = (h1 + j * h2) % m
            p[bit >> 3] |= 1 << (bit & 7)
    return out


class BloomFilter:
    """A decoded filter. ``may_contain(h)`` is False only if the key is absent."""

    __slots__ = ("bits", "num_bits", "k", "_range")

    def __init__(self, payload: bytes, path: str = "", offset: int = 0) -> None:
        if not payload:
            self.bits = None
            self.num_bits = 0
            self.k = 0
            self._range = range(0)
            return
        if len(payload) < _HEADER.size:
            raise CorruptionError("filter block too short", path=path, offset=offset)
        m, k = _HEADER.unpack_from(payload, 0)
        if not 1 <= k <= 30 or m < 64 or (m + 7) // 8 != len(payload) - _HEADER.size:
            raise CorruptionError(f"filter block malformed (bits={m}, k={k})", path=path, offset=offset)
        bits = bitarray(endian="little")
        bits.frombytes(payload[_HEADER.size:])
        self.bits = bits
        self.num_bits = m
        self.k = k
        self._range = range(k)

    def may_contain(self, h: int) -> bool:
        bits = self.bits
        if bits is None:
            return True
        m = self.num_bits
        h1 = h & _MASK32
        h2 = h >> 32
        for _ in self._range:
            if not bits[h1 % m]:
                return False
            h1 += h2
        return True

    def may_contain_many(self, hashes: list[int]) -> list[bool]:
        """may_contain() of each of ``hashes`` (bloom_hash values). From
        VECTOR_MIN hashes on, every probe of every key is computed at once
        with numpy: a dozen array operations instead of a Python loop of up
        to k probes per key; below it, the arrays' fixed cost (tens of
        microseconds) would exceed what they save."""
        bits = self.bits
        if bits is None:
            return [True] * len(hashes)
        m = self.num_bits
        if len(hashes) < VECTOR_MIN:
            out = []
            probes = self._range
            for h in hashes:
                h1 = h & _MASK32
                h2 = h >> 32
                for _ in probes:
                    if not bits[h1 % m]:
                        out.append(False)
                        break
                    h1 += h2
                else:
                    out.append(True)
            return out
        h = np.array(hashes, dtype=np.uint64).view(np.int64)
        h1 = h & _MASK32
        h2 = (h >> 32) & _MASK32
        # h1 + i*h2 < 2**32 * 31 for i < 30: exact in int64, exactly may_contain's probes.
        positions = h2[:, None] * np.arange(self.k, dtype=np.int64)
        positions += h1[:, None]
        positions %= m
        data = np.frombuffer(bits, dtype=np.uint8)
        return ((data[positions >> 3] >> (positions & 7)) & 1).all(axis=1).tolist()

    @property
    def size_bytes(self) -> int:
        return 0 if self.bits is None else len(self.bits) // 8
