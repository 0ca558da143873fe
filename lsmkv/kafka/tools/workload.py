"""A seeded stream of keyed change events, and the table it leaves behind.

A :class:`WorkloadSpec` says how many records, over how many keys, chosen
how (``uniform``, ``zipfian`` -- popular keys scattered over the key space
-- or ``sequential``), with values of what size and compressibility, and
which share are tombstones (a null value: the key is deleted). The stream
is a pure function of the spec and its seed: the producer publishes it,
and :func:`expected_table` computes, without any broker, the table a
correct load must end with -- the last value of every key whose last
record is not a tombstone.

Keys are ``k<index>`` (zero-padded); a value starts with
``<key index>:<counter>|``, the counter counting that key's records from
1, so a reader can tell a key's values apart and check their order; the
rest is filler, ``compressibility`` of it one repeated byte and the rest
seeded random bytes.

This module never talks to a broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

DISTRIBUTIONS = ("uniform", "zipfian", "sequential")
#: Records generated per numpy draw.
_CHUNK = 65_536
_POOL = 1 << 20


@dataclass(frozen=True)
class WorkloadSpec:
    records: int
    keys: int
    distribution: str = "uniform"
    value_size: int = 100
    #: Share of each value (0..1) that is one repeated byte (compresses well).
    compressibility: float = 0.5
    tombstone_ratio: float = 0.0
    seed: int = 0
    #: Zipfian skew (YCSB's 0.99).
    zipf_theta: float = 0.99

    def __post_init__(self) -> None:
        for name in ("records", "keys", "value_size", "seed"):
            value = getattr(self, name)
            if type(value) is not int or value < (1 if name == "keys" else 0):
                raise ValueError(f"{name} must be a non-negative int{' (at least 1)' if name == 'keys' else ''}, "
                                 f"not {value!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}, not {self.distribution!r}")
        for name in ("compressibility", "tombstone_ratio"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{name} must be a number from 0 to 1, not {value!r}")
        if not 0 < self.zipf_theta < 10:
            raise ValueError(f"zipf_theta must be in (0, 10), not {self.zipf_theta!r}")

    def key(self, index: int) -> bytes:
        return b"k%0*d" % (len(str(self.keys - 1)), index)


def _key_indexes(spec: WorkloadSpec, rng: np.random.Generator) -> Iterator[np.ndarray]:
    n = spec.records
    if spec.distribution == "sequential":
        for start in range(0, n, _CHUNK):
            yield np.arange(start, min(n, start + _CHUNK), dtype=np.int64) % spec.keys
        return
    if spec.distribution == "zipfian":
        weights = 1.0 / np.power(np.arange(1, spec.keys + 1, dtype=np.float64), spec.zipf_theta)
        cdf = np.cumsum(weights)
        cdf /= cdf[-1]
        scatter = rng.permutation(spec.keys)  # popular keys spread over the key space
        for start in range(0, n, _CHUNK):
            draws = np.searchsorted(cdf, rng.random(min(_CHUNK, n - start)), side="right")
            yield scatter[np.minimum(draws, spec.keys - 1)]
        return
    for start in range(0, n, _CHUNK):
        yield rng.integers(0, spec.keys, min(_CHUNK, n - start))


def generate(spec: WorkloadSpec) -> Iterator[tuple[bytes, bytes | None]]:
    """The stream: (key, value or None for a tombstone), in order."""
    rng = np.random.default_rng(spec.seed)
    pool = rng.integers(0, 256, _POOL, dtype=np.uint8).tobytes()
    counters = np.zeros(spec.keys, dtype=np.int64)
    width = len(str(spec.keys - 1))
    size = spec.value_size
    repeated = int(size * spec.compressibility)
    random_part = size - repeated
    fill = b"a" * repeated
    n = 0
    for indexes in _key_indexes(spec, rng):
        tombstones = rng.random(len(indexes)) < spec.tombstone_ratio if spec.tombstone_ratio else None
        starts = rng.integers(0, _POOL - random_part, len(indexes)) if random_part else None
        for j, index in enumerate(indexes.tolist()):
            key = b"k%0*d" % (width, index)
            counters[index] += 1
            if tombstones is not None and tombstones[j]:
                yield key, None
            else:
                head = b"%d:%d|" % (index, counters[index])
                if random_part:
                    s = int(starts[j])
                    body = pool[s:s + random_part] + fill
                else:
                    body = fill
                yield key, (head + body)[:max(size, len(head))]
            n += 1


def expected_table(spec: WorkloadSpec) -> dict[bytes, bytes]:
    """The table a correct load of the whole stream ends with."""
    table: dict[bytes, bytes] = {}
    for key, value in generate(spec):
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def parse_value(value: bytes) -> tuple[int, int]:
    """(key index, per-key counter) a generated value starts with."""
    head = value[:value.index(b"|")]
    index, counter = head.split(b":")
    return int(index), int(counter)
