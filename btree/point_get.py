"""A get on a writable handle, and the state it reads, held by one object.

This module owns :class:`PointGet`: what ``DB.get`` needs on every call
(the handle's lock, the current tree and its buffer pool, the adaptive hash
index, whether the handle is usable) and what gets count for ``stats()``
(gets, hash index hits, pages read), as fields of one object the DB keeps
in ``_point``. ``DB._load_state`` binds it to each tree it loads, and the
DB's ``_usable`` flag is its ``usable`` field, so the two never disagree.
It also owns the hash index hits' bookkeeping that ``get`` and
``multi_get`` share (:meth:`PointGet.count_hash_hits`).

In the compiled build it is an extension type (btree/point_get.pxd): a get
reads these as C struct members and calls ``Tree.get`` as a C method,
where a method of the DB (a Python class) looks each one up in the
instance dict. :meth:`PointGet.get` serves a writable handle's gets and
returns :data:`NOT_SERVED` for the rest (a read-only handle, which retries
its reads while a writer elsewhere checkpoints, and a closed or failed
one, whose error the DB raises): ``DB.get`` then takes its general path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .bufferpool import BufferPool
    from .tree import Tree

#: What PointGet.get returns for a get it does not serve (see the module docstring).
NOT_SERVED = object()


class PointGet:
    """The state a get reads (see the module docstring)."""

    def __init__(self, lock, read_only: bool) -> None:
        # The lock's bound methods, kept: a get calls them directly.
        self.acquire = lock.acquire
        self.release = lock.release
        self.read_only = read_only
        #: DB._usable: False until the handle opens, after close(), and
        #: while a failed write's tree is rebuilt.
        self.usable = False
        self.tree: Tree | None = None
        self.pool: BufferPool | None = None
        self.pager = None
        self.pages = None
        #: The hash index (None when it is off), and each key's leaf page.
        self.ahi: dict | None = None
        self.ahi_page: dict | None = None
        #: Counters for stats(): gets (get and multi_get, each distinct
        #: key once), hash index hits, pages read from the page file.
        self.gets = 0
        self.ahi_hits = 0
        self.page_reads = 0

    def bind(self, tree: Tree, pool: BufferPool) -> None:
        """Read ``tree`` (kept in ``pool``) from now on: the tree a load made."""
        self.tree = tree
        self.pool = pool
        self.pager = pool.pager
        self.pages = pool.pages
        self.ahi = tree.ahi
        self.ahi_page = tree.ahi_page

    def get(self, key: bytes):
        """The value of ``key`` (bytes) or None, read under the lock; or
        NOT_SERVED for a read-only handle or one not usable."""
        if self.read_only:
            return NOT_SERVED
        self.acquire()
        try:
            if not self.usable:
                return NOT_SERVED
            self.gets += 1
            ahi = self.ahi
            if ahi:  # (empty, as after a load: the key is not hashed)
                value = ahi.get(key)
                if value is not None:
                    hits = self.ahi_hits = self.ahi_hits + 1
                    if not hits & 15:
                        self.mark_leaves((key,), 1)
                    return value
            pager = self.pager
            reads = pager.page_reads
            value = self.tree.get(key)
            if pager.page_reads != reads:
                self.page_reads += pager.page_reads - reads
                pool = self.pool
                if len(pool.pages) > pool.capacity:
                    pool.trim()
            return value
        finally:
            self.release()

    def count_hash_hits(self, keys, hits: int) -> None:
        """Count ``hits`` hash index hits among ``keys``, marking a leaf as
        recently used per 16 of them, as get() does for its own."""
        before = self.ahi_hits
        self.ahi_hits = before + hits
        marks = (before + hits) // 16 - before // 16
        if marks:
            self.mark_leaves(keys, marks)

    def mark_leaves(self, keys, marks: int) -> None:
        """Mark the leaves of up to ``marks`` of ``keys`` (hash index hits)
        as recently used, each for the 16 hits it served (counted one in
        16): a hot leaf stays in the pool, and the other hits stay cheap."""
        ahi_page = self.ahi_page
        pages = self.pages
        for key in keys:
            node = pages.get(ahi_page.get(key))
            if node is not None:
                node.ref = True
                node.hits += 16
                marks -= 1
                if not marks:
                    return
