"""The B+tree algorithms: search, insert with splits, delete with merges, range reads.

This module owns the shape of the tree. It works on decoded nodes from the
buffer pool and never does I/O itself except through it (cache misses,
overflow pages). Conventions (see docs/btree.md):

* internal node: ``kids[i]`` holds keys < ``keys[i]``, ``kids[i+1]`` keys >= it;
  separators pushed up by a leaf split are the shortest prefix of the right
  leaf's first key that is greater than the left leaf's last key;
* leaves are linked both ways (``prev``/``next`` page numbers, 0 = none);
* a key is at most a quarter of a page, so every internal entry is; a leaf
  entry is at most half a page (larger values go to overflow chains), so a
  split into two pages always works: of at most a page and a half of
  entries, the byte midpoint leaves at most a page on each side;
* an overfull leaf first gives entries to a sibling under the same parent
  that has room (up to 85% of its page), which keeps random loads about 80%
  full; only when neither sibling can take them does it split:
* split: at the byte midpoint, except that an insert at the right (left) end
  of the rightmost (leftmost) leaf leaves the old page full, so ordered loads
  fill pages completely;
* delete: a node that falls below a quarter full is merged with a sibling
  when the two fit in one page; otherwise it stays underfull (lazy), except
  that an internal node left without keys borrows from its sibling. Empty
  leaves always merge, so their pages always return to the free list; a root
  with a single child is replaced by that child.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import count

from lsmkv.base.errors import CorruptionError
from lsmkv.base.key_search import keys_bisect_left, keys_bisect_right

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from .bufferpool import BufferPool
from .expiry import ExpiredCount
from .leaf_runs import LeafRuns
from .node import (DEADLINE_SIZE, HEADER_SIZE, INTERNAL_CELL_SIZE, LEAF_CELL_SIZE, SLOT_SIZE, Expiring, LeafImage,
                   Node, Overflow, decode_overflow, overflow_pages, value_size)

_LEAF_FIXED = SLOT_SIZE + LEAF_CELL_SIZE
_INT_FIXED = SLOT_SIZE + INTERNAL_CELL_SIZE
#: A range read's chunk ends once the values it resolved from overflow
#: chains pass this many bytes, whatever its entry count.
CHUNK_BYTES = 1 << 22
#: Tree versions, unique in the process: a tree rebuilt from the disk
#: (a reload, a vacuum, a read-only handle's new view) never takes a number
#: a range read of an older tree recorded.
_versions = count(1)


def limits(page_size: int) -> tuple[int, int]:
    """(largest entry with an overflow reference in bytes, largest key in
    bytes) for ``page_size``: a quarter page, the key limit's basis."""
    max_cell = (page_size - HEADER_SIZE) // 4
    return max_cell, max_cell - _LEAF_FIXED - 4


def inline_limit(page_size: int) -> int:
    """The largest leaf entry (cell and slot) whose value is stored in the
    leaf: half a page. A value of a larger entry goes to an overflow chain.
    (A quarter page, the limit before 2026-11-25, sent values of about a
    kilobyte on 4 KiB pages to a chain of their own: one page each, a space
    amplification of 4; both kinds of file read alike.)"""
    return (page_size - HEADER_SIZE) // 2


def shortest_separator(a: bytes, b: bytes) -> bytes:
    """The shortest prefix of ``b`` that is greater than ``a`` (given a < b)."""
    n = min(len(a), len(b))
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    return b[:p + 1]


def _leaf_used(node: Node) -> int:
    used = HEADER_SIZE + _LEAF_FIXED * len(node.keys) + sum(map(len, node.keys))
    for v in node.vals:
        used += len(v) if type(v) is bytes else value_size(v)
    return used


def _overflow_of(v) -> Overflow | None:
    """The overflow reference inside a leaf value, if it has one."""
    t = type(v)
    if t is Overflow:
        return v
    if t is Expiring and type(v.value) is Overflow:
        return v.value
    return None


def _internal_used(node: Node) -> int:
    return HEADER_SIZE + _INT_FIXED * len(node.keys) + sum(map(len, node.keys))


#: How full a sibling may become when it takes entries from an overfull
#: leaf (the rest is left for its own inserts, so that shifts do not just
#: move the split next door).
SHIFT_FILL = 0.85


def _take(keys: list[bytes], vals: list, order: range, need: int, want: int, room: int) -> tuple[int, int]:
    """How many entries of a leaf to move to a sibling, taking them in
    ``order`` (from the end or from the start, never the last one left):
    (count, bytes moved). At least ``need`` bytes, about ``want`` if they
    fit in ``room``, never more than ``room``; fewer than ``need`` bytes
    when that is impossible."""
    count = moved = 0
    target = max(need, want)
    for i in order:
        if moved >= target:
            break
        v = vals[i]
        size = _LEAF_FIXED + len(keys[i]) + (len(v) if type(v) is bytes else value_size(v))
        if moved + size > room:
            break
        moved += size
        count += 1
    return count, moved


def _balanced_point(sizes: list[int], lo: int, hi: int) -> int:
    """Index m in [lo, hi] splitting ``sizes`` into halves of nearly equal sum."""
    half = sum(sizes) / 2
    acc = 0
    m = lo
    for idx, s in enumerate(sizes):
        if acc + s / 2 > half:
            m = idx
            break
        acc += s
    else:
        m = len(sizes)
    return max(lo, min(hi, m))


class Tree:
    """The tree of one database. Not thread-safe by itself: the DB's lock guards it."""

    def __init__(self, pool: BufferPool, root: int, height: int, entries: int, hash_index: bool = True,
                 ttl_entries: int = 0, now_ms=None) -> None:
        self.pool = pool
        #: Values with a ttl in the tree (kept exact by put and delete), and
        #: the clock that says which have expired (ms since the epoch).
        self.ttl_entries = ttl_entries
        self.now_ms = now_ms or (lambda: 0)
        #: The deadlines of those values, once live_count() needed them
        #: (None until then): kept exact by put and delete from then on.
        self.expiry: ExpiredCount | None = None
        #: The adaptive hash index (InnoDB's idea): ``ahi`` maps key -> inline
        #: value and ``ahi_page`` key -> its leaf's page number, for keys that
        #: gets have looked up in a hot leaf of the buffer pool (one that has
        #: served more gets than it holds keys); a get that hits it skips the
        #: descent.
        #: Kept exact by put/delete/split/merge and by eviction. (Two dicts of
        #: bytes and ints, which the garbage collector never tracks.)
        self.ahi: dict[bytes, bytes] | None = {} if hash_index else None
        self.ahi_page: dict[bytes, int] | None = {} if hash_index else None
        pool.ahi = self.ahi
        pool.ahi_page = self.ahi_page
        self.pager = pool.pager
        self.pages = pool.pages
        self.root = root
        self.height = height
        #: range(height - 1): the internal levels of a descent (kept, not rebuilt per call)
        self.inner = range(height - 1)
        self.entries = entries
        #: Changes with every put and delete (RangePos: a range read goes on
        #: where its last chunk stopped only if the tree is unchanged).
        self.version = next(_versions)
        ps = self.pager.page_size
        self.page_size = ps
        self.max_cell, self.max_key = limits(ps)
        self.max_inline = inline_limit(ps)
        #: Overfull leaves that gave entries to a sibling instead of splitting.
        self.shifts = 0
        self.min_fill = ps // 4
        self.ovf_data = ps - HEADER_SIZE
        #: Live snapshots: id -> overlay (page number -> the node as it was
        #: when the snapshot was taken, saved just before its first change).
        self.snaps: dict[int, dict[int, Node]] = {}
        #: Id of the newest live snapshot, 0 if none: nodes with ``saved``
        #: below it must be preserved before they change.
        self.snap_seq = 0
        #: Overflow pages freed while snapshots live (they may still read them).
        self.deferred: list[int] = []

    # ---- page access ---------------------------------------------------------------

    def node(self, pgno: int, leaf: bool) -> Node:
        node = self.pages.get(pgno)
        if node is None:
            node = self._load(pgno, leaf)
        node.ref = True
        node.hits += 1
        return node

    def _load(self, pgno: int, leaf: bool) -> Node:
        node = self.pool.load(pgno)
        if node.leaf != leaf:
            raise CorruptionError(f"expected a {'leaf' if leaf else 'internal'} page in the tree, found a "
                                  f"{'leaf' if node.leaf else 'internal'} page", path=self.pager.path, page=pgno)
        return node

    def preserve(self, node: Node) -> None:
        """Save ``node``'s current state for every live snapshot that does not
        have this page yet; call before changing a node (cheap without snapshots)."""
        saved = node.saved
        if saved >= self.snap_seq:
            return
        pg = node.pgno
        copy = None
        for sid, overlay in self.snaps.items():
            if sid > saved and pg not in overlay:
                if copy is None:
                    copy = node.clone()
                overlay[pg] = copy
        node.saved = self.snap_seq

    def end_snapshot(self, sid: int) -> None:
        self.snaps.pop(sid, None)
        self.snap_seq = max(self.snaps, default=0)
        if not self.snaps and self.deferred:
            for pg in self.deferred:
                self.pool.release(pg)
            self.deferred.clear()

    def touch(self, node: Node) -> None:
        if not node.dirty:
            node.dirty = True
            self.pool.dirty[node.pgno] = node

    # ---- point operations ------------------------------------------------------------

    @cython.locals(node=Node, i=cython.Py_ssize_t, level=cython.Py_ssize_t, ahi=dict, pool=BufferPool, keys=list)
    def get(self, key: bytes):
        """The value stored under ``key`` or None."""
        pages = self.pages
        pg = self.root
        pool = self.pool
        pool.lookups += self.height
        # (A membership test and an index, not pages.get: the compiled build
        # makes each one C call, where .get is a method looked up by name.)
        for level in range(self.height - 1):
            node = pages[pg] if pg in pages else self._load(pg, False)
            node.ref = True
            pg = node.kids[keys_bisect_right(node.keys, key)]
        if pg not in pages:
            if not pool.admit(pg):  # searched in its page image, not kept
                v, buf = self.pager.search_leaf(pg, key)
                pool.observe_image(buf)
                return v if v is None or type(v) is bytes else self._value(v)
            node = self._load(pg, True)  # read often enough: decoded and kept
        else:
            node = pages[pg]
        node.ref = True
        node.hits += 1
        keys = node.keys
        i = keys_bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            v = node.vals[i]
            if type(v) is bytes:
                # Into the hash index once the leaf has served more gets
                # than it holds keys: before that most gets of it are first
                # reads, which an entry would not serve again.
                ahi = self.ahi
                if ahi is not None and node.hits > len(keys) and len(ahi) < pool.hash_index_limit:
                    ahi[key] = v
                    self.ahi_page[key] = pg
                    if not len(ahi) & 255:
                        pool.hash_index_grew()
                return v
            return self._value(v)  # (the hash index holds only plain values)
        return None

    def get_many(self, keys: list[bytes], view=None) -> list:
        """The value of each of ``keys`` (ascending, distinct) or None, in
        the current tree (``view`` None) or a snapshot view: one descent per
        leaf, every key that falls in that leaf served from it (the bound
        the descent passes on the right says which do), as RocksDB's
        MultiGet serves the keys of one block. ttl deadlines are compared
        with one clock reading."""
        out: list = []
        n = len(keys)
        if view is None:
            root, height = self.root, self.height
            pages = self.pages
            load = self._load
        else:
            root, height, node = self._view(view)
        inner = range(height - 1)
        pool = self.pool
        ahi = self.ahi if view is None else None
        now = None
        i = 0
        while i < n:
            key = keys[i]
            pg = root
            bound = None  # the smallest separator above the leaf on its right
            pool.lookups += height
            for _ in inner:
                if view is None:
                    nd = pages.get(pg) or load(pg, False)
                    nd.ref = True
                else:
                    nd = node(pg, False)
                seps = nd.keys
                j = keys_bisect_right(seps, key)
                if j < len(seps):
                    bound = seps[j]
                pg = nd.kids[j]
            end = n if bound is None else bisect_left(keys, bound, i + 1)
            if view is None:
                leaf = pages.get(pg)
                if leaf is None:
                    if not pool.admit(pg):  # searched in its page image, not kept
                        found, buf = self.pager.search_leaf_keys(pg, keys[i:end])
                        pool.observe_image(buf)
                        for v in found:
                            if v is None or type(v) is bytes:
                                out.append(v)
                            else:
                                if now is None:
                                    now = self.now_ms()
                                out.append(self._value_at(v, now))
                        i = end
                        continue
                    leaf = self._load(pg, True)
                leaf.hits += end - i
            else:
                leaf = node(pg, True)
            leaf.ref = True
            lkeys = leaf.keys
            vals = leaf.vals
            nk = len(lkeys)
            indexing = ahi is not None and leaf.hits > nk  # (the rule get follows)
            at = 0
            for key in keys[i:end]:
                at = bisect_left(lkeys, key, at)
                if at < nk and lkeys[at] == key:
                    v = vals[at]
                    if type(v) is not bytes:
                        if now is None:
                            now = self.now_ms()
                        v = self._value_at(v, now)
                    elif indexing and len(ahi) < pool.hash_index_limit:
                        ahi[key] = v
                        self.ahi_page[key] = pg
                        if not len(ahi) & 255:
                            pool.hash_index_grew()
                    out.append(v)
                else:
                    out.append(None)
            i = end
        return out

    def _value_at(self, v, now: int):
        """_value() with the clock read once by the caller (``now``, ms)."""
        if type(v) is Expiring:
            if v.deadline <= now:
                return None
            v = v.value
            if type(v) is bytes:
                return v
        return self.read_overflow(v)

    def _value(self, v):
        """The value a read returns for a leaf value that is not plain bytes:
        an overflow chain read, or None for a value whose ttl has expired."""
        if type(v) is Expiring:
            if v.deadline <= self.now_ms():
                return None
            v = v.value
            if type(v) is bytes:
                return v
        return self.read_overflow(v)

    def _path(self, key: bytes) -> list[tuple[Node, int]]:
        """The internal nodes above ``key``'s leaf with the child index taken
        in each (walked again only when a split or merge needs it)."""
        path = []
        pg = self.root
        for _ in self.inner:
            node = self.node(pg, False)
            i = keys_bisect_right(node.keys, key)
            path.append((node, i))
            pg = node.kids[i]
        return path

    def put(self, key: bytes, value) -> None:
        """Store ``value`` (bytes, or an Expiring holding bytes) under ``key``."""
        self.version = next(_versions)
        pages = self.pages
        pg = self.root
        self.pool.lookups += self.height
        for _ in self.inner:
            node = pages.get(pg) or self._load(pg, False)
            node.ref = True
            pg = node.kids[keys_bisect_right(node.keys, key)]
        leaf = pages.get(pg) or self._load(pg, True)
        leaf.ref = True
        if type(value) is bytes:
            if _LEAF_FIXED + len(key) + len(value) > self.max_inline:
                v = self.write_overflow(value)
                vsize = 4
                leaf.ovf = True
            else:
                v = value
                vsize = len(value)
        else:  # an Expiring: the deadline goes in the cell too
            raw = value.value
            if _LEAF_FIXED + DEADLINE_SIZE + len(key) + len(raw) > self.max_inline:
                v = Expiring(value.deadline, self.write_overflow(raw))
                vsize = DEADLINE_SIZE + 4
            else:
                v = Expiring(value.deadline, raw)
                vsize = DEADLINE_SIZE + len(raw)
            leaf.ovf = True
            self.ttl_entries += 1
            if self.expiry is not None:
                self.expiry.add(value.deadline)
        if leaf.saved < self.snap_seq:
            self.preserve(leaf)
        keys = leaf.keys
        i = keys_bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            old = leaf.vals[i]
            leaf.vals[i] = v
            if type(old) is bytes:
                leaf.used += vsize - len(old)
            else:
                leaf.used += vsize - value_size(old)
                self._drop_value(old)
        else:
            keys.insert(i, key)
            leaf.vals.insert(i, v)
            leaf.used += _LEAF_FIXED + len(key) + vsize
            self.entries += 1
        if not leaf.dirty:
            leaf.dirty = True
            self.pool.dirty[pg] = leaf
        ahi = self.ahi
        if ahi and key in ahi:  # keep an indexed key's entry exact (gets add entries)
            if v is value:
                ahi[key] = value
            else:
                del ahi[key]
                del self.ahi_page[key]
        if leaf.used > self.page_size:
            self._split_leaf(leaf, self._path(key), i)

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; False if it was not there."""
        self.version = next(_versions)
        pages = self.pages
        pg = self.root
        self.pool.lookups += self.height
        for _ in self.inner:
            node = pages.get(pg) or self._load(pg, False)
            node.ref = True
            pg = node.kids[keys_bisect_right(node.keys, key)]
        leaf = pages.get(pg) or self._load(pg, True)
        leaf.ref = True
        keys = leaf.keys
        i = keys_bisect_left(keys, key)
        if i >= len(keys) or keys[i] != key:
            return False
        if leaf.saved < self.snap_seq:
            self.preserve(leaf)
        del keys[i]
        old = leaf.vals.pop(i)
        if type(old) is bytes:
            leaf.used -= _LEAF_FIXED + len(key) + len(old)
        else:
            leaf.used -= _LEAF_FIXED + len(key) + value_size(old)
            self._drop_value(old)
        self.entries -= 1
        self.touch(leaf)
        if self.ahi is not None:
            self.ahi.pop(key, None)
            self.ahi_page.pop(key, None)
        if leaf.used < self.min_fill and self.height > 1:
            self._rebalance(leaf, self._path(key))
        return True

    def _drop_value(self, old) -> None:
        """A leaf value that is not plain bytes leaves the tree: free its
        overflow chain, count its ttl out."""
        if type(old) is Expiring:
            self.ttl_entries -= 1
            if self.expiry is not None:
                self.expiry.remove(old.deadline)
        ref = _overflow_of(old)
        if ref is not None:
            self.free_overflow(ref)

    def live_count(self) -> int:
        """The keys a read finds now: the entries less the values whose ttl
        has expired. O(1) while no value has a ttl; otherwise the first call
        walks the leaves for the deadlines (ExpiredCount), and later ones
        count only the deadlines passed since (a clock set back walks again)."""
        if not self.ttl_entries:
            return self.entries
        now = self.now_ms()
        expiry = self.expiry
        expired = None if expiry is None else expiry.expired(now)
        if expired is None:
            self.expiry = expiry = ExpiredCount(self._deadlines(), now)
            expired = expiry.expired(now)
        return self.entries - expired

    def _deadlines(self):
        """The deadline of every value with a ttl, leaf by leaf (a leaf
        outside the pool is read in place, not kept)."""
        pg = self.root
        for _ in self.inner:
            pg = self.node(pg, False).kids[0]
        while pg:
            leaf = self._range_leaf(pg, None, False)
            if type(leaf) is Node:
                vals, ovf = leaf.vals, leaf.ovf
            else:
                vals, ovf = leaf.cells(0, leaf.count)[1:]
            if ovf:
                for v in vals:
                    if type(v) is Expiring:
                        yield v.deadline
            pg = leaf.next

    def expired_keys(self, lo: bytes | None, limit: int) -> tuple[list[bytes], bytes | None]:
        """Keys from ``lo`` upward whose ttl has expired, looking at about
        ``limit`` entries; and where to go on from (None: the end). For the
        sweep that reclaims their space (the caller deletes them)."""
        now = self.now_ms()
        pg = self.root
        for _ in self.inner:
            n = self.node(pg, False)
            pg = n.kids[0 if lo is None else bisect_right(n.keys, lo)]
        leaf = self.node(pg, True)
        i = 0 if lo is None else bisect_left(leaf.keys, lo)
        found: list[bytes] = []
        seen = 0
        while True:
            if leaf.ovf:
                for key, v in zip(leaf.keys[i:], leaf.vals[i:]):
                    if type(v) is Expiring and v.deadline <= now:
                        found.append(key)
            seen += len(leaf.keys) - i
            if not leaf.next:
                return found, None
            leaf = self.node(leaf.next, True)
            self.pool.lookups += 1
            i = 0
            if seen >= limit and leaf.keys:
                return found, leaf.keys[0]

    # ---- overflow values ---------------------------------------------------------------

    def write_overflow(self, value: bytes) -> Overflow:
        cap = self.ovf_data
        n = -(-len(value) // cap)
        allocate = self.pager.allocate
        pgs = [allocate() for _ in range(n)]
        raw = self.pool.raw_dirty
        for j, pg in enumerate(pgs):
            raw[pg] = (value[j * cap:(j + 1) * cap], pgs[j + 1] if j + 1 < n else 0)
        return Overflow(pgs[0], len(value))

    def _overflow_chain(self, ref: Overflow):
        """Yield (page, data) along the chain of ``ref`` (node.overflow_pages:
        its length and shape checked), pages not yet written read from the pool."""
        raw = self.pool.raw_dirty
        pager = self.pager
        ps, path = pager.page_size, pager.path

        def page_data(pg: int) -> tuple[bytes, int]:
            ent = raw.get(pg)
            return ent if ent is not None else decode_overflow(pager.read_page(pg), pg, ps, path)

        return overflow_pages(ref, page_data, pager.page_count, ps, path)

    def read_overflow(self, ref: Overflow) -> bytes:
        return b"".join([data for _, data in self._overflow_chain(ref)])

    def free_overflow(self, ref: Overflow) -> None:
        pages = [pg for pg, _ in self._overflow_chain(ref)]
        if self.snaps:  # a snapshot may still read this value
            self.deferred += pages
            self.pager.free_changed = True
            return
        for pg in pages:
            self.pool.release(pg)

    # ---- splits ---------------------------------------------------------------------------

    def _split_leaf(self, leaf: Node, path: list, i: int) -> None:
        if self._shift_to_sibling(leaf, path):
            return
        keys, vals = leaf.keys, leaf.vals
        n = len(keys)
        if i == n - 1 and leaf.next == 0:
            m = n - 1  # appending at the right edge: leave the old page full
        elif i == 0 and leaf.prev == 0:
            m = 1
        else:
            sizes = [_LEAF_FIXED + len(k) + (len(v) if type(v) is bytes else value_size(v)) for k, v in zip(keys, vals)]
            m = _balanced_point(sizes, 1, n - 1)
        right = self.pool.new_node(True)
        right.keys = keys[m:]
        right.vals = vals[m:]
        right.ovf = leaf.ovf
        del keys[m:]
        del vals[m:]
        if self.ahi:
            self._rehome(right)
        leaf.used = _leaf_used(leaf)
        right.used = _leaf_used(right)
        right.prev = leaf.pgno
        if leaf.next:  # (a new leaf's next is 0 already)
            self._link_next(right, leaf.next)
        leaf.next = right.pgno
        self._insert_in_parent(path, leaf, shortest_separator(keys[-1], right.keys[0]), right.pgno)

    def _link_next(self, leaf: Node, pg: int) -> None:
        """Make the leaf ``pg`` (0: none) the one after ``leaf``: ``leaf.next``,
        and that leaf's ``prev`` (its pre-image saved for snapshots first)."""
        leaf.next = pg
        if pg:
            nxt = self.node(pg, True)
            if nxt.saved < self.snap_seq:  # (as put() does: no call without snapshots)
                self.preserve(nxt)
            nxt.prev = leaf.pgno
            self.touch(nxt)

    def _shift_to_sibling(self, leaf: Node, path: list) -> bool:
        """Before splitting an overfull leaf, move entries into a sibling
        under the same parent that has room (a B*-tree's redistribution,
        what SQLite's balancing does with siblings): random inserts then
        leave leaves about 80% full instead of the 69% of splits alone.
        Moves entries until the two are about even (so that the next
        inserts find room), at least as many as bring the leaf back within
        its page, while the sibling stays within SHIFT_FILL of a page; the parent's
        separator is recomputed and must fit in the parent. False (nothing
        changed) when no sibling can take them."""
        if not path:
            return False
        parent, idx = path[-1]
        limit = int(self.page_size * SHIFT_FILL)
        keys, vals = leaf.keys, leaf.vals
        excess = leaf.used - self.page_size
        if idx + 1 < len(parent.kids):  # the right sibling takes entries from the end
            sibling = self.node(parent.kids[idx + 1], True)
            count, moved = _take(keys, vals, range(len(keys) - 1, 0, -1), excess,
                                 (leaf.used - sibling.used) // 2, limit - sibling.used)
            if moved >= excess:
                m = len(keys) - count
                sep = shortest_separator(keys[m - 1], keys[m])
                grow = len(sep) - len(parent.keys[idx])
                if parent.used + grow <= self.page_size:
                    self.preserve(sibling)
                    self.preserve(parent)
                    sibling.keys[:0] = keys[m:]
                    sibling.vals[:0] = vals[m:]
                    del keys[m:]
                    del vals[m:]
                    return self._shifted(leaf, sibling, parent, idx, sep, grow, moved)
        if idx > 0:  # the left sibling takes entries from the start
            sibling = self.node(parent.kids[idx - 1], True)
            m, moved = _take(keys, vals, range(len(keys) - 1), excess, (leaf.used - sibling.used) // 2,
                             limit - sibling.used)
            if moved >= excess:
                sep = shortest_separator(keys[m - 1], keys[m])
                grow = len(sep) - len(parent.keys[idx - 1])
                if parent.used + grow <= self.page_size:
                    self.preserve(sibling)
                    self.preserve(parent)
                    sibling.keys += keys[:m]
                    sibling.vals += vals[:m]
                    del keys[:m]
                    del vals[:m]
                    return self._shifted(leaf, sibling, parent, idx - 1, sep, grow, moved)
        return False

    def _shifted(self, leaf: Node, sibling: Node, parent: Node, s: int, sep: bytes, grow: int,
                 moved: int) -> bool:
        """Finish a shift: sizes, flags, the separator between the two."""
        sibling.ovf = sibling.ovf or leaf.ovf
        leaf.used -= moved
        sibling.used += moved
        parent.keys[s] = sep
        parent.used += grow
        if self.ahi:
            self._rehome(sibling)
        self.touch(sibling)
        self.touch(parent)
        self.shifts += 1
        return True

    def _rehome(self, leaf: Node) -> None:
        """Point the hash index's entries for ``leaf``'s keys at ``leaf``."""
        ahi_page = self.ahi_page
        pg = leaf.pgno
        for k in leaf.keys:
            if k in ahi_page:
                ahi_page[k] = pg

    def _insert_in_parent(self, path: list, left: Node, sep: bytes, right_pg: int) -> None:
        if not path:
            root = self.pool.new_node(False)
            root.keys = [sep]
            root.kids = [left.pgno, right_pg]
            root.used = HEADER_SIZE + _INT_FIXED + len(sep)
            self.root = root.pgno
            self.height += 1
            self.inner = range(self.height - 1)
            return
        parent, idx = path.pop()
        self.preserve(parent)
        parent.keys.insert(idx, sep)
        parent.kids.insert(idx + 1, right_pg)
        parent.used += _INT_FIXED + len(sep)
        self.touch(parent)
        if parent.used > self.page_size:
            self._split_internal(parent, path, idx)

    def _split_internal(self, node: Node, path: list, at: int) -> None:
        keys, kids = node.keys, node.kids
        n = len(keys)
        if at == n - 1 and n >= 3:
            m = n - 2  # appending at the right edge
        else:
            m = _balanced_point([_INT_FIXED + len(k) for k in keys], 1, n - 2)
        up = keys[m]
        right = self.pool.new_node(False)
        right.keys = keys[m + 1:]
        right.kids = kids[m + 1:]
        del keys[m:]
        del kids[m + 1:]
        node.used = _internal_used(node)
        right.used = _internal_used(right)
        self._insert_in_parent(path, node, up, right.pgno)

    # ---- merges -----------------------------------------------------------------------------

    def _rebalance(self, node: Node, path: list) -> None:
        parent, idx = path[-1]
        if len(parent.kids) < 2:
            return
        leaf = node.leaf
        if idx > 0:
            left, right, s = self.node(parent.kids[idx - 1], leaf), node, idx - 1
        else:
            left, right, s = node, self.node(parent.kids[1], leaf), 0
        sep = parent.keys[s]
        self.preserve(left)
        self.preserve(right)
        self.preserve(parent)
        combined = left.used + right.used - HEADER_SIZE
        if not leaf:
            combined += _INT_FIXED + len(sep)
        if combined <= self.page_size:
            if leaf:
                left.keys += right.keys
                left.vals += right.vals
                left.ovf = left.ovf or right.ovf
                if self.ahi:
                    self._rehome(left)
                self._link_next(left, right.next)
            else:
                left.keys.append(sep)
                left.keys += right.keys
                left.kids += right.kids
            left.used = combined
            self.touch(left)
            self.pool.release(right.pgno)
            del parent.keys[s]
            del parent.kids[s + 1]
            parent.used -= _INT_FIXED + len(sep)
            self.touch(parent)
            path.pop()
            if not path:
                if not parent.keys:
                    self.root = parent.kids[0]
                    self.pool.release(parent.pgno)
                    self.height -= 1
                    self.inner = range(self.height - 1)
            elif parent.used < self.min_fill:
                self._rebalance(parent, path)
        elif not leaf and not node.keys:
            self._redistribute_internal(left, right, parent, s, path)

    def _redistribute_internal(self, left: Node, right: Node, parent: Node, s: int, path: list) -> None:
        """Spread two internal siblings' children evenly (one of them has no key left)."""
        keys = left.keys + [parent.keys[s]] + right.keys
        kids = left.kids + right.kids
        n = len(keys)
        m = _balanced_point([_INT_FIXED + len(k) for k in keys], 1, n - 2)
        old = parent.keys[s]
        up = keys[m]
        left.keys, left.kids = keys[:m], kids[:m + 1]
        right.keys, right.kids = keys[m + 1:], kids[m + 1:]
        left.used = _internal_used(left)
        right.used = _internal_used(right)
        self.touch(left)
        self.touch(right)
        parent.keys[s] = up
        parent.used += len(up) - len(old)
        self.touch(parent)
        if parent.used > self.page_size:
            self._split_internal(parent, path[:-1], s)

    # ---- range reads ----------------------------------------------------------------------------

    def _resolve(self, keys: list[bytes], vals: list) -> tuple[list, list, int]:
        """The keys and values of a leaf's ``keys`` and ``vals`` as a read
        returns them -- overflow chains read, values whose ttl has expired
        left out -- and the number of overflow bytes read (chunks stop early
        after a few MiB)."""
        types = set(map(type, vals))
        if types <= {bytes}:
            return list(keys), list(vals), 0
        now = self.now_ms() if Expiring in types else 0
        out_keys = []
        out_vals = []
        nbytes = 0
        for key, v in zip(keys, vals):
            t = type(v)
            if t is not bytes:
                if t is Expiring:
                    if v.deadline <= now:
                        continue
                    v = v.value
                if type(v) is not bytes:
                    v = self.read_overflow(v)
                    nbytes += len(v)
            out_keys.append(key)
            out_vals.append(v)
        return out_keys, out_vals, nbytes

    def live_entries(self):
        """Every live entry in key order, as the bulk builder takes them:
        (key, bytes) or (key, Expiring(deadline, bytes)); overflow chains
        read, values whose ttl has expired left out (compact_range's input)."""
        pg = self.root
        for _ in range(self.height - 1):
            pg = self.node(pg, False).kids[0]
        now = self.now_ms() if self.ttl_entries else 0
        read = self.read_overflow
        while pg:
            leaf = self.node(pg, True)
            if not leaf.ovf:
                yield from zip(leaf.keys, leaf.vals)
            else:
                for key, v in zip(leaf.keys, leaf.vals):
                    t = type(v)
                    if t is Expiring:
                        if v.deadline <= now:
                            continue
                        inner = v.value if type(v.value) is bytes else read(v.value)
                        yield key, Expiring(v.deadline, inner)
                    elif t is bytes:
                        yield key, v
                    else:
                        yield key, read(v)
            pg = leaf.next

    def _view(self, view):
        """(root, height, node accessor) of the current tree or of a snapshot
        view (root, height, overlay)."""
        if view is None:
            return self.root, self.height, self.node
        root, height, overlay = view
        node = self.node

        def snap_node(pg: int, leaf: bool) -> Node:
            n = overlay.get(pg)
            return n if n is not None else node(pg, leaf)
        return root, height, snap_node

    def position(self, key: bytes | None) -> float:
        """Where ``key`` falls in the tree, as a fraction 0..1 of its leaves,
        read from the internal pages alone (no leaf is read): at each level
        the child the key descends into, as a share of its siblings, each
        subtree taken to hold as many leaves as its siblings. Monotone in
        the key, so differences of positions add up over adjacent ranges."""
        if key is None:
            return 1.0
        pg, height = self.root, self.height
        lo, width = 0.0, 1.0
        for _ in range(height - 1):
            n = self.node(pg, False)
            i = bisect_right(n.keys, key)
            width /= len(n.kids)
            lo += i * width
            pg = n.kids[i]
        leaf = self.node(pg, True)
        keys = leaf.keys
        if keys:
            lo += width * bisect_left(keys, key) / len(keys)
        return lo

    def get_in(self, view, key: bytes):
        """The value of ``key`` in a snapshot view, or None."""
        root, height, node = self._view(view)
        pg = root
        for _ in range(height - 1):
            n = node(pg, False)
            pg = n.kids[bisect_right(n.keys, key)]
        n = node(pg, True)
        i = bisect_left(n.keys, key)
        if i < len(n.keys) and n.keys[i] == key:
            v = n.vals[i]
            return v if type(v) is bytes else self._value(v)
        return None

    def get_entry(self, key: bytes) -> tuple[bytes | None, int | None]:
        """(value, ttl deadline or None) of ``key`` in the current tree;
        (None, None) if it is absent or its ttl has expired: what a merge
        folds its operand onto (btree/merging.py)."""
        pg = self.root
        for _ in self.inner:
            n = self.node(pg, False)
            pg = n.kids[bisect_right(n.keys, key)]
        n = self.node(pg, True)
        i = bisect_left(n.keys, key)
        if i == len(n.keys) or n.keys[i] != key:
            return None, None
        v = n.vals[i]
        deadline = None
        if type(v) is Expiring:
            if v.deadline <= self.now_ms():
                return None, None
            deadline = v.deadline
            v = v.value
        return (v if type(v) is bytes else self.read_overflow(v)), deadline

    def _seek_leaf(self, key: bytes | None, view, reverse: bool) -> int:
        """The page number of the leaf a range read from ``key`` starts in
        (None: the first leaf, or with ``reverse`` the last), in the current
        tree or in a snapshot ``view``. Reading backward from ``key``, the
        leaf is the one holding the keys just below it."""
        if view is None:
            pages = self.pages
            pg = self.root
            for _ in self.inner:
                node = pages.get(pg) or self._load(pg, False)
                node.ref = True
                keys = node.keys
                pg = node.kids[(len(keys) if reverse else 0) if key is None else
                               keys_bisect_left(keys, key) if reverse else keys_bisect_right(keys, key)]
            return pg
        pg, height, node_of = self._view(view)
        for _ in range(height - 1):
            node = node_of(pg, False)
            keys = node.keys
            pg = node.kids[(len(keys) if reverse else 0) if key is None else
                           keys_bisect_left(keys, key) if reverse else keys_bisect_right(keys, key)]
        return pg

    def chunk_forward(self, lo: bytes | None, lo_inclusive: bool, hi: bytes | None,
                      limit: int, view=None, resume: "RangePos | None" = None) -> tuple[LeafRuns, "RangePos | None"]:
        """About ``limit`` items from ``lo`` upward (below ``hi``), and where
        the read stopped (None: nothing more in range). The items are a
        LeafRuns (btree/leaf_runs.py): the keys and values copied from each
        leaf, whose (key, value) pairs are made as they are iterated, after
        the lock.

        Given the RangePos the previous chunk of the same read returned,
        and if the tree has not changed since (its ``version``), the read
        goes on from there: no descent from the root, and the page it
        stopped in is not read again. Otherwise it seeks ``lo`` from the
        root; a chunk that seeks ends at the end of the leaf it seeks into
        when the next leaf is outside the pool (a short range read, a seek
        and a few items, should not pay for a page it may never return)."""
        overlay = None if view is None else view[2]
        pg, i, leaf, seek = self._chunk_start(lo, lo_inclusive, view, overlay, resume, False)
        runs = LeafRuns()
        cells = 0  # cells read: the chunk ends after ``limit`` of them (expired values count)
        nbytes = 0
        images = 0
        while True:
            if type(leaf) is Node:
                keys = leaf.keys
                n = len(keys)
                j = min(n, i + limit - cells)
                vals, ovf = leaf.vals, leaf.ovf
                keys, vals = keys[i:j], vals[i:j]  # (copies: the chunk is read after the lock)
            else:
                images += 1
                n = leaf.count
                j = min(n, i + limit - cells)
                keys, vals, ovf = leaf.cells(i, j)
            if hi is not None and keys and keys[-1] >= hi:
                cut = bisect_left(keys, hi)
                keys, vals = keys[:cut], vals[:cut]
                if ovf:
                    keys, vals = self._resolve(keys, vals)[:2]
                runs.add(keys, vals)
                return runs, None
            if ovf:
                keys, vals, big = self._resolve(keys, vals)
                nbytes += big
            runs.add(keys, vals)
            cells += j - i
            if j < n:  # the page goes on past the cells read
                if runs.count:
                    return runs, RangePos(self.version, pg, j, None if type(leaf) is Node else leaf, images)
                i, cells = j, 0  # every cell read held an expired value: read on
                continue
            pg = leaf.next
            if not pg:
                return runs, None
            if self._chunk_ends_before(pg, cells >= limit or nbytes > CHUNK_BYTES, seek, overlay):
                if runs.count:
                    return runs, RangePos(self.version, pg, 0, None, images)
                cells = nbytes = 0
            leaf = self._range_leaf(pg, overlay, False)
            self.pool.lookups += 1
            i = 0

    def _chunk_start(self, key: bytes | None, inclusive: bool, view, overlay: dict | None,
                     resume: "RangePos | None", reverse: bool) -> tuple:
        """(page, index, leaf, seek): where a chunk of a range read starts.
        It goes on from ``resume``, where the previous chunk stopped, if
        the tree has not changed since (``version``; the leaf is the image
        the previous chunk verified, when it read the page outside the
        pool), and does not seek. Otherwise it seeks ``key`` from the root
        (None: the first leaf, or with ``reverse`` the last): the index is
        that of the first cell at ``key`` (past it unless ``inclusive``),
        with None at None reading backward (the leaf's end)."""
        if resume is not None and resume.version == self.version:
            leaf = resume.image
            if leaf is None:
                leaf = self._range_leaf(resume.pgno, overlay, False)
            return resume.pgno, resume.index, leaf, False
        pg = self._seek_leaf(key, view, reverse)
        leaf = self._range_leaf(pg, overlay, True)
        if key is None:
            index = None if reverse else 0
        elif type(leaf) is Node:
            index = keys_bisect_left(leaf.keys, key) if inclusive else keys_bisect_right(leaf.keys, key)
        else:
            index = leaf.lower_bound(key, inclusive)
        return pg, index, leaf, True

    def _chunk_ends_before(self, pg: int, full: bool, seek: bool, overlay: dict | None) -> bool:
        """Whether a chunk ends before moving on to leaf ``pg``: it is
        ``full`` (its cells or bytes), or it seeks and ``pg`` is outside
        the pool (a short range read does not pay for a page it may never
        return)."""
        return full or (seek and pg not in self.pages and (overlay is None or pg not in overlay))

    def _range_leaf(self, pg: int, overlay: dict | None, first: bool) -> "Node | LeafImage":
        """The leaf ``pg`` for a range read: a Node (a leaf in the snapshot's
        overlay or the pool), or for one outside the pool its verified page
        image (Pager.read_leaf), from which the read decodes only the cells
        it returns. A leaf outside the pool is not
        kept unless the pool's admission policy says so (BufferPool.admit):
        the leaf a range read seeks into (``first``) counts as a read of it,
        as a get's leaf does; the leaves a read passes through are admitted
        only if already remembered, so a scan does not push out what gets
        keep reading."""
        if overlay is not None:
            node = overlay.get(pg)
            if node is not None:
                return node
        node = self.pages.get(pg)
        if node is None:
            pool = self.pool
            # (A leaf passed through is admitted only if remembered: most are
            # not, and then admit() would change nothing.)
            if not (first or pg in pool.seen) or not pool.admit(pg, first):
                return self.pager.read_leaf(pg)
            node = self._load(pg, True)
        node.ref = True
        node.hits += 1
        return node

    def chunk_backward(self, hi: bytes | None, lo: bytes | None, limit: int,
                       view=None, resume: "RangePos | None" = None) -> tuple[LeafRuns, "RangePos | None"]:
        """About ``limit`` items from just below ``hi`` downward (not below
        ``lo``), in descending order, and where the read stopped (None:
        nothing more in range); the items, ``resume`` and the end of a chunk
        that seeks as for chunk_forward."""
        overlay = None if view is None else view[2]
        pg, j, leaf, seek = self._chunk_start(hi, True, view, overlay, resume, True)
        runs = LeafRuns()
        cells = 0
        nbytes = 0
        images = 0
        while True:
            if type(leaf) is Node:
                if j is None:
                    j = len(leaf.keys)
                i = max(0, j - (limit - cells))
                keys, vals, ovf = leaf.keys[i:j], leaf.vals[i:j], leaf.ovf
            else:
                images += 1
                if j is None:
                    j = leaf.count
                i = max(0, j - (limit - cells))
                keys, vals, ovf = leaf.cells(i, j)
            if lo is not None and keys and keys[0] < lo:
                cut = bisect_left(keys, lo)
                keys, vals = keys[cut:], vals[cut:]
                if ovf:
                    keys, vals = self._resolve(keys, vals)[:2]
                runs.add(keys[::-1], vals[::-1])
                return runs, None
            if ovf:
                keys, vals, big = self._resolve(keys, vals)
                nbytes += big
            runs.add(keys[::-1], vals[::-1])
            cells += j - i
            if i > 0:  # the page goes on below the cells read
                if runs.count:
                    return runs, RangePos(self.version, pg, i, None if type(leaf) is Node else leaf, images)
                j, cells = i, 0  # every cell read held an expired value: read on
                continue
            pg = leaf.prev
            if not pg:
                return runs, None
            if self._chunk_ends_before(pg, cells >= limit or nbytes > CHUNK_BYTES, seek, overlay):
                if runs.count:
                    return runs, RangePos(self.version, pg, None, None, images)
                cells = nbytes = 0
            leaf = self._range_leaf(pg, overlay, False)
            self.pool.lookups += 1
            j = None


class RangePos:
    """Where a chunk of a range read stopped: in leaf ``pgno`` before cell
    ``index`` (reading forward; reading backward, the cells below it are
    next, and None means from the leaf's end), with the leaf's verified
    page image if it was read outside the pool. Valid only while the tree's
    ``version`` is the one recorded: any write may move entries between
    pages, and then the next chunk seeks again from its last key.
    ``images`` counts the leaves the chunk read outside the pool (what
    its cells cost: btree/scan.py sizes the next chunk by it)."""

    __slots__ = ("version", "pgno", "index", "image", "images")

    def __init__(self, version: int, pgno: int, index: int | None, image: "LeafImage | None",
                 images: int) -> None:
        self.version = version
        self.pgno = pgno
        self.index = index
        self.image = image
        self.images = images
