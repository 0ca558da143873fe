"""LeafRuns: the entries of one chunk of a forward range read, held as the
runs of keys and values it read from each leaf, not as (key, value) pairs.

Tree.chunk_forward reads a chunk under the DB's lock, and a scan hands its
entries out after the lock is released (btree/scan.py). Made into a list of
(key, value) tuples under the lock, up to 4,096 of them at a time, the
pairs cost a scan more than reading the leaves did: each tuple allocated,
tracked by the garbage collector while the list lives, then freed with the
list. Held as runs (each a key list and a value list of one leaf), the
pairs are made as the caller takes them, by ``zip``, one at a time; a
caller that unpacks each pair (``for k, v in db.scan()``) gets zip's one
tuple again and again. A cursor (btree/cursor.py) takes the key and value
lists whole. Each run is the chunk's own list, copied under the lock, so
writes after the chunk was read do not show in it.

``clear()`` empties the runs, and with them every iterator over them: the
DB's and a snapshot's close() stop the scans reading them that way.
"""

from __future__ import annotations

from itertools import chain
from typing import Iterator


class LeafRuns:
    """The runs of one chunk, in key order; iterating yields the pairs."""

    __slots__ = ("keys", "values", "count")

    def __init__(self) -> None:
        #: The runs' key lists and value lists, parallel, and the entries in all.
        self.keys: list[list[bytes]] = []
        self.values: list[list[bytes]] = []
        self.count = 0

    def add(self, keys, values) -> None:
        """Append a run: ``keys`` and their ``values`` (lists this chunk
        owns; tuples are copied into lists, which clear() can empty)."""
        if keys:
            self.keys.append(keys if type(keys) is list else list(keys))
            self.values.append(values)
            self.count += len(keys)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return chain.from_iterable(map(zip, self.keys, self.values))

    def last_key(self) -> bytes:
        """The chunk's last key (it holds at least one entry)."""
        return self.keys[-1][-1]

    def clear(self) -> None:
        """Drop every entry: iterators over the runs stop at their next item."""
        for keys in self.keys:
            keys.clear()
        self.keys.clear()
        self.values.clear()
        self.count = 0
