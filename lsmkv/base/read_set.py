"""ReadSet: what a transaction read from its snapshot -- the keys it got and
the key ranges its scans and cursors covered -- recorded as it reads, for
the validation of its commit (lsmkv/base/conflicts.py).

What a range read records (the choice that keeps commits serializable
without blaming a transaction for what it never looked at): the part of
the key space the read has *walked*, no more.

* A scan, ``scan(start, end)``, records nothing until it yields its first
  entry; after yielding key ``k`` ascending it has covered ``[start, k]``
  (every key in there it did not yield is absent from the snapshot, and a
  key written there since is a phantom); once it ends, ``[start, end)``.
  Descending, ``[k, end)`` and then ``[start, end)``. A scan stopped early
  (``break``, a dropped iterator) keeps what it walked.
* A cursor (:class:`RecordingCursor`) records, from each seek, the range
  between the key sought and where it landed (to the bound when it lands
  on nothing), and grows that range as ``next``/``prev`` move on; a new
  seek starts a new range. Iterating a cursor (``for k, v in cursor``,
  ``cursor.stream()``) records as a scan does.

A key a transaction wrote itself is shadowed by its own write, but its
range is recorded all the same: its keys are validated as written keys
anyway, and keeping the ranges whole keeps them few.

The ranges are read when the transaction commits, also of scans and
cursors still open then (they cannot go on after the commit: the
transaction's streams end with ClosedError). Nothing here reads the
database or validates anything.
"""

from __future__ import annotations

from typing import Iterator

from .cursor import Cursor, SourceCursor
from .key_ranges import Range, is_empty, successor
from .keys import as_key


class Span:
    """One contiguous range a scan or cursor has read: ``[low, high)``, None
    for an open end; with ``high_is_key`` set, ``high`` is the last key read
    (inclusive), which is how a scan moves it without building a key per
    entry. ``read`` stays False until the read observed anything."""

    __slots__ = ("low", "high", "high_is_key", "read")

    def __init__(self, low: bytes | None, high: bytes | None, read: bool = True) -> None:
        self.low = low
        self.high = high
        self.high_is_key = False
        self.read = read

    def end(self) -> bytes | None:
        """The exclusive high end (None: open)."""
        high = self.high
        return successor(high) if self.high_is_key and high is not None else high

    def range(self) -> Range:
        return self.low, self.end()

    def __repr__(self) -> str:
        return f"Span({self.low!r}, {self.end()!r}{'' if self.read else ', unread'})"


class ReadSet:
    """The keys a transaction got and the spans its range reads walked."""

    __slots__ = ("keys", "spans")

    def __init__(self) -> None:
        #: Keys read with get, [] or in (looked up in the snapshot or not).
        self.keys: set[bytes] = set()
        #: Ranges read by scans and cursors, each grown in place as they walk.
        self.spans: list[Span] = []

    def span(self, low: bytes | None, high: bytes | None, read: bool = True) -> Span:
        """A new range read, recorded (the caller grows it)."""
        span = Span(low, high, read)
        self.spans.append(span)
        return span

    def ranges(self) -> list[Range]:
        """The ranges read so far (not merged; empty ones left out)."""
        out = []
        for span in self.spans:
            if span.read:
                low, high = span.range()
                if not is_empty(low, high):
                    out.append((low, high))
        return out


def recorded_stream(items: Iterator[tuple[bytes, bytes]], span: Span, reverse: bool,
                    lower: bytes | None, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    """``items`` (a scan over [lower, upper) in ``span``, ascending or
    descending), growing ``span`` to cover what was yielded; once they are
    all yielded, to the bound. ``span`` starts unread, with its fixed end
    set (the low end ascending, the high one descending)."""
    items = iter(items)
    if reverse:
        for item in items:
            span.low = item[0]
            span.read = True
            yield item
            for item in items:
                span.low = item[0]
                yield item
            break
        span.low = lower
    else:
        span.high_is_key = True
        for item in items:
            span.high = item[0]
            span.read = True
            yield item
            for item in items:
                span.high = item[0]
                yield item
            break
        span.high = upper
        span.high_is_key = False
    span.read = True


def _lesser(a: bytes | None, b: bytes | None) -> bytes | None:
    """The lower of two low ends (None: open, the lowest)."""
    return None if a is None or b is None else min(a, b)


def _greater(a: bytes | None, b: bytes | None) -> bytes | None:
    """The higher of two high ends (None: open, the highest)."""
    return None if a is None or b is None else max(a, b)


class RecordingCursor(Cursor):
    """A cursor (lsmkv/base/cursor.py) that records in a :class:`ReadSet`
    the ranges it walked (see the module docstring). Moves and reads are
    the plain cursor's; each records after it succeeds."""

    __slots__ = ("_reads", "_span")

    def __init__(self, sources: list[SourceCursor], lower_bound: object = None, upper_bound: object = None, *,
                 reads: ReadSet, **kwargs) -> None:
        super().__init__(sources, lower_bound, upper_bound, **kwargs)
        self._reads = reads
        self._span: Span | None = None

    def _landed_up(self) -> bytes | None:
        """The exclusive high end of what a forward move just covered."""
        return self._upper if self._key is None else successor(self._key)

    def _landed_down(self) -> bytes | None:
        """The low end of what a backward move just covered."""
        return self._lower if self._key is None else self._key

    def seek_to_first(self) -> None:
        super().seek_to_first()
        self._span = self._reads.span(self._lower, self._landed_up())

    def seek_to_last(self) -> None:
        super().seek_to_last()
        self._span = self._reads.span(self._landed_down(), self._upper)

    def seek(self, key: object) -> None:
        super().seek(key)
        low = as_key(key)
        if self._lower is not None and low < self._lower:
            low = self._lower
        self._span = self._reads.span(low, self._landed_up())

    def seek_for_prev(self, key: object) -> None:
        super().seek_for_prev(key)
        high = as_key(key)
        high = self._upper if self._upper is not None and high >= self._upper else successor(high)
        self._span = self._reads.span(self._landed_down(), high)

    def next(self) -> None:
        super().next()
        span = self._span
        span.high = _greater(span.high, self._landed_up())

    def prev(self) -> None:
        super().prev()
        span = self._span
        span.low = _lesser(span.low, self._landed_down())

    def stream(self, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        lower, upper = self._lower, self._upper
        if reverse:
            high = upper if start is None or (upper is not None and start >= upper) else successor(start)
            span = self._reads.span(None, high, read=False)
        else:
            low = lower if start is None or (lower is not None and start < lower) else start
            span = self._reads.span(low, None, read=False)
        return recorded_stream(super().stream(start, reverse), span, reverse, lower, upper)
