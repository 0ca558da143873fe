"""Range tombstones, fragmented: what ``db.delete_range(start, end)`` leaves.

A range tombstone ``(start, end, seq)`` deletes every version of every key
k with ``start <= k < end`` whose sequence is below ``seq`` (RocksDB's
DeleteRange: the end is exclusive). Tombstones written at different times
overlap and nest; a :class:`FragmentedTombstones` cuts them, as RocksDB's
FragmentedRangeTombstoneList does, into non-overlapping *fragments*
``[start, end)`` sorted by key, each with the descending sequences of the
tombstones that cover it. Then every question is a binary search:

* :meth:`covering_seq`: is key k at sequence s covered when read at
  snapshot r? -- yes iff ``s < covering_seq(k, r)``;
* :meth:`clipped`: the fragments a table holding [lo, hi) must carry;
* :meth:`visible_spans`: the key ranges a reader at r sees deleted
  (adjacent fragments joined), for skipping stretches of older sources.

A FragmentedTombstones is immutable once built: the memtable builds a new
one for each range delete it takes, readers use the one of the moment
without a lock. This module knows nothing of tables, memtables or the DB.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterable, Iterator

#: A range tombstone as written: (start, end, sequence).
Tombstone = tuple[bytes, bytes, int]


class FragmentedTombstones:
    """Non-overlapping fragments ``[starts[i], ends[i])`` in key order, each
    with ``seqs[i]``: the sequences of the tombstones covering it, descending."""

    __slots__ = ("starts", "ends", "seqs", "_spans")

    def __init__(self, starts: list[bytes], ends: list[bytes], seqs: list[tuple[int, ...]]) -> None:
        self.starts = starts
        self.ends = ends
        self.seqs = seqs
        #: visible_spans() of the last read sequence asked: (read_seq, spans).
        self._spans: tuple[int, tuple[list[bytes], list[bytes]]] | None = None

    @classmethod
    def build(cls, tombstones: Iterable[Tombstone]) -> "FragmentedTombstones":
        """Fragment ``tombstones`` (any order, overlapping or nested; empty
        ranges are ignored). O(n log n) in the number of tombstones, whatever
        the number of keys they cover."""
        events: dict[bytes, list[tuple[int, int]]] = {}
        for start, end, seq in tombstones:
            if start < end:
                events.setdefault(start, []).append((seq, 1))
                events.setdefault(end, []).append((seq, -1))
        starts: list[bytes] = []
        ends: list[bytes] = []
        seqs: list[tuple[int, ...]] = []
        active: dict[int, int] = {}
        points = sorted(events)
        for i, point in enumerate(points):
            for seq, delta in events[point]:
                count = active.get(seq, 0) + delta
                if count:
                    active[seq] = count
                else:
                    del active[seq]
            if active and i + 1 < len(points):
                covering = tuple(sorted(active, reverse=True))
                if ends and ends[-1] == point and seqs[-1] == covering:
                    ends[-1] = points[i + 1]  # the same tombstones go on: one fragment
                else:
                    starts.append(point)
                    ends.append(points[i + 1])
                    seqs.append(covering)
        return cls(starts, ends, seqs)

    def with_tombstone(self, start: bytes, end: bytes, seq: int) -> "FragmentedTombstones":
        """A new list: these fragments and the tombstone (start, end, seq).
        Only the fragments it overlaps are fragmented again; the rest are
        copied (list slices, in C): O(t + k log k) for t fragments, k of them
        overlapped, however many keys the tombstone covers."""
        if not start < end:
            return self
        i = bisect_right(self.ends, start)  # the first fragment ending after start
        j = bisect_left(self.starts, end, i)  # the first fragment starting at or after end
        pieces = [(start, end, seq)]
        for k in range(i, j):
            pieces.extend((self.starts[k], self.ends[k], covering) for covering in self.seqs[k])
        middle = FragmentedTombstones.build(pieces)
        return FragmentedTombstones(self.starts[:i] + middle.starts + self.starts[j:],
                                    self.ends[:i] + middle.ends + self.ends[j:],
                                    self.seqs[:i] + middle.seqs + self.seqs[j:])

    @classmethod
    def merged(cls, parts: Iterable["FragmentedTombstones | None"]) -> "FragmentedTombstones":
        """The fragments of the tombstones of all ``parts`` together."""
        return cls.build(t for part in parts if part is not None for t in part.tombstones())

    def __len__(self) -> int:
        """The number of fragments."""
        return len(self.starts)

    def __bool__(self) -> bool:
        return bool(self.starts)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FragmentedTombstones) and self.starts == other.starts
                and self.ends == other.ends and self.seqs == other.seqs)

    def __repr__(self) -> str:
        return "FragmentedTombstones(%r)" % list(zip(self.starts, self.ends, self.seqs))

    def count(self) -> int:
        """The number of (fragment, sequence) records: what a table stores."""
        return sum(map(len, self.seqs))

    def tombstones(self) -> Iterator[Tombstone]:
        """Every (start, end, seq) record, fragment by fragment, newest first in each."""
        for start, end, seqs in zip(self.starts, self.ends, self.seqs):
            for seq in seqs:
                yield start, end, seq

    @property
    def smallest(self) -> bytes:
        return self.starts[0]

    @property
    def largest_end(self) -> bytes:
        return self.ends[-1]

    def covering_seq(self, key: bytes, read_seq: int) -> int:
        """The newest sequence <= read_seq of a tombstone covering ``key``,
        0 if none: a version of ``key`` with a sequence below it is deleted
        for a reader at ``read_seq``."""
        i = bisect_right(self.starts, key) - 1
        if i < 0 or key >= self.ends[i]:
            return 0
        for seq in self.seqs[i]:
            if seq <= read_seq:
                return seq
        return 0

    def meets(self, first: bytes, last: bytes) -> bool:
        """Whether some fragment covers a key k with first <= k <= last."""
        i = bisect_right(self.ends, first)  # the first fragment ending after first
        return i < len(self.starts) and self.starts[i] <= last

    def span_at(self, key: bytes, read_seq: int) -> tuple[bytes, bytes] | None:
        """The joined stretch [start, end) holding ``key`` that is deleted
        for a reader at ``read_seq``, or None if ``key`` is not in one."""
        starts, ends = self.visible_spans(read_seq)
        i = bisect_right(starts, key) - 1
        if i < 0 or key >= ends[i]:
            return None
        return starts[i], ends[i]

    def span_below(self, key: bytes, read_seq: int) -> tuple[bytes, bytes] | None:
        """The deleted stretch [start, end) with start < key <= end, if any:
        every key just below ``key`` is deleted (reverse iteration)."""
        starts, ends = self.visible_spans(read_seq)
        i = bisect_right(starts, key) - 1
        if i >= 0 and starts[i] == key:
            i -= 1
        if i < 0 or ends[i] < key:
            return None
        return starts[i], ends[i]

    def visible_spans(self, read_seq: int) -> tuple[list[bytes], list[bytes]]:
        """The key ranges deleted for a reader at ``read_seq`` (fragments with
        a sequence <= read_seq, touching ones joined), as (starts, ends)."""
        cached = self._spans
        if cached is not None and cached[0] == read_seq:
            return cached[1]
        starts: list[bytes] = []
        ends: list[bytes] = []
        for start, end, seqs in zip(self.starts, self.ends, self.seqs):
            if seqs[-1] <= read_seq:
                if ends and ends[-1] == start:
                    ends[-1] = end
                else:
                    starts.append(start)
                    ends.append(end)
        spans = (starts, ends)
        self._spans = (read_seq, spans)
        return spans

    def clipped(self, lo: bytes | None, hi: bytes | None) -> "FragmentedTombstones":
        """The fragments cut to [lo, hi) (None: unbounded): what a table
        holding that key range carries."""
        starts: list[bytes] = []
        ends: list[bytes] = []
        seqs: list[tuple[int, ...]] = []
        for start, end, covering in zip(self.starts, self.ends, self.seqs):
            if lo is not None and start < lo:
                start = lo
            if hi is not None and end > hi:
                end = hi
            if start < end:
                starts.append(start)
                ends.append(end)
                seqs.append(covering)
        return FragmentedTombstones(starts, ends, seqs)

    def retained(self, keep) -> "FragmentedTombstones":
        """The fragments with only the sequences ``keep(seq)`` is true of."""
        starts: list[bytes] = []
        ends: list[bytes] = []
        seqs: list[tuple[int, ...]] = []
        for start, end, covering in zip(self.starts, self.ends, self.seqs):
            kept = tuple(seq for seq in covering if keep(seq))
            if kept:
                starts.append(start)
                ends.append(end)
                seqs.append(kept)
        return FragmentedTombstones(starts, ends, seqs)


EMPTY = FragmentedTombstones([], [], [])
