"""Key ranges and sets of them: what a transaction scanned, what a commit
deleted (lsmkv/base/conflicts.py, lsmkv/base/read_set.py).

A range is ``(low, high)``: low inclusive, high exclusive, ``None`` for an
open end (low None: from the first key; high None: past the last). The
smallest key greater than ``k`` is ``k + b"\\x00"`` (:func:`successor`), so a
range that ends at a key inclusively is ``(low, successor(key))``.

:class:`KeyRanges` is the union of some ranges as disjoint, sorted ranges,
answering "which range holds this key" with a binary search and "do two
sets overlap" with a merge. It owns no other state and does no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import itemgetter
from typing import Iterable, Iterator, Optional

#: (low inclusive, high exclusive); None for an open end.
Range = tuple[Optional[bytes], Optional[bytes]]

_low = itemgetter(0)


def successor(key: bytes) -> bytes:
    """The smallest key greater than ``key``."""
    return key + b"\x00"


def is_empty(low: bytes | None, high: bytes | None) -> bool:
    """Whether [low, high) holds no key."""
    return low is not None and high is not None and low >= high


def show_key(key: bytes, limit: int = 40) -> str:
    """``key`` for a message: escaped (its repr), cut after ``limit`` bytes
    with its length said."""
    if len(key) <= limit:
        return repr(key)
    return f"{key[:limit]!r}... ({len(key)} bytes)"


def show_range(low: bytes | None, high: bytes | None) -> str:
    """A range for a message: ``[b'a', b'k')``, with the open ends named."""
    lo = "the first key" if low is None or low == b"" else show_key(low)
    hi = "past the last key" if high is None else show_key(high)
    return f"[{lo}, {hi})"


class KeyRanges:
    """The union of some ranges, as disjoint ranges in ascending order.

    Building it sorts the ranges once (O(r log r)); :meth:`containing` is a
    binary search (O(log r)), :meth:`first_overlap` a merge of two sets
    (O(r + s)). Empty ranges are dropped; ranges that
    touch or overlap are merged."""

    __slots__ = ("lows", "highs")

    def __init__(self, ranges: Iterable[Range] = ()) -> None:
        #: Lows ascending (an open low is b"", the smallest key); highs
        #: exclusive, None for open.
        self.lows: list[bytes] = []
        self.highs: list[bytes | None] = []
        items = [(b"" if lo is None else lo, hi) for lo, hi in ranges if not is_empty(lo, hi)]
        items.sort(key=_low)
        lows, highs = self.lows, self.highs
        for lo, hi in items:
            if highs and (highs[-1] is None or lo <= highs[-1]):
                if highs[-1] is not None and (hi is None or hi > highs[-1]):
                    highs[-1] = hi
            else:
                lows.append(lo)
                highs.append(hi)

    def __len__(self) -> int:
        return len(self.lows)

    def __bool__(self) -> bool:
        return bool(self.lows)

    def __iter__(self) -> Iterator[Range]:
        """The ranges, ascending; an open low as None."""
        for lo, hi in zip(self.lows, self.highs):
            yield (None if lo == b"" else lo), hi

    def containing(self, key: bytes) -> Range | None:
        """The range that holds ``key``, or None."""
        i = bisect_right(self.lows, key) - 1
        if i >= 0:
            hi = self.highs[i]
            if hi is None or key < hi:
                lo = self.lows[i]
                return (None if lo == b"" else lo), hi
        return None

    def first_overlap(self, other: "KeyRanges") -> tuple[Range, Range] | None:
        """A range of this set and a range of ``other`` sharing a key, or None."""
        a_lows, a_highs, b_lows, b_highs = self.lows, self.highs, other.lows, other.highs
        i = j = 0
        while i < len(a_lows) and j < len(b_lows):
            a_hi, b_hi = a_highs[i], b_highs[j]
            # [a_lo, a_hi) and [b_lo, b_hi) overlap when each starts below the other's end.
            if (b_hi is None or a_lows[i] < b_hi) and (a_hi is None or b_lows[j] < a_hi):
                a = (None if a_lows[i] == b"" else a_lows[i]), a_hi
                b = (None if b_lows[j] == b"" else b_lows[j]), b_hi
                return a, b
            # The one that ends first can overlap nothing further on.
            if a_hi is not None and (b_hi is None or a_hi <= b_hi):
                i += 1
            else:
                j += 1
        return None
