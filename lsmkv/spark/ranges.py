"""Key ranges: what the Spark data source reads, as a sorted list of
disjoint half-open byte ranges ``[lo, hi)`` (None: an open end).

This module owns the range algebra the reader plans with -- intersecting
the ranges of pushed filters, cutting them at split keys into partitions
-- and nothing else; it knows no Spark and no engine. Every operation is
exact: a key is in the result iff it satisfies every input, so a filter
turned into ranges here can be left out of Spark's own evaluation.
"""

from __future__ import annotations

from typing import Iterable, Optional

Key = Optional[bytes]
Range = tuple[Key, Key]  # [lo, hi); lo None = from the first key, hi None = to the last

#: Every key.
ALL: list[Range] = [(None, None)]


def after(key: bytes) -> bytes:
    """The smallest key greater than ``key`` (for ``> key`` and ``<= key``)."""
    return key + b"\x00"


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with ``prefix``
    (None when there is none: the prefix is empty or all 0xff bytes)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _tighter(pick, a: Key, b: Key) -> Key:
    """The tighter of two bounds, where None is unbounded: ``pick`` is max
    for lower bounds, min for upper bounds."""
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


def _empty(r: Range) -> bool:
    lo, hi = r
    return lo is not None and hi is not None and lo >= hi


def normalize(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, disjoint, non-empty ranges covering exactly the union of ``ranges``."""
    items = sorted((r for r in ranges if not _empty(r)), key=lambda r: (r[0] is not None, r[0] or b""))
    out: list[Range] = []
    for lo, hi in items:
        if out:
            plo, phi = out[-1]
            if phi is None:
                break  # the previous range runs to the end: it holds this one
            if lo is not None and lo <= phi or lo is None:
                out[-1] = (plo, None if hi is None else max(phi, hi))
                continue
        out.append((lo, hi))
    return out


def intersect(a: list[Range], b: list[Range]) -> list[Range]:
    """The keys in both ``a`` and ``b`` (each normalized)."""
    out: list[Range] = []
    for alo, ahi in a:
        for blo, bhi in b:
            r = (_tighter(max, alo, blo), _tighter(min, ahi, bhi))
            if not _empty(r):
                out.append(r)
    return normalize(out)


def point(key: bytes) -> Range:
    return (key, after(key))


def is_point(r: Range) -> bool:
    lo, hi = r
    return lo is not None and hi == after(lo)


def split(ranges: list[Range], cuts: list[bytes]) -> list[list[Range]]:
    """``ranges`` (normalized) cut at ``cuts`` (ascending): one list of
    ranges per slot ``[cut[i-1], cut[i])`` that holds any of them, in key
    order. Slots no range reaches are left out, so a point reads in one
    partition whatever the cuts are."""
    bounds: list[Range] = []
    prev: Key = None
    for c in cuts:
        bounds.append((prev, c))
        prev = c
    bounds.append((prev, None))
    parts = []
    for slot in bounds:
        piece = intersect(ranges, [slot])
        if piece:
            parts.append(piece)
    return parts
