"""BlockCache: the byte-bounded cache of table blocks.

A cached block lives in its TableReader (``blocks`` list), held either raw
(its verified, uncompressed bytes, searched in place) or, once it keeps
being used, decoded with its keys in the reader's key index (table/reader.py). A
hit on the read path takes no lock and does no bookkeeping beyond stores
into the reader's per-block bytes. The cache itself only decides what to
keep: it queues admitted blocks and, when ``capacity`` bytes are exceeded,
evicts with CLOCK (second chance): a block referenced since it was last
considered gets its bit cleared and goes round again; an unreferenced one
is released by its reader (``reader.release``). CLOCK approximates LRU at a
fraction of its bookkeeping.

Charges are the blocks' approximate memory: a raw block its bytes plus a
bytes object's header; a decoded one its bytes plus the objects of its
entries and their key-index slots (table/block.py). Admission, promotion
and eviction take a short lock. Its default size, when none is given, is
the rule both engines share (lsmkv/base/cache_size.py).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (a reader imports this module)
    from .table.reader import TableReader


class BlockCache:
    __slots__ = ("capacity", "usage", "admitted", "evicted", "promoted", "_owners", "_indexes", "_lock",
                 "_acquire", "_release")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.usage = 0
        self.admitted = 0
        self.evicted = 0
        #: Raw blocks decoded and indexed because they kept being used.
        self.promoted = 0
        #: The CLOCK queue, as two deques side by side (a block's reader and
        #: its index in it) rather than one of (reader, index) pairs: a pair
        #: holding a reader is an object the garbage collector tracks, one
        #: per cached block, which every full collection would walk.
        self._owners: deque = deque()
        self._indexes: deque = deque()
        self._lock = threading.Lock()
        # The lock's methods, bound once (compiled, a ``with`` block looks up
        # __enter__ and __exit__ by name each time).
        self._acquire = self._lock.acquire
        self._release = self._lock.release

    def admit(self, reader: TableReader, index: int, held, charge: int) -> None:
        """Keep ``held`` (raw bytes or a decoded block) as ``reader``'s block
        ``index``, evicting others as needed."""
        if charge > self.capacity:
            return
        self._acquire()
        try:
            if reader.blocks[index] is not None:
                return  # another thread loaded it meanwhile
            self._make_room(charge)
            reader.blocks[index] = held
            reader.charges[index] = charge
            reader.refs[index] = 0
            reader.uses[index] = 0
            self._owners.append(reader)
            self._indexes.append(index)
            self.usage += charge
            self.admitted += 1
        finally:
            self._release()

    def promote(self, reader: TableReader, index: int, held, block) -> None:
        """Replace ``held``, ``reader``'s cached block ``index``, by its
        decoded form ``block`` and index its keys (reader.index_block)."""
        with self._lock:
            if reader.blocks[index] is not held:
                return  # evicted (or promoted) meanwhile
            extra = block.charge - reader.charges[index]
            if extra > 0:
                reader.refs[index] = 1  # keep it through the room-making below
                self._make_room(extra)
                if reader.blocks[index] is not held:
                    return
            reader.blocks[index] = block
            reader.charges[index] = block.charge
            self.usage += extra
            reader.index_block(index, block)
            self.promoted += 1

    def _make_room(self, charge: int) -> None:
        """Evict until ``charge`` more bytes fit (called with the lock held)."""
        owners = self._owners
        indexes = self._indexes
        while self.usage + charge > self.capacity and owners:
            owner = owners.popleft()
            i = indexes.popleft()
            if owner.blocks[i] is None:
                continue  # already dropped with its table
            if owner.refs[i]:
                owner.refs[i] = 0
                owners.append(owner)
                indexes.append(i)
                continue
            self.usage -= owner.charges[i]
            owner.release(i)
            self.evicted += 1

    def drop_reader(self, reader: TableReader) -> None:
        """Release every block of ``reader`` (its table is going away)."""
        with self._lock:
            for i, held in enumerate(reader.blocks):
                if held is not None:
                    self.usage -= reader.charges[i]
                    reader.release(i)

    def __len__(self) -> int:
        return len(self._owners)
