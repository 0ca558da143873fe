"""The seeded data: how record numbers become keys, and where values come from.

A record is identified by a number (its *keynum*); a :class:`KeySpace` turns
numbers into key bytes. Two key spaces exist:

* :class:`DbBenchKeys`: db_bench style, the number in decimal, zero-padded to
  ``--key-size`` bytes, so key order is number order (``fillseq`` writes in
  key order). A *missing* key is a present key followed by ``"."``: it sorts
  between two present keys, as db_bench's ``readmissing`` does.
* :class:`YcsbKeys`: YCSB style, ``"user"`` followed by the number (or, with
  ``insertorder=hashed``, by its FNV hash), zero-padded to ``zeropadding``
  digits.

Values come from a :class:`ValuePool`: a seeded 1 MiB buffer whose bytes are
``compressibility`` redundant (0: random bytes; 0.5: a general-purpose
compressor shrinks them to about half), read at a rolling offset like
db_bench's value generator.

The engine suites (bench/suites/lsm.py, compaction.py, btree.py) draw their
data from a ``random.Random`` instead, as the scripts they replaced did, so
that a seed gives the same keys as before: :func:`random_keys` and
:func:`half_random_values`.
"""

from __future__ import annotations

import random
import zlib

import numpy as np

from .distributions import fnvhash64_array

__all__ = ["KeySpace", "DbBenchKeys", "YcsbKeys", "ValuePool", "compression_ratio", "random_keys",
           "half_random_values", "VALUE_COUNT"]

#: Distinct values the engine suites cycle through (value ``i & (VALUE_COUNT - 1)`` for the i-th put).
VALUE_COUNT = 4096


class KeySpace:
    """Maps record numbers to keys. ``identity`` names the mapping (two key
    spaces with the same identity produce the same keys)."""

    identity = "?"

    def keys(self, nums: np.ndarray) -> list[bytes]:
        raise NotImplementedError

    def key(self, num: int) -> bytes:
        return self.keys(np.array([num], dtype=np.int64))[0]

    def missing_keys(self, nums: np.ndarray) -> list[bytes]:
        """Keys guaranteed absent, each sorting right after the key of its number."""
        return [k + b"." for k in self.keys(nums)]

    def max_records(self) -> int:
        """How many distinct numbers this key space can represent."""
        raise NotImplementedError


class DbBenchKeys(KeySpace):
    """Decimal record number, zero-padded to ``key_size`` bytes."""

    def __init__(self, key_size: int = 16) -> None:
        if key_size < 4:
            raise ValueError(f"--key-size must be at least 4 bytes, not {key_size}")
        self.key_size = key_size
        self.identity = f"dbbench:key_size={key_size}"

    def keys(self, nums: np.ndarray) -> list[bytes]:
        fmt = b"%0" + str(self.key_size).encode() + b"d"
        return [fmt % n for n in np.asarray(nums).tolist()]

    def max_records(self) -> int:
        return 10 ** self.key_size


class YcsbKeys(KeySpace):
    """``user<number>`` as YCSB builds keys (hashed or ordered inserts)."""

    def __init__(self, hashed: bool = True, zeropadding: int = 1) -> None:
        self.hashed = hashed
        self.zeropadding = max(1, zeropadding)
        self.identity = f"ycsb:insertorder={'hashed' if hashed else 'ordered'}:zeropadding={self.zeropadding}"

    def keys(self, nums: np.ndarray) -> list[bytes]:
        nums = np.asarray(nums, dtype=np.int64)
        if self.hashed:
            nums = fnvhash64_array(nums)
        fmt = b"user%0" + str(self.zeropadding).encode() + b"d"
        return [fmt % n for n in nums.tolist()]

    def max_records(self) -> int:
        return 2 ** 62


class ValuePool:
    """Seeded value bytes with a chosen compressibility.

    ``take(lengths)`` returns one value per length, each a slice of the pool
    at a rolling offset; the same seed and lengths give the same values.
    """

    SIZE = 1 << 20
    _PIECE = 100

    def __init__(self, seed: int, compressibility: float = 0.5) -> None:
        if not 0.0 <= compressibility < 1.0:
            raise ValueError(f"--value-compressibility must be in [0, 1), not {compressibility}")
        rng = np.random.default_rng([seed, 0x76616C])
        random_len = max(1, round(self._PIECE * (1.0 - compressibility)))
        pieces = self.SIZE // self._PIECE + 1
        raw = rng.integers(0, 256, size=(pieces, random_len), dtype=np.uint8)
        reps = -(-self._PIECE // random_len)
        block = np.tile(raw, (1, reps))[:, : self._PIECE]
        self._pool = block.tobytes()[: self.SIZE]
        self._pos = 0
        self.compressibility = compressibility

    def take(self, lengths: np.ndarray | list[int]) -> list[bytes]:
        pool, size = self._pool, self.SIZE
        pos = self._pos
        out = []
        for n in np.asarray(lengths).tolist():
            if n > size:
                raise ValueError(f"values larger than {size} bytes are not supported")
            if pos + n > size:
                pos = 0
            out.append(pool[pos:pos + n])
            pos += n
        self._pos = pos
        return out


def compression_ratio(values: list[bytes]) -> float:
    """Compressed/original size of the values concatenated (zlib level 6)."""
    raw = b"".join(values)
    return len(zlib.compress(raw, 6)) / max(1, len(raw))


def random_keys(rng: random.Random, count: int, size: int = 16) -> list[bytes]:
    """``count`` random keys of ``size`` bytes, in the order drawn (duplicates possible)."""
    return [rng.randbytes(size) for _ in range(count)]


def half_random_values(rng: random.Random, size: int, count: int = VALUE_COUNT) -> list[bytes]:
    """``count`` values of ``size`` bytes, each half random bytes repeated
    (about 2:1 compressible, like db_bench's default)."""
    return [(rng.randbytes(size // 2) * 2)[:size] for _ in range(count)]
