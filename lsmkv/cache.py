"""LRUCache: a byte-bounded least-recently-used cache (the block cache).

Entries carry a *charge* (their approximate memory in bytes); inserting past
``capacity`` evicts from the least recently used end. Lookups take no lock:
a hit is a dict probe and a move-to-end, each one atomic C call on an
OrderedDict. Inserts and evictions take a short lock. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class LRUCache:
    __slots__ = ("capacity", "usage", "hits", "misses", "_map", "_lock")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.usage = 0
        self.hits = 0
        self.misses = 0
        self._map: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        """The cached value or None (counts a hit or a miss)."""
        entry = self._map.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            self._map.move_to_end(key)
        except KeyError:  # evicted by another thread in between
            pass
        return entry[0]

    def insert(self, key, value, charge: int) -> None:
        if charge > self.capacity:
            return
        with self._lock:
            old = self._map.pop(key, None)
            if old is not None:
                self.usage -= old[1]
            self._map[key] = (value, charge)
            self.usage += charge
            while self.usage > self.capacity:
                _, (_, c) = self._map.popitem(last=False)
                self.usage -= c

    def erase_where(self, predicate) -> None:
        """Drop every entry whose key satisfies ``predicate``."""
        with self._lock:
            for key in [k for k in self._map if predicate(k)]:
                _, c = self._map.pop(key)
                self.usage -= c

    def __len__(self) -> int:
        return len(self._map)
