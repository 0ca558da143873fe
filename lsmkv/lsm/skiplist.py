"""UnrolledSkipList: the memtable's ordered index of distinct user keys.

An unrolled skiplist keeps keys in *nodes*, each a small sorted Python list,
with one express lane above them: the list of every node's largest key. A
search is two binary searches (``bisect`` over the lane, then over one node),
both running in C; an insert is an ``insort`` into one node of at most
``2 * NODE_LOAD`` keys, a memmove in C. A node that grows past twice the load
splits in two.

Why one lane and not a tower of probabilistic levels: in Python every level of
a classic skiplist costs interpreted steps per hop, while a bisect over a lane
of a few thousand maxima is one C call. With NODE_LOAD = 256 a lane holds about
4,000 entries at 1M keys, and an insert moves at most ~500 pointers (a put's
insert shifts a node's pointers one by one, in CPython's list insert: at 512
it was a sixth of a compiled put's instructions, 1,000 of 9,050; halved, a
search costs one bisect step more over the lane and one less in the node).

Complexity: insert O(log n + NODE_LOAD); search O(log n); iteration O(1) per key.

Concurrency: one writer at a time (the DB's write lock). Readers never block
the writer's common path: an insert that does not split is a single C call on
one node; a split and every reader's "give me the keys after k" take a short
lock, so a reader never sees the lane and the nodes disagree.
"""

from __future__ import annotations

import threading
from bisect import bisect_right, insort

from lsmkv.base.key_search import keys_bisect_left, keys_bisect_right

NODE_LOAD = 256


class UnrolledSkipList:
    __slots__ = ("_nodes", "_maxes", "_lock")

    def __init__(self) -> None:
        self._nodes: list[list[bytes]] = []
        self._maxes: list[bytes] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(map(len, self._nodes))

    def insert(self, key: bytes) -> None:
        """Insert ``key``, which must not be present already."""
        maxes = self._maxes
        if maxes:
            i = bisect_right(maxes, key)
            if i == len(maxes):
                i -= 1
                node = self._nodes[i]
                node.append(key)
                maxes[i] = key
            else:
                node = self._nodes[i]
                insort(node, key)
            if len(node) > 2 * NODE_LOAD:
                self._split(i)
        else:
            with self._lock:
                self._nodes.append([key])
                maxes.append(key)

    def _split(self, i: int) -> None:
        with self._lock:
            node = self._nodes[i]
            half = node[NODE_LOAD:]
            del node[NODE_LOAD:]
            self._nodes.insert(i + 1, half)
            self._maxes.insert(i, node[-1])

    def keys_after(self, key: bytes | None, inclusive: bool, limit: int | None = None) -> list[bytes]:
        """A copy of the keys of one node that come after ``key`` (the
        first node's keys when ``key`` is None), at most ``limit`` of them
        (the first ones); empty at the end."""
        with self._lock:
            maxes = self._maxes
            if not maxes:
                return []
            if key is None:
                return self._nodes[0][:limit]
            i = keys_bisect_left(maxes, key) if inclusive else keys_bisect_right(maxes, key)
            if i == len(maxes):
                return []
            node = self._nodes[i]
            j = keys_bisect_left(node, key) if inclusive else keys_bisect_right(node, key)
            return node[j:] if limit is None else node[j:j + limit]

    def keys_before(self, key: bytes | None, inclusive: bool, limit: int | None = None) -> list[bytes]:
        """Keys of one node that come before ``key`` (``<=`` if inclusive), in
        ascending order, at most ``limit`` of them (the last ones); the last
        node's keys when ``key`` is None."""
        with self._lock:
            maxes = self._maxes
            if not maxes:
                return []
            if key is None:
                node = self._nodes[-1]
                return node[-limit:] if limit is not None else list(node)
            i = keys_bisect_left(maxes, key)
            if i == len(maxes):
                i -= 1
            node = self._nodes[i]
            j = keys_bisect_right(node, key) if inclusive else keys_bisect_left(node, key)
            if j == 0:
                if i == 0:
                    return []
                node, j = self._nodes[i - 1], len(self._nodes[i - 1])
            return node[:j] if limit is None else node[max(0, j - limit):j]

    def iter_from(self, start: bytes | None = None, end: bytes | None = None):
        """Keys in [start, end) ascending, safe against concurrent inserts
        (keys inserted while iterating may or may not be seen)."""
        chunk = self.keys_after(start, inclusive=True)
        while chunk:
            if end is not None and chunk[-1] >= end:
                for key in chunk:
                    if key >= end:
                        return
                    yield key
                return
            yield from chunk
            chunk = self.keys_after(chunk[-1], inclusive=False)

    def iter_reverse(self, start: bytes | None = None, end: bytes | None = None):
        """Keys in [start, end) descending."""
        chunk = self.keys_before(end, inclusive=False)
        while chunk:
            for key in reversed(chunk):
                if start is not None and key < start:
                    return
                yield key
            chunk = self.keys_before(chunk[0], inclusive=False)

    def __iter__(self):
        return self.iter_from()
