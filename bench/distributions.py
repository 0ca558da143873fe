"""Key-choosing distributions: which record an operation touches.

Everything here draws from a seeded ``numpy.random.Generator`` and returns
whole arrays at once, so that a phase's operation sequence is generated before
its timed loop starts and is identical for every engine.

The distributions follow YCSB's definitions (core workload, ``requestdistribution``):

* :class:`Uniform`: every record in ``[lo, hi]`` equally likely.
* :class:`Zipfian`: item ``i`` (0-based) has probability proportional to
  ``1/(i+1)**theta``, sampled with the constant-time method of Gray et al.,
  "Quickly Generating Billion-Record Synthetic Databases" (SIGMOD 1994), the
  method YCSB uses. Item 0 is exactly ``1/zeta(n)`` likely, item 1 exactly
  ``0.5**theta/zeta(n)``; the rest follow the method's approximation.
* :class:`ScrambledZipfian`: YCSB's ``zipfian``: a zipfian draw over 10^10
  items (theta 0.99), hashed with 64-bit FNV-1a and folded onto the record
  range, so popular records are scattered over the key space instead of
  clustered at its start.
* :class:`SkewedLatest`: YCSB's ``latest``: a zipfian distance back from the
  most recently inserted record, so recent inserts are the most popular.
* :class:`Hotspot`: a fraction of the operations go to a hot fraction of the
  records (the first records of the range), the rest to the others.
* :class:`Sequential`: records in order, wrapping around.
* :class:`Exponential`: YCSB's ``exponential``: an exponentially distributed
  distance back from the most recent record.

Draws that depend on how many records exist (zipfian, latest, exponential)
take a per-draw upper bound ``limit`` (the newest record number at the time of
the operation), which is how inserts during a phase widen the choice.
"""

from __future__ import annotations

import math

import numpy as np

#: YCSB's zipfian constant.
ZIPFIAN_CONSTANT = 0.99
#: Items in the zipfian draw that ScrambledZipfian hashes from (as YCSB).
SCRAMBLED_ITEM_COUNT = 10_000_000_000

_FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
_FNV_PRIME_64 = 0x100000001B3
_MASK64 = (1 << 64) - 1

__all__ = [
    "ZIPFIAN_CONSTANT", "SCRAMBLED_ITEM_COUNT", "fnv1a_64", "fnvhash64", "fnvhash64_array", "zeta",
    "KeyChooser", "Uniform", "Zipfian", "ScrambledZipfian", "SkewedLatest", "Hotspot", "Sequential",
    "Exponential",
]


def fnv1a_64(data: bytes) -> int:
    """64-bit FNV-1a of ``data`` (the textbook definition, used as the test oracle)."""
    h = _FNV_OFFSET_BASIS_64
    for octet in data:
        h = ((h ^ octet) * _FNV_PRIME_64) & _MASK64
    return h


def fnvhash64(value: int) -> int:
    """YCSB's hash of a record number: FNV-1a over its 8 little-endian bytes,
    read as a signed 64-bit integer and made non-negative."""
    h = fnv1a_64((value & _MASK64).to_bytes(8, "little"))
    signed = h - (1 << 64) if h >> 63 else h
    return abs(signed) & ((1 << 63) - 1)


def fnvhash64_array(values: np.ndarray) -> np.ndarray:
    """:func:`fnvhash64` of every element, vectorized (returns int64, all >= 0)."""
    v = np.asarray(values, dtype=np.int64).view(np.uint64)
    h = np.full(v.shape, _FNV_OFFSET_BASIS_64, dtype=np.uint64)
    prime = np.uint64(_FNV_PRIME_64)
    with np.errstate(over="ignore"):
        for shift in range(0, 64, 8):
            h ^= (v >> np.uint64(shift)) & np.uint64(0xFF)
            h *= prime
    signed = h.view(np.int64)
    with np.errstate(over="ignore"):
        out = np.abs(signed)
    # abs(INT64_MIN) overflows back to itself; clear the sign bit as a last resort.
    return out & np.int64(0x7FFFFFFFFFFFFFFF)


def zeta(n: int, theta: float) -> float:
    """sum(1/i**theta for i in 1..n).

    Exact (summed in blocks) up to 10^8 terms; beyond that, the first 10^6
    terms exactly plus the Euler-Maclaurin estimate of the tail.
    """
    if n <= 0:
        return 0.0
    exact_limit = 100_000_000
    if n <= exact_limit:
        return _zeta_sum(1, n, theta)
    head = 1_000_000
    total = _zeta_sum(1, head, theta)
    a, b = head + 1, n
    f = lambda x: x ** -theta  # noqa: E731
    if theta == 1.0:
        integral = math.log(b / a)
    else:
        integral = (b ** (1 - theta) - a ** (1 - theta)) / (1 - theta)
    # Euler-Maclaurin: integral + (f(a)+f(b))/2 + (f'(b)-f'(a))/12
    fprime = lambda x: -theta * x ** (-theta - 1)  # noqa: E731
    return total + integral + (f(a) + f(b)) / 2 + (fprime(b) - fprime(a)) / 12


def _zeta_sum(first: int, last: int, theta: float) -> float:
    total = 0.0
    block = 4_000_000
    for lo in range(first, last + 1, block):
        hi = min(last, lo + block - 1)
        total += float(np.sum(np.arange(lo, hi + 1, dtype=np.float64) ** -theta))
    return total


class KeyChooser:
    """A distribution over record numbers. ``sample`` returns ``size`` draws.

    ``limit`` (optional, array of length ``size``): the newest record number
    that exists when each draw happens. Distributions over a fixed range
    ignore it; the others never return a record beyond it.
    """

    name = "?"

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError


class Uniform(KeyChooser):
    """Every record in ``[lo, hi]`` equally likely."""

    name = "uniform"

    def __init__(self, lo: int, hi: int) -> None:
        if hi < lo:
            raise ValueError(f"uniform range is empty ({lo}..{hi})")
        self.lo, self.hi = lo, hi

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        return rng.integers(self.lo, self.hi + 1, size=size, dtype=np.int64)


class Zipfian(KeyChooser):
    """Zipfian over ``base + [0, n)`` with constant ``theta``; item ``base`` is the most popular.

    When ``sample`` gets a ``limit``, each draw is over ``[0, limit_i - base + 1)``
    items instead (the item count may only grow past ``n``, as in YCSB).
    """

    name = "zipfian"

    def __init__(self, n: int, theta: float = ZIPFIAN_CONSTANT, base: int = 0,
                 zetan: float | None = None) -> None:
        if n < 1:
            raise ValueError("zipfian needs at least one item")
        if not 0 < theta < 1:
            raise ValueError(f"zipfian constant must be in (0, 1), not {theta}")
        self.n = n
        self.theta = theta
        self.base = base
        self.alpha = 1.0 / (1.0 - theta)
        self.zeta2 = zeta(2, theta)
        self.zetan = zeta(n, theta) if zetan is None else zetan
        # zeta(n) for item counts above self.n, extended on demand (growing item counts).
        self._zeta_growth = np.array([self.zetan])

    def _zeta_for(self, counts: np.ndarray) -> np.ndarray:
        top = int(counts.max())
        if top > self.n + len(self._zeta_growth) - 1:
            start = self.n + len(self._zeta_growth)
            terms = np.arange(start, top + 1, dtype=np.float64) ** -self.theta
            self._zeta_growth = np.concatenate(
                [self._zeta_growth, self._zeta_growth[-1] + np.cumsum(terms)])
        return self._zeta_growth[np.maximum(counts - self.n, 0)]

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        if limit is None:
            counts = None
            n = float(self.n)
            zetan: float | np.ndarray = self.zetan
        else:
            counts = np.maximum(np.asarray(limit, dtype=np.int64) - self.base + 1, 1)
            n = counts.astype(np.float64)
            zetan = self._zeta_for(counts)
        u = rng.random(size)
        uz = u * zetan
        eta = (1.0 - np.power(2.0 / n, 1.0 - self.theta)) / (1.0 - self.zeta2 / zetan)
        raw = n * np.power(eta * u - eta + 1.0, self.alpha)
        out = np.floor(raw).astype(np.int64)
        out[uz < 1.0 + 0.5 ** self.theta] = 1
        out[uz < 1.0] = 0
        upper = (self.n if counts is None else counts) - 1
        out = np.minimum(out, upper)
        return out + self.base


class ScrambledZipfian(KeyChooser):
    """YCSB's ``zipfian``: popular items scattered over ``[lo, hi]`` by FNV hashing."""

    name = "zipfian"

    # zeta(10^10, 0.99), as YCSB precomputes it.
    _ZETAN_099 = 26.46902820178302

    def __init__(self, lo: int, hi: int, theta: float = ZIPFIAN_CONSTANT) -> None:
        if hi < lo:
            raise ValueError(f"zipfian range is empty ({lo}..{hi})")
        self.lo, self.hi = lo, hi
        self.itemcount = hi - lo + 1
        zetan = self._ZETAN_099 if theta == ZIPFIAN_CONSTANT else zeta(SCRAMBLED_ITEM_COUNT, theta)
        self._gen = Zipfian(SCRAMBLED_ITEM_COUNT, theta, zetan=zetan)

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        draws = self._gen.sample(rng, size)
        out = self.lo + fnvhash64_array(draws) % self.itemcount
        if limit is not None:
            # As YCSB: a record that is not inserted yet is drawn again.
            limit = np.asarray(limit, dtype=np.int64)
            bad = np.flatnonzero(out > limit)
            rounds = 0
            while bad.size:
                redraw = self.lo + fnvhash64_array(self._gen.sample(rng, bad.size)) % self.itemcount
                out[bad] = redraw
                bad = bad[redraw > limit[bad]]
                rounds += 1
                if rounds > 1000:
                    raise ValueError("zipfian range is far larger than the records that exist")
        return out


class SkewedLatest(KeyChooser):
    """YCSB's ``latest``: ``limit - zipfian(limit)``; the newest record is the most popular."""

    name = "latest"

    def __init__(self, initial_limit: int, theta: float = ZIPFIAN_CONSTANT) -> None:
        self._zipf = Zipfian(max(initial_limit, 1), theta)

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        if limit is None:
            raise ValueError("latest needs the newest record number of every draw")
        limit = np.asarray(limit, dtype=np.int64)
        # A zipfian distance in [0, limit) back from the newest record (at least one item).
        distance = self._zipf.sample(rng, size, limit=np.maximum(limit - 1, 0))
        return np.maximum(limit - distance, 0)


class Hotspot(KeyChooser):
    """``hot_op_fraction`` of draws go uniformly to the first ``hot_set_fraction``
    of ``[lo, hi]`` (the hot set); the rest uniformly to the remainder."""

    name = "hotspot"

    def __init__(self, lo: int, hi: int, hot_set_fraction: float = 0.2, hot_op_fraction: float = 0.8) -> None:
        if hi < lo:
            raise ValueError(f"hotspot range is empty ({lo}..{hi})")
        if not 0.0 <= hot_set_fraction <= 1.0 or not 0.0 <= hot_op_fraction <= 1.0:
            raise ValueError("hotspot fractions must be between 0 and 1")
        self.lo, self.hi = lo, hi
        interval = hi - lo + 1
        self.hot = int(interval * hot_set_fraction)
        self.cold = interval - self.hot
        self.hot_op_fraction = hot_op_fraction

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        hot_draw = rng.random(size) < self.hot_op_fraction
        if self.hot == 0:
            hot_draw[:] = False
        if self.cold == 0:
            hot_draw[:] = True
        out = np.empty(size, dtype=np.int64)
        n_hot = int(hot_draw.sum())
        if n_hot:
            out[hot_draw] = self.lo + rng.integers(0, self.hot, size=n_hot)
        if size - n_hot:
            out[~hot_draw] = self.lo + self.hot + rng.integers(0, self.cold, size=size - n_hot)
        return out


class Sequential(KeyChooser):
    """Records ``lo, lo+1, ..., hi, lo, ...`` (continues across calls)."""

    name = "sequential"

    def __init__(self, lo: int, hi: int) -> None:
        if hi < lo:
            raise ValueError(f"sequential range is empty ({lo}..{hi})")
        self.lo, self.interval = lo, hi - lo + 1
        self._next = 0

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        out = self.lo + (np.arange(self._next, self._next + size, dtype=np.int64) % self.interval)
        self._next += size
        return out


class Exponential(KeyChooser):
    """YCSB's ``exponential``: ``limit - X`` with X exponential such that
    ``percentile`` percent of draws fall within the newest ``range_`` records."""

    name = "exponential"

    def __init__(self, percentile: float, range_: float) -> None:
        if not 0 < percentile < 100 or range_ <= 0:
            raise ValueError("exponential needs 0 < percentile < 100 and a positive range")
        self.gamma = -math.log(1.0 - percentile / 100.0) / range_

    def sample(self, rng: np.random.Generator, size: int, limit: np.ndarray | None = None) -> np.ndarray:
        if limit is None:
            raise ValueError("exponential needs the newest record number of every draw")
        limit = np.asarray(limit, dtype=np.int64)
        out = limit - (-np.log1p(-rng.random(size)) / self.gamma).astype(np.int64)
        bad = np.flatnonzero(out < 0)
        while bad.size:
            redraw = limit[bad] - (-np.log1p(-rng.random(bad.size)) / self.gamma).astype(np.int64)
            out[bad] = redraw
            bad = bad[redraw < 0]
        return out
