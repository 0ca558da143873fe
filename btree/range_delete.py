"""Range deletes on the tree: every key k with start <= k < end removed in bulk.

This module owns how ``delete_range`` changes the tree (docs/btree.md). It
never visits the covered keys one by one:

* the cut: from the root down, a child whose separators put its whole key
  range inside [start, end) is freed whole -- its internal pages and leaves
  return to the free list as a vacuum's do, a leaf outside the buffer pool
  read only for its entry count (and, if one of its cells is an overflow
  reference or carries a ttl, for those values: their chains are freed and
  their ttls counted out) -- and removed from its parent with its
  separator in one slice. Only the children the range's two ends fall
  into are descended into (at most two per level); the two edge leaves
  are trimmed by one slice each;
* the leaf chain is relinked across the gap: the last leaf left below
  ``start`` points to the leaf holding ``end``'s position (which always
  stays) and back;
* the repair: a node the cut left without keys (an empty leaf, an internal
  node with one child) is merged with or fills up from a sibling by the
  tree's own rebalancing, highest first along the two edge paths, until
  none is left; a root with one child is replaced by it; then the edge
  leaves merge with a sibling if they fell below a quarter page and fit.

Cost: the pages freed (each read once if it is not in the pool) plus
O(height) nodes changed on the two edges: a key covered costs nothing of
its own but a byte looked at in a leaf outside the pool, a decode in a
leaf that holds overflow or ttl values, and, for a cached leaf while the
hash index holds keys, one C-level set operation over its keys. Snapshots open
across the delete keep their view: every node changed or freed is
preserved first (Tree.preserve), which for a leaf outside the pool means
reading it into the pool, and overflow pages are held back while
snapshots live, as for any delete.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING

from .tree import _internal_used, _leaf_used, _versions

if TYPE_CHECKING:
    from .node import Node
    from .tree import Tree


class RangeCut:
    """One range delete on ``tree``: :meth:`run` removes the keys in
    [lo, hi) and counts what it removed (``entries``, ``pages_freed``)."""

    __slots__ = ("tree", "lo", "hi", "entries", "pages_freed")

    def __init__(self, tree: Tree, lo: bytes, hi: bytes) -> None:
        self.tree = tree
        self.lo = lo
        self.hi = hi
        self.entries = 0
        self.pages_freed = 0

    def run(self) -> None:
        tree, lo, hi = self.tree, self.lo, self.hi
        if lo >= hi:
            return
        tree.version = next(_versions)
        first = _leaf_page(tree, lo)
        last = _leaf_page(tree, hi)
        before_first = tree.node(first, True).prev
        self._partial(tree.root, 0, None, None)
        tree.entries -= self.entries
        if first != last:
            # Every leaf between the two was freed; ``first`` too if the
            # range covered it whole. ``last`` holds hi's position: it stays.
            left = before_first if first in tree.pager.free else first
            right = tree.node(last, True)
            if left:
                node = tree.node(left, True)
                tree.preserve(node)
                node.next = last
                tree.touch(node)
            tree.preserve(right)
            right.prev = left
            tree.touch(right)
        self._repair()

    # ---- the cut ----------------------------------------------------------------------------

    def _partial(self, pg: int, depth: int, lower: bytes | None, upper: bytes | None) -> None:
        """Remove the keys in range from the subtree ``pg`` (bounds [lower,
        upper), None open), which the range covers in part."""
        tree, lo, hi = self.tree, self.lo, self.hi
        leaf = depth == tree.height - 1
        node = tree.node(pg, leaf)
        keys = node.keys
        if leaf:
            i = bisect_left(keys, lo)
            j = bisect_left(keys, hi, i)
            if i < j:
                tree.preserve(node)
                self._drop_entries(node, keys[i:j], node.vals[i:j])
                del keys[i:j]
                del node.vals[i:j]
                node.used = _leaf_used(node)
                tree.touch(node)
            return
        a = bisect_right(keys, lo)
        b = bisect_left(keys, hi)
        whole = []
        for i in range(a, b + 1):
            low = lower if i == 0 else keys[i - 1]
            up = upper if i == len(keys) else keys[i]
            if (lo == b"" if low is None else low >= lo) and up is not None and up <= hi:
                whole.append(i)
            else:
                self._partial(node.kids[i], depth + 1, low, up)
        if whole:
            # (Contiguous: every child between the two edge ones is covered.)
            f0, f1 = whole[0], whole[-1]
            tree.preserve(node)
            for kid in node.kids[f0:f1 + 1]:
                self._whole(kid, depth + 1)
            # A removed child takes its lower separator with it (the upper one
            # for the first child): the neighbour's range grows over the gap,
            # which holds no key any more.
            if f0:
                del keys[f0 - 1:f1]
            else:
                del keys[:f1 + 1]
            del node.kids[f0:f1 + 1]
            node.used = _internal_used(node)
            tree.touch(node)

    def _whole(self, pg: int, depth: int) -> None:
        """Free the subtree ``pg``, which the range covers whole."""
        tree = self.tree
        if depth < tree.height - 1:
            node = tree.node(pg, False)
            tree.preserve(node)
            for kid in node.kids:
                self._whole(kid, depth + 1)
        else:
            node = tree.pages.get(pg)
            if node is None and tree.snaps:
                node = tree.node(pg, True)  # read in: the snapshots keep its pre-image
            if node is not None:
                tree.preserve(node)
                self._drop_entries(node, node.keys, node.vals)
            else:
                image = tree.pager.read_leaf(pg)
                for value in image.non_plain_values():
                    tree._drop_value(value)
                self.entries += image.count
        tree.pool.release(pg)
        self.pages_freed += 1

    def _drop_entries(self, node: Node, keys: list[bytes], vals: list) -> None:
        """Count out the entries ``keys``/``vals`` of the cached leaf ``node``:
        their overflow chains and ttls, their hash index entries."""
        tree = self.tree
        self.entries += len(keys)
        if node.ovf:
            for value in vals:
                if type(value) is not bytes:
                    tree._drop_value(value)
        ahi = tree.ahi
        if ahi:
            ahi_page = tree.ahi_page
            for key in ahi_page.keys() & set(keys):
                del ahi[key]
                del ahi_page[key]

    # ---- the repair -------------------------------------------------------------------------

    def _repair(self) -> None:
        tree = self.tree
        while True:
            while tree.height > 1:
                root = tree.node(tree.root, False)
                if root.keys:
                    break
                tree.preserve(root)
                tree.root = root.kids[0]
                tree.pool.release(root.pgno)
                tree.height -= 1
                tree.inner = range(tree.height - 1)
            found = self._highest_keyless()
            if found is None:
                break
            node, path = found
            tree._rebalance(node, path)
        for key in (self.lo, self.hi):
            if tree.height == 1:
                break  # (a merge at the other edge may have left the root a leaf)
            path = tree._path(key)
            parent, i = path[-1]
            leaf = tree.node(parent.kids[i], True)
            if leaf.used < tree.min_fill:
                tree._rebalance(leaf, path)

    def _highest_keyless(self) -> tuple[Node, list] | None:
        """The highest node below the root without keys on the path to
        ``lo`` or to ``hi``, with the path above it; None if there is none."""
        tree = self.tree
        for key in (self.lo, self.hi):
            path: list = []
            pg = tree.root
            for depth in range(tree.height):
                leaf = depth == tree.height - 1
                node = tree.node(pg, leaf)
                if path and not node.keys:
                    return node, path
                if leaf:
                    break
                i = bisect_right(node.keys, key)
                path.append((node, i))
                pg = node.kids[i]
        return None


def _leaf_page(tree: Tree, key: bytes) -> int:
    """The page of the leaf whose key range holds ``key``."""
    pg = tree.root
    for _ in tree.inner:
        node = tree.node(pg, False)
        pg = node.kids[bisect_right(node.keys, key)]
    return pg


def delete_range(tree: Tree, lo: bytes, hi: bytes) -> RangeCut:
    """Remove every key k with lo <= k < hi from ``tree``; the RangeCut
    says how many entries and pages went."""
    cut = RangeCut(tree, lo, hi)
    cut.run()
    return cut
