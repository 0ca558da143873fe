"""Consistency checking: ``btree.check(path)`` and the tree invariant checker.

This module owns the definition of a well-formed btree database:

* every page in use (meta, tree, overflow, free-list) has a valid checksum
  and its own page number;
* keys are strictly ascending within each node, and every key of a subtree
  lies within the bounds its parent's separators give it;
* all leaves are at the same depth; the leaf chain links each leaf to its
  in-order neighbours in both directions;
* no page is referenced twice; the free list is disjoint from the tree;
  every page below the page count is in the tree, an overflow chain, the
  free-list chain or the free list; the page map (format 4) puts no two
  pages, map pages or directory pages in one slot;
* the entry count in the meta page matches the leaves.

:func:`verify_structure` checks a tree through any page source: the live
buffer pool for :meth:`DB.check_invariants` (:func:`verify_tree`, with
:func:`verify_hash_index` for the adaptive hash index), the file for
:func:`check`.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from typing import TYPE_CHECKING, Callable

from lsmkv.base.check_report import CheckReport
from lsmkv.base.dbdir import prepare_directory
from lsmkv.base.errors import CorruptionError, LockError
from lsmkv.base.fs import DEFAULT_FS, FileSystem

from .node import DEADLINE_SIZE, Expiring, Node, Overflow, decode_node, decode_overflow, overflow_pages
from .pager import LOG_FILE, PAGES_FILE, Pager, StaleView, decode_meta
from .wal import parse_log

if TYPE_CHECKING:
    from .tree import Tree

_MAX_REPORTED = 50


def verify_structure(*, root: int, height: int, page_count: int, free: set[int], entries: int,
                     node: Callable[[int, bool], Node], overflow: Callable[[Overflow], list[int]],
                     max_key: int, page_size: int, reserved: set[int] | None = None,
                     ttl_entries: int | None = None, meta_chain: Overflow | None = None) -> tuple[list[str], dict]:
    """Check the tree rooted at ``root``. ``node(pg, leaf)`` returns a decoded
    node (raising CorruptionError if it cannot); ``overflow(ref)`` the pages of
    a chain. ``free`` is the set of free pages, ``reserved`` pages used
    otherwise (free-list chain); ``ttl_entries``, if given, the number of
    values with a ttl the database records; ``meta_chain`` the chain holding
    the metadata entries. Returns (problems, counts)."""
    problems: list[str] = []
    owner: dict[int, str] = {}
    leaves: list[Node] = []
    counts = {"internal_pages": 0, "leaf_pages": 0, "overflow_pages": 0, "entries": 0, "ttl_entries": 0}

    def problem(text: str) -> None:
        if len(problems) < _MAX_REPORTED:
            problems.append(text)

    def claim(pg: int, what: str) -> bool:
        if not (2 <= pg < page_count):
            problem(f"{what} page {pg} is outside the file's {page_count} pages")
            return False
        if pg in owner:
            problem(f"page {pg} is used twice (as {owner[pg]} and as {what})")
            return False
        owner[pg] = what
        return True

    def visit(pg: int, depth: int, lo: bytes | None, hi: bytes | None) -> None:
        leaf = depth == height - 1
        if not claim(pg, "leaf" if leaf else "internal"):
            return
        try:
            n = node(pg, leaf)
        except CorruptionError as exc:
            problem(str(exc))
            return
        keys = n.keys
        for i in range(1, len(keys)):
            if not keys[i - 1] < keys[i]:
                problem(f"page {pg}: keys out of order at slot {i}")
                break
        if keys:
            if lo is not None and keys[0] < lo:
                problem(f"page {pg}: key {keys[0]!r} is below its separator {lo!r}")
            if hi is not None and keys[-1] >= hi:
                problem(f"page {pg}: key {keys[-1]!r} is not below its separator {hi!r}")
        if n.used > page_size:
            problem(f"page {pg}: node holds {n.used} bytes, more than a page")
        if leaf:
            counts["leaf_pages"] += 1
            counts["entries"] += len(keys)
            if not keys and pg != root:
                problem(f"page {pg}: empty leaf left in the tree")
            if any(len(k) > max_key for k in keys):
                problem(f"page {pg}: key longer than the {max_key}-byte limit")
            leaves.append(n)
            for k, v in zip(keys, n.vals):
                if type(v) is Expiring:
                    counts["ttl_entries"] += 1
                    if len(k) > max_key - DEADLINE_SIZE:
                        problem(f"page {pg}: key of {len(k)} bytes with a ttl, above the "
                                f"{max_key - DEADLINE_SIZE}-byte limit for those")
                    v = v.value
                if type(v) is not bytes:
                    try:
                        chain = overflow(v)
                    except CorruptionError as exc:
                        problem(str(exc))
                        continue
                    for opg in chain:
                        if claim(opg, "overflow"):
                            counts["overflow_pages"] += 1
        else:
            counts["internal_pages"] += 1
            if len(n.kids) != len(keys) + 1:
                problem(f"page {pg}: {len(keys)} keys but {len(n.kids)} children")
                return
            if not keys:
                problem(f"page {pg}: internal node without keys")
            for i, kid in enumerate(n.kids):
                visit(kid, depth + 1, lo if i == 0 else keys[i - 1], hi if i == len(keys) else keys[i])

    visit(root, 0, None, None)
    if meta_chain is not None:
        try:
            for pg in overflow(meta_chain):
                if claim(pg, "metadata"):
                    counts["overflow_pages"] += 1
        except CorruptionError as exc:
            problem(str(exc))
    for i, leaf in enumerate(leaves):
        want_prev = leaves[i - 1].pgno if i else 0
        want_next = leaves[i + 1].pgno if i + 1 < len(leaves) else 0
        if leaf.prev != want_prev:
            problem(f"page {leaf.pgno}: prev link is {leaf.prev}, expected {want_prev}")
        if leaf.next != want_next:
            problem(f"page {leaf.pgno}: next link is {leaf.next}, expected {want_next}")
    if counts["entries"] != entries:
        problem(f"the tree holds {counts['entries']} entries, the database records {entries}")
    if ttl_entries is not None and counts["ttl_entries"] != ttl_entries:
        problem(f"the tree holds {counts['ttl_entries']} values with a ttl, the database records {ttl_entries}")
    for pg in sorted(free & owner.keys())[:10]:
        problem(f"page {pg} is both free and in use as {owner[pg]}")
    reserved = reserved or set()
    for pg in sorted(reserved & owner.keys())[:10]:
        problem(f"free-list page {pg} is also in use as {owner[pg]}")
    accounted = owner.keys() | free | reserved
    missing = [pg for pg in range(2, page_count) if pg not in accounted]
    if missing:
        problem(f"{len(missing)} pages are neither in use nor free (leaked), e.g. {missing[:5]}")
    stray = [pg for pg in free if not (2 <= pg < page_count)]
    if stray:
        problem(f"free list names pages outside the file, e.g. {sorted(stray)[:5]}")
    counts["free_pages"] = len(free | reserved)
    return problems, counts


def verify_tree(tree: Tree, pager: Pager, meta_chain: Overflow | None) -> list[str]:
    """The problems of the live ``tree`` (dirty pages included), read
    through its buffer pool: verify_structure's checks, with the pages held
    back for live snapshots counted as free and ``meta_chain`` the chain
    holding the metadata entries."""
    return verify_structure(
        root=tree.root, height=tree.height, page_count=pager.page_count,
        free=set(pager.free) | set(tree.deferred), entries=tree.entries, ttl_entries=tree.ttl_entries,
        node=tree.node,
        overflow=lambda ref: [pg for pg, _ in tree._overflow_chain(ref)],
        max_key=tree.max_key, page_size=pager.page_size, meta_chain=meta_chain)[0]


def verify_hash_index(tree: Tree, pages: dict[int, Node]) -> list[str]:
    """Every entry of the tree's adaptive hash index names a leaf among the
    cached ``pages`` that holds that key with that value."""
    if tree.ahi is None:
        return []
    problems = []
    if tree.ahi.keys() != tree.ahi_page.keys():
        problems.append("hash index: the value and page maps hold different keys")
    for key, value in tree.ahi.items():
        node = pages.get(tree.ahi_page.get(key))
        if node is None or not node.leaf:
            problems.append(f"hash index: {key!r} points at page {tree.ahi_page.get(key)}, not a cached leaf")
            break
        i = bisect_left(node.keys, key)
        if i >= len(node.keys) or node.keys[i] != key or node.vals[i] != value:
            problems.append(f"hash index: {key!r} is not in page {node.pgno} with that value")
            break
    return problems


def check(path: str, fs: FileSystem | None = None) -> CheckReport:
    """Verify the btree database in ``path``: every page in use, the tree
    invariants, the free list and the log. Never writes."""
    fs = fs or DEFAULT_FS
    path = os.fspath(path)
    prepare_directory(path, "btree", fs, create=False)
    report = CheckReport(engine="btree", path=path)
    details = report.details
    lock = None
    try:
        lock = fs.lock(os.path.join(path, PAGES_FILE))
        details["writer_active"] = False
    except LockError:
        details["writer_active"] = True  # best effort: a writer may change pages under the check
    try:
        _check(fs, path, report)
    finally:
        if lock is not None:
            lock.release()
    return report


def _check(fs: FileSystem, path: str, report: CheckReport) -> None:
    problems, details = report.problems, report.details
    pager = Pager(fs, path, read_only=True)
    try:
        if pager.is_empty():
            problems.append(f"{pager.path} is empty (the database was never completely created)")
            return
        try:
            meta = pager.read_meta()
        except CorruptionError as exc:
            problems.append(str(exc))
            return
        ps = pager.page_size
        copies = []
        for slot in (0, 1):
            try:
                m = decode_meta(pager.file.read_at(slot * ps, ps), slot, ps, pager.path)
                copies.append(f"page {slot}: epoch {m.epoch}")
            except CorruptionError as exc:
                copies.append(f"page {slot}: damaged ({exc.reason}); the other copy is used")
        details["meta_copies"] = copies
        pager.overlay_journal()
        details["pending_journal"] = bool(pager.overlay)
        meta = pager.meta
        pager.page_count = meta.page_count
        details.update(page_size=ps, epoch=meta.epoch, height=meta.height, page_count=meta.page_count,
                       root=meta.root, checkpoint_lsn=meta.ckpt_lsn)
        details.update(format_version=meta.version, slot_count=meta.slot_count)
        try:
            pager.check_counts(meta)
        except CorruptionError as exc:
            problems.append(str(exc))
            return  # (the structure cannot be walked with counts the file cannot hold)
        try:
            pager.load_pages(meta)
        except CorruptionError as exc:
            problems.append(str(exc))
        except StaleView as exc:
            problems.append(f"{pager.path}: page-map or free-list page {exc.args[0]} rewritten by the writer "
                            "while the check ran")
        else:
            problems.extend(pager.map.problems(pager.path))
            details["map_pages"] = len(pager.map.map_slots) + len(pager.map.dir_slots)
        chain = set(pager.freelist_pages)
        listed = pager.free - chain
        if meta.free_count != len(pager.free) and not problems:
            problems.append(f"meta page records {meta.free_count} free pages, the free list holds {len(pager.free)}")

        def read(pg: int) -> bytes:
            try:
                return pager.read_page(pg)
            except StaleView:
                raise CorruptionError("page rewritten by the writer while the check ran", path=pager.path,
                                      page=pg) from None

        def node(pg: int, leaf: bool) -> Node:
            n = decode_node(read(pg), pg, ps, pager.path)
            if n.leaf != leaf:
                raise CorruptionError(f"expected a {'leaf' if leaf else 'internal'} page", path=pager.path, page=pg)
            return n

        def overflow(ref: Overflow) -> list[int]:
            return [pg for pg, _ in overflow_pages(ref, lambda pg: decode_overflow(read(pg), pg, ps, pager.path),
                                                   meta.page_count, ps, pager.path)]

        from .tree import limits
        found, counts = verify_structure(root=meta.root, height=meta.height, page_count=meta.page_count,
                                         free=listed, reserved=chain, entries=meta.entries,
                                         ttl_entries=meta.ttl_entries, node=node,
                                         overflow=overflow, max_key=limits(ps)[1], page_size=ps,
                                         meta_chain=Overflow(meta.meta_page, meta.meta_length)
                                         if meta.meta_page else None)
        problems.extend(found)
        details.update(counts)
        details["pages_verified"] = 2 + counts["internal_pages"] + counts["leaf_pages"] + \
            counts["overflow_pages"] + len(chain) + details.get("map_pages", 0)
        log_path = os.path.join(path, LOG_FILE)
        if fs.exists(log_path):
            try:
                contents = parse_log(fs.read_file(log_path), log_path)
            except CorruptionError as exc:
                problems.append(str(exc))
            else:
                if contents is not None:
                    pending = [r for r in contents.records if r[0] >= meta.ckpt_lsn]
                    details.update(log_records=len(contents.records), log_records_to_replay=len(pending),
                                   log_torn_tail_bytes=contents.torn_bytes)
                    if contents.base_lsn > meta.ckpt_lsn:
                        problems.append(f"{log_path}: log starts at LSN {contents.base_lsn}, after the "
                                        f"checkpoint at {meta.ckpt_lsn}")
    finally:
        pager.close()
