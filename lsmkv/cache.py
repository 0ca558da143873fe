"""BlockCache: the byte-bounded cache of decoded table blocks.

A cached block lives in its TableReader (``blocks`` list, and, once it is
used a second time, its keys in the reader's key index), so a hit on the
read path takes no lock and does no bookkeeping beyond one store into the
reader's reference bits. The cache
itself only decides what to keep: it queues admitted blocks and, when
``capacity`` bytes are exceeded, evicts with CLOCK (second chance): a block
referenced since it was last considered gets its bit cleared and goes round
again; an unreferenced one is released by its reader (``reader.release``).
CLOCK approximates LRU at a fraction of its bookkeeping.

Charges are the blocks' approximate memory (raw bytes plus per-entry
overhead, see table/block.py). Admission and eviction take a short lock.
"""

from __future__ import annotations

import threading
from collections import deque


class BlockCache:
    __slots__ = ("capacity", "usage", "admitted", "evicted", "_queue", "_lock")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.usage = 0
        self.admitted = 0
        self.evicted = 0
        self._queue: deque = deque()
        self._lock = threading.Lock()

    def admit(self, reader, index: int, block) -> None:
        """Keep ``block`` for ``reader`` (``reader.hold(index, block)``),
        evicting as needed."""
        charge = block.charge
        if charge > self.capacity:
            return
        with self._lock:
            if reader.blocks[index] is not None:
                return  # another thread loaded it meanwhile
            queue = self._queue
            while self.usage + charge > self.capacity and queue:
                entry = queue.popleft()
                owner, i, c = entry
                if owner.blocks[i] is None:
                    continue  # already dropped with its table
                if owner.refs[i]:
                    owner.refs[i] = 0
                    queue.append(entry)
                    continue
                owner.release(i)
                self.usage -= c
                self.evicted += 1
            reader.hold(index, block)
            queue.append((reader, index, charge))
            self.usage += charge
            self.admitted += 1

    def index(self, reader, index: int, block) -> None:
        """A cached block is used again: its reader indexes its keys
        (``reader.index_block``), under the lock so that an eviction cannot
        interleave."""
        with self._lock:
            reader.index_block(index, block)

    def drop_reader(self, reader) -> None:
        """Release every block of ``reader`` (its table is going away)."""
        with self._lock:
            for i, block in enumerate(reader.blocks):
                if block is not None:
                    self.usage -= block.charge
                    reader.release(i)

    def __len__(self) -> int:
        return len(self._queue)
