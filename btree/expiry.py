"""How many of the tree's values with a ttl have expired at a moment, so
that ``len(db)`` counts the keys a read finds without reading the leaves.

The tree counts its entries and its values with a ttl exactly (the meta
page keeps both); what it cannot know without reading is how many of those
deadlines have passed. :class:`ExpiredCount` keeps the multiset of the
deadlines: built by one walk of the leaves the first time it is needed,
kept exact from then on by the tree's put and delete (including the
sweep's deletes), and asked ``expired(now)``. Each deadline is counted
once, when the clock first passes it, so a count costs O(log n) per
deadline passed since the last one, and O(1) when none passed.

Invariant: every deadline in the multiset is either at or before
``as_of`` and counted in ``_expired``, or after it and counted in
``_pending`` (deadline -> how many), with a heap entry for it. The heap may
hold stale entries (a deadline whose values were all deleted, or a
deadline pushed twice); popping one counts what ``_pending`` still holds
for it, which is then nothing.

A clock that goes back (the wall clock set back) makes expired values
readable again: ``expired`` then returns None and the caller builds the
count afresh. This module never reads a clock or a page: it is handed
deadlines and times (ms since the epoch, lsmkv/base/ttl.py).
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from typing import Iterable

#: Stale heap entries tolerated beyond the live ones before the heap is rebuilt.
_SLACK = 64


class ExpiredCount:
    """The deadlines of the values with a ttl in one tree, and how many of
    them have passed (see the module docstring)."""

    __slots__ = ("_pending", "_heap", "_expired", "_as_of")

    def __init__(self, deadlines: Iterable[int], now: int) -> None:
        pending: dict[int, int] = {}
        expired = 0
        for deadline in deadlines:
            if deadline <= now:
                expired += 1
            else:
                pending[deadline] = pending.get(deadline, 0) + 1
        heap = list(pending)
        heapify(heap)
        self._pending = pending
        self._heap = heap
        self._expired = expired
        self._as_of = now

    def add(self, deadline: int) -> None:
        """A value with this deadline entered the tree."""
        if deadline <= self._as_of:
            self._expired += 1
            return
        pending = self._pending
        count = pending.get(deadline)
        if count is None:
            pending[deadline] = 1
            heappush(self._heap, deadline)
        else:
            pending[deadline] = count + 1

    def remove(self, deadline: int) -> None:
        """A value with this deadline left the tree (deleted, overwritten, swept)."""
        if deadline <= self._as_of:
            self._expired -= 1
            return
        pending = self._pending
        count = pending[deadline]
        if count > 1:
            pending[deadline] = count - 1
            return
        del pending[deadline]
        if len(self._heap) > 2 * len(pending) + _SLACK:
            heap = self._heap = list(pending)
            heapify(heap)

    def expired(self, now: int) -> int | None:
        """How many of the deadlines are at or before ``now``; None if
        ``now`` is before the last time asked (the clock went back: build
        the count again)."""
        if now < self._as_of:
            return None
        heap, pending = self._heap, self._pending
        expired = self._expired
        while heap and heap[0] <= now:
            expired += pending.pop(heappop(heap), 0)
        self._expired = expired
        self._as_of = now
        return expired
