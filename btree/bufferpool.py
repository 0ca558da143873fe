"""The buffer pool: decoded pages in memory, CLOCK eviction, dirty tracking.

This module owns which pages are in memory. Pages are held decoded
(:class:`~btree.node.Node`) in an insertion-ordered map; a hit sets the
page's reference bit, and eviction is CLOCK (second chance): the oldest page
is evicted if its bit is clear, otherwise the bit is cleared and the page
goes to the back.

The pool is charged by what it holds in memory, not by page images: a
decoded page costs its encoded bytes plus about 75 bytes per entry (the
key and value objects' headers and their list slots) plus about 440 bytes
for the node (measured with tracemalloc: a 4 KiB leaf of 26 entries with
100-byte values takes 5.7 KB, one of 94 entries with 10-byte values
10.7 KB), plus what the allocator adds to each key and value object
(``allocator_slack``: tracemalloc counts the bytes asked for, but Python's
allocator hands out blocks in multiples of 16 bytes; a 16-byte key and a
100-byte value take 26 bytes more than their objects' sizes, 10% of such a
leaf, which the process's resident memory showed). The pool keeps a
running estimate of a leaf's cost (``page_bytes``) from the leaves it
decodes, a sample of the leaves searched in their page image and the dirty
leaves each checkpoint writes, and one of an internal page's
(``inner_bytes``: hundreds of separators and child numbers, about five
times a leaf of 100-byte values) from the internal pages. Kept apart, the
internal pages a reopened tree loads first do not pass for leaves: mixed
into one estimate, the 131 internal pages of a 1,000,000-key tree raised
it from 6.6 to 21.6 KB, shrank the pool to a third of its room, and the
evictions that followed stopped admissions for good. It holds
``capacity = inner_pages + (room - inner_pages * inner_bytes) // page_bytes``
pages, where ``room`` is ``cache_size``
less what the tree's adaptive hash index takes (up to 140 bytes per
entry, two dict slots, at the most entries it has held; it may take at
most a quarter of ``cache_size``).
So the pool's memory follows ``cache_size`` whatever the values' sizes.

Which leaves read outside the pool it keeps is its admission policy
(:meth:`BufferPool.admit`): a leaf is decoded and kept once it has been read
``admit_after`` times while remembered in ``seen`` (at most a pool's worth
of page numbers, then all forgotten at once); until then a read searches
its page image without keeping it. ``admit_after`` starts at 2 (2Q's
admission on the second touch) and adapts to what keeping pages earns:
each evicted leaf reports how many reads it served while kept (``hits``),
and over every 128 evictions, if the average is below 4 (a decode and an
eviction, about 55 us, cost more than 4 reads of a kept page save over
reads of its image) the pool asks for one touch more, up to 8, and above
16 one touch fewer. Under uniform random reads over data larger than the
pool no set of pages is better than another, and admissions nearly stop;
under skewed reads the hot leaves are read often enough to be kept.

Dirty pages (changed since the last checkpoint) are never evicted: they reach
the page file only through a checkpoint (see :mod:`btree.pager`), and the DB
starts a checkpoint when dirty pages take more than three quarters of the
pool, so eviction always finds clean pages. Overflow pages written since the
last checkpoint are kept as raw (data, next page) pairs in ``raw_dirty``.
"""

from __future__ import annotations

import struct
import sys
from collections import OrderedDict
from itertools import islice

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from .node import HEADER, HEADER_SIZE, KIND_INLINE, LEAF_CELL, SLOT_SIZE, Node, decode_node
from .pager import Pager

#: Memory of a decoded page beyond its encoded bytes: per node and per entry
#: (see the module docstring for the measurements).
NODE_BYTES = 440
ENTRY_BYTES = 75
#: Memory of one adaptive-hash-index entry: a slot in each of two dicts,
#: whose tables grow by doubling (measured: 70 to 140 bytes per entry).
HASH_INDEX_ENTRY_BYTES = 140
#: The hash index may take at most this share of cache_size.
HASH_INDEX_SHARE = 4
#: The pool never holds fewer pages than this, whatever cache_size says.
MIN_PAGES = 16
#: A checkpoint starts when dirty pages take more than this share of the pool.
DIRTY_RATIO = 0.75
#: Weight of one observed page in the running estimate of a page's cost.
ESTIMATE_WEIGHT = 1 / 64
#: Pages of a checkpoint that update the estimate.
CHECKPOINT_SAMPLE = 64
#: One in this many leaves searched in their page image (not decoded)
#: updates the estimate with what it would take decoded.
IMAGE_SAMPLE = 8
#: Reads of a leaf (while remembered) that admit it into the pool: the
#: fewest and the most the admission policy asks for.
ADMIT_MIN = 2
ADMIT_MAX = 8
#: Evicted leaves between two adjustments of ``admit_after``.
ADMIT_SAMPLE = 128
#: Average reads served per evicted leaf below which admission gets
#: stricter, and above which it gets looser. Measured (a 4 KiB leaf of
#: 100-byte values): a decode plus an eviction costs about 55 us, a read of
#: a kept leaf about 5 us and a read of a page image outside the pool about
#: 15 us.
ADMIT_LOW_HITS = 4
ADMIT_HIGH_HITS = 16


#: A page's first slot (the offset of its first cell).
_FIRST_SLOT = struct.Struct("<H")
#: Bytes of a bytes object beyond its data (CPython 3.11: 33).
BYTES_OBJECT_HEADER = sys.getsizeof(b"")
#: The largest object Python's small-object allocator serves (from blocks of
#: 16-byte multiples); larger ones come from malloc (an 8-byte header, 16-byte
#: aligned).
SMALL_OBJECT_LIMIT = 512
#: The slack counted for a value that is not plain bytes (an Overflow or an
#: Expiring object): half a 16-byte block.
OTHER_VALUE_SLACK = 8


def allocator_slack(length: int) -> int:
    """Bytes the allocator adds to a bytes object of ``length`` bytes of data."""
    size = BYTES_OBJECT_HEADER + length
    if size <= SMALL_OBJECT_LIMIT:
        return -size & 15
    return 8 + (-(size + 8) & 15)


def page_cost(node: Node) -> int:
    """Estimated bytes of memory a decoded page takes: its encoded bytes,
    the node, and per entry the objects' headers, list slots and the
    allocator's slack (that of the page's first key and value, for all of
    them: a page of fixed-size records is counted exactly)."""
    keys = node.keys
    n = len(keys)
    if not n:
        return NODE_BYTES + node.used
    slack = allocator_slack(len(keys[0]))
    if node.leaf:
        value = node.vals[0]
        slack += allocator_slack(len(value)) if type(value) is bytes else OTHER_VALUE_SLACK
    return NODE_BYTES + node.used + (ENTRY_BYTES + slack) * n


class BufferPool:
    """Not thread-safe by itself: the DB's lock guards it."""

    def __init__(self, pager: Pager, cache_size: int, hash_index: bool = False) -> None:
        self.pager = pager
        #: Bytes of memory the pool (with the hash index) may take.
        self.cache_size = cache_size
        #: Running estimate of one decoded page's memory; until pages are
        #: observed, twice the page size (a 4 KiB leaf of 100-byte values
        #: takes 1.4 times, one of 10-byte values 2.6 times).
        self.page_bytes = float(2 * pager.page_size + NODE_BYTES)
        #: The same for an internal page, and how many the pool holds.
        self.inner_bytes = float(2 * pager.page_size + NODE_BYTES)
        self.inner_pages = 0
        #: Entries the hash index may hold (0 without one).
        self.hash_index_limit = cache_size // HASH_INDEX_SHARE // HASH_INDEX_ENTRY_BYTES if hash_index else 0
        #: The most entries the hash index has held: its dicts keep the
        #: memory of their largest size (a dict does not shrink as entries
        #: are deleted), so that is what it is charged.
        self.hash_index_peak = 0
        self.pages: OrderedDict[int, Node] = OrderedDict()
        self.dirty: dict[int, Node] = {}
        self.raw_dirty: dict[int, tuple[bytes, int]] = {}
        #: The tree's adaptive hash index (see btree.tree), or None.
        self.ahi: dict | None = None
        self.ahi_page: dict | None = None
        self.misses = 0
        self.lookups = 0
        self.evictions = 0
        #: Leaves read outside the pool and not kept: page number -> reads
        #: while remembered (at most ``capacity`` entries, then cleared).
        self.seen: dict[int, int] = {}
        #: Reads while remembered that admit a leaf (see the module docstring).
        self.admit_after = ADMIT_MIN
        #: Leaves searched in their page image (see observe_image).
        self.images_searched = 0
        self._evicted_leaves = 0
        self._evicted_hits = 0
        self.capacity = MIN_PAGES
        self.dirty_limit = 8
        self.resize()

    def resize(self) -> None:
        """Recompute how many pages fit (``capacity``) and how many may be
        dirty before a checkpoint (``dirty_limit``), from the estimate of a
        page's cost and the hash index's current size."""
        ahi = self.ahi
        if ahi and len(ahi) > self.hash_index_peak:
            self.hash_index_peak = len(ahi)
        inner = self.inner_pages
        room = self.cache_size - self.hash_index_peak * HASH_INDEX_ENTRY_BYTES - inner * self.inner_bytes
        cap = inner + max(int(room // self.page_bytes), MIN_PAGES)
        self.capacity = cap
        self.dirty_limit = max(int(cap * DIRTY_RATIO), 8)

    def memory_bytes(self) -> int:
        """Estimated memory the pool holds now (pages and hash index)."""
        inner = self.inner_pages
        return int((len(self.pages) - inner) * self.page_bytes + inner * self.inner_bytes
                   + self.hash_index_peak * HASH_INDEX_ENTRY_BYTES)

    def observe(self, node: Node) -> None:
        """Fold one decoded page's cost into the estimate for its kind."""
        if node.leaf:
            self.page_bytes += (page_cost(node) - self.page_bytes) * ESTIMATE_WEIGHT
        else:
            self.inner_bytes += (page_cost(node) - self.inner_bytes) * ESTIMATE_WEIGHT

    @cython.locals(sample=cython.Py_ssize_t)
    def observe_image(self, buf: bytes) -> None:
        """Count a leaf searched in its verified page image ``buf``; one in
        :data:`IMAGE_SAMPLE` updates the estimate with what the leaf would
        take decoded (from its header: entries and bytes used). When reads
        rarely admit leaves, decoded pages alone would leave the estimate
        where it started."""
        self.images_searched += 1
        sample = IMAGE_SAMPLE  # (compiled: the count and its test in C integers)
        if self.images_searched % sample:
            return
        count, cell_start = HEADER.unpack_from(buf, 0)[4:6]
        cells = len(buf) - cell_start if cell_start else 0
        slack = 0
        if count:  # (its checksum verified; a first slot past the page is left to the search to report)
            first = _FIRST_SLOT.unpack_from(buf, HEADER_SIZE)[0]
            if first + LEAF_CELL.size <= len(buf):
                klen, kind, vlen = LEAF_CELL.unpack_from(buf, first)
                slack = allocator_slack(klen) + (allocator_slack(vlen) if kind == KIND_INLINE else OTHER_VALUE_SLACK)
        cost = NODE_BYTES + HEADER_SIZE + (SLOT_SIZE + ENTRY_BYTES + slack) * count + cells
        self.page_bytes += (cost - self.page_bytes) * ESTIMATE_WEIGHT
        self.resize()

    def observe_checkpoint(self) -> None:
        """Fold a sample of the pages a checkpoint is writing (the pages
        writes made, which no load observed) into the estimate."""
        for node in islice(self.dirty.values(), CHECKPOINT_SAMPLE):
            self.observe(node)
        self.resize()

    def hash_index_grew(self) -> None:
        """The hash index grew (called every 256 entries): it takes room
        from the pages, so evict pages if they no longer fit."""
        self.resize()
        if len(self.pages) > self.capacity:
            self.trim()

    @cython.locals(seen=dict, reads=cython.Py_ssize_t)
    def admit(self, pgno: int, remember: bool = True) -> bool:
        """Whether a read of leaf ``pgno``, which is not in the pool, decodes
        and keeps it (True) or searches its page image (False). Counts the
        read while ``pgno`` is remembered; ``remember=False`` (the leaves a
        scan passes through) admits one already remembered but does not
        start remembering it."""
        seen = self.seen
        reads = seen.get(pgno, 0) + 1
        if reads >= self.admit_after:
            del seen[pgno]  # (admit_after >= 2: it was remembered)
            return True
        if reads == 1:
            if not remember:
                return False
            if len(seen) >= self.capacity:
                seen.clear()
        seen[pgno] = reads
        return False

    def _evicted_leaf(self, hits: int) -> None:
        """Adjust ``admit_after`` by what the evicted leaves earned."""
        self._evicted_hits += hits
        self._evicted_leaves += 1
        if self._evicted_leaves < ADMIT_SAMPLE:
            return
        average = self._evicted_hits / self._evicted_leaves
        if average < ADMIT_LOW_HITS and self.admit_after < ADMIT_MAX:
            self.admit_after += 1
        elif average > ADMIT_HIGH_HITS and self.admit_after > ADMIT_MIN:
            self.admit_after -= 1
        self._evicted_leaves = self._evicted_hits = 0

    def load(self, pgno: int) -> Node:
        """Read, verify and decode page ``pgno`` and keep it (a cache miss)."""
        pager = self.pager
        node = decode_node(pager.read_page(pgno), pgno, pager.page_size, pager.path)
        self.pages[pgno] = node
        if not node.leaf:
            self.inner_pages += 1
        self.misses += 1
        self.observe(node)
        self.resize()
        return node

    def new_node(self, leaf: bool) -> Node:
        """A new, empty, dirty node on a freshly allocated page."""
        pg = self.pager.allocate()
        node = Node(pg, leaf)
        node.dirty = True
        self.pages[pg] = node
        if not leaf:
            self.inner_pages += 1
        self.dirty[pg] = node
        return node

    def release(self, pgno: int) -> None:
        """Forget page ``pgno`` and return it to the free list."""
        node = self.pages.pop(pgno, None)
        if node is not None:
            node.dirty = False
            if not node.leaf:
                self.inner_pages -= 1
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
            self.ahi.clear()  # (clear() frees a dict's table)
            self.ahi_page.clear()
            self.hash_index_peak = 0
        self.pages.clear()
        self.inner_pages = 0
        self.dirty.clear()
        self.raw_dirty.clear()
        self.seen.clear()

    def trim(self) -> bool:
        """Evict clean pages until the pool is within capacity. Returns False
        if it could not (too many dirty pages: a checkpoint is due)."""
        self.resize()
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
                if not node.leaf:
                    self.inner_pages -= 1
                else:
                    self._evicted_leaf(node.hits)
                    if self.ahi:
                        indexed = self.ahi_page.keys() & node.keys  # (usually none: one pass in C)
                        if indexed:
                            pop, pop_page = self.ahi.pop, self.ahi_page.pop
                            for k in indexed:
                                pop(k, None)
                                pop_page(k, None)
        return True
