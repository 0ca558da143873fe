"""BlockCache: the byte-bounded cache of decoded table blocks.

A cached block lives in its TableReader's ``blocks`` list, so a hit on the
read path is one list index and one store into the reader's reference bits,
with no lock and no hashing. The cache itself only decides what to keep: it
queues admitted blocks and, when ``capacity`` bytes are exceeded, evicts with
CLOCK (second chance): a block referenced since it was last considered gets
its bit cleared and goes round again; an unreferenced one is dropped from
its reader. CLOCK approximates LRU at a fraction of its bookkeeping.

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
        """Keep ``block`` as ``reader.blocks[index]``, evicting as needed."""
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
                owner.blocks[i] = None
                self.usage -= c
                self.evicted += 1
            reader.blocks[index] = block
            reader.refs[index] = 0
            queue.append((reader, index, charge))
            self.usage += charge
            self.admitted += 1

    def drop_reader(self, reader) -> None:
        """Release every block of ``reader`` (its table is going away)."""
        with self._lock:
            blocks = reader.blocks
            for i, block in enumerate(blocks):
                if block is not None:
                    self.usage -= block.charge
                    blocks[i] = None

    def __len__(self) -> int:
        return len(self._queue)
