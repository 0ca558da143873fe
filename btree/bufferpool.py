"""The buffer pool: decoded pages in memory, CLOCK eviction, dirty tracking.

This module owns which pages are in memory. Pages are held decoded
(:class:`~btree.node.Node`) in an insertion-ordered map; a hit sets the
page's reference bit, and eviction is CLOCK (second chance): the oldest page
is evicted if its bit is clear, otherwise the bit is cleared and the page
goes to the back. Capacity is ``cache_size // page_size`` pages.

Dirty pages (changed since the last checkpoint) are never evicted: they reach
the page file only through a checkpoint (see :mod:`btree.pager`), and the DB
starts a checkpoint when dirty pages take more than three quarters of the
pool, so eviction always finds clean pages. Overflow pages written since the
last checkpoint are kept as raw (data, next page) pairs in ``raw_dirty``.
"""

from __future__ import annotations

from collections import OrderedDict

from .node import Node, decode_node
from .pager import Pager


class BufferPool:
    """Not thread-safe by itself: the DB's lock guards it."""

    def __init__(self, pager: Pager, capacity: int) -> None:
        self.pager = pager
        self.capacity = capacity
        self.pages: OrderedDict[int, Node] = OrderedDict()
        self.dirty: dict[int, Node] = {}
        self.raw_dirty: dict[int, tuple[bytes, int]] = {}
        #: The tree's adaptive hash index (see btree.tree), or None.
        self.ahi: dict | None = None
        self.ahi_page: dict | None = None
        self.misses = 0
        self.lookups = 0
        self.evictions = 0

    def load(self, pgno: int) -> Node:
        """Read, verify and decode page ``pgno`` and keep it (a cache miss)."""
        pager = self.pager
        node = decode_node(pager.read_page(pgno), pgno, pager.page_size, pager.path)
        self.pages[pgno] = node
        self.misses += 1
        return node

    def new_node(self, leaf: bool) -> Node:
        """A new, empty, dirty node on a freshly allocated page."""
        pg = self.pager.allocate()
        node = Node(pg, leaf)
        node.dirty = True
        self.pages[pg] = node
        self.dirty[pg] = node
        return node

    def release(self, pgno: int) -> None:
        """Forget page ``pgno`` and return it to the free list."""
        node = self.pages.pop(pgno, None)
        if node is not None:
            node.dirty = False
        self.dirty.pop(pgno, None)
        self.raw_dirty.pop(pgno, None)
        self.pager.release(pgno)

    def dirty_count(self) -> int:
        return len(self.dirty) + len(self.raw_dirty)

    def mark_all_clean(self) -> None:
        for node in self.dirty.values():
            node.dirty = False
        self.dirty.clear()
        self.raw_dirty.clear()

    def clear(self) -> None:
        if self.ahi is not None:
            self.ahi.clear()
            self.ahi_page.clear()
        self.pages.clear()
        self.dirty.clear()
        self.raw_dirty.clear()

    def trim(self) -> bool:
        """Evict clean pages until the pool is within capacity. Returns False
        if it could not (too many dirty pages: a checkpoint is due)."""
        pages = self.pages
        cap = self.capacity
        budget = 2 * len(pages) + 2
        while len(pages) > cap:
            if budget <= 0:
                return False
            budget -= 1
            pg, node = pages.popitem(last=False)
            if node.dirty or node.ref:
                node.ref = False
                pages[pg] = node
            else:
                self.evictions += 1
                if node.leaf and self.ahi:
                    pop, pop_page = self.ahi.pop, self.ahi_page.pop
                    for k in node.keys:
                        pop(k, None)
                        pop_page(k, None)
        return True
